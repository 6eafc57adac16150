"""Benchmark: the console on the farm's task set in real-phone mode (issue #36).

The farm's phones answer only what a real Android phone answers and count every request only a farm
would answer; their apps show the states a real farm meets and cannot inject (login expiry, CAPTCHAs,
region walls...) on their own seeded schedule. The console imports the task set and the farm's setup
recipes, collects every task on the schema-guided line (prerequisites set up by their recipes first),
judges and routes each trajectory, and gathers hand-back samples from what was met. Figures:

    tasks_executable   tasks whose prerequisites were met (or that have none) / tasks collected
    preset_success     recipes that ran to their end / recipes started
    handback_classes   hand-back classes met at least once (of 14)
    handback_samples   samples the hand-back channel made
    system_a_abstain   share of judged trajectories on which System A abstained (an app's own state)
    farm_only_calls    requests to the farm-only interfaces (must be 0)

    make realphone   (REALPHONE_PHONES=4, REALPHONE_HANDBACK_RATE=0.05, REALPHONE_LIMIT=N tasks)

Runs in a PostgreSQL database made for the run and dropped afterwards (DATABASE_URL names the server).
"""
import os
import sys
import time
from pathlib import Path

from throwaway_db import create_database, drop_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PHONES = int(os.environ.get("REALPHONE_PHONES", "4"))
RATE = float(os.environ.get("REALPHONE_HANDBACK_RATE", "0.05"))
LIMIT = int(os.environ["REALPHONE_LIMIT"]) if os.environ.get("REALPHONE_LIMIT") else None
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
BASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
if not BASE_URL.startswith(("postgres://", "postgresql://")):
    raise SystemExit("perf/realphone.py needs DATABASE_URL to name a PostgreSQL server")
NAME = f"realphone_{time.strftime('%Y%m%d_%H%M%S')}_{os.getpid()}"
os.environ["DATABASE_URL"] = create_database(BASE_URL, NAME)
os.environ["HANDBACK_SAMPLES"] = "0"      # gathered below, in this process, not by a worker
os.environ["ECDM_AUTOMATIC"] = "0"

import django

django.setup()

from django.conf import settings
from django.core.management import call_command

from devices.registry import discover_devices
from flywheel.collection import handback
from flywheel.collection.driver import drive_host
from flywheel.collection.launch import launch_run
from flywheel.models import HandbackSample, Query, Trajectory, Vote
from flywheel.queries.jsonl import import_queries
from flywheel.queries.recipes import import_recipes
from simfarm.farm import Farm
from simfarm.serve import ServerThread

TASKS = ROOT / "simfarm" / "tasks" / "tasks.jsonl"
RECIPES = ROOT / "simfarm" / "setup_recipes.jsonl"


def measure() -> dict:
    call_command("migrate", verbosity=0)
    import_queries(TASKS.read_text())
    import_recipes(RECIPES.read_text())
    keys = list(Query.objects.order_by("key").values_list("key", flat=True))[:LIMIT]
    farm = Farm(devices=PHONES, seed=0, real_phone=True, handback_rate=RATE)
    started = time.perf_counter()
    with ServerThread(farm) as server:
        address = f"127.0.0.1:{server.port}"
        settings.ADB_SERVERS = [address]
        discover_devices()
        run = launch_run("schema", {"keys": keys}, config={"phones": PHONES, "max_steps": 25, "clarify_wait_s": 0},
                         dispatch=False)  # nobody answers a clarify here: the spec does, or it ends
        print(f"{len(keys)} tasks on {PHONES} phones in real-phone mode, hand-back rate {RATE}", flush=True)
        drive_host(run.pk, address, PHONES, budget_s=24 * 3600)
        trajectories = list(Trajectory.objects.filter(run=run))
        for trajectory in trajectories:
            handback.gather(trajectory.pk)
    setups = [t.setup for t in trajectories if t.setup.get("prerequisites")]
    started_recipes = [r for setup in setups for r in setup.get("recipes", [])]
    a_votes = Vote.objects.filter(trajectory__run=run, system="A")
    return {
        "tasks": len(trajectories),
        "tasks_executable": sum(t.status != Trajectory.Status.NOT_EXECUTABLE for t in trajectories) / len(trajectories),
        "with_prerequisites": len(setups),
        "preset_success": (sum(r["ok"] for r in started_recipes) / len(started_recipes)) if started_recipes else None,
        "handback_classes": HandbackSample.objects.values("state").distinct().count(),
        "handback_samples": HandbackSample.objects.count(),
        "system_a_abstain": a_votes.filter(vote="abstain").count() / a_votes.count() if a_votes.exists() else None,
        "farm_only_calls": sum(phone.farm_only_count for phone in farm.phones.values()),
        "refused": [call for phone in farm.phones.values() for call in phone.farm_only_calls][:10],
        "verdicts": {v: sum(t.verdict == v for t in trajectories) for v in {t.verdict for t in trajectories}},
        "minutes": (time.perf_counter() - started) / 60,
    }


def fmt(value) -> str:
    return "n/a" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))


def main():
    try:
        f = measure()
    finally:
        drop_database(BASE_URL, NAME)
    print(f"collected {f['tasks']} tasks in {f['minutes']:.1f} min; {f['with_prerequisites']} with prerequisites; "
          f"verdicts {f['verdicts']}")
    if f["refused"]:
        print("farm-only requests:", *f["refused"], sep="\n  ")
    print("realphone: " + " ".join(f"{name}={fmt(f[name])}" for name in (
        "tasks_executable", "preset_success", "handback_classes", "handback_samples", "system_a_abstain",
        "farm_only_calls")))


if __name__ == "__main__":
    main()
