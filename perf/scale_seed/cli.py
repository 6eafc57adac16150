"""The seed's command line (perf/seed_scale.py): refuses a database that already has data unless
--force, checks the sizes, seeds, and says how many rows it wrote."""
import argparse

from django.db import connection

from perf.scale_seed import Sizes, existing_data, seed


class SeedRefused(Exception):
    """The seed was not written: not PostgreSQL, a database with data (and no --force), or bad sizes."""


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perf/seed_scale.py",
        description="Fill the database with realistic made-up flywheel data at scale (PostgreSQL COPY). "
                    "Meant for an empty database used to measure pages; refuses one with data unless --force.")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--trajectories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=50_000, help="rows per COPY transaction (progress is printed per batch)")
    parser.add_argument("--seed", type=int, default=17, dest="random_seed", help="random seed: the same seed makes the same data")
    parser.add_argument("--force", action="store_true",
                        help="add the made-up rows even though the database already has data (nothing is deleted)")
    return parser


def run(argv=None) -> dict:
    """Seed the database Django is set up on, as `argv` asks; returns what seed() returns.
    Raises SeedRefused instead of writing anything when it should not."""
    args = parser().parse_args(argv)
    if connection.vendor != "postgresql":
        raise SeedRefused("seed_scale needs PostgreSQL (it writes with COPY); DATABASE_URL points at "
                          f"{connection.vendor}.")
    found = existing_data()
    if found and not args.force:
        held = ", ".join(f"{n:,} {name}" for name, n in found.items())
        raise SeedRefused(
            f"Refusing to seed: the database {connection.settings_dict['NAME']!r} already has data ({held}). "
            "seed_scale adds made-up queries, runs, trajectories and steps next to whatever is there, which "
            "would mix them into real pages and pools. Point DATABASE_URL at an empty database, or pass "
            "--force to add them anyway (nothing existing is changed or deleted).")
    sizes = Sizes(steps=args.steps, trajectories=args.trajectories, queries=args.queries)
    try:
        sizes.check()
    except ValueError as error:
        raise SeedRefused(str(error))
    print(f"Seeding {args.steps:,} steps, {args.trajectories:,} trajectories, {args.queries:,} queries "
          f"into {connection.settings_dict['NAME']!r}", flush=True)
    result = seed(sizes, batch=max(1000, args.batch), seed_value=args.random_seed)
    rows = sum(result["tables"].values())
    print(f"Seeded {rows:,} rows in {result['seconds']} s.", flush=True)
    return result
