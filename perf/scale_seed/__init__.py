"""A realistic PostgreSQL at scale (issue #17): people, phones, apps, queries, runs, trajectories,
steps, votes, verdicts, adjudications, attributions, repairs and the three pools, made up with the
distributions real data has, written with COPY. `perf/seed_scale.py` is its command line (perf/scale_seed/cli.py).

It is for measuring pages at scale, not for a database people work in: the made-up rows sit next
to whatever is there, so `existing_data()` lets the command refuse a database that has data.
"""
import random
import time
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from devices.models import Device
from flywheel.models import CollectionRun, Query, Step, Trajectory
from flywheel.tallies import rebuild_tallies
from perf.scale_seed import catalog as catalog_seed
from perf.scale_seed import write
from perf.scale_seed.plan import plan_trajectories
from perf.scale_seed.rows import RowWriter


@dataclass
class Sizes:
    steps: int = 1_000_000
    trajectories: int = 100_000
    queries: int = 20_000

    def check(self):
        if min(self.steps, self.trajectories, self.queries) < 1:
            raise ValueError("steps, trajectories and queries must each be at least 1")
        if self.steps < self.trajectories:
            raise ValueError(f"{self.steps} steps cannot fill {self.trajectories} trajectories (one step each at least)")


def existing_data() -> dict[str, int]:
    """What the database holds already (rows per kind, those that are not empty)."""
    found = {"queries": Query.objects.count(), "trajectories": Trajectory.objects.count(),
             "steps": Step.objects.count(), "collection runs": CollectionRun.objects.count(),
             "devices": Device.objects.count()}
    return {name: n for name, n in found.items() if n}


def seed(sizes: Sizes, batch: int = 50_000, seed_value: int = 17, out=None) -> dict:
    """Write the whole data set; returns the counts written per table and the seconds it took."""
    if connection.vendor != "postgresql":
        raise RuntimeError("seed_scale writes with PostgreSQL's COPY: point DATABASE_URL at PostgreSQL")
    sizes.check()
    out = out or _Printer()
    rng = random.Random(seed_value)
    started = time.monotonic()
    tag = f"{int(time.time()):x}"
    now = timezone.now() - timedelta(minutes=5)
    writer = RowWriter(out, batch=batch)
    catalog = catalog_seed.Catalog()
    with _fast_session():
        out.write("people, phones, apps and function trees, policies")
        catalog_seed.seed_people(tag, catalog)
        catalog_seed.seed_devices(tag, rng, catalog, now)
        catalog_seed.seed_apps_and_trees(tag, catalog)
        catalog_seed.seed_versions(tag, catalog)
        catalog_seed.seed_failure_classes(tag, catalog)
        out.write(f"queries: {sizes.queries:,}")
        catalog_seed.seed_queries(writer, rng, tag, sizes.queries, catalog, now)
        catalog_seed.seed_rl_pool(writer, rng, catalog, now)
        out.write("planning trajectories")
        first_id = writer.reserve(Trajectory, sizes.trajectories)
        first_run = writer.reserve(CollectionRun, 0)  # how many is known once planned: reserved below
        plan = plan_trajectories(rng, catalog, sizes.trajectories, sizes.steps, first_id, first_run, now)
        writer.reserve(CollectionRun, len(plan.runs))
        out.write(f"collection runs: {len(plan.runs):,}, trajectories: {len(plan.trajectories):,}")
        write.write_runs(writer, plan, catalog, now)
        write.write_trajectories(writer, plan)
        write.write_steps(writer, rng, plan, catalog, sizes.steps)
        write.write_judging(writer, plan, catalog)
        write.write_repair_side(writer, plan, catalog)
        writer.finish()
    out.write("folding the pool and verdict tallies, analysing the tables")
    rebuild_tallies()
    with connection.cursor() as cursor:
        # Statistics, and the visibility map that index-only scans need (VACUUM only outside a transaction).
        cursor.execute("ANALYZE" if connection.in_atomic_block else "VACUUM ANALYZE")
    return {"tables": writer.written, "seconds": round(time.monotonic() - started, 1)}


class _fast_session:
    """COPY batches need not wait for the disk one by one: a crash loses at most the seed itself."""

    def __enter__(self):
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO off")

    def __exit__(self, *exc):
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO DEFAULT")


class _Printer:
    def write(self, text):
        print(text, flush=True)
