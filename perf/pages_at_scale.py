"""Benchmark: the busiest pages on a PostgreSQL at scale (issue #17, part 3).

Seeds, with perf/seed_scale.py, a PostgreSQL database named by BENCH_SCALE_DATABASE_URL
(default postgres://postgres@127.0.0.1:5432/flywheel_scale; created and migrated if missing, and
without --reuse dropped and created again first: it is this benchmark's own database) with
1,000,000 steps, 100,000 trajectories and 20,000 queries and everything around them. With
--reuse, a database that already holds a seed is measured as it is.

Then, in a child process on that database, first does what beat does every minute on a live site
(folds the tallies, takes the ledger's snapshot: flywheel/tallies.py, flywheel/pools/ledger_snapshot.py)
and prints how long that took, then requests each page as the role that uses it through Django's
test Client (in-process: URL routing, middleware, role checks, views, templates and SQL, no HTTP
server), warming each up first, and prints per page the median and p95 in ms and the number of
SQL queries of one request:

    dashboard (/dashboard/ and /dashboard/counts/, what the live dashboard re-reads on each event),
    ledger (/ledger/ and /ledger/runs/<the largest run>/), pools (/pools/),
    queues (annotator /queue/, adjudicator /adjudication/, annotator /repairs/),
    runs (/runs/ and /runs/<a live run>/, which the page polls every 2 s).

A group's figure is its slowest page's p95.

    .venv/bin/python perf/pages_at_scale.py [--reuse] [--requests 30] [--steps 1000000 ...]

Ends with one line: `pages: dashboard_p95_ms_1m=<n> ledger_p95_ms_1m=<n> pools_p95_ms_1m=<n>
queues_p95_ms_1m=<n> runs_p95_ms_1m=<n> worst_page=<name> worst_p95_ms=<n>` (the suffix names
the number of steps: 1m, 100k...).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/flywheel_scale"
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").exists() else sys.executable
GROUPS = {"dashboard": ("dashboard", "dashboard counts"), "ledger": ("ledger", "ledger run"), "pools": ("pools",),
          "queues": ("annotator queue", "adjudication queue", "repair queue"), "runs": ("runs", "run detail")}
MARK = "PAGES-JSON "


def _server_and_name(url):
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/postgres")), parts.path.lstrip("/")


def prepare_database(url, reuse, sizes, env):
    """Create (and without `reuse` recreate) the database, migrate it, seed it unless reused."""
    import psycopg
    from psycopg import sql

    server, name = _server_and_name(url)
    with psycopg.connect(server, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists and not reuse:
            connection.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        if not exists or not reuse:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    manage = [PYTHON, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    with psycopg.connect(url) as connection:
        seeded = connection.execute("SELECT EXISTS (SELECT 1 FROM flywheel_step)").fetchone()[0]
    if seeded and reuse:
        print(f"reusing the seeded database {name!r}")
        return
    subprocess.run([PYTHON, str(ROOT / "perf" / "seed_scale.py"), "--steps", str(sizes["steps"]), "--trajectories",
                    str(sizes["trajectories"]), "--queries", str(sizes["queries"])], cwd=ROOT, env=env, check=True)


# -- the measurement (child process, on the seeded database) -----------------------------------------

def pages_to_measure():
    """(name, role, url) of each page, with the ids of real rows of the seeded database."""
    from django.db.models import Count

    from flywheel.models import CollectionRun

    largest = CollectionRun.objects.annotate(n=Count("trajectories")).order_by("-n").values_list("pk", flat=True)[0]
    live = (CollectionRun.objects.filter(status="running").order_by("-created_at").values_list("pk", flat=True).first()
            or largest)
    return [("dashboard", "manager", "/dashboard/"), ("dashboard counts", "manager", "/dashboard/counts/"),
            ("ledger", "manager", "/ledger/"), ("ledger run", "manager", f"/ledger/runs/{largest}/"),
            ("pools", "manager", "/pools/"), ("annotator queue", "annotator", "/queue/"),
            ("adjudication queue", "adjudicator", "/adjudication/"), ("repair queue", "annotator", "/repairs/"),
            ("runs", "manager", "/runs/"), ("run detail", "manager", f"/runs/{live}/")]


def measure(requests, warmup=3):
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from flywheel.pools.ledger_snapshot import take_snapshot
    from flywheel.tallies import fold_tallies

    # What beat does every minute on a live site, so that the pages read what they would there.
    started = time.perf_counter()
    fold_tallies()
    folded_ms = (time.perf_counter() - started) * 1000
    snapshot = take_snapshot()
    background = {"fold_tallies_ms": round(folded_ms, 1), "ledger_snapshot_ms": round(snapshot.seconds * 1000, 1)}
    clients = {}
    results = {}
    for name, role, url in pages_to_measure():
        if role not in clients:
            clients[role] = Client()
            clients[role].force_login(User.objects.filter(groups__name=role).order_by("pk").first())
        client = clients[role]
        for _ in range(warmup):
            assert client.get(url).status_code == 200, f"{url} answered {client.get(url).status_code}"
        timings = []
        for _ in range(requests):
            started = time.perf_counter()
            client.get(url)
            timings.append((time.perf_counter() - started) * 1000)
        with CaptureQueriesContext(connection) as queries:
            client.get(url)
        timings.sort()
        results[name] = {"url": url, "role": role, "median_ms": round(statistics.median(timings), 1),
                         "p95_ms": round(timings[max(0, round(0.95 * len(timings)) - 1)], 1),
                         "queries": len(queries.captured_queries)}
    print(MARK + json.dumps({"pages": results, "background": background}), flush=True)


# -- the figures ---------------------------------------------------------------------------------

def size_label(steps):
    return f"{steps // 1_000_000}m" if steps % 1_000_000 == 0 else f"{steps // 1000}k"


def run(reuse: bool = True, requests: int = 30, steps: int = 1_000_000, trajectories: int = 100_000,
        queries: int = 20_000, verbose: bool = True) -> dict:
    """Seed (or reuse) and measure; returns per-page figures and, per group, `<group>_p95_ms`."""
    url = os.environ.get("BENCH_SCALE_DATABASE_URL", DEFAULT_DATABASE_URL)
    env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="config.settings", PYTHONPATH=str(ROOT),
               FLYWHEEL_KEY_PREFIX=f"benchpages{os.getpid()}:", LOG_LEVEL="WARNING")
    sizes = {"steps": steps, "trajectories": trajectories, "queries": queries}
    prepare_database(url, reuse, sizes, env)
    child = subprocess.run([PYTHON, __file__, "--measure", str(requests)], cwd=ROOT, env=env, check=True,
                           capture_output=True, text=True)
    line = next(line for line in child.stdout.splitlines() if line.startswith(MARK))
    measured = json.loads(line[len(MARK):])
    pages = measured["pages"]
    figures = {"pages": pages, "steps": steps, "background": measured["background"]}
    for group, names in GROUPS.items():
        figures[f"{group}_p95_ms"] = max(pages[name]["p95_ms"] for name in names)
    worst = max(pages, key=lambda name: pages[name]["p95_ms"])
    figures.update(worst_page=worst, worst_p95_ms=pages[worst]["p95_ms"])
    figures["load_average"] = round(os.getloadavg()[0], 2)
    if verbose:
        background = measured["background"]
        print(f"  beat's work first: fold_tallies {background['fold_tallies_ms']:.0f} ms, "
              f"ledger snapshot {background['ledger_snapshot_ms']:.0f} ms; machine load average after the "
              f"requests {figures['load_average']} on {os.cpu_count()} cores")
        for name, page in pages.items():
            print(f"  {name:<20} {page['url']:<24} as {page['role']:<11} median {page['median_ms']:7.1f} ms  "
                  f"p95 {page['p95_ms']:7.1f} ms  {page['queries']:3d} queries")
    return figures


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        return measure(int(sys.argv[2]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reuse", action="store_true", help="measure the database as it is when it holds a seed")
    parser.add_argument("--requests", type=int, default=30, help="timed requests per page (after 3 to warm up)")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--trajectories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=20_000)
    args = parser.parse_args()
    figures = run(args.reuse, args.requests, args.steps, args.trajectories, args.queries)
    label = size_label(args.steps)
    groups = " ".join(f"{group}_p95_ms_{label}={figures[f'{group}_p95_ms']:.0f}" for group in GROUPS)
    print(f"pages: {groups} worst_page={figures['worst_page'].replace(' ', '_')} "
          f"worst_p95_ms={figures['worst_p95_ms']:.0f}")


if __name__ == "__main__":
    main()
