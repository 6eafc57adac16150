"""Issue #38: a step's large JSON columns (the model's request and reply, the CoT, the timings) are
compressed with lz4 instead of PostgreSQL's default pglz when they go out of line (TOAST): at a
thousand phones the database spends part of each step compressing them, and lz4 costs less CPU
(perf/step_writes.py: 2.4 -> 2.0 ms of database CPU per step). PostgreSQL 14+ built with lz4 only;
elsewhere nothing changes. Values already stored keep their compression until rewritten."""
from django.db import migrations

COLUMNS = ("model_io", "cot", "timings")


def supports_lz4(connection) -> bool:
    if connection.vendor != "postgresql" or connection.pg_version < 140000:
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT enumvals::text LIKE '%%lz4%%' FROM pg_settings WHERE name = 'default_toast_compression'")
        row = cursor.fetchone()
    return bool(row and row[0])


def set_compression(method):
    def apply(apps, schema_editor):
        if not supports_lz4(schema_editor.connection):
            return
        for column in COLUMNS:
            schema_editor.execute(f"ALTER TABLE flywheel_step ALTER COLUMN {column} SET COMPRESSION {method}")
    return apply


class Migration(migrations.Migration):
    dependencies = [("flywheel", "0020_setup_recipes")]
    operations = [migrations.RunPython(set_compression("lz4"), set_compression("pglz"))]
