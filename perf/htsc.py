"""Benchmark: trajectories judged by HTSC and routed per second, with the offline systems.

Builds ten-step trajectories from real virtual-farm screens (Settings pages captured in-process),
stores them like a collection line does (content-addressed hierarchies, one row per step), then
times evaluate_trajectory() — safety checklist, Systems B and C, consensus, persisted votes and
verdict, routing — over all of them. System A needs the live phone and abstains here.

Uses DATABASE_URL when set, else a throwaway SQLite database. Prints its figures and ends with
one line: `htsc: trajectories_per_s=<n>`.
"""
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if "DATABASE_URL" not in os.environ:
    os.environ["FLYWHEEL_VAR_DIR"] = tempfile.mkdtemp(prefix="bench-htsc-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.core.management import call_command

from devices.uitree import all_nodes, parse_hierarchy
from flywheel.blobs import store_blob
from flywheel.judging.pipeline import evaluate_trajectory
from flywheel.models import App, Query, Step, Trajectory
from simfarm.farm import Farm

TRAJECTORIES = int(os.environ.get("BENCH_TRAJECTORIES", "300"))
STEPS = 10


def capture_screens():
    """Ten real screens: Settings' main list and the pages its rows open."""
    phone = next(iter(Farm(devices=1, seed=3).phones.values()))
    phone.run("am start -n com.android.settings/.Settings")
    screens = []
    main = phone.dump_hierarchy()
    # Row titles: text of the list (the rows around them are what a tap on them hits).
    rows = [n for n in all_nodes(parse_hierarchy(main)) if n.text and not n.clickable][1::2][:STEPS]
    for node in rows:
        phone.run("am start -n com.android.settings/.Settings")
        before = phone.dump_hierarchy()
        phone.run(f"input tap {node.center[0]} {node.center[1]}")
        screens.append((before, {"action": "click", "point": list(node.center)}))
    distinct = len(screens)
    while len(screens) < STEPS - 1:
        screens.append(screens[len(screens) % distinct])
    screens = screens[:STEPS - 1] + [(phone.dump_hierarchy(), {"action": "terminate", "status": "success"})]
    return screens


def build(screens):
    app, _ = App.objects.get_or_create(package="com.android.settings")
    verification = {"milestones": [{"name": "settings", "text": "WLAN"},
                                   {"name": "end", "text_contains": "a"}],
                    "terminal": [{"check": "settings", "key": "bluetooth_on", "equals": "1"}], "veto": []}
    names = [store_blob(xml.encode(), "xml") for xml, _ in screens]
    failed_end = {"action": "terminate", "status": "failure"}
    trajectories = []
    for i in range(TRAJECTORIES):
        query = Query.objects.create(key=f"bench-{time.time_ns()}-{i}", text="Open settings pages",
                                     tier="L2", verification=verification)
        query.set_apps([app])
        trajectories.append(Trajectory.objects.create(query=query, line="automatic", status="completed"))
    # Every third trajectory gives up at the end, so the routing has both outcomes to handle.
    Step.objects.bulk_create(Step(trajectory=t, index=k, hierarchy=names[k],
                                  executed_action=failed_end if k == STEPS - 1 and n % 3 == 2 else screens[k][1],
                                  foreground_package="com.android.settings")
                             for n, t in enumerate(trajectories) for k in range(STEPS))
    return trajectories


def main():
    call_command("migrate", verbosity=0)
    screens = capture_screens()
    trajectories = build(screens)
    timings, outcomes = [], {}
    started = time.perf_counter()
    for trajectory in trajectories:
        t0 = time.perf_counter()
        verdict = evaluate_trajectory(trajectory)
        timings.append((time.perf_counter() - t0) * 1000)
        outcomes[verdict.outcome] = outcomes.get(verdict.outcome, 0) + 1
    elapsed = time.perf_counter() - started
    rate = len(trajectories) / elapsed
    print(f"database: {django.db.connection.vendor}; {len(trajectories)} trajectories of {STEPS} steps")
    print(f"outcomes: {outcomes}")
    sample = trajectories[0]
    print("sample votes: " + "; ".join(f"{v.system}={v.vote} ({v.rationale[:60]})" for v in sample.votes.all()))
    print(f"per trajectory: median {statistics.median(timings):.1f} ms, "
          f"p95 {sorted(timings)[int(0.95 * len(timings)) - 1]:.1f} ms")
    print(f"htsc: trajectories_per_s={rate:.1f}")


if __name__ == "__main__":
    main()
