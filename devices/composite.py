"""Composite capability actions (report §3.2.1) expanded on the phone side, over plain ADB:

- open: a functional need ("a note-taking app") or an app name ("Notes") → an installed app,
  launched with monkey. The phone decides which app, because which apps are installed depends on
  the phone.
- set_scroll_widget: turn the wheel picker at a point to a target value, swipe by swipe, reading
  the hierarchy between swipes.

Every key, tap, swipe and launch they make goes through an InputGate (devices/gate.py): audited
as that exact input on the screen as it is then, with the holder's lease confirmed. `gate.phone`
is used directly only to read (package list, foreground).
"""
from __future__ import annotations

import difflib
import re
import threading
import time

from devices.gate import InputBlocked
from devices.touch import plan_swipe, stroke_command
from devices.uitree import all_nodes, parse_hierarchy

HOME = {"action": "system_button", "button": "home"}
HOME_KEY = "input keyevent KEYCODE_HOME"

LAUNCHER_PAGES_MAX = 6
LAUNCH_SETTLE_S = 0.3
WHEEL_MAX_SWIPES = 40
WHEEL_ITEMS_PER_SWIPE = 4      # long wheel swipes fling unpredictably on real phones

# A need's words → words that app labels or package names of that kind contain. Ordered: the
# first group a need matches wins; within a group the first app found wins.
FUNCTION_GROUPS = [
    ({"note", "notes", "note-taking", "notetaking", "memo", "memos", "notebook", "jot"},
     ("notes", "note", "memo", "notebook", "keep")),
    ({"settings", "setting", "preferences", "configure", "system", "wifi", "wi-fi", "bluetooth", "brightness"},
     ("settings", "setting")),
    ({"shop", "shopping", "buy", "purchase", "store", "mall", "e-commerce", "ecommerce", "retail", "cart"},
     ("shop", "store", "mall", "mart", "market", "taobao", "amazon", "jd", "ebay", "buy")),
    ({"food", "delivery", "takeout", "take-out", "takeaway", "meal", "restaurant", "restaurants", "dinner", "lunch",
      "groceries", "eat"}, ("food", "dash", "eats", "delivery", "meituan", "eleme", "takeout", "meal")),
    ({"chat", "chatting", "message", "messages", "messaging", "messenger", "im", "text", "texting", "sms"},
     ("chat", "messag", "messenger", "talk", "wechat", "whatsapp", "telegram", "sms", "mms")),
    ({"social", "friends", "feed", "post", "posts", "network"}, ("social", "weibo", "twitter", "facebook", "instagram")),
    ({"video", "videos", "movie", "movies", "film", "tv", "watch", "streaming"}, ("video", "tube", "movie", "tv", "film")),
    ({"music", "song", "songs", "audio", "podcast", "podcasts", "radio"}, ("music", "song", "audio", "podcast", "radio")),
    ({"news", "reading", "reader", "read", "article", "articles", "book", "books", "novel"},
     ("news", "read", "book", "novel")),
    ({"travel", "trip", "flight", "flights", "hotel", "hotels", "train", "map", "maps", "navigation", "ride", "taxi"},
     ("travel", "trip", "flight", "hotel", "map", "ride", "taxi", "booking")),
    ({"bank", "banking", "finance", "wallet", "money", "payment", "stocks", "pay"},
     ("bank", "wallet", "finance", "pay", "money", "stock")),
    ({"calculator", "calculate"}, ("calc",)),
    ({"calendar", "schedule", "agenda"}, ("calendar",)),
    ({"clock", "alarm", "timer", "stopwatch"}, ("clock", "alarm")),
    ({"camera", "photo", "photos", "gallery", "pictures"}, ("camera", "gallery", "photo")),
    ({"browser", "web", "internet"}, ("browser", "chrome", "firefox")),
    ({"translate", "translation", "translator", "translating"}, ("translat",)),
]
_FILLER = {"a", "an", "the", "app", "application", "apps", "for", "to", "some", "any", "my", "that", "which",
           "can", "lets", "me", "i", "open", "launch", "start", "use", "with", "of", "and", "or"}

_label_cache: dict[tuple[str, str], tuple[tuple[str, ...], dict[str, str]]] = {}
_label_lock = threading.Lock()


class CompositeError(Exception):
    pass


# -- open ----------------------------------------------------------------------------------------

def _normalize(text: str) -> str:
    return re.sub(r"[^0-9a-z\u4e00-\u9fff]+", "", text.lower())


def _words(text: str) -> set[str]:
    return set(re.findall(r"[0-9a-z\u4e00-\u9fff][0-9a-z\u4e00-\u9fff'-]*", text.lower())) - _FILLER


def installed_packages(phone) -> list[str]:
    output = phone.shell("pm list packages")
    return sorted({line.split(":", 1)[1].strip() for line in output.splitlines() if line.startswith("package:")})


def launcher_labels(gate) -> list[tuple[str, tuple[int, int], int]]:
    """(label, centre, page) of every app icon on the home screen, flipping through its pages.
    The real way to see labels over ADB: `pm` does not print them."""
    gate.send(HOME, HOME_KEY)
    seen, found = set(), []
    for page in range(LAUNCHER_PAGES_MAX):
        roots = parse_hierarchy(gate.screen())
        icons = [n for n in all_nodes(roots) if n.clickable and (n.text or n.desc)
                 and "launcher" in n.package and not n.scrollable]
        new = [(n.text or n.desc, n.center, page) for n in icons if (n.text or n.desc) not in seen]
        if not new:
            break
        for label, centre, p in new:
            seen.add(label)
            found.append((label, centre, p))
        workspace = next((n for n in all_nodes(roots) if n.scrollable and "launcher" in n.package), None)
        if workspace is None:
            break
        x1, y1, x2, y2 = workspace.bounds
        mid = (y1 + y2) // 2
        start, end = [x2 - (x2 - x1) // 8, mid], [x1 + (x2 - x1) // 8, mid]
        gate.send({"action": "swipe", "start": start, "end": end},
                  f"input swipe {start[0]} {mid} {end[0]} {mid} 300")
    if any(page > 0 for _, _, page in found):
        gate.send(HOME, HOME_KEY)  # back to the first page
    return found


def _package_for_label(label: str, packages: list[str]) -> str | None:
    """'Notes' → com.sim.notes, 'ShopMart' → com.sim.shop, 'Settings' → com.android.settings."""
    wanted = _normalize(label)
    best = None
    for package in packages:
        for part in reversed(package.lower().split(".")):
            if len(part) < 3 or part in ("com", "android", "app", "apps", "mobile", "sim", "google"):
                continue
            if part == wanted:
                return package
            if (part in wanted or wanted in part) and best is None:
                best = package
    return best


def app_labels(gate, packages: list[str] | None = None, refresh: bool = False) -> dict[str, str]:
    """{label: package} of launchable apps, cached per phone until its package list changes.

    Reading them presses Home and may tap icons: `gate` audits each of those inputs. A label whose
    identifying tap was blocked is left out, and the list is then not cached."""
    phone = gate.phone
    key = (phone.address, phone.serial)
    packages = installed_packages(phone) if packages is None else packages
    with _label_lock:
        cached = _label_cache.get(key)
    if cached and cached[0] == tuple(packages) and not refresh:
        return dict(cached[1])
    labels, complete = {}, True
    for label, centre, page in launcher_labels(gate):
        package = _package_for_label(label, packages)
        if package is None and page == 0:
            try:
                package = _package_by_tapping(gate, centre)
            except InputBlocked:
                complete = False
        if package:
            labels[label] = package
    if complete:
        with _label_lock:
            _label_cache[key] = (tuple(packages), labels)
    return dict(labels)


def forget_labels(phone) -> None:
    """Drop the cached labels of one phone (the next `open` reads its launcher again)."""
    with _label_lock:
        _label_cache.pop((phone.address, phone.serial), None)


def cached_labels(phone) -> dict[str, str] | None:
    """The labels read from this phone's launcher earlier in this process, without touching it."""
    with _label_lock:
        cached = _label_cache.get((phone.address, phone.serial))
    return dict(cached[1]) if cached else None


def _package_by_tapping(gate, centre) -> str | None:
    """Last resort for a label that names no package (WeChat is com.tencent.mm): open it from the
    launcher, as a person would, and read which package came to the front."""
    gate.send({"action": "click", "point": list(centre)}, f"input tap {centre[0]} {centre[1]}")
    time.sleep(LAUNCH_SETTLE_S)
    package = gate.phone.foreground().get("package") or None
    gate.send(HOME, HOME_KEY)
    return package if package and "launcher" not in package else None


def resolve_app(need: str, labels: dict[str, str], packages: list[str]) -> tuple[str, str] | None:
    """(package, why) for a need, or None. Pure: label match first, then the function groups."""
    wanted = _normalize(need)
    if not wanted:
        return None
    if need.strip() in packages:
        return need.strip(), "package name"
    by_label = {_normalize(label): (label, package) for label, package in labels.items()}
    if wanted in by_label:
        label, package = by_label[wanted]
        return package, f"label '{label}'"
    stripped = _normalize(" ".join(sorted(_words(need), key=need.lower().find)))
    if stripped in by_label:
        label, package = by_label[stripped]
        return package, f"label '{label}'"
    named = _word_runs(need)
    for norm, (label, package) in by_label.items():
        if len(norm) >= 3 and norm in named:
            return package, f"label '{label}' named in the request"
    words = _words(need)
    # Launcher apps only, when the launcher told us which they are (a phone has hundreds of
    # packages without an icon); bare package names otherwise.
    candidates = list(labels.items()) or [(package, package) for package in packages]
    for need_words, app_words in FUNCTION_GROUPS:
        if not words & need_words and not any(w.rstrip("s") in need_words for w in words):
            continue
        for name, package in candidates:
            haystack = _normalize(name) + " " + package.lower()
            if any(word in haystack for word in app_words):
                return package, f"'{name}' serves the need ({'/'.join(sorted(words & need_words) or words)})"
    close = difflib.get_close_matches(wanted, list(by_label), n=1, cutoff=0.75)
    if close:
        label, package = by_label[close[0]]
        return package, f"label '{label}' (closest name)"
    return None


def _word_runs(text: str, longest: int = 3) -> set[str]:
    """Runs of 1..3 consecutive words, glued: "open google maps now" has "googlemaps"."""
    tokens = re.findall(r"[0-9a-z\u4e00-\u9fff]+", text.lower())
    return {"".join(tokens[i:i + n]) for n in range(1, longest + 1) for i in range(len(tokens) - n + 1)}


def open_app(gate, need: str) -> dict:
    """Resolve, audit the launch of the resolved app, launch; returns {"package", "label", "why",
    "command"}. Raises CompositeError, or InputBlocked when the audit refuses an input."""
    packages = installed_packages(gate.phone)
    labels = app_labels(gate, packages)
    resolved = resolve_app(need, labels, packages)
    if resolved is None:
        names = ", ".join(sorted(labels)) or "none found"
        raise CompositeError(f"no installed app serves {need!r}; launcher apps: {names}")
    package, why = resolved
    label = next((name for name, owner in labels.items() if owner == package), "")
    command = f"monkey -p {package} -c android.intent.category.LAUNCHER 1"
    code, output = gate.send({"action": "open", "app": need, "package": package, "label": label}, command)
    if code != 0 or "No activities found" in output or "aborted" in output:
        raise CompositeError(f"{package} could not be launched: {output.strip()[-200:]}")
    return {"package": package, "label": label, "why": why, "command": command}


# -- set_scroll_widget ---------------------------------------------------------------------------

def find_wheel(roots, x: int, y: int):
    """The wheel picker at the point: a NumberPicker (or scrollable node) containing it."""
    containing = [n for n in all_nodes(roots) if n.contains(x, y)]
    pickers = [n for n in containing if "NumberPicker" in n.cls or "Picker" in n.cls]
    if not pickers:
        pickers = [n for n in containing if n.scrollable]
    return min(pickers, key=lambda n: n.area) if pickers else None


def wheel_value(wheel) -> tuple[str, str | None, str | None]:
    """(selected, previous, next) texts: the middle EditText (android:id/numberpicker_input) is the
    value, the ones above and below are its neighbours."""
    items = [n for n in wheel.walk() if n is not wheel and n.text]
    items.sort(key=lambda n: n.center[1])
    selected = next((n for n in items if n.resource_id.endswith("numberpicker_input")), None) \
        or next((n for n in items if n.selected), None) \
        or min(items, key=lambda n: abs(n.center[1] - wheel.center[1]), default=None)
    if selected is None:
        return "", None, None
    above = [n for n in items if n.center[1] < selected.center[1]]
    below = [n for n in items if n.center[1] > selected.center[1]]
    return selected.text, (above[-1].text if above else None), (below[0].text if below else None)


def _same(a, b) -> bool:
    if a is None or b is None:
        return False
    a, b = str(a).strip(), str(b).strip()
    if a.lower() == b.lower():
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _as_number(text):
    try:
        return float(str(text).strip())
    except (TypeError, ValueError):
        return None


def set_scroll_widget(gate, point, target: str, rng, width: int, height: int) -> dict:
    """Swipe the wheel at `point` until it shows `target`. Returns {"value", "swipes", "history"}."""
    history, commands = [], []
    direction = None       # +1: towards later values (finger moves up), -1: earlier
    tried_other_way = False
    for swipe in range(WHEEL_MAX_SWIPES + 1):
        roots = parse_hierarchy(gate.screen())
        wheel = find_wheel(roots, *point)
        if wheel is None:
            raise CompositeError(f"no wheel picker at {list(point)}")
        value, previous, following = wheel_value(wheel)
        history.append(value)
        if _same(value, target):
            return {"value": value, "swipes": swipe, "history": history, "commands": commands}
        if swipe == WHEEL_MAX_SWIPES:
            break
        current, wanted = _as_number(value), _as_number(target)
        if current is not None and wanted is not None:
            step = int(round(wanted - current))
            direction, count = (1 if step > 0 else -1), min(abs(step), WHEEL_ITEMS_PER_SWIPE)
        elif _same(following, target):
            direction, count = 1, 1
        elif _same(previous, target):
            direction, count = -1, 1
        else:  # names (months, zones): walk one way, turn round once at the end
            if direction is None:
                direction = 1
            if len(history) > 1 and history[-1] == history[-2]:
                if tried_other_way:
                    break
                direction, tried_other_way = -direction, True
            count = WHEEL_ITEMS_PER_SWIPE
        if len(history) > 2 and history[-1] == history[-2] == history[-3]:
            break  # the wheel does not move any more
        commands.append(_turn_wheel(gate, wheel, point, target, direction, count, rng, width, height))
    raise CompositeError(f"the wheel at {list(point)} did not reach {target!r}; "
                         f"it showed {' → '.join(dict.fromkeys(history))}")


def _turn_wheel(gate, wheel, point, target, direction, count, rng, width, height):
    items = [n for n in wheel.walk() if n is not wheel and n.text]
    item_height = max((n.bounds[3] - n.bounds[1] for n in items), default=(wheel.bounds[3] - wheel.bounds[1]) // 3)
    x = wheel.center[0]
    top, bottom = wheel.bounds[1], wheel.bounds[3]
    margin = max(item_height // 4, 1)
    distance = item_height * count
    # Later values come from below: the finger moves up to bring them to the middle. The stroke
    # starts inside the wheel (a touch that starts outside would scroll the page instead).
    start_y = bottom - margin if direction > 0 else top + margin
    end_y = start_y - direction * distance
    start = (x, min(max(start_y, 0), height - 1))
    end = (x, min(max(end_y, 0), height - 1))
    command = stroke_command(plan_swipe(start, end, 500 + 100 * count, rng, width, height))
    # Audited as the action it serves, at the wheel, with this stroke's own start and end.
    gate.send({"action": "set_scroll_widget", "point": list(point), "value": target,
               "start": list(start), "end": list(end)}, command)
    return command
