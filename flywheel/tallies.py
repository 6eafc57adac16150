"""Exact counts of the big append-only tables without counting them on every request.

Why this design (issue #17): the dashboard and the pool pages count the CPT pool (one row per
executed step: a million and more), the SFT pool, the verdicts per day and the semi-automatic
line's verified steps, and the open dashboard re-reads its counts on every pushed event. Counting
those tables each time costs hundreds of milliseconds at 1M steps and grows with the data.

- Counters bumped by the writers (in code or by triggers) would put a hot row in every step's
  transaction, where 16 collection workers write at once (and the step recorder belongs to the
  write path, which must stay fast); a missed code path would drift forever.
- A materialised view refreshed by beat recounts everything each time and is stale in between,
  which a live dashboard cannot show.

So each source is folded incrementally instead: beat (`fold_tallies`, every minute) adds the rows
whose time lies between the source's mark and now − FOLD_LAG to `Tally` (per day and key) and
moves the mark. A read is the folded tallies plus the same aggregate over the rows after the mark,
in one SQL statement (one snapshot, so a fold committing meanwhile is never counted twice or
missed): exact, live, and it touches only a few minutes of new rows however large the table is.
This works because these rows never change once their time has passed (CPT and SFT entries are
append-only, a verdict is written once, a semi-automatic step is settled once its trajectory has
finished). FOLD_LAG covers transactions that commit after their rows' timestamp. A rebuild from
scratch (`rebuild_tallies`, daily, and after a seed) heals anything else, such as deleted rows.
Without beat, nothing is folded and reads count everything, as before.
"""
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from django.db import connection, models, transaction
from django.db.models import CharField, Count, F, FloatField, Func, Q, Sum, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, TruncDate
from django.db.models.lookups import GreaterThanOrEqual
from django.utils import timezone

from flywheel.models import CptEntry, Line, SftEntry, Step, Verdict
from flywheel.models.summaries import Tally, TallyMark

FOLD_LAG = timedelta(minutes=5)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Source:
    name: str
    model: type
    time: str                       # the field whose value places a row before or after the mark
    keys: tuple                     # expressions joined into the key
    day: str | None = None          # the field whose date a row is counted under (None: no days)
    measure: object = None          # an expression summed into `total` (its non-null rows: `measured`)
    settled_when_set: bool = False  # a row whose time is NULL is not settled yet: always read live
    filters: dict = field(default_factory=dict)

    def rows(self):
        return self.model.objects.filter(**self.filters).order_by()


VERIFIED = Source(
    "verification", Step, time="trajectory__finished_at", settled_when_set=True,
    filters={"trajectory__line": Line.SEMI_AUTO, "executed_action__isnull": False, "edit__isnull": False},
    keys=(F("trajectory__annotator_id"), F("trajectory__model_version_id"),
          KeyTextTransform("accepted_unchanged", "edit"),
          GreaterThanOrEqual(Cast(KeyTextTransform("pixel_distance", "edit"), FloatField()), 1.0)),
    measure=Cast(KeyTextTransform("verify_ms", "timings"), FloatField()))
CPT = Source("cpt", CptEntry, time="created_at", day="created_at", keys=(F("step__foreground_package"),))
SFT = Source("sft", SftEntry, time="created_at", day="created_at", keys=(F("intake"), F("trajectory__line")))
VERDICTS = Source("verdicts", Verdict, time="created_at", day="created_at", keys=(F("outcome"),))
SOURCES = (CPT, SFT, VERDICTS, VERIFIED)


def _key(source):
    """The key fields as text joined by '|' (a NULL field is empty). Plain `||`: Django's Concat
    costs ~10 ms to compile for four parts, on every read."""
    parts = [Coalesce(Cast(expression, CharField()), Value("")) for expression in source.keys]
    return Func(*parts, template="(%(expressions)s)", arg_joiner=" || '|' || ", output_field=CharField())


def key_flag(value: str) -> bool:
    """A boolean key part as the database wrote it (PostgreSQL: true/false, SQLite: 1/0)."""
    return value in ("true", "1")


def _aggregated(source, rows):
    """(day, key, n, total, measured) per day and key of `rows`."""
    day = TruncDate(source.day) if source.day else Value(None, output_field=models.DateField())
    measure = source.measure
    total = Coalesce(Sum(measure), Value(0.0)) if measure is not None else Value(0.0, output_field=FloatField())
    measured = Count(measure) if measure is not None else Value(0, output_field=models.BigIntegerField())
    return (rows.annotate(tally_day=day, tally_key=_key(source)).values("tally_day", "tally_key")
            .annotate(tally_n=Count("pk"), tally_total=total, tally_measured=measured)
            .values_list("tally_day", "tally_key", "tally_n", "tally_total", "tally_measured"))


def _after_mark(source):
    """The source's rows not folded yet. The mark is read first so that the planner sees a literal
    bound and scans the time index from there; the statement checks it again against the mark of
    its own snapshot, so a fold that committed in between is not counted twice."""
    known = TallyMark.objects.filter(source=source.name).values_list("folded_until", flat=True).first() or EPOCH
    current = Coalesce(models.Subquery(TallyMark.objects.filter(source=source.name).values("folded_until")[:1]),
                       Value(EPOCH, output_field=models.DateTimeField()))
    after = Q(**{f"{source.time}__gte": known}) & Q(**{f"{source.time}__gte": current})
    if source.settled_when_set:
        after |= Q(**{f"{source.time}__isnull": True})
    return source.rows().filter(after)


def read(source: Source, by: tuple = ("day", "key")) -> list[tuple]:
    """[(*by values, n, total, measured)]: folded tallies and the live rows after the mark, summed
    by `by` (a subset of "day", "key"), in one statement."""
    if not set(by) <= {"day", "key"}:
        raise ValueError(f"tallies are summed by day and/or key, not {by!r}")
    folded = Tally.objects.filter(source=source.name).order_by().values_list("day", "key", "n", "total", "measured")
    union = folded.union(_aggregated(source, _after_mark(source)), all=True)
    sql, params = union.query.sql_with_params()
    columns = ", ".join(f'"{column}"' for column in by)
    select = f"{columns}, " if by else ""
    group = f" GROUP BY {columns}" if by else ""
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT {select}SUM("n"), SUM("total"), SUM("measured") FROM ({sql}) AS tally_rows{group}',
                       params)
        rows = cursor.fetchall()
    if "day" in by:  # SQLite hands back text
        at = by.index("day")
        rows = [(*row[:at], date.fromisoformat(row[at]) if isinstance(row[at], str) else row[at], *row[at + 1:])
                for row in rows]
    return [(*row[:len(by)], int(row[len(by)] or 0), float(row[len(by) + 1] or 0), int(row[len(by) + 2] or 0))
            for row in rows]


def total(source: Source) -> int:
    rows = read(source, by=())
    return rows[0][0] if rows else 0


def _locked_mark(source):
    TallyMark.objects.get_or_create(source=source.name, defaults={"folded_until": EPOCH})
    return TallyMark.objects.select_for_update().get(source=source.name)


def fold(source: Source, until: datetime | None = None) -> int:
    """Add the rows between the mark and `until` (now − FOLD_LAG) to the tallies; the rows folded.
    Never past now: a row written later with an earlier time would be missed."""
    until = min(until or timezone.now() - FOLD_LAG, timezone.now())
    with transaction.atomic():
        mark = _locked_mark(source)
        if mark.folded_until >= until:
            return 0
        window = source.rows().filter(**{f"{source.time}__gte": mark.folded_until, f"{source.time}__lt": until})
        added = list(_aggregated(source, window))
        existing = {(t.day, t.key): t for t in Tally.objects.filter(source=source.name).filter(
            Q(day__in={day for day, *_ in added if day}) | Q(day__isnull=True))}
        changed, new = [], []
        for day, key, n, summed, measured in added:
            tally = existing.get((day, key))
            if tally is None:
                new.append(Tally(source=source.name, day=day, key=key, n=n, total=summed, measured=measured))
            else:
                tally.n, tally.total, tally.measured = tally.n + n, tally.total + summed, tally.measured + measured
                changed.append(tally)
        Tally.objects.bulk_update(changed, ["n", "total", "measured"])
        Tally.objects.bulk_create(new)
        mark.folded_until = until
        mark.save(update_fields=["folded_until", "folded_at"])
    return sum(row[2] for row in added)


def rebuild(source: Source, until: datetime | None = None) -> int:
    """Count the source again from scratch up to `until` (never past now); the rows folded."""
    until = min(until or timezone.now() - FOLD_LAG, timezone.now())
    with transaction.atomic():
        mark = _locked_mark(source)
        Tally.objects.filter(source=source.name).delete()
        rows = list(_aggregated(source, source.rows().filter(**{f"{source.time}__lt": until})))
        Tally.objects.bulk_create(Tally(source=source.name, day=day, key=key, n=n, total=summed, measured=measured)
                                  for day, key, n, summed, measured in rows)
        mark.folded_until = until
        mark.save(update_fields=["folded_until", "folded_at"])
    return sum(row[2] for row in rows)


def fold_tallies() -> dict:
    return {source.name: fold(source) for source in SOURCES}


def rebuild_tallies() -> dict:
    return {source.name: rebuild(source) for source in SOURCES}
