"""Does the compact head stop only when the task is done? A leave-query-out check, offline.

    python perf/compact_stops.py collect STEPS.json [--tiers L1,L2]   # schema-guided episodes on the farm
    python perf/compact_stops.py measure STEPS.json [--folds 5]        # train and score, queries held out

`collect` runs the offline policy schema-guided (the known path shown, as the schema line collects)
on the farm's single-app tasks, keeps the episodes System A judges true (what the SFT pool admits)
and writes each step: goal, history text, UI dump, screen, apps, package and the executed action.
`measure` featurises those steps with this checkout's compact_features, trains the head with
training/trainer/compact.py on all queries but one fold and scores the held-out fold: top-1 accuracy
(the head ranks the expert's action first) and the premature stop rate (the head ranks terminate
first at a step that is not its trajectory's last), both leaving queries out (5 folds) and leaving
whole apps out (9 folds: unseen apps, as the demo's held-out tasks are). Needs torch (the training extras).

Measured 2026-12-06 on 72 kept L1/L2 trajectories (450 steps, 2 ending in call_user), 40 epochs:
    before (64 features, terminate without evidence; call_user steps skipped):
        leave-query-out top1 0.609, premature stop 40/378 = 10.6%; leave-app-out top1 0.596, 45/378 = 11.9%
    after (the ending candidates carry the stop evidence; call_user a candidate):
        leave-query-out top1 0.631, premature stop 26/378 = 6.9%;  leave-app-out top1 0.596, 33/378 = 8.7%
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "perf"))  # offline_policy; after the root, whose training/ perf/training.py would hide


def collect(path: Path, tiers: tuple[str, ...]):
    from offline_policy import single_app_tasks, terminal_truth

    from devices.baseline import read_baseline
    from devices.executor import ActionExecutor
    from devices.observation import observe
    from devices.phone import PhoneConnection
    from devices.reset import reset_phone
    from flywheel.policies import OfflinePolicy
    from flywheel.policies.base import PolicyError, PolicyState
    from flywheel.policies.protocol import AGENT_STOPS, HistoryEntry, history_text
    from perf.farm_recipes import set_up
    from simfarm.farm import Farm
    from simfarm.serve import ServerThread

    farm, kept, started = Farm(devices=1, seed=0), [], time.monotonic()
    tasks = single_app_tasks(tiers)
    with ServerThread(farm) as server:
        phone = PhoneConnection(f"127.0.0.1:{server.port}", next(iter(farm)).serial)
        baseline = read_baseline(phone)
        for task in tasks:
            apps = list(task.get("apps") or [])
            reset_phone(phone, task.get("reset") or None, apps=apps, baseline=baseline)
            if set_up(phone, task)[0]:
                print(f"{task['key']}: not executable here (its prerequisites)", flush=True)
                continue
            executor, history, steps, ended = ActionExecutor(phone, holder="compact-stops"), [], [], False
            for _ in range(20):
                seen = observe(phone)
                state = PolicyState(goal=task["text"], history=history, screenshots=[seen.png],
                                    hierarchy_xml=seen.hierarchy_xml, screen_size=(seen.width, seen.height),
                                    foreground=seen.foreground, known_path=task.get("known_path"), apps=apps)
                try:
                    proposal = OfflinePolicy().propose(state)
                except PolicyError:
                    break
                result = executor.execute(proposal.action, hierarchy_xml=seen.hierarchy_xml)
                if not result.ok:
                    break
                steps.append({"goal": task["text"], "history": history_text(history) if history else "",
                              "hierarchy": seen.hierarchy_xml, "screen": [seen.width, seen.height], "apps": apps,
                              "package": (seen.foreground or {}).get("package", ""), "action": result.action})
                history.append(HistoryEntry(cot=proposal.cot, action=result.action))
                if result.action["action"] in AGENT_STOPS:
                    ended = result.action["action"] == "call_user" or result.action.get("status") == "success"
                    break
            if ended and terminal_truth(phone, task["verification"])[0]:
                kept.append({"key": task["key"], "steps": steps})
            print(f"{task['key']}: {'kept' if kept and kept[-1]['key'] == task['key'] else 'dropped'}, "
                  f"{len(steps)} steps", flush=True)
    path.write_text(json.dumps(kept))
    print(f"{len(kept)}/{len(tasks)} trajectories kept, {sum(len(t['steps']) for t in kept)} steps "
          f"({time.monotonic() - started:.0f} s)")


def thousandths(action: dict, screen) -> dict:
    out = dict(action)
    if isinstance(action.get("point"), list) and action.get("coords", "pixel") == "pixel":
        out["point"] = [round(action["point"][0] * 1000 / screen[0]), round(action["point"][1] * 1000 / screen[1])]
        out["coords"] = "thousandths"
    return out


def featurised(trajectories: list[dict]) -> list[dict]:
    """Per trajectory: its steps' (features, target index, terminate index, is the last step)."""
    from flywheel.policies.compact_features import featurize, target_index

    out = []
    for trajectory in trajectories:
        rows = []
        for n, step in enumerate(trajectory["steps"]):
            screen = tuple(step["screen"])
            found, x = featurize(step["goal"], step["history"], step["hierarchy"], screen, step["apps"],
                                 step["package"])
            target = target_index(found, thousandths(step["action"], screen), screen)
            if target is None:
                continue
            stop = next(i for i, c in enumerate(found) if c.kind == "terminate")
            handback = next((i for i, c in enumerate(found) if c.kind == "call_user"), -1)
            rows.append((x, target, stop, handback, n == len(trajectory["steps"]) - 1))
        out.append({"key": trajectory["key"], "app": trajectory["steps"][0]["apps"][0], "rows": rows})
    return out


def measure(path: Path, folds: int, epochs: int):
    data = featurised(json.loads(path.read_text()))
    score(data, [i % folds for i in range(len(data))], f"leave-query-out ({folds} folds", epochs)
    apps = sorted({t["app"] for t in data})
    score(data, [apps.index(t["app"]) for t in data], f"leave-app-out ({len(apps)} apps", epochs)


def score(data: list[dict], fold_of: list[int], title: str, epochs: int):
    """Train on every fold but one, score the one left out, for each fold."""
    import numpy as np

    from training.trainer.compact import train

    folds = max(fold_of) + 1
    hits = premature = handbacks = inner = ends = stops_at_end = 0
    for fold in range(folds):
        train_rows = [r for i, t in enumerate(data) if fold_of[i] != fold for r in t["rows"]]
        test_rows = [r for i, t in enumerate(data) if fold_of[i] == fold for r in t["rows"]]
        x = np.concatenate([r[0] for r in train_rows])
        offsets = np.cumsum([0, *[len(r[0]) for r in train_rows]])
        weights, _ = train(x, offsets, np.array([r[1] for r in train_rows]), epochs=epochs,
                           seed=fold)
        for features, target, stop, handback, last in test_rows:
            hidden = np.maximum(((features - weights["mean"]) / weights["std"]) @ weights["w1"]
                                                 + weights["b1"], 0)
            best = int((hidden @ weights["w2"] + weights["b2"]).reshape(-1).argmax())
            hits += best == target
            if last:
                ends += 1
                stops_at_end += best == target
            else:
                inner += 1
                premature += best == stop
                handbacks += best == handback
    steps = inner + ends
    print(f"{title}, {len(data)} trajectories, {steps} steps): "
          f"top1={hits / max(1, steps):.3f} premature_stop={premature}/{inner}={premature / max(1, inner):.3f} "
          f"handback_not_last={handbacks}/{inner} right_at_last={stops_at_end}/{ends}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("collect", "measure"))
    parser.add_argument("path", type=Path)
    parser.add_argument("--tiers", default="L1,L2")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=40)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    if args.what == "collect":
        collect(args.path, tuple(args.tiers.split(",")))
    else:
        measure(args.path, args.folds, args.epochs)


if __name__ == "__main__":
    main()
