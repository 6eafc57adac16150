"""Walk a known path (docs/query-format.md steps) on a phone through its shell, as an agent would.

Used by tests and handy for checking app files: every step reads a fresh uiautomator dump,
finds its target and sends `input` commands, so a path that walks here walks over ADB too.
"""
import shlex
import xml.etree.ElementTree as ET

KEYS = {"back": "KEYCODE_BACK", "home": "KEYCODE_HOME", "enter": "KEYCODE_ENTER", "recents": "KEYCODE_APP_SWITCH",
        "recent": "KEYCODE_APP_SWITCH", "menu": "KEYCODE_MENU", "delete": "KEYCODE_DEL"}


class StepFailed(AssertionError):
    pass


def parse_bounds(text):
    left, right = text[1:-1].split("][")
    x1, y1 = map(int, left.split(","))
    x2, y2 = map(int, right.split(","))
    return x1, y1, x2, y2


def dump(phone):
    return ET.fromstring(phone.dump_hierarchy())


def find(root, target: dict):
    """All nodes matching the selector, in document order; `index` picks one."""
    matches = []
    for node in root.iter("node"):
        a = node.attrib
        if "text" in target and a.get("text") != target["text"]:
            continue
        if "text_contains" in target and target["text_contains"] not in a.get("text", ""):
            continue
        if "resource_id" in target and a.get("resource-id") != target["resource_id"]:
            continue
        if "content_desc" in target and a.get("content-desc") != target["content_desc"]:
            continue
        matches.append(node)
    index = target.get("index", 0)
    return matches[index] if len(matches) > index else None


def center(node):
    x1, y1, x2, y2 = parse_bounds(node.attrib["bounds"])
    return (x1 + x2) // 2, (y1 + y2) // 2


def _sh(phone, command):
    result = phone.run(command)
    if result.exit_code != 0:
        raise StepFailed(f"{command!r} failed: {result.stderr.decode(errors='replace')}")
    return result


def step_point(step, width, height):
    """A step's `point` in pixels: `coords` "thousandths" (the default, as the policy protocol's)
    or "pixel"; on a blind page a known path taps where the control is drawn."""
    x, y = step["point"]
    if step.get("coords", "thousandths") == "pixel":
        return int(x), int(y)
    return int(round(float(x) * width / 1000)), int(round(float(y) * height / 1000))


def run_step(phone, step):
    action = step["action"]
    width, height = phone.engine.metrics.width, phone.engine.metrics.height
    if action == "open":
        _sh(phone, f"monkey -p {step['app']} -c android.intent.category.LAUNCHER 1")
        return
    if action in ("wait", "terminate", "take_notes", "clarify", "call_user"):
        return
    if action == "system_button":
        _sh(phone, f"input keyevent {KEYS[step['button'].lower()]}")
        return
    if action == "swipe" and "target" not in step:
        direction = step.get("direction", "up")
        mid_x, mid_y = width // 2, height // 2
        dx, dy = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}[direction]
        x1, y1 = mid_x - dx * width * 3 // 10, mid_y - dy * height // 5
        x2, y2 = mid_x + dx * width * 3 // 10, mid_y + dy * height // 5
        _sh(phone, f"input swipe {x1} {y1} {x2} {y2} 300")
        return
    if "target" not in step and step.get("point"):
        x, y = step_point(step, width, height)  # a blind page: the control exists only in pixels
        node = None
    else:
        node = find(dump(phone), step["target"])
        if node is None:
            raise StepFailed(f"target not on screen: {step['target']}")
        x, y = center(node)
    if action in ("click", "double_click"):
        _sh(phone, f"input tap {x} {y}")
        if action == "double_click":
            _sh(phone, f"input tap {x} {y}")
    elif action == "long_press":
        _sh(phone, f"input swipe {x} {y} {x} {y} 800")
    elif action == "type":
        if node is None or node.attrib.get("focused") != "true":
            _sh(phone, f"input tap {x} {y}")
        _sh(phone, "input text " + shlex.quote(step["text"].replace(" ", "%s")))
    elif action in ("set_scroll_widget", "swipe", "drag"):
        x1, y1, x2, y2 = parse_bounds(node.attrib["bounds"])
        item = max(1, (y2 - y1) // 3)
        steps = int(step.get("steps", 1))
        sign = -1 if step.get("direction", "up") == "up" else 1
        _sh(phone, f"input swipe {x} {y} {x} {y + sign * item * steps} 300")
    else:
        raise StepFailed(f"unknown action {action}")


def walk(phone, steps):
    for i, step in enumerate(steps):
        try:
            run_step(phone, step)
        except StepFailed as exc:
            raise StepFailed(f"step {i} {step}: {exc}") from None
