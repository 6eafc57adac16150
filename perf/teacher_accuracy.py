"""Measure the offline Teacher's step-level corrections (§2.5.2) on the virtual farm's own tasks.

    python perf/teacher_accuracy.py [--tiers L1,L2,L3] [--explore] [--apps com.sim.shop,...] [-v]

For every single-app farm task with a known path (simfarm/tasks/tasks.jsonl), the known path is
replayed on a phone through the real executor and safety audit (each step's target resolved by the
offline policy's find_target). At every step position N the screen is observed and the Teacher gets
a single-step slip to correct: the prefix (steps before N, as executed, with their dumps), step N's
frame and dump, and a plausible wrong action there (another clickable element of that screen, seeded).
Its correction counts when it does what the known path's step N does: a tap inside the target's
bounds, the same app to open, the same text to type, the same key, terminate on the last step.

Two ways:
- known path: the Teacher knows the query's known path (what the ECDM gives it);
- GEM only: no known path; the Teacher matches the screen to the GEM and routes to the task's end
  page (the GemPage the fully replayed path ends on, as a query's function page would say). Needs a
  GEM: `--explore` explores the tasks' apps on the farm first (several minutes); without one this
  way is reported as not measured.

Database: BENCH_DATABASE_URL, else a throwaway SQLite (the safety audit and the GEM live there).
Ends with one line: `teacher: accuracy_known_path=… accuracy_gem=… n=…`.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "simfarm" / "tasks" / "tasks.jsonl"
STOP_ACTIONS = ("terminate", "call_user")


def single_app_tasks_with_paths(path=TASKS, tiers=("L1", "L2", "L3")) -> list[dict]:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [row for row in rows if row["tier"] in tiers and len(row["apps"]) == 1
            and (row.get("known_path") or {}).get("steps")]


def wrong_action_for(hierarchy_xml: str, step: dict, rng: random.Random) -> dict:
    """A plausible slip on this screen: a tap on another clickable element than step N's target."""
    from flywheel.policies.teacher_path import visible_nodes
    from flywheel.screens.selectors import find_target

    nodes = visible_nodes(hierarchy_xml)
    target = find_target(nodes, step["target"]) if step.get("target") else None
    clickable = [n for n in nodes if n.clickable and n.enabled and n.area
                 and (target is None or not (target.contains(*n.center) or n.contains(*target.center)))]
    if clickable:
        return {"action": "click", "point": list(rng.choice(clickable).center), "coords": "pixel"}
    if step.get("action") == "system_button" and step.get("button") == "back":
        return {"action": "system_button", "button": "home"}
    return {"action": "system_button", "button": "back"}


def replay_slips(phone, tasks, baseline=None, verbose=False) -> list[dict]:
    """Replay each task's known path; at every position N keep what a slip there looks like:
    {"task", "n", "step", "ctx" (TeacherContext without known path facts), "final": the last context}."""
    from devices.executor import ActionExecutor
    from devices.observation import observe
    from devices.reset import reset_phone
    from flywheel.policies.protocol import HistoryEntry, describe_action
    from flywheel.policies.teacher import TeacherContext
    from flywheel.policies.teacher_path import _resolve, effective_steps, visible_nodes
    from perf.farm_recipes import set_up

    slips = []
    for task in tasks:
        apps = list(task["apps"])
        steps = effective_steps(task["known_path"], apps)
        reset_phone(phone, task.get("reset") or None, apps=apps, baseline=baseline)
        unmet, _ = set_up(phone, task)
        if unmet:
            print(f"  {task['key']}: not executable here: {unmet}", flush=True)
            continue
        executor = ActionExecutor(phone, holder="teacher-accuracy")
        rng = random.Random(task["key"])
        history, dumps, mine = [], [], []
        for n, step in enumerate(steps):
            seen = observe(phone)
            ctx = TeacherContext(goal=task["text"], history=list(history), screenshot=seen.png,
                                 hierarchy_xml=seen.hierarchy_xml, screen_size=(seen.width, seen.height),
                                 wrong_action=wrong_action_for(seen.hierarchy_xml, step, rng),
                                 foreground=seen.foreground, apps=apps, step_index=n, history_hierarchies=list(dumps))
            mine.append({"task": task, "n": n, "step": step, "ctx": ctx})
            if step["action"] in STOP_ACTIONS:
                break
            action, label = _resolve(step, visible_nodes(seen.hierarchy_xml), (seen.width, seen.height))
            result = executor.execute(action, hierarchy_xml=seen.hierarchy_xml) if action else None
            if result is None or not result.ok:
                why = "target not on screen" if result is None else (result.reason or result.error)
                if verbose:
                    print(f"  {task['key']}: the known path stops replaying at step {n + 1}: {why}", flush=True)
                mine[-1]["unreplayed"] = why
                break
            history.append(HistoryEntry(cot={"Decision": describe_action(result.action, label)}, action=result.action))
            dumps.append(seen.hierarchy_xml)
        for slip in mine:
            slip["final"] = mine[-1]["ctx"]
        slips += [slip for slip in mine if "unreplayed" not in slip]
    return slips


def score(slips, use_known_path=True, teacher=None, verbose=False) -> dict:
    """Ask the Teacher to correct every slip; count those that do what the known path does."""
    from dataclasses import replace

    from flywheel.policies.teacher_gem import current_page
    from flywheel.policies.teacher_offline import OfflineTeacher
    from flywheel.policies.teacher_path import hits_step

    teacher = teacher or OfflineTeacher()
    correct, by_source, by_action, misses = 0, Counter(), Counter(), []
    ends = {}
    for slip in slips:
        ctx, task = slip["ctx"], slip["task"]
        if use_known_path:
            ctx = replace(ctx, known_path=task["known_path"])
        else:
            key = task["key"]
            if key not in ends:
                page = current_page(slip["final"])
                ends[key] = [page.pk] if page is not None else []
            ctx = replace(ctx, target_pages=ends[key])
        answer = teacher.correct(ctx)
        ok = hits_step(answer.action, slip["step"], ctx.hierarchy_xml)
        correct += ok
        by_source[f"{answer.source}:{'ok' if ok else 'miss'}"] += 1
        by_action[f"{slip['step']['action']}:{'ok' if ok else 'miss'}"] += 1
        if not ok:
            misses.append({"task": task["key"], "n": slip["n"], "expected": slip["step"], "answer": answer.action,
                           "source": answer.source, "confidence": answer.confidence, "why": answer.rationale[:160]})
            if verbose:
                print(f"  miss {task['key']} step {slip['n'] + 1}: expected {slip['step']}, got {answer.action} "
                      f"({answer.source}, {answer.confidence}): {answer.rationale[:120]}", flush=True)
    return {"correct": correct, "total": len(slips), "by_source": dict(by_source), "by_action": dict(by_action),
            "misses": misses}


def teacher_accuracy(phone, tasks, baseline=None, use_known_path=True, verbose=False) -> dict:
    """dict(correct, total, by_source, misses) of the offline Teacher on single-step slips of `tasks`."""
    return score(replay_slips(phone, tasks, baseline, verbose=verbose), use_known_path, verbose=verbose)


def _share(result) -> str:
    return f"{result['correct'] / result['total']:.3f}" if result and result["total"] else "nan"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiers", default="L1,L2,L3")
    parser.add_argument("--apps", default="", help="only tasks of these packages (comma-separated)")
    parser.add_argument("--explore", action="store_true", help="explore the tasks' apps first (GEM-only way)")
    parser.add_argument("--phones", type=int, default=4, help="phones for the exploration")
    parser.add_argument("-v", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    var = tempfile.mkdtemp(prefix="bench-teacher-")
    os.environ["FLYWHEEL_VAR_DIR"] = var
    os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{var}/bench.sqlite3"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from devices.baseline import read_baseline
    from devices.phone import PhoneConnection
    from flywheel.models import GemPage
    from simfarm.farm import Farm
    from simfarm.serve import ServerThread

    call_command("migrate", verbosity=0)
    tasks = single_app_tasks_with_paths(tiers=tuple(args.tiers.split(",")))
    if args.apps:
        tasks = [task for task in tasks if task["apps"][0] in args.apps.split(",")]
    started = time.monotonic()
    farm = Farm(devices=max(1, args.phones) if args.explore else 1, seed=0)
    with ServerThread(farm) as server:
        address = f"127.0.0.1:{server.port}"
        if args.explore:
            from devices.registry import discover_devices
            from flywheel.queries.exploration.runs import explore_apps_now

            settings.ADB_SERVERS = [address]
            discover_devices([address])
            packages = sorted({task["apps"][0] for task in tasks})
            run = explore_apps_now(packages, {"max_seconds": 3600, "phones": args.phones})
            print(f"exploration of {len(packages)} apps: {run.status}, {run.pages_found} pages in "
                  f"{time.monotonic() - started:.0f} s", flush=True)
        phone = PhoneConnection(address, next(iter(farm)).serial)
        slips = replay_slips(phone, tasks, baseline=read_baseline(phone), verbose=args.v)
        known = score(slips, use_known_path=True, verbose=args.v)
        print(f"known path: {known['correct']}/{known['total']} correct; by source {known['by_source']}; "
              f"by step {known['by_action']}", flush=True)
        gem = None
        if GemPage.objects.exists():
            gem = score(slips, use_known_path=False, verbose=args.v)
            print(f"GEM only: {gem['correct']}/{gem['total']} correct; by source {gem['by_source']}; "
                  f"by step {gem['by_action']}", flush=True)
        else:
            print("GEM only: not measured, the database has no GEM (run with --explore)", flush=True)
    print(f"{len(tasks)} single-app tasks, {len(slips)} slips, {time.monotonic() - started:.0f} s", flush=True)
    print(f"teacher: accuracy_known_path={_share(known)} accuracy_gem={_share(gem)} n={known['total']}")


if __name__ == "__main__":
    main()
