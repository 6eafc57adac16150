"""Measure the built-in offline policy on the virtual farm's simple single-app tasks.

    python perf/offline_policy.py [--tiers L1,L2] [--only goal|schema] [-v]

Starts the farm in-process, runs the policy on every single-app task of the chosen tiers through
the real executor and safety audit (over the ADB protocol), judges each by its terminal checks as
the farm knows them (its apps' own state included: a harness's ground truth) and prints the share that succeeds, both ways: from the goal alone (what the automatic,
RL and benchmark lines measure) and schema-guided (the known path shown, §2.3.4 only).
Needs a database for the safety rules (DATABASE_URL, default var/).
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "simfarm" / "tasks" / "tasks.jsonl"


def single_app_tasks(tiers=("L1", "L2"), path=TASKS):
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [row for row in rows if row["tier"] in tiers and len(row["apps"]) == 1]


def terminal_truth(phone, verification: dict) -> tuple[bool, str]:
    """Whether the task's end state holds, as the farm itself knows it (its apps' own providers
    included): the harness's ground truth, not a judge — the console's System A reads only what any
    phone shows (flywheel/rules/device_state.py) and abstains on an app's own state."""
    from flywheel.judging.terminal_checks import check_command, compare, read_and_compare

    checks = (verification or {}).get("terminal") or []
    for check in checks:
        if check["check"] in ("foreground", "screen"):
            ok, why = read_and_compare(phone, check)
        else:
            ok, why = compare(check, phone.shell_result(check_command(check))[1])
        if not ok:
            return False, why
    return bool(checks), f"all {len(checks)} terminal check(s) hold" if checks else "no terminal check"


def measure(tasks, phone, schema_guided=False, verbose=False, baseline=None):
    """[(key, succeeded, outcome, steps)] for each task, run on `phone` (a PhoneConnection); each
    reset restores `baseline` (the phone's global settings, read before the first task)."""
    from flywheel.policies import OfflinePolicy
    from flywheel.policies.episode import run_episode
    from perf.farm_recipes import set_up

    results = []
    for task in tasks:
        episode = run_episode(phone, task, OfflinePolicy(), schema_guided=schema_guided, baseline=baseline,
                              prepare=lambda reset, task=task: set_up(reset, task)[0])
        holds, why = terminal_truth(phone, task["verification"])
        # A handoff the task expects (call_user at a payment screen) ends the episode as well as
        # terminate does; what decides is the terminal state, as the farm knows it.
        ended = episode.outcome in ("terminate:success", "call_user", "clarify")
        succeeded = ended and holds
        results.append((task["key"], succeeded, episode.outcome, len(episode.steps)))
        if verbose:
            print(f"{'PASS' if succeeded else 'fail'} {task['key']}: {episode.outcome}, "
                  f"{len(episode.steps)} steps; end state {'holds' if holds else 'does not hold'}: {why[:120]}", flush=True)
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiers", default="L1,L2")
    parser.add_argument("--only", choices=("goal", "schema"), help="measure one way only")
    parser.add_argument("-v", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from devices.baseline import read_baseline
    from devices.phone import PhoneConnection
    from simfarm.farm import Farm
    from simfarm.serve import ServerThread

    tasks = single_app_tasks(tuple(args.tiers.split(",")))
    farm = Farm(devices=1, seed=0)
    started = time.monotonic()
    ways = [way for way in ("goal", "schema") if args.only in (None, way)]
    figures = []
    with ServerThread(farm) as server:
        phone = PhoneConnection(f"127.0.0.1:{server.port}", next(iter(farm)).serial)
        baseline = read_baseline(phone)
        for way in ways:
            results = measure(tasks, phone, schema_guided=way == "schema", verbose=args.v, baseline=baseline)
            passed = sum(1 for _, ok, _, _ in results if ok)
            false_claims = sum(1 for _, ok, outcome, _ in results if outcome == "terminate:success" and not ok)
            print(f"{way}: claimed success the end state refutes: {false_claims}/{len(results)}", flush=True)
            figures.append(f"sr_{way}={passed}/{len(results)}={passed / max(1, len(results)):.0%}")
    print(f"offline policy on {len(tasks)} {args.tiers} single-app tasks (farm truth): {' '.join(figures)} "
          f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
