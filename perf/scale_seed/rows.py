"""Writing seeded rows fast: PostgreSQL COPY in batches, ids reserved up front, progress printed.

Rows are dicts keyed by field attname (`trajectory_id`, not `trajectory`); a field left out gets
its model default, so every NOT NULL column is filled the way Django would fill it. JSON fields
take Python values. Ids are handed out from max(id) + 1 and each table's identity sequence is
moved past them at the end, so the application's own inserts carry on after the seed.
"""
import json
import time
from collections.abc import Iterable

from django.db import connection, models
from django.utils import timezone


class RawJson(str):
    """JSON already written as text: passed to COPY as it is."""


_encode = json.JSONEncoder(separators=(",", ":")).encode


class RowWriter:
    def __init__(self, out, batch: int = 50_000):
        self.out, self.batch = out, batch
        self._next_id: dict[type, int] = {}
        self.written: dict[str, int] = {}

    def reserve(self, model: type[models.Model], count: int) -> int:
        """The first of `count` fresh ids of `model`'s table."""
        if model not in self._next_id:
            with connection.cursor() as cursor:
                cursor.execute(f'SELECT COALESCE(MAX(id), 0) FROM "{model._meta.db_table}"')
                self._next_id[model] = cursor.fetchone()[0] + 1
        first = self._next_id[model]
        self._next_id[model] += count
        return first

    def copy(self, model: type[models.Model], rows: Iterable[dict], total: int | None = None,
             quiet: bool = False) -> int:
        """COPY `rows` into the model's table, one statement (one transaction, in autocommit) per
        `batch` rows; returns the count."""
        fields = list(model._meta.concrete_fields)
        columns = ", ".join(f'"{f.column}"' for f in fields)
        defaults = [_default(f) for f in fields]
        is_json = [isinstance(f, models.JSONField) for f in fields]
        names = [f.attname for f in fields]
        table = model._meta.db_table
        label = model._meta.verbose_name_plural
        started, count = time.monotonic(), 0
        connection.ensure_connection()
        raw = connection.connection
        iterator = iter(rows)
        while True:
            wrote = 0
            with raw.cursor() as cursor, cursor.copy(f'COPY "{table}" ({columns}) FROM STDIN') as copy:
                for row in iterator:
                    copy.write_row([_cell(row.get(name, default), as_json)
                                    for name, default, as_json in zip(names, defaults, is_json)])
                    wrote += 1
                    if wrote >= self.batch:
                        break
            count += wrote
            if wrote and not quiet:
                self._progress(label, count, total, started)
            if wrote < self.batch:
                break
        self.written[table] = self.written.get(table, 0) + count
        return count

    def _progress(self, label, count, total, started):
        rate = count / max(time.monotonic() - started, 1e-6)
        of = f"/{total:,}" if total else ""
        self.out.write(f"  {label}: {count:,}{of} ({rate:,.0f} rows/s)")

    def finish(self):
        """Move each touched table's identity sequence past the ids the seed used."""
        with connection.cursor() as cursor:
            for model, next_id in self._next_id.items():
                table = model._meta.db_table
                cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", [table, max(next_id - 1, 1)])


def _default(field):
    if field.primary_key:
        return None
    if field.has_default():
        return field.get_default()
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return timezone.now()
    if field.null:
        return None
    if isinstance(field, (models.CharField, models.TextField, models.FileField)):
        return ""
    return None


def _cell(value, as_json):
    if as_json and value is not None and not isinstance(value, RawJson):
        return _encode(value)
    return value
