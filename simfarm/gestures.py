"""Touch and key input for the Engine: hit-testing taps and swipes against the screen tree.

`input motionevent DOWN/MOVE/UP` build a stroke timed by the phone's own clock (which only `sleep`
moves inside a gesture), so a quick DOWN…UP is a tap, a still hold of LONG_PRESS_MS a long press,
and a stroke that leaves the touch slop a swipe. The last motion events are kept for `dumpsys input`.
"""
from collections import deque

from simfarm import ui

KEYCODES = {
    "HOME": 3, "BACK": 4, "CALL": 5, "ENDCALL": 6, "DPAD_UP": 19, "DPAD_DOWN": 20, "DPAD_LEFT": 21,
    "DPAD_RIGHT": 22, "DPAD_CENTER": 23, "VOLUME_UP": 24, "VOLUME_DOWN": 25, "POWER": 26, "CAMERA": 27,
    "CLEAR": 28, "COMMA": 55, "PERIOD": 56, "TAB": 61, "SPACE": 62, "ENTER": 66, "DEL": 67, "AT": 77,
    "MENU": 82, "NOTIFICATION": 83, "SEARCH": 84, "MEDIA_PLAY_PAUSE": 85, "PAGE_UP": 92, "PAGE_DOWN": 93,
    "ESCAPE": 111, "FORWARD_DEL": 112, "MOVE_HOME": 122, "MOVE_END": 123, "VOLUME_MUTE": 164,
    "APP_SWITCH": 187, "SLEEP": 223, "WAKEUP": 224, "MINUS": 69, "EQUALS": 70, "SLASH": 76,
}
KEYCODES.update({str(d): 7 + d for d in range(10)})
KEYCODES.update({chr(ord("A") + i): 29 + i for i in range(26)})
CODE_TO_NAME = {code: name for name, code in KEYCODES.items()}
TYPED_KEYS = {"SPACE": " ", "COMMA": ",", "PERIOD": ".", "AT": "@", "MINUS": "-", "EQUALS": "=", "SLASH": "/",
              "TAB": "\t"}
LONG_PRESS_MS = 500
TOUCH_SLOP_DP = 20          # movement under this (per axis) keeps a touch a tap or a long press
MOTION_LOG_SIZE = 16        # motion events kept for `dumpsys input`


def keycode_name(key: str) -> str | None:
    """'KEYCODE_BACK', 'BACK' or '4' (a number is a key code) → 'BACK'; None when unknown."""
    key = key.strip().upper()
    if key.startswith("KEYCODE_"):
        name = key[len("KEYCODE_"):]
        return name if name in KEYCODES else None
    if key.isdigit():
        return CODE_TO_NAME.get(int(key))
    return key if key in KEYCODES else None


def find_target(root, x, y, attr):
    """Topmost window first; inside it the last node (in draw order) under the point with a handler.

    A modal window (dialog, shade, keyboard) swallows the event even where it has no handler.
    """
    for window in reversed(root.children):
        if not ui.contains(window.bounds, x, y) or window.style.get("passthrough"):
            continue
        best = None
        for node in window.walk():
            if getattr(node, attr) is not None and node.enabled and ui.contains(node.bounds, x, y):
                best = node
        if best is not None:
            return best
        if window.window in ("StatusBar", "NavigationBar") or window.style.get("modal", True):
            return None
    return None


class Gestures:
    """Mixed into Engine; every public method here is one `input` command."""

    def _before_input(self):
        if self.toast_text is not None:
            self.toast_text = None
            self.changed()  # the toast leaves the screen even when the touch hits nothing
        self.anomalies.before_action()

    def _close_paste_menu(self):
        """Any touch closes a popup (Paste, a launcher shortcut); hit-testing uses the screen from before."""
        if self.foreground is not None and self.foreground.top.paste_menu is not None:
            self.foreground.top.paste_menu = None
            self.changed()
        if self.launcher_menu is not None:
            self.launcher_menu = None
            self.changed()

    def tap(self, x, y):
        self._before_input()
        screen = self.screen()
        self._close_paste_menu()
        node = find_target(screen, x, y, "on_tap")
        if node is not None:
            node.on_tap(x, y)
            self.changed()
        self.anomalies.after_action()
        return "tap"

    def long_press(self, x, y):
        self._before_input()
        screen = self.screen()
        self._close_paste_menu()
        node = find_target(screen, x, y, "on_long_press")
        if node is not None:
            node.on_long_press(x, y)
        else:  # a view without a long-click listener still clicks on release
            node = find_target(screen, x, y, "on_tap")
            if node is not None:
                node.on_tap(x, y)
        self.changed()
        self.anomalies.after_action()
        return "long_press"

    def swipe(self, x1, y1, x2, y2, duration_ms=300):
        """`input swipe`: a same-point swipe is a tap or (held LONG_PRESS_MS) a long press."""
        if not self._beyond_slop(x2 - x1, y2 - y1):
            return self.long_press(x1, y1) if duration_ms >= LONG_PRESS_MS else self.tap(x1, y1)
        return self._moved_stroke(x1, y1, x2, y2)

    def _beyond_slop(self, dx, dy):
        slop = self.metrics.px(TOUCH_SLOP_DP)
        return abs(dx) >= slop or abs(dy) >= slop

    def _moved_stroke(self, x1, y1, x2, y2):
        """A finger that went down at (x1, y1), moved, and lifted at (x2, y2): system gestures, then views."""
        dx, dy = x2 - x1, y2 - y1
        m = self.metrics
        self._before_input()
        try:
            if self.anomalies.handle_swipe(x1, y1, x2, y2):
                return "swipe"
            if y1 <= m.status_bar * 1.5 and dy > m.px(200) and not self.shade_open:
                self.open_shade()
            elif self.shade_open and dy < -m.px(200) and y1 > m.height // 2:
                self.shade_open = False
                self.changed()
            elif y1 >= m.height - m.nav_bar * 1.5 and dy < -m.px(200):
                self.home()  # gesture navigation: swipe up from the bottom edge
            elif (x1 <= m.px(30) or x1 >= m.width - m.px(30)) and abs(dx) > m.px(150) and abs(dx) > abs(dy):
                self.back()  # edge swipe is Back
            else:
                node = find_target(self.screen(), x1, y1, "on_swipe")
                if node is not None:
                    node.on_swipe(dx, dy, x1, y1)
                    self.changed()
            return "swipe"
        finally:
            self.anomalies.after_action()

    # -- motion events (`input motionevent`) -------------------------------------------------------

    def _init_touch(self):
        self.motion_log = deque(maxlen=MOTION_LOG_SIZE)  # (action, x, y, ms since its DOWN, uptime ms)
        self.stroke_points = None     # the touch in progress: [(action, x, y, clock seconds)]
        self.last_gesture = None      # (kind, (x1, y1), (x2, y2), duration ms, MOVE count)

    def _log_motion(self, action, x, y, t, down_time):
        self.motion_log.append((action, x, y, round((t - down_time) * 1000), round((t - self.phone.boot_time) * 1000)))

    def _gesture_done(self, kind, points):
        moves = sum(1 for p in points if p[0] == "MOVE")
        duration_ms = round((points[-1][3] - points[0][3]) * 1000)
        self.last_gesture = (kind, points[0][1:3], points[-1][1:3], duration_ms, moves)

    def record_motion(self, points, kind):
        """Log the events `input tap|swipe` inject ([(action, x, y, clock seconds)]) and the gesture."""
        for action, x, y, t in points:
            self._log_motion(action, x, y, t, points[0][3])
        self._gesture_done(kind, points)

    def motion_event(self, action, x, y) -> bool:
        """One `input motionevent`; UP ends the stroke and dispatches it. False for an unknown action."""
        if action not in ("DOWN", "MOVE", "UP", "CANCEL"):
            return False
        now = self.phone.now()
        if action == "DOWN":
            self.stroke_points = []
        elif self.stroke_points is None:  # no DOWN before it: the dispatcher drops the inconsistent event
            self._log_motion(action, x, y, now, now)
            return True
        self.stroke_points.append((action, x, y, now))
        self._log_motion(action, x, y, now, self.stroke_points[0][3])
        if action in ("UP", "CANCEL"):
            points, self.stroke_points = self.stroke_points, None
            self._gesture_done(self.stroke(points) if action == "UP" else "cancel", points)
        return True

    def stroke(self, points):
        """Classify a finished stroke as Android's touch handling would and dispatch it; returns the kind.

        A touch that stays inside the slop is a tap, or a long press once held LONG_PRESS_MS. One that
        leaves it is a swipe from DOWN to UP (scroll, fling, drag), unless it was held still for
        LONG_PRESS_MS over a view with a long-click listener: that long press fired before the move.
        """
        _, x0, y0, t0 = points[0]
        _, x1, y1, t1 = points[-1]
        left = next((t for _, x, y, t in points if self._beyond_slop(x - x0, y - y0)), None)
        still_ms = ((t1 if left is None else left) - t0) * 1000
        if left is None:
            return self.long_press(x0, y0) if still_ms >= LONG_PRESS_MS else self.tap(x0, y0)
        if still_ms >= LONG_PRESS_MS and find_target(self.screen(), x0, y0, "on_long_press") is not None:
            return self.long_press(x0, y0)
        return self._moved_stroke(x0, y0, x1, y1)

    def horizontal_swipe_on_page(self, task, dx):
        """A sideways swipe on a page with tabs moves to the neighbouring tab."""
        spec = self.apps[task.package].pages[task.top.page_id]
        tabs = spec.get("bottom_nav") or []
        selected = next((i for i, t in enumerate(tabs) if t.get("selected")), None)
        if selected is None:
            return
        target = selected + (1 if dx < 0 else -1)
        if 0 <= target < len(tabs) and tabs[target].get("tap"):
            self.context(task).run(tabs[target]["tap"])

    def key(self, name: str) -> bool:
        """Press a key by name ('BACK'); False when the key is unknown."""
        name = keycode_name(name)
        if name is None:
            return False
        if name not in ("DEL", "ENTER"):
            self._before_input()
        if name == "BACK" or name == "ESCAPE":
            self.back()
        elif name == "HOME":
            self.home()
        elif name == "APP_SWITCH":
            self.recents()
        elif name == "NOTIFICATION":
            self.open_shade()
        elif name == "DEL":
            self.delete_char()
        elif name == "ENTER":
            self.submit()
        elif name in ("POWER", "SLEEP"):
            self.phone.screen_on = name == "POWER" and not self.phone.screen_on
        elif name == "WAKEUP":
            self.phone.screen_on = True
        elif name == "FORWARD_DEL" or name == "CLEAR":
            pass
        elif name in TYPED_KEYS:
            self.type_text(TYPED_KEYS[name])
        elif len(name) == 1:
            self.type_text(name.lower())
        self.changed()
        self.anomalies.after_action()
        return True
