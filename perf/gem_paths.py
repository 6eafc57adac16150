"""Benchmark: Global Environment Memory path queries on a synthetic GEM of 10,000 pages.

Writes the GEM into a real database the way exploration does (GemPage and Edge rows): 40 apps of
~250 pages each (a navigation tree with back edges and a few extra links per page) and a system
launcher that every app's start page reaches by Home and that launches every app, plus share-sheet
edges between apps. Then measures a cold build of the networkx graph from the rows (gem_graph),
and the median over 200 random page pairs of shortest_path and reachable as callers make them
(graph=None: the version-stamp check that keeps the cache current included), and without it.

Database: BENCH_DATABASE_URL if set; else a throwaway PostgreSQL database `gem_bench_<pid>` on the
server of DATABASE_URL (created and dropped here) when it is PostgreSQL; else a throwaway SQLite.

Ends with one line: `gem: pages=10000 edges=N build_ms=… shortest_path_ms_p50=… reachability_ms_p50=…`.
"""
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = tempfile.mkdtemp(prefix="bench-gem-")
os.environ["FLYWHEEL_VAR_DIR"] = VAR
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
APPS, PAGES, PAIRS, SEED = 40, 10_000, 200, 12
DROP = None  # (server URL, database name) of a database this script created


def choose_database():
    global DROP
    if os.environ.get("BENCH_DATABASE_URL"):
        os.environ["DATABASE_URL"] = os.environ["BENCH_DATABASE_URL"]
        return
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        import psycopg

        parts = urlsplit(url)
        name = f"gem_bench_{os.getpid()}"
        server = urlunsplit(parts._replace(path="/postgres"))
        try:
            with psycopg.connect(server, autocommit=True) as connection:
                connection.execute(f'CREATE DATABASE "{name}"')
        except psycopg.Error as error:
            print(f"PostgreSQL not usable ({error}); using SQLite", file=sys.stderr)
        else:
            DROP = (server, name)
            os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{name}"))
            return
    os.environ["DATABASE_URL"] = f"sqlite:///{VAR}/bench.sqlite3"


def drop_database():
    if DROP:
        import psycopg
        from django.db import connections

        connections.close_all()
        with psycopg.connect(DROP[0], autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{DROP[1]}"')


def key(via, action):
    return hashlib.sha1((via + json.dumps(action, sort_keys=True)).encode()).hexdigest()[:40]


def build_gem(rng):
    """Insert the synthetic GEM; returns (page ids, edge count, seconds)."""
    from flywheel.models import App, Edge, GemPage

    started = time.monotonic()
    launcher_app = App.objects.create(package="com.bench.launcher", is_system=True, label="Launcher")
    apps = App.objects.bulk_create(App(package=f"com.bench.app{i:02d}", label=f"App {i}") for i in range(APPS))
    per_app = (PAGES - 1) // APPS
    sizes = [per_app + (1 if i < (PAGES - 1) % APPS else 0) for i in range(APPS)]
    launcher = GemPage.objects.create(app=launcher_app, name="launcher", kind="launcher", is_start=True)
    rows, parents = [], []
    for app, size in zip(apps, sizes):
        for n in range(size):
            parent = None if n == 0 else rng.randrange(max(0, n - 30), n)  # a bushy tree
            parents.append(parent)
            rows.append(GemPage(app=app, name=f"p{n}", title=f"{app.label} page {n}", is_start=n == 0,
                                depth=0 if n == 0 else 1 + n.bit_length() // 2,
                                inputs=["text: search keyword"] if n % 17 == 3 else [],
                                outputs=["text: item title"] if n % 13 == 5 else []))
    pages = GemPage.objects.bulk_create(rows, batch_size=2000)
    edges, offset = [], 0
    for app, size in zip(apps, sizes):
        block = pages[offset:offset + size]
        for n, page in enumerate(block):
            parent = parents[offset + n]
            if parent is not None:
                tap = {"action": "click", "target": {"resource_id": f"{app.package}:id/to_p{n}"}}
                back = {"action": "system_button", "button": "back"}
                edges.append(Edge(source=block[parent], target=page, via="tap", action=tap, action_key=key("tap", tap)))
                edges.append(Edge(source=page, target=block[parent], via="back", action=back, action_key=key("back", back)))
            for other in rng.sample(range(size), 2):  # links across the tree (tabs, related items)
                if other != n:
                    tap = {"action": "click", "target": {"text": f"item {other}"}}
                    edges.append(Edge(source=page, target=block[other], via="tap", action=tap,
                                      action_key=key("tap", tap)))
        home = {"action": "system_button", "button": "home"}
        launch = {"action": "open", "app": app.package}
        edges.append(Edge(source=block[0], target=launcher, via="home", kind="cross", action=home,
                          action_key=key("home", home)))
        edges.append(Edge(source=launcher, target=block[0], via="launch", kind="cross", action=launch,
                          action_key=key("launch", launch)))
        for n in range(0, size, 50):  # share sheet: a page hands text to another app
            target = pages[rng.randrange(len(pages))]
            share = {"action": "click", "target": {"text": "Share"}}
            if target.app_id != app.pk:
                edges.append(Edge(source=block[n], target=target, via="share", kind="cross", action=share,
                                  action_key=key("share", share)))
        offset += size
    Edge.objects.bulk_create(edges, batch_size=5000, ignore_conflicts=True)
    return [launcher.pk] + [page.pk for page in pages], Edge.objects.count(), time.monotonic() - started


def median_ms(function, pairs):
    times = []
    for source, target in pairs:
        started = time.perf_counter()
        function(source, target)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main():
    choose_database()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    try:
        call_command("migrate", verbosity=0)
        from flywheel.queries.gem import graph as gem

        rng = random.Random(SEED)
        page_ids, edge_count, insert_s = build_gem(rng)
        print(f"database: {connection.vendor}; inserted {len(page_ids)} pages and {edge_count} edges "
              f"in {insert_s:.1f} s", file=sys.stderr)
        builds = []
        for _ in range(3):
            gem.invalidate()
            started = time.perf_counter()
            graph = gem.gem_graph()
            builds.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        stamp = gem.version_stamp()
        stamp_ms = (time.perf_counter() - started) * 1000
        pairs = [(rng.choice(page_ids), rng.choice(page_ids)) for _ in range(PAIRS)]
        found = [gem.shortest_path(s, t) for s, t in pairs]
        lengths = [len(path) for path in found if path is not None]
        path_ms = median_ms(gem.shortest_path, pairs)
        reach_ms = median_ms(gem.reachable, pairs)
        pure_path_ms = median_ms(lambda s, t: gem.shortest_path(s, t, graph), pairs)
        pure_reach_ms = median_ms(lambda s, t: gem.reachable(s, t, graph), pairs)
        print(f"builds_ms={[round(b) for b in builds]} stamp_ms={stamp_ms:.1f} ({len(stamp)} values) "
              f"paths_found={len(lengths)}/{PAIRS} mean_length={statistics.mean(lengths):.1f} "
              f"in-graph shortest_path_ms_p50={pure_path_ms:.3f} reachability_ms_p50={pure_reach_ms:.3f}")
        print(f"gem: pages={len(page_ids)} edges={graph.number_of_edges()} build_ms={statistics.median(builds):.0f} "
              f"shortest_path_ms_p50={path_ms:.2f} reachability_ms_p50={reach_ms:.2f}")
    finally:
        drop_database()


if __name__ == "__main__":
    main()
