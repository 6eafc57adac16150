"""Seed a PostgreSQL database at scale for measuring pages (issue #17): by default 1,000,000 steps,
100,000 trajectories and 20,000 queries with their votes, verdicts, adjudications, repairs, pool
rows, runs, phones and people, all made up (perf/scale_seed/). Refuses a database that already has
data unless --force. perf/pages_at_scale.py runs it on its own database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/flywheel_scale \
        .venv/bin/python perf/seed_scale.py [--steps 1000000 --trajectories 100000 --queries 20000]
        [--batch 50000] [--seed 17] [--force]

The database must be migrated first (`manage.py migrate`).
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from perf.scale_seed.cli import SeedRefused, run


def main():
    try:
        run(sys.argv[1:])
    except SeedRefused as error:
        sys.exit(f"seed_scale: {error}")


if __name__ == "__main__":
    main()
