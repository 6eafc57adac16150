"""Seed a PostgreSQL database at scale for measuring pages (issue #17): by default 1,000,000 steps,
100,000 trajectories and 20,000 queries with their votes, verdicts, adjudications, repairs, pool
rows, runs, phones and people. Refuses a database that already has data unless --force."""
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from flywheel.scale_seed import Sizes, existing_data, seed


class Command(BaseCommand):
    help = ("Fill the database with realistic made-up flywheel data at scale (PostgreSQL COPY). "
            "Meant for an empty database used to measure pages; refuses one with data unless --force.")

    def add_arguments(self, parser):
        parser.add_argument("--steps", type=int, default=1_000_000)
        parser.add_argument("--trajectories", type=int, default=100_000)
        parser.add_argument("--queries", type=int, default=20_000)
        parser.add_argument("--batch", type=int, default=50_000, help="rows per COPY transaction (progress is printed per batch)")
        parser.add_argument("--seed", type=int, default=17, dest="random_seed", help="random seed: the same seed makes the same data")
        parser.add_argument("--force", action="store_true",
                            help="add the made-up rows even though the database already has data (nothing is deleted)")

    def handle(self, *args, steps, trajectories, queries, batch, random_seed, force, **options):
        if connection.vendor != "postgresql":
            raise CommandError("seed_scale needs PostgreSQL (it writes with COPY); DATABASE_URL points at "
                               f"{connection.vendor}.")
        found = existing_data()
        if found and not force:
            held = ", ".join(f"{n:,} {name}" for name, n in found.items())
            raise CommandError(
                f"Refusing to seed: the database {connection.settings_dict['NAME']!r} already has data ({held}). "
                "seed_scale adds made-up queries, runs, trajectories and steps next to whatever is there, which "
                "would mix them into real pages and pools. Point DATABASE_URL at an empty database, or pass "
                "--force to add them anyway (nothing existing is changed or deleted).")
        sizes = Sizes(steps=steps, trajectories=trajectories, queries=queries)
        try:
            sizes.check()
        except ValueError as error:
            raise CommandError(str(error))
        self.stdout.write(f"Seeding {steps:,} steps, {trajectories:,} trajectories, {queries:,} queries "
                          f"into {connection.settings_dict['NAME']!r}")
        result = seed(sizes, batch=max(1000, batch), seed_value=random_seed, out=self.stdout)
        rows = sum(result["tables"].values())
        self.stdout.write(self.style.SUCCESS(f"Seeded {rows:,} rows in {result['seconds']} s."))
