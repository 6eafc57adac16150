"""Seeded steps as the step recorder writes them (flywheel/collection/recorder.py): observation
(content-addressed screenshot and dump names that repeat across steps, foreground, timings), the
five-tag reasoning, proposal and executed action, the safety audit with the CPT cleaning verdict,
the semi-automatic line's edit and verify time, anomalies, masks, Teacher takeover, model I/O —
and the CPT pool entry of every executed step that passed cleaning.

A million steps are made in Python, so the JSON of the columns is written as text from templates
(`RawJson`) rather than dumped from dicts: same documents, a third of the time.
"""
import hashlib
import json
from datetime import timedelta

from perf.scale_seed.rows import RawJson

LAUNCHER = "com.android.launcher3"
FRAMES_PER_APP = 160
TYPED = ["headphones", "groceries", "7:30", "hello there", "Beijing", "dark mode", "receipt"]
ELEMENTS = ["Search", "Settings", "Add to cart", "Save", "Filter", "Back", "Share", "Next", "OK", "More"]
SYSTEM_PROMPT = ("You operate an Android phone for the user. Answer with [Observation] [Reflection] [Plan] "
                 "[Decision] [Memory] and one action from the 14 in the action space.")
OFFLINE_IO = [RawJson(json.dumps({"policy": "offline-rules-v1", "rule": rule}))
              for rule in ("known path", "hierarchy match", "goal words")]
AUDITS = {(element, duplicate): RawJson(json.dumps({
    "blocked": False, "reason": "", "element": {"text": element, "class": "android.widget.Button"}, "error": "",
    "note": "", "cpt": "duplicate of the previous frame" if duplicate else "accepted"}))
    for element in ELEMENTS for duplicate in (False, True)}
ENDPOINT_IO = ('{"url": "http://gpu-host:8000/v1/chat/completions", "request": {"model": "qwen2.5-vl-7b-gui", '
               '"temperature": 0.2, "max_tokens": 512, "messages": [{"role": "system", "content": '
               + json.dumps(SYSTEM_PROMPT) + '}, {"role": "user", "content": [{"type": "text", "text": %s}, '
               '{"type": "image_url", "image_url": "<redacted>"}]}]}, "attempts": [{"status": 200, "ms": %d}], '
               '"response": {"choices": [{"message": {"content": %s}}], "usage": {"prompt_tokens": %d, '
               '"completion_tokens": %d}}, "parse_notes": []}')


class FrameNames:
    """Blob names of a fixed set of frames per app: the same screen yields the same name."""

    def __init__(self, packages):
        packages = [*packages, LAUNCHER]
        self.frames = {p: [_blob(f"{p}:{n}", "png") for n in range(FRAMES_PER_APP)] for p in packages}
        self.dumps = {p: [_blob(f"{p}:{n}", "xml") for n in range(FRAMES_PER_APP)] for p in packages}
        self.phash = {name: hashlib.md5(name.encode()).hexdigest()[:16] for names in self.frames.values() for name in names}
        self.stacks = {p: [RawJson(json.dumps([f"{p}/.MainActivity", f"{p}/.Page{n}Activity"]))
                           for n in range(FRAMES_PER_APP)] for p in packages}


def _blob(seed: str, extension: str) -> str:
    digest = hashlib.sha256(seed.encode()).hexdigest()
    return f"blobs/{digest[:2]}/{digest}.{extension}"


def _action(r, index, last, t, package, ended):
    if last and ended:
        status = "success" if t.verdict in ("true", "pending") or r() < 0.5 else "failure"
        return {"action": "terminate", "status": status}
    if index == 0:
        return {"action": "open", "app": package}
    roll = r()
    if roll < 0.68:
        return {"action": "click", "point": [40 + int(r() * 1000), 120 + int(r() * 2180)], "coords": "pixel"}
    if roll < 0.78:
        return {"action": "type", "text": TYPED[int(r() * len(TYPED))]}
    if roll < 0.88:
        return {"action": "swipe", "start": [540, 1800], "end": [540, 300 + int(r() * 600)], "coords": "pixel"}
    if roll < 0.93:
        return {"action": "system_button", "button": "back"}
    if roll < 0.97:
        return {"action": "wait", "seconds": 2}
    if roll < 0.99:
        return {"action": "take_notes", "text": f"price {5 + int(r() * 85)}"}
    return {"action": "long_press", "point": [40 + int(r() * 1000), 120 + int(r() * 2180)], "coords": "pixel"}


def _cot(r, action, app, index, element):
    return {"Observation": f"{app} is open on page {index}; the '{element}' control is visible near the top, "
                           "with a list of results below it.",
            "Reflection": "The previous action took effect; nothing blocks the screen." if index else "",
            "Plan": f"Use '{element}' to get closer to the goal, then confirm the result.",
            "Decision": f"{action['action']} {action.get('text') or action.get('app') or element}",
            "Memory": f"noted price {5 + int(r() * 85)}" if r() < 0.3 else ""}


def _edit(r, proposed, executed):
    accepted = r() < 0.72
    moved = None if accepted or "point" not in executed else round(0.5 + r() * 180, 1)
    return {"type_changed": False, "from_type": proposed["action"], "to_type": executed["action"],
            "pixel_distance": moved, "fields_changed": [] if accepted else ["point"], "text_changed": False,
            "cot_changed": [] if accepted or r() < 0.6 else ["Decision"], "by_hand": False,
            "action_unchanged": accepted or not moved or moved < 1, "accepted_unchanged": accepted}


def _model_io(r, endpoint, goal, cot):
    if not endpoint:
        return OFFLINE_IO[int(r() * len(OFFLINE_IO))]
    content = " ".join(f"[{tag}] {text}" for tag, text in cot.items())
    return RawJson(ENDPOINT_IO % (json.dumps(f"Goal: {goal}"), 300 + int(r() * 2200), json.dumps(content),
                                  900 + int(r() * 1700), 60 + int(r() * 140)))


def trajectory_steps(rng, t, packages, goal, frames, endpoint, first_id):
    """(step rows, CPT rows without ids) of one planned trajectory."""
    r = rng.random
    steps, cpt = [], []
    semi_auto = t.line == "semi_auto"
    ended = t.status == "completed" and t.steps > 1
    live = t.status in ("running", "paused")
    when = t.started_at
    apps = [p.rsplit(".", 1)[-1].title() for p in packages]
    for index in range(t.steps):
        last = index == t.steps - 1
        position = min(index * len(packages) // t.steps, len(packages) - 1)
        package = LAUNCHER if index == 0 and r() < 0.3 else packages[position]
        page = int(r() * FRAMES_PER_APP)
        element = ELEMENTS[int(r() * len(ELEMENTS))]
        action = _action(r, index, last, t, packages[0], ended)
        cot = _cot(r, action, apps[position], index, element)
        executed = not (last and (live or t.status == "interrupted"))
        proposed = action
        if semi_auto and "point" in action and r() < 0.2:
            proposed = {**action, "point": [action["point"][0] + int(r() * 120) - 60, action["point"][1] + int(r() * 120) - 60]}
        step_seconds = (8 + r() * 32) if semi_auto else (2 + r() * 6)
        screencap, dump = 25 + int(r() * 375), 40 + int(r() * 660)
        timings = {"screencap_ms": screencap, "dump_ms": dump, "observe_ms": screencap + dump + int(r() * 30),
                   "screen": [1080, 2400], "propose_ms": 300 + int(r() * 2200) if endpoint else 2 + int(r() * 38),
                   "proposed_at": when.timestamp() + 1.0}
        edit = None
        if executed:
            timings.update(executed_at=when.timestamp() + step_seconds, execute_ms=60 + int(r() * 840),
                           step_ms=round(step_seconds * 1000))
            if semi_auto:
                timings["verify_ms"] = round((step_seconds - 1) * 1000)
                edit = _edit(r, proposed, action)
        if t.line == "schema" and r() < 0.01:
            edit = {"clarify_pending": "Turn the toggle on? It cannot be undone."} if live and last else \
                {"clarify_answer": "yes" if r() < 0.7 else "no", "by": "spec"}
        duplicate = r() < 0.1
        step_id = first_id + index
        screenshot = frames.frames[package][page]
        steps.append({
            "id": step_id, "trajectory_id": t.id, "index": index, "screenshot": screenshot,
            "hierarchy": frames.dumps[package][page], "foreground_package": package,
            "activity_stack": frames.stacks[package][page], "cot": cot, "proposed_action": proposed,
            "executed_action": action if executed else None, "edit": edit, "confidence": round(0.4 + r() * 0.59, 3),
            "model_io": _model_io(r, endpoint, goal, cot),
            "anomaly": {"kind": "popup", "at": when.isoformat()} if r() < 0.02 else None,
            "audit": AUDITS[element, duplicate] if executed else None, "label_masked": r() < 0.03,
            "score": round(r(), 3) if t.line in ("automatic", "rl") else None,
            "takeover": t.line == "automatic" and r() < 0.005, "timings": timings, "created_at": when})
        if executed and not duplicate:
            cpt.append({"step_id": step_id, "screenshot": screenshot, "action": action,
                        "phash": frames.phash[screenshot], "created_at": when + timedelta(seconds=step_seconds)})
        when += timedelta(seconds=step_seconds + 1)
    return steps, cpt
