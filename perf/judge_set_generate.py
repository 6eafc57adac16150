"""Generator of the judge-evaluation set (flywheel/judging/judge_sets/<version>.jsonl).

Collects trajectories on a virtual farm phone, through its ADB server and the product's own executor,
with policies of varying skill over the farm's tasks: an expert following the known path, a detour
that wanders off and comes back, and the classic failures — a pseudo-completion (success declared a
step early), a near-miss (the last tap on a neighbour), a wanderer, a loop on a dead spot, a quitter.
Each case is labelled with the farm's ground truth: the task's terminal facts read on the farm in its
normal mode (its own providers, which no judge in real-phone mode can read) and the farm's own
screen kind after every step (ordinary, blind, trap). Actions are stored as executed, taps by point,
so a replay on a phone whose dumps are blind does the same.

    python perf/judge_set_generate.py [--version v1] [--per-task 3]

Deterministic for a given farm seed and task file. Prints one last line `judge_set: cases= true= …`.
"""
import argparse
import json
import os
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if "DATABASE_URL" not in os.environ:
    os.environ["FLYWHEEL_VAR_DIR"] = tempfile.mkdtemp(prefix="judge-set-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from devices.executor import execute_action
from devices.observation import observe
from devices.phone import PhoneConnection
from devices.reset import reset_phone
from devices.uitree import all_nodes, parse_hierarchy
from flywheel.judging.terminal_checks import CheckNotReadable, read_and_compare
from flywheel.screens.ocr_candidates import pixel_candidates
from flywheel.screens.selectors import find_target
from perf.farm_recipes import set_up
from simfarm.farm import Farm
from simfarm.serve import ServerThread

TASKS = ROOT / "simfarm" / "tasks" / "tasks.jsonl"
SETS = ROOT / "flywheel" / "judging" / "judge_sets"
SEED, SERIAL = 0, "sim-0001"
FAILURES = ("pseudo", "near_miss", "wanderer", "looper", "quitter")
SKILLS = ("expert", "detour") + FAILURES
TRAP = "trap"   # a pseudo-completion on a "looks done" screen, for the tasks the farm tags with one
ON, OFF, NEUTRAL = "on_course", "off_course", "neutral"


class Walk:
    """One trajectory being collected: executed actions, per-step truth, screen kinds seen."""

    def __init__(self, connection, phone, setup=()):
        self.connection, self.phone = connection, phone
        self.actions, self.step_truth, self.kinds = [], [], {phone_kind(phone)}
        self.setup = list(setup)   # what the task's setup recipes did after the reset (replayed before `actions`)

    def screen(self) -> str:
        return self.connection.dump_hierarchy()

    def act(self, action: dict, label: str) -> bool:
        result = execute_action(self.connection, action, self.screen(), rules=[])
        self.actions.append(action)
        self.step_truth.append(label)
        self.kinds.add(phone_kind(self.phone))
        return result.ok

    def end(self, status: str, label: str):
        self.actions.append({"action": "terminate", "status": status})
        self.step_truth.append(label)


def phone_kind(phone) -> str:
    kind = getattr(phone, "screen_kind", None)
    return kind() if callable(kind) else "ordinary"


def concrete(step: dict, xml: str) -> dict | None:
    """A known-path step as the action that runs it (a target becomes the point it sits at)."""
    name, target = step.get("action"), step.get("target")
    point = step.get("point")
    if target:
        node = find_target(list(all_nodes(parse_hierarchy(xml))), target)
        if node is None:
            return None
        point = list(node.center)
    keep = {k: v for k, v in step.items() if k not in ("target", "point", "coords")}
    # a resolved target is in pixels; a step written as a point keeps its own convention
    coords = "pixel" if target else step.get("coords", "pixel")
    if name in ("click", "double_click", "long_press", "set_scroll_widget"):
        return {**keep, "point": point, "coords": coords} if point else None
    if name in ("type", "swipe") and point:
        return {**keep, "point": point, "coords": coords}
    return keep


def clickables(xml: str, avoid: list | None = None) -> list[list[int]]:
    nodes = [n for n in all_nodes(parse_hierarchy(xml))
             if n.clickable and n.package != "com.android.systemui" and n.area > 0]
    points = [list(n.center) for n in nodes if list(n.center) != avoid]
    return points or [[540, 1200], [300, 900], [780, 1500]]   # a blind page: somewhere in its content


def truth_of(connection, task: dict) -> tuple[bool, str]:
    details = []
    for check in task["verification"]["terminal"]:
        try:
            passed, detail = read_and_compare(connection, check)
        except CheckNotReadable as error:
            return False, f"not readable: {error}"
        if not passed:
            return False, f"{check.get('check')}: {detail}"
        details.append(detail)
    return True, "; ".join(details)


def start(farm, connection, task: dict) -> "Walk":
    farm.factory_reset(SERIAL)   # nothing a previous case did (a wanderer's taps) leaks into this one
    reset_phone(connection, task.get("reset"), apps=task.get("apps") or [])
    unmet, setup = set_up(connection, task, rules=[])
    if unmet:
        raise SystemExit(f"{task['key']}: its prerequisites cannot be met on the farm: {unmet}")
    return Walk(connection, farm.phones[SERIAL], setup)


def touchable(connection) -> list[list[int]]:
    """Points a user could touch now: the dump's clickable nodes, else the words OCR reads on a blind page."""
    seen = observe(connection)
    points = [list(n.center) for n in all_nodes(parse_hierarchy(seen.hierarchy_xml))
              if n.clickable and n.package != "com.android.systemui" and n.area > 0]
    pixels = pixel_candidates(seen.hierarchy_xml, seen.png, (seen.width, seen.height))
    return points + [list(n.center) for n in pixels.nodes]


def walk_prefix(farm, connection, task: dict, steps: list):
    """A fresh walk that followed `steps` of the known path, or None where one does not resolve."""
    walk = start(farm, connection, task)
    for step in steps:
        action = concrete(step, walk.screen())
        if action is None:
            return None
        walk.act(action, ON)
    return walk


def find_trap(farm, connection, task: dict, path: list) -> tuple[int, list] | None:
    """(prefix length, point): the deepest place on the path where one touch shows a trap screen."""
    for k in range(len(path), 0, -1):
        if walk_prefix(farm, connection, task, path[:k]) is None:
            continue
        for point in touchable(connection)[:30]:
            walk = walk_prefix(farm, connection, task, path[:k])
            walk.act({"action": "click", "point": point, "coords": "pixel"}, OFF)
            if phone_kind(walk.phone) == "trap":
                return k, point
    return None


def collect(farm, connection, task: dict, skill: str, rng: random.Random) -> dict | None:
    path = [s for s in task["known_path"]["steps"] if s.get("action") != "terminate"]
    if skill == TRAP:
        found = find_trap(farm, connection, task, path)
        if found is None:
            return None
        cut, trap_point = found
    walk = start(farm, connection, task)
    cut = cut if skill == TRAP else {"pseudo": len(path) - 1, "quitter": max(1, len(path) - 2), "looper": len(path) - 1,
           "wanderer": rng.randint(1, max(1, len(path) // 2)), "near_miss": len(path) - 1}.get(skill, len(path))
    detour_at = rng.randint(1, max(1, len(path) - 1)) if skill == "detour" else None
    for number, step in enumerate(path[:cut]):
        if number == detour_at:
            walk.act({"action": "click", "point": rng.choice(clickables(walk.screen())), "coords": "pixel"}, NEUTRAL)
            walk.act({"action": "system_button", "button": "back"}, NEUTRAL)
        action = concrete(step, walk.screen())
        if action is None:
            return None   # the path does not resolve here (a detour that did not come back)
        walk.act(action, ON)
    if skill == TRAP:
        walk.act({"action": "click", "point": trap_point, "coords": "pixel"}, OFF)
    elif skill == "near_miss":
        right = concrete(path[-1], walk.screen())
        if right is None or "point" not in right:
            return None
        wrong = min(clickables(walk.screen(), right["point"]),
                    key=lambda p: abs(p[0] - right["point"][0]) + abs(p[1] - right["point"][1]))
        walk.act({**right, "point": wrong}, OFF)
    elif skill == "wanderer":
        for _ in range(2):
            walk.act({"action": "click", "point": rng.choice(clickables(walk.screen())), "coords": "pixel"}, OFF)
    elif skill == "looper":
        for _ in range(3):
            walk.act({"action": "click", "point": [540, 70], "coords": "pixel"}, OFF)   # the status bar
    truth, detail = truth_of(connection, task)
    if skill == "quitter":
        walk.end("failure", NEUTRAL)
    else:
        walk.end("success", ON if truth else OFF)
    kinds = walk.kinds
    kind = "trap" if "trap" in kinds else "blind" if "blind" in kinds else "ordinary"
    return {"key": f"{task['key']}/{skill}", "task": task["key"], "skill": skill, "goal": task["text"],
            "apps": task.get("apps") or [], "verification": task["verification"],
            "known_path": task.get("known_path"), "reset": task.get("reset"), "actions": walk.actions,
            **({"setup": walk.setup} if walk.setup else {}),
            "truth": truth, "truth_detail": detail[:300], "screen_kind": kind, "step_truth": walk.step_truth}


def eligible(task: dict) -> bool:
    steps = (task.get("known_path") or {}).get("steps") or []
    return (bool(steps) and steps[-1] == {"action": "terminate", "status": "success"}
            and bool((task.get("verification") or {}).get("terminal")) and len(steps) >= 3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", default="v1")
    parser.add_argument("--per-task", type=int, default=3, help="cases per task: the expert and others")
    args = parser.parse_args()
    tasks = [t for t in map(json.loads, TASKS.read_text().splitlines()) if eligible(t)]
    farm = Farm(devices=1, seed=SEED)
    cases, skipped = [], Counter()
    with ServerThread(farm) as server:
        connection = PhoneConnection(address=f"127.0.0.1:{server.port}", serial=SERIAL)
        screen = connection.window_size()
        for number, task in enumerate(tasks):
            rng = random.Random(f"{SEED}:{task['key']}")
            # the expert, then failures and detours in rotation, so every skill covers every app
            rotation = list(SKILLS[1:])
            others = [rotation[(number * (args.per_task - 1) + i) % len(rotation)] for i in range(args.per_task - 1)]
            trap = [TRAP] if "trap" in (task.get("tags") or []) else []
            for skill in ["expert"] + others + trap:
                case = collect(farm, connection, task, skill, rng)
                if case is None:
                    skipped[skill] += 1
                else:
                    cases.append(case)
    SETS.mkdir(parents=True, exist_ok=True)
    meta = {"version": args.version, "generator": "perf/judge_set_generate.py", "farm_seed": SEED,
            "phone": SERIAL, "screen": list(screen),
            "tasks": len(tasks), "cases": len(cases), "skills": dict(Counter(c["skill"] for c in cases)),
            "kinds": dict(Counter(c["screen_kind"] for c in cases)),
            "true": sum(1 for c in cases if c["truth"])}
    out = SETS / f"{args.version}.jsonl"
    out.write_text("\n".join(json.dumps(line, sort_keys=True) for line in [{"meta": meta}] + cases) + "\n")
    print(f"wrote {out.relative_to(ROOT)}; skipped (path did not resolve): {dict(skipped)}")
    print(f"kinds: {meta['kinds']}; skills: {meta['skills']}")
    print(f"judge_set: cases={len(cases)} true={meta['true']} false={len(cases) - meta['true']}")


if __name__ == "__main__":
    main()
