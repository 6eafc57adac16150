"""Stored failed trajectories for the ECDM's path tests: real PNG frames and uiautomator dumps."""
import io
import itertools
import random

from django.utils import timezone
from PIL import Image, ImageDraw

from flywheel.blobs import store_blob
from flywheel.models import App, Attribution, Query, Repair, Step, Trajectory, Verdict

SETTINGS = "com.android.settings"
KEYS = itertools.count(1)


def png(seed) -> bytes:
    """A frame whose picture depends on `seed` (blocks of colour: distinct perceptual hashes)."""
    rng = random.Random(str(seed))
    image = Image.new("RGB", (108, 240), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        x, y = rng.randrange(0, 96), rng.randrange(0, 228)
        draw.rectangle([x, y, x + rng.randrange(8, 40), y + rng.randrange(8, 40)],
                       fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def node(text="", rid="", cls="android.widget.TextView", bounds=(0, 0, 10, 10), clickable=False, package=SETTINGS,
         desc="", children=""):
    x1, y1, x2, y2 = bounds
    attrs = (f'text="{text}" resource-id="{rid}" class="{cls}" package="{package}" content-desc="{desc}" '
             f'clickable="{"true" if clickable else "false"}" bounds="[{x1},{y1}][{x2},{y2}]"')
    return f"<node {attrs}>{children}</node>" if children else f"<node {attrs} />"


def page(title, rows=(), package=SETTINGS, layout="list", extra=""):
    """A page: a title in the top band, then one clickable row per entry (resource-id from its text)."""
    body = node(title, "", bounds=(168, 100, 1056, 268), package=package)
    for i, row in enumerate(rows):
        rid = f"{package}:id/{row.lower().replace(' ', '_')}"
        y = 300 + 200 * i
        body += node("", rid, "android.widget.LinearLayout", (0, y, 1080, y + 180), True, package,
                     children=node(row, "android:id/title", bounds=(152, y + 20, 1032, y + 90), package=package))
    container = node("", f"{package}:id/{layout}", "android.widget.FrameLayout", (0, 0, 1080, 2400), package=package,
                     children=body + extra)
    return f'<?xml version="1.0" ?><hierarchy rotation="0">{container}</hierarchy>'


def dialog(title, buttons, package="com.android.permissioncontroller"):
    """A focused dialog window: only the dialog is in the dump."""
    body = node(title, f"{package}:id/permission_message", bounds=(120, 900, 960, 1000), package=package)
    for i, text in enumerate(buttons):
        y = 1050 + 150 * i
        body += node(text, f"{package}:id/button{i}", "android.widget.Button", (120, y, 960, y + 130), True, package)
    panel = node("", "android:id/parentPanel", "android.widget.FrameLayout", (84, 850, 996, 1600), package=package,
                 children=body)
    return f'<?xml version="1.0" ?><hierarchy rotation="0">{node("", "", "android.widget.FrameLayout", (0, 0, 1080, 2400), package=package, children=panel)}</hierarchy>'


def row_center(index):
    return [540, 300 + 200 * index + 90]


def cot(decision="", plan="Go on with the task"):
    return {"Observation": "A settings screen.", "Reflection": "", "Plan": plan, "Decision": decision, "Memory": ""}


def make_query(key=None, text="Open the Bluetooth settings", tier="L2", package=SETTINGS, label="Settings"):
    query = Query.objects.create(key=key or f"q-{next(KEYS)}", text=text, tier=tier, persona="novice",
                                 reset={"force_stop": [package], "clear": [], "home": True},
                                 verification={"terminal": [{"check": "foreground", "package": package}],
                                               "milestones": []})
    query.set_apps([App.objects.get_or_create(package=package, defaults={"label": label})[0]])
    return query


def stored_trajectory(screens, actions, query=None, verdict="false", screenshots=True, line="automatic"):
    """A judged trajectory: step i shows screens[i] (xml) and ran actions[i] (None: not executed)."""
    query = query or make_query()
    trajectory = Trajectory.objects.create(query=query, line=line, status="completed", verdict=verdict,
                                           destination="ecdm", finished_at=timezone.now())
    Verdict.objects.create(trajectory=trajectory, outcome=verdict)
    for index, (xml, action) in enumerate(zip(screens, actions, strict=True)):
        Step.objects.create(trajectory=trajectory, index=index, foreground_package=SETTINGS,
                            screenshot=store_blob(png(xml), "png") if screenshots else "",
                            hierarchy=store_blob(xml.encode(), "xml"), executed_action=action,
                            proposed_action=action, cot=cot(f"step {index}"), timings={"screen": [1080, 2400]})
    return trajectory


def repair_for(trajectory, path="step", step_index=1, level=3, cause="perception_drift", features=None):
    attribution = Attribution.objects.create(trajectory=trajectory, level=level, cause=cause,
                                             first_bad_step=step_index, features=features or {}, owner="ecdm",
                                             ecdm_path=path)
    return Repair.objects.create(trajectory=trajectory, attribution=attribution, path=path, step_index=step_index)


HOME = page("Home", ["Settings", "Clock"], package="com.android.launcher")
MAIN = page("Settings", ["WLAN", "Bluetooth", "Display"])
DISPLAY = page("Display", ["Brightness", "Dark theme"], layout="display")
BLUETOOTH = page("Bluetooth", ["Use Bluetooth", "Device name"], layout="bluetooth")
OPEN_SETTINGS = {"action": "open", "app": SETTINGS, "package": SETTINGS}
TAP_DISPLAY = {"action": "click", "point": row_center(2), "coords": "pixel"}
TAP_BLUETOOTH = {"action": "click", "point": row_center(1), "coords": "pixel"}
GIVE_UP = {"action": "terminate", "status": "failure"}


def slipped_trajectory(**options):
    """Open Settings (right), tap Display instead of Bluetooth (the slip), give up."""
    return stored_trajectory([HOME, MAIN, DISPLAY], [OPEN_SETTINGS, TAP_DISPLAY, GIVE_UP], **options)
