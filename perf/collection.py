"""Benchmark: collection steps per second through real Celery workers on the virtual farm.

Starts what it needs: virtual farms (ADB servers), Celery workers (one per phone host, each
driving its phones concurrently), and a database (BENCH_DATABASE_URL, else a throwaway SQLite).
Redis comes from REDIS_URL (default redis://127.0.0.1:6379/0) under a private key prefix.

Measures steps/s with 1, 4 and 16 phones on one host with one worker, and 16 phones split over
two hosts with two workers; and the per-step overhead excluding phone time (the step's wall time
minus observing the phone — screencap, UI dump, screen size, foreground — and the action's own
time on the phone).

Ends with one line: `collection: steps_per_s_1=<n> steps_per_s_16=<n> overhead_ms_per_step=<n>`.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = tempfile.mkdtemp(prefix="bench-collection-")
os.environ["FLYWHEEL_VAR_DIR"] = VAR
os.environ["FLYWHEEL_KEY_PREFIX"] = f"bench{os.getpid()}:"
if os.environ.get("BENCH_DATABASE_URL"):
    os.environ["DATABASE_URL"] = os.environ["BENCH_DATABASE_URL"]
else:
    os.environ["DATABASE_URL"] = f"sqlite:///{VAR}/bench.sqlite3"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.conf import settings
from django.core.management import call_command

from devices.hosts import host_queue
from devices.registry import discover_devices
from flywheel.collection.launch import launch_run
from flywheel.models import App, CollectionRun, Query, Step
from simfarm.launch import die_with_parent, running_farm

STEPS_PER_TRAJECTORY = 12
TRAJECTORIES_PER_PHONE = 2
PATH = {"mode": "tap", "summary": "scroll Settings", "steps": [{"action": "open", "app": "com.android.settings"}] + [
    {"action": "swipe", "direction": "up" if i % 2 else "down"} for i in range(STEPS_PER_TRAJECTORY - 2)] + [
    {"action": "terminate", "status": "success"}]}


def start_worker(address, log):
    env = dict(os.environ, ADB_SERVERS=address)
    return subprocess.Popen(
        [str(ROOT / ".venv/bin/celery"), "-A", "config", "worker", "--pool", "solo", "-l", "warning",
         "-Q", host_queue(address), "-n", f"bench-{address.replace(':', '-')}@%h",
         "--without-mingle", "--without-gossip"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent)


def measure(farms, phones_per_host, label):
    """One run over `phones_per_host` phones of each farm; returns (steps/s, step records)."""
    addresses = [farm.address for farm in farms]
    settings.ADB_SERVERS = addresses
    discover_devices(addresses)
    tag = f"bench-{label}"
    phones = phones_per_host * len(farms)
    app, _ = App.objects.get_or_create(package="com.android.settings")
    for i in range(phones * TRAJECTORIES_PER_PHONE):
        query = Query.objects.create(key=f"{tag}-{i}", text="Scroll the Settings list", tier="L1",
                                     known_path=PATH, tags=[tag], verification={},
                                     reset={"force_stop": ["com.android.settings"], "clear": [], "home": True})
        query.set_apps([app])
    started = time.perf_counter()
    # Schema-guided, the one line that shows the policy the known path: every trajectory follows
    # the long scroll path, so the figure is per step, not per reset and judgement.
    run = launch_run("schema", {"tags": [tag]}, config={"phones": phones, "max_steps": 40})
    while CollectionRun.objects.get(pk=run.pk).status not in ("done", "cancelled", "failed"):
        time.sleep(0.2)
    elapsed = time.perf_counter() - started
    steps = list(Step.objects.filter(trajectory__run=run, executed_action__isnull=False).values_list("timings", flat=True))
    rate = len(steps) / elapsed
    print(f"{label}: {phones} phone(s) on {len(farms)} host(s): {len(steps)} steps in {elapsed:.1f} s "
          f"= {rate:.1f} steps/s")
    return rate, steps


def overhead(steps):
    """Per step: wall time minus the time spent waiting for the phone (screen, dump, action)."""
    values = []
    for t in steps:
        if "step_ms" not in t:
            continue
        phone_ms = t.get("observe_ms", 0) + t.get("execute_ms", 0)
        values.append(t["step_ms"] - phone_ms)
    return statistics.median(values) if values else float("nan")


def main():
    call_command("migrate", verbosity=0)
    with ExitStack() as stack:
        log = open(Path(VAR) / "workers.log", "wb")
        big = stack.enter_context(running_farm(devices=16, seed=1, log_path=Path(VAR) / "farm-a.log"))
        worker = start_worker(big.address, log)
        stack.callback(worker.terminate)
        time.sleep(3)
        rate_1, _ = measure([big], 1, "1-phone")
        rate_4, _ = measure([big], 4, "4-phones")
        rate_16, steps_16 = measure([big], 16, "16-phones-1-worker")
        worker.terminate()
        worker.wait(timeout=20)
        # Two hosts of 8 phones, one worker each: the same 16 phones' worth of work.
        host_a = stack.enter_context(running_farm(devices=8, seed=2, log_path=Path(VAR) / "farm-b.log"))
        host_b = stack.enter_context(running_farm(devices=8, seed=3, log_path=Path(VAR) / "farm-c.log"))
        workers = [start_worker(host_a.address, log), start_worker(host_b.address, log)]
        for w in workers:
            stack.callback(w.terminate)
        time.sleep(3)
        rate_16_2, _ = measure([host_a, host_b], 8, "16-phones-2-workers")
    over = overhead(steps_16)
    print(f"database: {django.db.connection.vendor}; scaling 1→16 phones: x{rate_16 / rate_1:.1f}; "
          f"1 vs 2 workers at 16 phones: {rate_16:.1f} vs {rate_16_2:.1f} steps/s")
    audit = statistics.median([t.get("audit_ms", 0) for t in steps_16] or [0])
    propose = statistics.median([t.get("propose_ms", 0) for t in steps_16] or [0])
    print(f"per-step overhead excluding phone time: median {over:.0f} ms (of which the audit — a "
          f"fresh screen when the observed one is over 1 s old, the rules, the lease check — "
          f"median {audit:.0f} ms; the policy's proposal median {propose:.0f} ms)")
    print(f"collection: steps_per_s_1={rate_1:.1f} steps_per_s_16={max(rate_16, rate_16_2):.1f} "
          f"overhead_ms_per_step={over:.0f}")


if __name__ == "__main__":
    main()
