"""Benchmark: how much of an automatic run's failure the ECDM turns into supervision (§2.5).

    python perf/ecdm.py [--tiers L1,L2,L3] [--phones 4] [--skip-browser]

Starts a virtual farm and a database (BENCH_DATABASE_URL, else a throwaway SQLite), imports the
farm's task set, and runs the automatic line with the built-in offline policy (the goal alone,
no known path: what the automatic line shows a policy) through the real collection driver,
executor, audit and HTSC. Then, in this process, every False / Env_ERROR trajectory goes through
the ECDM exactly as a repair worker runs it: cascaded attribution, dispatch, the offline Teacher
(which, as a repair tool, may use the task's known path and the GEM), RQA, pop-up repair; the
repairs a Teacher could not make wait for a person and count as not salvaged here.

Measures:
- salvage_yield: the share of failed trajectories that produced an SFT sample (target ≥ 0.6);
- teacher_accuracy: the offline Teacher's single-step-slip corrections against the farm tasks'
  known-correct next action (perf/teacher_accuracy.py; target ≥ 0.9);
- repair_items_per_min: a person clearing the human repair queue in chromium with the keyboard
  only (perf/repair_queue.py, run as a subprocess; --skip-browser leaves it out).

Ends with one line: `ecdm: salvage_yield=<r> teacher_accuracy=<r> repair_items_per_min=<n>`.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = tempfile.mkdtemp(prefix="bench-ecdm-")
os.environ["FLYWHEEL_VAR_DIR"] = VAR
os.environ["FLYWHEEL_KEY_PREFIX"] = f"bench{os.getpid()}:"
os.environ["ECDM_AUTOMATIC"] = "0"  # this script runs the ECDM itself, in order, in this process
os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{VAR}/bench.sqlite3"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.conf import settings
from django.core.management import call_command

from simfarm.launch import running_farm

TASKS = ROOT / "simfarm" / "tasks" / "tasks.jsonl"


def collect(address, tiers, phones):
    from devices.registry import discover_devices
    from flywheel.collection.driver import drive_host
    from flywheel.collection.launch import launch_run
    from flywheel.models import CollectionRun, Query

    settings.ADB_SERVERS = [address]
    discover_devices([address])
    keys = list(Query.objects.filter(tier__in=tiers).values_list("key", flat=True))
    run = launch_run("automatic", {"keys": keys}, config={"phones": phones, "max_steps": 20,
                                                          "teacher_takeover_after": 0}, dispatch=False)
    started = time.perf_counter()
    drive_host(run.pk, address, phones)
    run.refresh_from_db()
    print(f"automatic run #{run.pk}: {run.completed}/{run.total} trajectories in "
          f"{time.perf_counter() - started:.0f} s ({run.status})", flush=True)
    if run.status != CollectionRun.Status.DONE:
        print("warning: the run did not finish; the yield below is over what was collected", flush=True)
    return run


def run_ecdm(run):
    from flywheel.judging.pipeline import evaluate_pending
    from flywheel.models import Outcome, Repair, Trajectory
    from flywheel.repair.counterfactual import derive_recurring
    from flywheel.repair.ecdm import process_failure, run_repair

    evaluate_pending(limit=10_000, older_than=__import__("datetime").timedelta(0))
    verdicts = Counter(Trajectory.objects.filter(run=run).values_list("verdict", flat=True))
    print(f"verdicts: {dict(verdicts)}", flush=True)
    failed = list(Trajectory.objects.filter(run=run, verdict__in=[Outcome.FALSE, Outcome.ENV_ERROR])
                  .values_list("pk", flat=True))
    started = time.perf_counter()
    for trajectory_id in failed:
        process_failure(trajectory_id)
    for repair_id in Repair.objects.filter(trajectory_id__in=failed, status="pending").exclude(
            path="counterfactual").values_list("pk", flat=True):
        run_repair(repair_id)
    derived = derive_recurring()
    elapsed = time.perf_counter() - started
    return failed, elapsed, derived


def report(failed, elapsed, derived):
    from flywheel.models import Attribution, Repair
    from flywheel.rules.salvage import salvage_yield

    attributions = Attribution.objects.filter(trajectory_id__in=failed)
    print("attribution: " + ", ".join(f"L{level} {cause}: {n}" for (level, cause), n in sorted(
        Counter(attributions.values_list("level", "cause")).items())), flush=True)
    print("dispatch: " + ", ".join(f"{path or 'no repair'}: {n}" for path, n in sorted(
        Counter(attributions.values_list("ecdm_path", flat=True)).items())), flush=True)
    repairs = Repair.objects.filter(trajectory_id__in=failed)
    print("repairs: " + ", ".join(f"{path}/{status}: {n}" for (path, status), n in sorted(
        Counter(repairs.values_list("path", "status")).items())), flush=True)
    by_path, counted = Counter(), set()
    for repair in repairs.filter(status="done", sample__isnull=False).order_by("pk"):
        if repair.trajectory_id in counted:
            continue
        counted.add(repair.trajectory_id)
        by_path["human" if (repair.correction or {}).get("by") == "human" else repair.path] += 1
    value = salvage_yield(len(failed), by_path)
    print(f"{len(failed)} failed trajectories → {len(counted)} salvaged ({dict(by_path)}) in {elapsed:.1f} s; "
          f"counterfactual: {derived}", flush=True)
    for repair in repairs.filter(status__in=["needs_human", "failed"])[:15]:
        print(f"  not salvaged: repair #{repair.pk} {repair.path} of #{repair.trajectory_id}: "
              f"{repair.status}: {(repair.human_reason or repair.reason)[:140]}")
    return value


def teacher_figure(address, serial):
    from devices.baseline import read_baseline
    from devices.phone import PhoneConnection
    from perf.teacher_accuracy import single_app_tasks_with_paths, teacher_accuracy

    phone = PhoneConnection(address, serial)
    result = teacher_accuracy(phone, single_app_tasks_with_paths(TASKS), baseline=read_baseline(phone))
    print(f"teacher (known path available): {result['correct']}/{result['total']} correct; "
          f"by source {result.get('by_source')}", flush=True)
    return result["correct"] / result["total"] if result["total"] else float("nan")


def browser_figure():
    process = subprocess.run([sys.executable, str(ROOT / "perf" / "repair_queue.py")], cwd=ROOT,
                             capture_output=True, text=True, timeout=900)
    lines = [line for line in process.stdout.splitlines() if line.startswith("repair_queue:")]
    if process.returncode or not lines:
        print("repair queue benchmark failed:\n" + (process.stdout + process.stderr)[-2000:], flush=True)
        return float("nan")
    print(lines[-1], flush=True)
    fields = dict(part.split("=", 1) for part in lines[-1].split()[1:])
    return float(fields["repair_items_per_min"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiers", default="L1,L2,L3")
    parser.add_argument("--phones", type=int, default=4)
    parser.add_argument("--skip-browser", action="store_true")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    call_command("import_queries", str(TASKS), verbosity=0)
    call_command("import_recipes", str(ROOT / "simfarm" / "setup_recipes.jsonl"), verbosity=0)
    with running_farm(devices=args.phones + 1, seed=11, log_path=Path(VAR) / "farm.log") as farm:
        run = collect(farm.address, args.tiers.split(","), args.phones)
        failed, elapsed, derived = run_ecdm(run)
        salvage = report(failed, elapsed, derived)
        accuracy = teacher_figure(farm.address, farm.serials[-1])
    per_min = float("nan") if args.skip_browser else browser_figure()
    print(f"ecdm: salvage_yield={salvage if salvage is not None else 'nan'} "
          f"teacher_accuracy={accuracy:.3f} repair_items_per_min={per_min:.1f}")


if __name__ == "__main__":
    main()
