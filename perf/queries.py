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

import django  # noqa: E402

django.setup()

import yaml  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from devices.models import Device  # noqa: E402
from devices.registry import discover_devices  # noqa: E402
from flywheel.collection.runs import host_queue, launch_run  # noqa: E402
from flywheel.models import App, CollectionRun, GemPage, Query, Trajectory  # noqa: E402
from flywheel.queries.coverage import coverage  # noqa: E402
from flywheel.queries.exploration_runs import explore_apps_now  # noqa: E402
from flywheel.queries.external_tags import vbench_agreement  # noqa: E402
from flywheel.queries.function_tree import build_tree_from_gem, leaves  # noqa: E402
from flywheel.queries.generation_runs import generate_now  # noqa: E402
from tests.farm import die_with_parent, running_farm  # noqa: E402

APPS_DIR = ROOT / "simfarm" / "apps"
VBENCH = ROOT.parent / "shared" / "data" / "mobilegui-vbench" / "MobileGUI-VBench.jsonl"
PHONES = int(os.environ.get("BENCH_PHONES", "8"))


def farm_apps() -> dict:
    """package → {"pages": {activity: page id}, "leaves": {leaf id: page id}} from the app files."""
    apps = {}
    for path in sorted(APPS_DIR.glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())
        pages = {}
        for page_id, page in (spec.get("pages") or {}).items():
            activity = page.get("activity") or "." + "".join(p.capitalize() for p in page_id.split("_")) + "Activity"
            pages[activity] = page_id
        ids = [node["id"] for node in spec.get("functions") or []]
        declared_leaves = {node["id"]: node.get("page") for node in spec.get("functions") or []
                           if not any(other.startswith(node["id"] + "/") for other in ids) and not node.get("reuse_of")}
        apps[spec["package"]] = {"pages": pages, "leaves": declared_leaves}
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


def collect(farm) -> None:
    """Review-free: every gate-passed query approved; one query per leaf collected once."""
    passed = Query.objects.filter(status=Query.Status.REVIEW, source="synthesized")
    keys, seen = [], set()
    for query in passed.prefetch_related("function_links").order_by("key"):
        leaf = next((link.function_id for link in query.function_links.all()), None)
        if leaf not in seen:
            seen.add(leaf)
            keys.append(query.key)
    passed.update(status=Query.Status.READY)
    log = open(Path(VAR) / "worker.log", "wb")
    worker = start_worker(farm.address, log)
    try:
        started = time.perf_counter()
        run = launch_run("automatic", {"keys": keys}, config={"phones": PHONES, "max_steps": 20})
        while CollectionRun.objects.get(pk=run.pk).status not in ("done", "cancelled", "failed"):
            time.sleep(1)
        elapsed = time.perf_counter() - started
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    verdicts = Trajectory.objects.filter(run=run).values_list("verdict", flat=True)
    true = sum(1 for v in verdicts if v == "true")
    print(f"automatic collection of {len(keys)} queries (one per leaf): {len(verdicts)} trajectories in "
          f"{elapsed / 60:.1f} min, {true} True")


def main():
    call_command("migrate", verbosity=0)
    truth = farm_apps()
    with ExitStack() as stack:
        farm = stack.enter_context(running_farm(devices=PHONES, seed=5, log_path=Path(VAR) / "farm.log"))
        settings.ADB_SERVERS = [farm.address]
        discover_devices([farm.address])
        print(f"{Device.objects.count()} phones; database: {django.db.connection.vendor}")
        pages_per_min = explore(truth)
        build_trees(truth)
        generated_per_s, gate_pass_rate = generate()
        collect(farm)
    leaf_coverage = coverage()
    print(f"coverage after the round: {leaf_coverage}")
    agreement = vbench_agreement(VBENCH)
    print(f"VBench tagging agreement: {agreement}")
    print(f"queries: explore_pages_per_min={pages_per_min:.0f} generated_per_s={generated_per_s:.1f} "
          f"gate_pass_rate={gate_pass_rate:.2f} leaf_coverage={leaf_coverage['ratio']:.2f} "
          f"vbench_tag_agreement={agreement['overall']:.2f}")


if __name__ == "__main__":
    main()
