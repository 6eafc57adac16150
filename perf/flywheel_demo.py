"""`make flywheel-demo`: the flywheel proves itself on this machine (issue #16).

Starts what it needs, apart from the console's own data: a fresh database (a new PostgreSQL database
on the server DATABASE_URL names; SQLite when DATABASE_URL is not PostgreSQL; the database and the
run's files in var/flywheel-demo/run-* are removed at the end unless FLYWHEEL_DEMO_KEEP=1), a virtual farm with 4 phones, and one Celery worker (every queue,
the farm's host queue, beat embedded). Redis comes from REDIS_URL under a private key prefix. Then it
runs flywheel_demo's rounds through them (flywheel_demo/orchestrator.py) and prints the report.

Every run's report is kept in var/flywheel-demo/ (FLYWHEEL_DEMO_REPORTS); the console's Flywheel demo
page lists them. Ends with one line:
`flywheel: sr_round0=<n> sr_round1=<n> sr_round<last>=<n> ci95_r1_r<last>=[<lo>,<hi>] unseen_function_sr_round<last>=<n>
false_success_round<last>=<n> ecdm_delta=<points> heldout_tasks=<n> minutes=<n>` (<last> is the last round that ran:
3 with the default two loop rounds; the interval is the round 1 → last gain's, in points).
"""
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from throwaway_db import create_database, drop_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
STAMP = time.strftime("%Y%m%d-%H%M%S")
VAR = ROOT / "var" / "flywheel-demo" / f"run-{STAMP}"
VAR.mkdir(parents=True, exist_ok=True)
PHONES = int(os.environ.get("FLYWHEEL_DEMO_PHONES", "4"))
HOSTS = max(1, min(PHONES, int(os.environ.get("FLYWHEEL_DEMO_HOSTS", "2"))))
TIMEOUT_MIN = float(os.environ.get("FLYWHEEL_DEMO_TIMEOUT_MIN", "45"))
os.environ["FLYWHEEL_VAR_DIR"] = str(VAR)
os.environ.setdefault("FLYWHEEL_DEMO_REPORTS", str(ROOT / "var" / "flywheel-demo"))
os.environ["FLYWHEEL_KEY_PREFIX"] = f"demo{os.getpid()}:"
os.environ["EVOLUTION_TRAINER"] = ""  # the demo trains each round's compact model itself
# One host drives one run at a time: a run that found every phone taken is sent again this soon.
os.environ.setdefault("COLLECTION_REDISPATCH_AFTER_S", "20")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def fresh_database() -> tuple[str, str]:
    """(DATABASE_URL for this run, the PostgreSQL database to drop afterwards or "")."""
    base = os.environ.get("FLYWHEEL_DEMO_DATABASE_URL") or os.environ.get("DATABASE_URL", "")
    if not base.startswith(("postgres://", "postgresql://")):
        return f"sqlite:///{VAR}/demo.sqlite3", ""
    name = f"flywheel_demo_{STAMP.replace('-', '_')}_{os.getpid()}"
    return create_database(base, name), name


BASE_URL = os.environ.get("FLYWHEEL_DEMO_DATABASE_URL") or os.environ.get("DATABASE_URL", "")
os.environ["DATABASE_URL"], DROP = fresh_database()

import django

django.setup()

from django.core.management import call_command

from devices.hosts import host_queue
from devices.registry import discover_devices
from flywheel_demo.models import DemoRun
from flywheel_demo.orchestrator import advance_demo, clean_demo_config
from simfarm.launch import die_with_parent, running_farm, stop

QUEUES = "default,collection,evaluation,repair,training,benchmark"


def start_worker(addresses, log):
    env = dict(os.environ, ADB_SERVERS=",".join(addresses))
    host_queues = ",".join(host_queue(address) for address in addresses)
    return subprocess.Popen(
        [str(ROOT / ".venv/bin/celery"), "-A", "config", "worker", "-B", "-s", str(VAR / "beat-schedule"),
         "--concurrency", str(3 + len(addresses)), "-l", "warning", "-Q", f"{QUEUES},{host_queues}",
         "-n", f"demo-{os.getpid()}@%h", "--without-mingle", "--without-gossip"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)


def print_report(report: dict):
    from flywheel_demo.report import sr_with_interval

    print("round  model                      held-out SR (95% CI)  solved/tasks  false success  unseen app SR  "
          "salvage yield  SFT pool (ECDM)  steps trained")
    for row in report["rounds"]:
        training, pools = row.get("training") or {}, row.get("pools") or {}
        salvage, unseen = row.get("salvage_yield"), (row.get("by_kind") or {}).get("unseen_function") or {}
        print(f"{row['round']:>5}  {training.get('model', '?'):<26} {sr_with_interval(row):<21} "
              f"{row.get('successes', 0):>5}/{row.get('tasks', 0):<6} {row.get('false_success')!s:>13}  "
              f"{unseen.get('sr')!s:>13}  {'n/a' if salvage is None else salvage!s:>13}  "
              f"{pools.get('sft', 0):>8} ({pools.get('sft_ecdm', 0)})  {training.get('steps_used') or 0:>13}")
    for comparison in report.get("comparisons") or []:
        print(comparison["words"])
    for arm in report.get("arms") or []:
        effect = (arm.get("effect") or {}).get("words") or "not compared"
        print(f"arm {arm['arm']} ({arm.get('what', '')}): SR {sr_with_interval(arm)} "
              f"({arm.get('successes', 0)}/{arm.get('tasks', 0)}); {effect}")
    print(f"targets {report['targets']}; met {report['met']}")


def farm_sizes(phones: int, hosts: int) -> list[int]:
    """Phones per host, as even as they go (5 on 2 hosts: 3 and 2)."""
    return [phones // hosts + (1 if i < phones % hosts else 0) for i in range(hosts)]


def main():
    call_command("migrate", verbosity=0)
    config = clean_demo_config({"phones": PHONES})
    with ExitStack() as stack:
        farms, first = [], 0
        for index, size in enumerate(farm_sizes(PHONES, HOSTS)):
            farms.append(stack.enter_context(running_farm(
                devices=size, log_path=VAR / f"farm-{index + 1}.log", extra_args=("--first-device", str(first)))))
            first += size
        log = stack.enter_context(open(VAR / "worker.log", "wb"))
        addresses = [farm.address for farm in farms]
        os.environ["ADB_SERVERS"] = ",".join(addresses)
        from django.conf import settings

        settings.ADB_SERVERS = addresses
        discover_devices(addresses)
        worker = start_worker(addresses, log)
        try:
            demo = DemoRun.objects.create(config=config, detail="started by make flywheel-demo")
            deadline, last = time.monotonic() + TIMEOUT_MIN * 60, ""
            while time.monotonic() < deadline:
                demo = advance_demo(demo.pk)
                if demo.detail != last:
                    print(f"[{time.strftime('%H:%M:%S')}] {demo.stage}: {demo.detail}", flush=True)
                    last = demo.detail
                if demo.status not in DemoRun.LIVE:
                    break
                if worker.poll() is not None:
                    raise SystemExit(f"the Celery worker exited ({worker.returncode}); see {VAR / 'worker.log'}")
                time.sleep(3)
            else:
                raise SystemExit(f"the demo did not finish in {TIMEOUT_MIN} min (stage {demo.stage}: {demo.detail})")
        finally:
            stop(worker, timeout=30)
    if demo.status != DemoRun.Status.DONE:
        raise SystemExit(f"the demo {demo.status}: {demo.error or demo.detail}")
    print_report(demo.report)
    print(f"report kept in {demo.report_path} (its chart: {Path(demo.report_path).with_suffix('.svg')})")
    print(demo.report["line"])


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: still drop the database
    try:
        main()
    finally:
        from django.db import connections

        connections.close_all()
        if os.environ.get("FLYWHEEL_DEMO_KEEP") != "1":  # the report stays; the run's data goes
            if DROP:
                drop_database(BASE_URL, DROP)
            shutil.rmtree(VAR, ignore_errors=True)
