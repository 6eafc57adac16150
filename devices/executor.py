"""The action executor: runs any of the 14 actions (devices/actions.py) on a PhoneConnection.

Every input an action sends — the tap of a click, the focusing tap and the text of a type, each key,
gesture, launcher tap and app launch of a composite — goes through one InputGate
(devices/gate.py): audited as that input on the screen as it is just before it (a block is
recorded and returned, never executed), and sent only while the holder's lease (when given) is
still held. take_notes refuses secrets whatever the rules say. Control actions (terminate,
clarify, call_user) touch nothing: they come back as `control` for the caller to record.
"""
from __future__ import annotations

import base64
import random
import re
import time
from dataclasses import asdict, dataclass, field

from django.conf import settings

from devices import leases, touch
from devices.actions import SCREEN_ACTIONS, SYSTEM_BUTTONS, ActionError, normalize_action
from devices.audit import AuditDecision, audit_and_record, record_block
from devices.composite import CompositeError, open_app, set_scroll_widget
from devices.gate import InputBlocked, InputGate, LeaseLost
from devices.phone import PhoneUnavailable
from devices.sensitive_text import secrets_in

TEXT_CHUNK = 200                 # characters per `input text` call
PLAIN_TEXT = re.compile(r"^[\x20-\x7e]*$")
SCREENSHOT_DIR = "/sdcard/Pictures/Screenshots"
POINTED_ACTIONS = ("click", "double_click", "type", "swipe", "drag", "long_press", "set_scroll_widget")


@dataclass
class ActionResult:
    ok: bool
    action: dict | None = None       # the normalized action (pixels) that ran or would have run
    blocked: bool = False            # the safety audit stopped it
    reason: str = ""                 # why it was blocked
    error: str = ""                  # why it failed (bad action, phone error, composite failure)
    note: str = ""                   # clamping, how `open` resolved the need, ...
    control: dict | None = None      # terminate / clarify / call_user / take_notes outcome
    element: dict | None = None      # the element the action hit (from the audit)
    commands: list = field(default_factory=list)   # shell command lines sent to the phone
    timings: dict = field(default_factory=dict)    # ms: audit, execute, total
    phone_lost: bool = False         # the phone stopped answering (not the action's fault)
    lease_lost: bool = False         # the holder's lease lapsed or was taken: nothing more was sent

    def to_dict(self) -> dict:
        return asdict(self)


class ActionFailed(Exception):
    """The phone did not do what the action asked (a refused command, an unresolvable need)."""


def shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


class ActionExecutor:
    """Executes actions on one phone. `rules` (SafetyRule-like objects) may be passed to avoid a
    query per action; by default the enabled rules are read from the database each time. With a
    `lease`, every input first confirms (and extends by `lease_ttl`) that it is still held."""

    def __init__(self, phone, *, holder: str = "", device=None, rules=None, seed: int | None = None,
                 gestures: str = "motionevent", coords: str = "pixel", lease=None,
                 lease_ttl=leases.DEFAULT_TTL):
        self.phone = phone
        self.holder = holder
        self.device = device
        self.rules = rules
        self.lease = lease
        self.lease_ttl = lease_ttl
        self.gate: InputGate | None = None  # the current action's
        self.rng = random.Random(seed)
        self.gestures = gestures  # "motionevent" (eased trajectories) or "swipe" (old phones)
        self.coords = coords      # for actions that carry no "coords" (a model's own convention)
        self._size = None

    def window_size(self) -> tuple[int, int]:
        if self._size is None:
            self._size = self.phone.window_size()
        return self._size

    # -- entry point ------------------------------------------------------------------------------

    def execute(self, action: dict, hierarchy_xml: str | None = None) -> ActionResult:
        """Validate, then run with every input audited. `hierarchy_xml`, the screen the action was
        decided on, is not what the audit judges: that is the screen just before each input (a
        stored dump may be minutes old)."""
        started = time.monotonic()
        result = ActionResult(ok=False)
        try:
            # Only actions with coordinates need the screen size; a terminate must work even
            # when the phone has gone away.
            pointed = isinstance(action, dict) and action.get("action") in POINTED_ACTIONS
            width, height = self.window_size() if pointed else (1, 1)
            if isinstance(action, dict) and "coords" not in action and self.coords != "pixel":
                action = {**action, "coords": self.coords}
            normalized = normalize_action(action, width, height)
        except ActionError as error:
            result.error = str(error)
            return self._finish(result, started)
        except PhoneUnavailable as error:
            result.error, result.phone_lost = str(error), True
            return self._finish(result, started)
        result.action = normalized
        result.note = normalized.get("note", "")
        name = normalized["action"]
        run_started = time.monotonic()
        try:
            if name == "take_notes":  # no input: judged on its text alone
                decision = audit_and_record(normalized, "", phone=self.phone, device=self.device,
                                            holder=self.holder, rules=self.rules)
                if decision.blocked:
                    raise InputBlocked(decision)
            elif name in SCREEN_ACTIONS:
                self.gate = InputGate(self.phone, rules=self.rules, device=self.device, holder=self.holder,
                                      lease=self.lease, lease_ttl=self.lease_ttl, commands=result.commands)
            getattr(self, f"_do_{name}")(normalized, result)
            result.ok = not result.error
        except InputBlocked as blocked:
            result.blocked, result.reason = True, blocked.decision.reason
            result.element = blocked.decision.element
        except LeaseLost as lost:
            result.error, result.lease_lost = str(lost), True
        except (ActionFailed, CompositeError, PhoneUnavailable) as error:
            result.error = str(error)
            result.phone_lost = isinstance(error, PhoneUnavailable)
        audit_seconds = self.gate.audit_seconds if self.gate is not None else 0.0
        if self.gate is not None:
            result.timings["audit"] = int(round(audit_seconds * 1000))
            if result.element is None:  # what the action itself acted on (not a launcher icon of `open`)
                result.element = next((decision.element for audited, decision in self.gate.decisions
                                       if audited["action"] == name and decision.element), None)
        result.timings["execute"] = max(_ms(run_started) - int(round(audit_seconds * 1000)), 0)
        self.gate = None
        return self._finish(result, started)

    def _finish(self, result, started):
        result.timings["total"] = _ms(started)
        return result

    def _shell(self, result, command: str, timeout: float = 30) -> tuple[int, str]:
        """A command that is not input (sleep, saving a screenshot file)."""
        result.commands.append(command)
        return self.phone.shell_result(command, timeout=timeout)

    def _check(self, result, command: str, timeout: float = 30) -> str:
        return _checked(command, *self._shell(result, command, timeout))

    def _input(self, action: dict, command: str, timeout: float = 30) -> tuple[int, str]:
        """Input, through the gate: audited as `action` on the screen as it is now."""
        return self.gate.send(action, command, timeout=timeout)

    def _input_checked(self, action: dict, command: str, timeout: float = 30) -> str:
        return _checked(command, *self._input(action, command, timeout))

    # -- tap-level ----------------------------------------------------------------------------------

    def _do_click(self, action, result):
        x, y = action["point"]
        self._input_checked(action, f"input tap {x} {y}")

    def _do_double_click(self, action, result):
        # One shell line, so the gap between the taps is the phone's, not the network's.
        self._input_checked(action, touch.double_tap_command(*action["point"]))

    def _do_type(self, action, result):
        if action.get("point"):
            x, y = action["point"]
            self._input_checked(action, f"input tap {x} {y}")  # judged: the field at the point, the text
            time.sleep(settings.INPUT_FOCUS_SETTLE_S)  # the keyboard comes up before the text goes in
        # What follows goes into the focused field, judged afresh after each input.
        into_focus = {key: value for key, value in action.items() if key not in ("point", "coords")}
        for index, line in enumerate(action["text"].split("\n")):
            if index:
                self._input_checked(into_focus, "input keyevent KEYCODE_ENTER")
            if line:
                self._type_line(into_focus, line)

    def _type_line(self, action, text: str):
        """`input text` for plain ASCII (space as %s, shell-quoted); anything else (unicode, a
        literal '%s') goes through the ADB keyboard broadcast, base64 so no byte is mangled."""
        if PLAIN_TEXT.match(text) and "%s" not in text:
            for start in range(0, len(text), TEXT_CHUNK):
                chunk = text[start:start + TEXT_CHUNK].replace(" ", "%s")
                self._input_checked(action, f"input text {shell_quote(chunk)}")
            return
        encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
        self._input_checked(action, f"am broadcast -a ADB_INPUT_B64 --es msg {encoded}")

    def _do_system_button(self, action, result):
        button = action["button"]
        code, output = self._input(action, f"input keyevent {SYSTEM_BUTTONS[button]}")
        if code == 0 and "Error" not in output:
            return
        if button == "screenshot":  # phones without a SYSRQ screenshot key: save one the same way
            stamp = time.strftime("%Y%m%d-%H%M%S")
            path = f"{SCREENSHOT_DIR}/Screenshot_{stamp}.png"
            self._check(result, f"mkdir -p {SCREENSHOT_DIR}; screencap -p {path}")
            result.note = _join(result.note, f"screenshot saved to {path}")
            return
        raise ActionFailed(f"the phone refused {SYSTEM_BUTTONS[button]}: {output.strip()[-200:]}")

    # -- gesture-level --------------------------------------------------------------------------

    def _stroke(self, action, points, fallback: str):
        if self.gestures == "motionevent":
            code, output = self._input(action, touch.stroke_command(points), timeout=60)
            if code == 0 and "Error" not in output:
                return
            if "motionevent" not in output and "Unknown" not in output:
                raise ActionFailed(f"gesture failed ({code}): {output.strip()[-300:]}")
            self.gestures = "swipe"  # this phone has no `input motionevent`; remember it
        self._input_checked(action, fallback, timeout=60)

    def _do_swipe(self, action, result):
        width, height = self.window_size()
        points = touch.plan_swipe(action["start"], action["end"], action.get("duration_ms"), self.rng, width, height)
        action["duration_ms"] = touch.duration_of(points)
        self._stroke(action, points, touch.swipe_fallback_command(action["start"], action["end"],
                                                                   action["duration_ms"]))

    def _do_drag(self, action, result):
        width, height = self.window_size()
        points = touch.plan_drag(action["start"], action["end"], action.get("duration_ms"), self.rng, width, height)
        action["duration_ms"] = touch.duration_of(points)
        (x1, y1), (x2, y2) = action["start"], action["end"]
        self._stroke(action, points, f"input draganddrop {x1} {y1} {x2} {y2} {action['duration_ms']}")

    def _do_long_press(self, action, result):
        width, height = self.window_size()
        hold = action.get("duration_ms") or 800
        points = touch.plan_long_press(action["point"], hold, self.rng, width, height)
        x, y = action["point"]
        self._stroke(action, points, f"input swipe {x} {y} {x} {y} {hold}")

    # -- composite -------------------------------------------------------------------------------

    def _do_open(self, action, result):
        opened = open_app(self.gate, action["app"])
        action["package"] = opened["package"]
        result.note = _join(result.note, f"opened {opened['package']} ({opened['why']})")

    def _do_set_scroll_widget(self, action, result):
        width, height = self.window_size()
        outcome = set_scroll_widget(self.gate, action["point"], action["value"], self.rng, width, height)
        result.note = _join(result.note, f"wheel set to {outcome['value']} in {outcome['swipes']} swipes")

    def _do_take_notes(self, action, result):
        reasons = secrets_in(action["text"])
        if reasons:  # Table 3 forbids these whatever the rules say
            result.blocked = True
            result.reason = "take_notes refused: " + " and ".join(reasons)
            result.error = result.reason
            record_block(action, AuditDecision(False, reason=result.reason), phone=self.phone,
                         device=self.device, holder=self.holder)
            return
        result.control = {"kind": "take_notes", "text": action["text"]}

    # -- control and handoff -------------------------------------------------------------------------

    def _do_wait(self, action, result):
        # Time passes on the phone (a real phone sleeps; the virtual farm's clock moves on).
        seconds = action["seconds"]
        if seconds > 0:
            self._check(result, f"sleep {seconds:g}", timeout=seconds + 15)
        result.control = {"kind": "wait", "seconds": seconds}

    def _do_terminate(self, action, result):
        result.control = {"kind": "terminate", "status": action["status"], "answer": action.get("answer", "")}

    def _do_clarify(self, action, result):
        result.control = {"kind": "clarify", "question": action["question"], "choices": action.get("choices", [])}

    def _do_call_user(self, action, result):
        result.control = {"kind": "call_user", "reason": action["reason"]}


def execute_action(phone, action: dict, hierarchy_xml: str | None = None, **options) -> ActionResult:
    return ActionExecutor(phone, **options).execute(action, hierarchy_xml)


def _checked(command: str, code: int, output: str) -> str:
    if code != 0 or output.lstrip().startswith("Error"):
        raise ActionFailed(f"`{command[:80]}` failed ({code}): {output.strip()[-300:]}")
    return output


def _ms(since: float) -> int:
    return int(round((time.monotonic() - since) * 1000))


def _join(*parts) -> str:
    return "; ".join(part for part in parts if part)

