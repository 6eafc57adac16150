"""Benchmark: one turn of the query side on the virtual farm, from nothing to covered leaves.

Exploration of every farm app on leased phones → function trees built from the explored GEM →
offline generation with intake gates 1–3 → every gate-passed query approved without review →
one automatic collection round (goal only, the built-in offline policy) through a real Celery
worker → coverage. Also the four-dimensional tagging of MobileGUI-VBench against its own labels.

The farm's app files are the ground truth here (a benchmark may read them; product code never
does): an app page counts as reached when an explored GEM page shows its activity, and a
declared leaf of the farm's function tree counts as explored when its page was reached.

Database: BENCH_DATABASE_URL, else a throwaway SQLite. Redis from REDIS_URL under a private prefix.
Ends with one line:
`queries: explore_pages_per_min= generated_per_s= gate_pass_rate= leaf_coverage= vbench_tag_agreement=`.
"""
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = tempfile.mkdtemp(prefix="bench-queries-")
os.environ["FLYWHEEL_VAR_DIR"] = VAR
os.environ["FLYWHEEL_KEY_PREFIX"] = f"bench{os.getpid()}:"
os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{VAR}/bench.sqlite3"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.conf import settings
from django.core.management import call_command

from devices.hosts import host_queue
from devices.models import Device
from devices.registry import discover_devices
from flywheel.collection.launch import launch_run
from flywheel.models import App, CollectionRun, GemPage, Query, Trajectory
from flywheel.queries.coverage import coverage
from flywheel.queries.exploration.runs import explore_apps_now
from flywheel.queries.external_tags import vbench_agreement
from flywheel.queries.function_tree.builder import build_tree_from_gem, leaves
from flywheel.queries.gates import index_function_nodes
from flywheel.queries.generation.runs import generate_now
from flywheel.screens.embedding import embed
from simfarm.appspec import load_apps
from simfarm.launch import die_with_parent, running_farm

VBENCH = ROOT.parent / "shared" / "data" / "mobilegui-vbench" / "MobileGUI-VBench.jsonl"
PHONES = int(os.environ.get("BENCH_PHONES", "8"))
ONLY_APPS = [p for p in os.environ.get("BENCH_APPS", "").split(",") if p]  # a quicker partial run


def farm_apps() -> dict:
    """package → {"pages": {activity: page id}, "leaves": {leaf id: page id}} from the app files."""
    apps = {}
    for spec in load_apps().values():
        pages = {spec.activity_of(page_id): page_id for page_id in spec.pages}
        declared = {node["id"]: node.get("page") for node in spec.function_leaves() if not node.get("reuse_of")}
        apps[spec.package] = {"pages": pages, "leaves": declared}
    return apps


def reached_pages(package: str, truth: dict) -> set:
    activities = GemPage.objects.filter(app__package=package).values_list("activity", flat=True)
    names = {activity.split("/")[-1] for activity in activities}
    return {page_id for activity, page_id in truth["pages"].items() if activity in names
            or f"{package}{activity}" in names}


def start_worker(address, log):
    env = dict(os.environ, ADB_SERVERS=address)
    return subprocess.Popen(
        [str(ROOT / ".venv/bin/celery"), "-A", "config", "worker", "--pool", "solo", "-l", "warning",
         "-Q", host_queue(address), "-n", f"bench-q-{address.replace(':', '-')}@%h",
         "--without-mingle", "--without-gossip"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent)


def explore(truth) -> float:
    packages = sorted(truth)
    started = time.perf_counter()
    run = explore_apps_now(packages, {"max_seconds": 1800})
    minutes = (time.perf_counter() - started) / 60
    print(f"exploration run #{run.pk}: {run.status}, {run.pages_found} pages, {run.actions_taken} actions "
          f"in {minutes:.1f} min; problems: {len(run.problems)}")
    worst = 1.0
    for package in packages:
        reached, total = reached_pages(package, truth[package]), len(truth[package]["pages"])
        missing = sorted(set(truth[package]["pages"].values()) - reached)
        worst = min(worst, len(reached) / total)
        print(f"  {package}: {len(reached)}/{total} pages = {len(reached) / total:.0%}"
              + (f" (not reached: {', '.join(missing[:8])}{'…' if len(missing) > 8 else ''})" if missing else ""))
    declared = explored = 0
    for package, spec in truth.items():
        reached = reached_pages(package, spec)
        declared += len(spec["leaves"])
        explored += sum(1 for page in spec["leaves"].values() if page in reached)
    print(f"farm's declared leaves whose page exploration reached: {explored}/{declared} = {explored / declared:.0%}; "
          f"worst app's pages: {worst:.0%}")
    return run.pages_found / minutes if minutes else 0.0


def build_trees(truth):
    for package in sorted(truth):
        summary = build_tree_from_gem(App.objects.get(package=package))
        print(f"  tree {package}: {summary}")
    print(f"function-tree leaves (built from exploration): {leaves().count()}")
    # The trees' node texts are embedded once when a tree is built (the tree page queues this on
    # a worker); generation runs then embed only their queries for gate 3.
    embed(["load the model once, as a worker process keeps it"])
    started = time.perf_counter()
    nodes = index_function_nodes()
    print(f"tree index: {nodes} nodes embedded for gate 3 in {time.perf_counter() - started:.1f} s")


def generate():
    run = generate_now({"per_leaf": 3, "cross_app": 40, "seed": 1})
    seconds = (run.finished_at - run.created_at).total_seconds()
    rate = run.generated / seconds if seconds else 0.0
    pass_rate = run.passed / run.generated if run.generated else 0.0
    print(f"generation run #{run.pk}: {run.generated} drafts in {seconds:.1f} s = {rate:.1f}/s; "
          f"passed {run.passed}, rejected {run.rejected}; report: {run.report.get('rejections', run.report)}")
    counted = leaves()
    with_query = counted.filter(queries__status=Query.Status.REVIEW).distinct().count()
    total = counted.count()
    print(f"leaves with at least one gate-passed query: {with_query}/{total} = {with_query / total:.0%}")
    return rate, pass_rate


def one_query_per_leaf() -> list[str]:
    keys, seen = [], set()
    approved = Query.objects.filter(status=Query.Status.READY, source="synthesized")
    for query in approved.prefetch_related("function_links").order_by("key"):
        leaf = next((link.function_id for link in query.function_links.all()), None)
        if leaf not in seen:
            seen.add(leaf)
            keys.append(query.key)
    return keys


def collect(farm, line) -> None:
    """One round on `line` over one approved query per leaf, through a real Celery worker."""
    keys = one_query_per_leaf()
    log = open(Path(VAR) / f"worker-{line}.log", "wb")
    worker = start_worker(farm.address, log)
    try:
        started = time.perf_counter()
        run = launch_run(line, {"keys": keys}, config={"phones": PHONES, "max_steps": 20})
        while CollectionRun.objects.get(pk=run.pk).status not in ("done", "cancelled", "failed"):
            time.sleep(1)
        elapsed = time.perf_counter() - started
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    verdicts = list(Trajectory.objects.filter(run=run).values_list("verdict", flat=True))
    true = sum(1 for v in verdicts if v == "true")
    print(f"{line} collection of {len(keys)} queries (one per leaf): {len(verdicts)} trajectories in "
          f"{elapsed / 60:.1f} min, {true} True")


def main():
    call_command("migrate", verbosity=0)
    truth = farm_apps()
    if ONLY_APPS:
        truth = {package: spec for package, spec in truth.items() if package in ONLY_APPS}
    with ExitStack() as stack:
        farm = stack.enter_context(running_farm(devices=PHONES, seed=5, log_path=Path(VAR) / "farm.log"))
        settings.ADB_SERVERS = [farm.address]
        discover_devices([farm.address])
        print(f"{Device.objects.count()} phones; database: {django.db.connection.vendor}")
        pages_per_min = explore(truth)
        build_trees(truth)
        generated_per_s, gate_pass_rate = generate()
        # Review-free: every gate-passed query is approved as it stands.
        Query.objects.filter(status=Query.Status.REVIEW, source="synthesized").update(status=Query.Status.READY)
        # The automatic line sees the goal alone (the built-in offline policy); the coverage it
        # reaches is the figure. The schema-guided line then checks that the known paths GEM gave
        # and the draft verification specs hold together on the phones.
        collect(farm, "automatic")
        leaf_coverage = coverage()
        print(f"coverage after the automatic round: {leaf_coverage}")
        collect(farm, "schema")
        print(f"coverage after a schema-guided round too: {coverage()}")
    agreement = vbench_agreement(VBENCH)
    print(f"VBench tagging agreement: {agreement}")
    print(f"queries: explore_pages_per_min={pages_per_min:.0f} generated_per_s={generated_per_s:.1f} "
          f"gate_pass_rate={gate_pass_rate:.2f} leaf_coverage={leaf_coverage['ratio']:.2f} "
          f"vbench_tag_agreement={agreement['overall']:.2f}")


if __name__ == "__main__":
    main()
