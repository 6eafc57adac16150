"""A small path follower and check evaluator for the virtual farm's task set (test helper).

Everything goes through `phone.run(shell command)`, as an ADB client would: the follower reads
the screen with `uiautomator dump`, resolves each step's target in that XML and sends `input`
commands; the checks read state with `settings`, `getprop`, `content query`, `ls`/`cat`, `dumpsys SERVICE`.
The console's real executor lives elsewhere; this one is only as big as the tests need.
"""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from simfarm.walker import step_point

DUMP_PATH = "/sdcard/window_dump.xml"
BUTTONS = {"back": "KEYCODE_BACK", "home": "KEYCODE_HOME", "enter": "KEYCODE_ENTER",
           "recents": "KEYCODE_APP_SWITCH", "app_switch": "KEYCODE_APP_SWITCH", "menu": "KEYCODE_MENU",
           "delete": "KEYCODE_DEL", "search": "KEYCODE_SEARCH", "notification": "KEYCODE_NOTIFICATION"}
_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")
MAX_SCROLLS = 6  # pages a target is searched for in each direction before a step fails
NO_DEVICE_ACTION = ("wait", "terminate", "take_notes", "clarify", "call_user")


class PathError(AssertionError):
    pass


def sh(phone, cmd: str) -> str:
    result = phone.run(cmd)
    return (result.stdout or b"").decode("utf-8", "replace") + (result.stderr or b"").decode("utf-8", "replace")


# -- the screen --------------------------------------------------------------------------------

def dump(phone) -> ET.Element:
    sh(phone, f"uiautomator dump {DUMP_PATH}")
    xml = phone.run(f"cat {DUMP_PATH}").stdout.decode("utf-8")
    return ET.fromstring(xml)


def bounds(node: ET.Element) -> tuple[int, int, int, int]:
    match = _BOUNDS.fullmatch(node.get("bounds", ""))
    if not match:
        raise PathError(f"node without bounds: {node.attrib}")
    return tuple(int(v) for v in match.groups())


def center(node: ET.Element) -> tuple[int, int]:
    x1, y1, x2, y2 = bounds(node)
    return (x1 + x2) // 2, (y1 + y2) // 2


def matches(node: ET.Element, selector: dict) -> bool:
    """A step target / milestone selector (docs/query-format.md) against one XML node."""
    checks = {"text": lambda n, v: n.get("text") == v,
              "text_contains": lambda n, v: v.lower() in (n.get("text") or "").lower(),
              "resource_id": lambda n, v: n.get("resource-id") == v,
              "content_desc": lambda n, v: n.get("content-desc") == v}
    used = [key for key in checks if key in selector]
    return bool(used) and all(checks[key](node, selector[key]) for key in used)


def find_all(root: ET.Element, selector: dict) -> list[ET.Element]:
    if "xpath" in selector:
        return root.findall(selector["xpath"])
    return [node for node in root.iter("node") if matches(node, selector)]


def find(root: ET.Element, selector: dict) -> ET.Element | None:
    found = find_all(root, selector)
    index = selector.get("index", 0)
    return found[index] if index < len(found) else None


def screen_size(root: ET.Element) -> tuple[int, int]:
    boxes = [bounds(node) for node in root.iter("node") if node.get("bounds")]
    return max(b[2] for b in boxes), max(b[3] for b in boxes)


def describe(root: ET.Element) -> str:
    """Short text of what is on screen, for failure messages."""
    items = []
    for node in root.iter("node"):
        label = node.get("text") or node.get("content-desc") or ""
        if label or node.get("resource-id"):
            items.append(f"{label!r}<{node.get('resource-id', '')}>")
    return ", ".join(items[:80])


# -- following a path ----------------------------------------------------------------------------

def _set_scroll_widget(phone, step, step_no):
    """Move a wheel picker: `steps` notches in `direction`, or until it shows `value`."""
    def wheel():
        node = resolve(phone, step["target"], step_no)
        x1, y1, x2, y2 = bounds(node)
        current = next((n.get("text") for n in node.iter("node")
                        if n.get("resource-id") == "android:id/numberpicker_input"), None)
        return (x1 + x2) // 2, (y1 + y2) // 2, (y2 - y1) // 3, current

    def notch(direction):
        x, y, item_h, _ = wheel()
        dy = -item_h if direction == "up" else item_h
        sh(phone, f"input swipe {x} {y} {x} {y + dy} 300")

    if "value" in step:
        for _ in range(100):
            _, _, _, current = wheel()
            if current == str(step["value"]):
                return
            notch(step.get("direction", "up"))
        raise PathError(f"step {step_no}: wheel never showed {step['value']!r}")
    for _ in range(int(step.get("steps", 1))):
        notch(step.get("direction", "up"))


@dataclass
class Trace:
    milestones_seen: list = field(default_factory=list)
    screens: int = 0



def _scroll(phone, root, direction) -> bool:
    """Swipe the biggest scrollable view one page; False when there is none."""
    views = [n for n in root.iter("node") if n.get("scrollable") == "true"]
    if not views:
        return False
    x1, y1, x2, y2 = max((bounds(n) for n in views), key=lambda b: (b[2] - b[0]) * (b[3] - b[1]))
    cx, top, bottom = (x1 + x2) // 2, y1 + (y2 - y1) // 5, y2 - (y2 - y1) // 5
    start, end = (bottom, top) if direction == "up" else (top, bottom)
    sh(phone, f"input swipe {cx} {start} {cx} {end} 300")
    return True


def resolve(phone, target, step_no=0) -> ET.Element:
    """The target on the current screen; like a real executor, scroll the list to find it."""
    root = dump(phone)
    for direction in ("up", "down"):
        for _ in range(MAX_SCROLLS):
            node = find(root, target)
            if node is not None:
                return node
            before = ET.tostring(root)
            if not _scroll(phone, root, direction):
                break
            root = dump(phone)
            if ET.tostring(root) == before:
                break
    node = find(root, target)
    if node is None:
        raise PathError(f"step {step_no}: target {target} not on screen; screen has: {describe(root)}")
    return node


def _check_veto(node, veto, step_no):
    for condition in veto or ():
        if matches(node, condition):
            raise PathError(f"step {step_no}: acts on a veto element ({condition.get('reason', condition)})")


def _point(phone, step):
    """A target-less step's `point` (a control on a blind page) in this phone's pixels."""
    return step_point(step, *screen_size(dump(phone)))


def _tap(phone, target, step_no, veto=(), step=None):
    if target is None and step is not None and step.get("point"):
        x, y = _point(phone, step)
        sh(phone, f"input tap {x} {y}")
        return x, y
    node = resolve(phone, target, step_no)
    _check_veto(node, veto, step_no)
    x, y = center(node)
    sh(phone, f"input tap {x} {y}")
    return x, y


def _input_text(text: str) -> str:
    escaped = text.replace(" ", "%s")  # `input text` reads %s as a space
    return "input text '" + escaped.replace("'", "'\\''") + "'"


def run_step(phone, step: dict, step_no: int, veto=()) -> None:
    """One query-format step; `veto` selectors must never be tapped (PathError if they are)."""
    action = step["action"]
    if action == "open":
        sh(phone, f"monkey -p {step['app']} -c android.intent.category.LAUNCHER 1")
    elif action in ("click", "double_click"):
        x, y = _tap(phone, step.get("target"), step_no, veto, step)
        if action == "double_click":
            sh(phone, f"input tap {x} {y}")
    elif action == "long_press" and not step.get("target") and step.get("point"):
        x, y = _point(phone, step)
        sh(phone, f"input swipe {x} {y} {x} {y} 800")
    elif action == "long_press":
        node = resolve(phone, step["target"], step_no)
        _check_veto(node, veto, step_no)
        x, y = center(node)
        sh(phone, f"input swipe {x} {y} {x} {y} 800")
    elif action == "type":
        if step.get("target") or step.get("point"):
            _tap(phone, step.get("target"), step_no, veto, step)
        sh(phone, _input_text(step["text"]))
    elif action == "swipe":
        root = dump(phone)
        width, height = screen_size(root)
        box = bounds(find(root, step["target"])) if step.get("target") else (0, int(height * 0.2), width, int(height * 0.8))
        cx, cy = (box[0] + box[2]) // 2, (box[1] + box[3]) // 2
        dx, dy = (box[2] - box[0]) * 3 // 8, (box[3] - box[1]) * 3 // 8
        direction = step.get("direction", "up")
        x1, y1, x2, y2 = {"up": (cx, cy + dy, cx, cy - dy), "down": (cx, cy - dy, cx, cy + dy),
                          "left": (cx + dx, cy, cx - dx, cy), "right": (cx - dx, cy, cx + dx, cy)}[direction]
        sh(phone, f"input swipe {x1} {y1} {x2} {y2} 300")
    elif action == "set_scroll_widget":
        _set_scroll_widget(phone, step, step_no)
    elif action == "system_button":
        key = BUTTONS.get(step["button"].lower(), step["button"])
        sh(phone, f"input keyevent {key}")
    elif action in NO_DEVICE_ACTION:
        pass
    else:
        raise PathError(f"step {step_no}: action {action!r} is not supported by the test follower")


def _drawn_on_blind_screen(phone, milestone) -> bool:
    """On a blind screen the words are only in pixels: a milestone is seen where it is drawn (what
    OCR reads), from the farm's own screen tree."""
    if phone.screen_kind() != "blind":
        return False
    texts = phone.drawn_texts()
    if "text" in milestone:
        return milestone["text"] in texts
    if "text_contains" in milestone:
        return any(milestone["text_contains"].lower() in text.lower() for text in texts)
    return False


def follow(phone, steps: list, milestones: list | None = None, after_step=None, veto=()) -> Trace:
    """Run the steps; after each one, mark the milestones (in order) found on the screen.

    `after_step(step_no, step)` is called after every step (tests record what they need).
    """
    trace = Trace()
    pending = list(milestones or [])
    for step_no, step in enumerate(steps):
        run_step(phone, step, step_no, veto)
        if after_step is not None:
            after_step(step_no, step)
        if pending:
            root = dump(phone)
            trace.screens += 1
            while pending and (find(root, pending[0]) is not None or _drawn_on_blind_screen(phone, pending[0])):
                trace.milestones_seen.append(pending.pop(0).get("name", ""))
    return trace


# -- reset and checks --------------------------------------------------------------------------

def fresh_phone(farm, serial: str = "sim-0001"):
    """Replace a farm phone by a factory-fresh one (apps, settings, files, clock as at boot).

    `pm clear` resets an app but not the phone's settings; tasks that switch Wi-Fi or dark theme
    would leak into the next task, so each task starts on a fresh phone and then runs its reset.
    """
    from simfarm.phone import VirtualPhone

    old = farm.phones[serial]
    phone = VirtualPhone(old.index, farm.seed, farm.apps)
    farm.phones[serial] = phone
    return phone


def focused_window(phone) -> str:
    """`package/activity` of the focused window, from `dumpsys window`."""
    output = sh(phone, "dumpsys window")
    line = next((line for line in output.splitlines() if "mCurrentFocus" in line), "")
    match = re.search(r"(\S+/\S+)\}", line)
    return match.group(1) if match else line.strip()


def reset_phone(phone, reset: dict, apps: list[str] = ()) -> None:
    """docs/query-format.md `reset`; the default force-stops and clears the task's apps."""
    force_stop = reset.get("force_stop", list(apps)) if reset else list(apps)
    clear = reset.get("clear", list(apps)) if reset else list(apps)
    sh(phone, "input keyevent KEYCODE_HOME")
    for package in force_stop:
        sh(phone, f"am force-stop {package}")
    for package in clear:
        sh(phone, f"pm clear {package}")
    if not reset or reset.get("home", True):
        sh(phone, "input keyevent KEYCODE_HOME")


RECIPES = Path(__file__).resolve().parents[2] / "simfarm" / "setup_recipes.jsonl"


def prepare(phone, record: dict) -> list[str]:
    """Meet a task's prerequisites as the console does after its reset: the farm's setup recipe for
    each (simfarm/setup_recipes.jsonl, matched by flywheel/rules/prerequisites), its steps followed.
    Returns the recipe keys that ran; PathError when a prerequisite has no recipe."""
    from flywheel.rules.prerequisites import Recipe, resolve

    recipes = [Recipe.from_row(json.loads(line)) for line in RECIPES.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    met, unmet = resolve(record.get("prerequisites") or [], recipes)
    if unmet:
        raise PathError(f"{record.get('key')}: no setup recipe meets {unmet}")
    for recipe in met:
        follow(phone, list(recipe.steps))
    return [recipe.key for recipe in met]


def _predicates(output: str, check: dict) -> list[str]:
    """Failures of equals / contains / not_contains / matches against a command's output."""
    failures = []
    if "equals" in check and output.strip() != str(check["equals"]):
        failures.append(f"expected {check['equals']!r}, got {output.strip()!r}")
    if "contains" in check and str(check["contains"]) not in output:
        failures.append(f"{check['contains']!r} not in output")
    if "not_contains" in check and str(check["not_contains"]) in output:
        failures.append(f"{check['not_contains']!r} in output")
    if "matches" in check and not re.search(check["matches"], output, re.M):
        failures.append(f"output does not match {check['matches']!r}")
    return failures


def evaluate(phone, check: dict) -> tuple[bool, str]:
    """One terminal check; returns (passed, what was seen)."""
    kind = check["check"]
    if kind == "settings":
        output = sh(phone, f"settings get {check['namespace']} {check['key']}")
    elif kind == "content":
        cmd = f"content query --uri {check['uri']}"
        if check.get("where"):
            cmd += f" --where \"{check['where']}\""
        output = sh(phone, cmd)
    elif kind == "file":
        listing = phone.run(f"ls {check['path']}")
        exists = listing.exit_code == 0
        if not check.get("exists", True):
            return (not exists), f"exists={exists}"
        if not exists:
            return False, f"{check['path']} does not exist"
        output = sh(phone, f"cat {check['path']}")
    elif kind == "foreground":
        output = sh(phone, "dumpsys window")
        focus = next((line for line in output.splitlines() if "mCurrentFocus" in line), "")
        ok = check["package"] in focus and (not check.get("activity") or check["activity"] in focus)
        return ok, focus.strip()
    elif kind == "getprop":
        output = sh(phone, f"getprop {check['key']}")
    elif kind == "dumpsys":
        output = sh(phone, f"dumpsys {check['service']}")
    elif kind == "screen":
        output = sh(phone, "uiautomator dump /dev/tty")
    else:
        return False, f"unknown check kind {kind!r}"
    failures = _predicates(output, check)
    return not failures, "; ".join(failures) + f" | output: {output.strip()[:400]!r}"


def failing_checks(phone, checks: list) -> list[str]:
    problems = []
    for check in checks:
        ok, seen = evaluate(phone, check)
        if not ok:
            problems.append(f"{check}: {seen}")
    return problems
