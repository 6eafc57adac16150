"""Anomalies real phone farms meet (report §2.3.7; Xiaomi-GUI-0 App. B.1 handoff kinds).

Each kind looks like the real thing in screenshot and hierarchy (texts, resource-ids, owning
package) and is handled the real way. Injection: `am broadcast -a com.sim.ANOMALY --es kind K
[--es package P]`, the ordinary ADB ways (see phone/shell), an app action, or a seeded random
rate. System anomalies are windows above everything; in-app ones belong to a task and come back
when the task does.

Besides injection, a phone shows hand-back states on its own schedule (`handback_rate`): real apps
put up forced updates, region walls, identity checks, ... without anyone asking, so this also runs
in real-phone mode, where the com.sim.ANOMALY broadcast reaches nobody.
"""
import random
from dataclasses import dataclass, field

from simfarm import anomaly_views as views

# kind -> (scope, handoff): handoff kinds need a person (agents should stop and call the user).
KINDS = {
    "permission_dialog": ("system", False),
    "ad_popup": ("app", False),
    "push_notification": ("top", False),
    "low_battery": ("system", False),
    "network_unavailable": ("page", False),
    "slow_network": ("page", False),
    "app_crash": ("system", False),
    "app_not_responding": ("system", False),
    "login_expired": ("app", True),
    "captcha": ("app", True),
    "payment_authentication": ("app", True),
    "risk_control": ("app", True),
    "update_prompt": ("app", False),
    "storage_full": ("system", False),
    # Hand-back states real apps show over themselves (drawn in handback_views.py).
    "forced_update": ("app", True),
    "region_wall": ("app", True),
    "identity_verification": ("app", True),
    "account_restricted": ("app", True),
    "device_conflict": ("app", True),
    "age_verification": ("app", True),
    "service_maintenance": ("app", True),
    "rating_prompt": ("app", False),
}
RANDOM_KINDS = ("permission_dialog", "ad_popup", "push_notification", "low_battery", "network_unavailable",
                "slow_network", "update_prompt", "login_expired", "captcha")
# What the phone's own schedule (handback_rate) puts over the foreground app: every handoff kind,
# plus the skippable in-app kinds an agent must learn to pass rather than hand back.
HANDBACK_SCHEDULE_KINDS = tuple(kind for kind, (_, handoff) in KINDS.items() if handoff) + (
    "ad_popup", "update_prompt", "rating_prompt")
LOGS_OUT = ("login_expired", "device_conflict")  # the app's session ends when these appear
HEADS_UP_ACTIONS = 3          # a heads-up notification hides itself after this many inputs
SLOW_NETWORK_OBSERVATIONS = 2  # "Loading…" stays for this many screenshots/dumps


@dataclass
class Anomaly:
    kind: str
    package: str | None = None
    params: dict = field(default_factory=dict)
    typed: str = ""
    countdown: int = 0


class Anomalies:
    def __init__(self, engine):
        self.engine = engine
        self.system: list[Anomaly] = []     # system windows, newest last
        self.heads_up: Anomaly | None = None
        self.pending: dict[str | None, Anomaly] = {}  # in-app anomalies waiting for their app
        self.rate = 0.0
        self.rng = random.Random(0)
        self.handback_rate = 0.0
        self.handback_rng = random.Random(0)  # its own stream: anomaly_rate's seeded runs stay as they were

    # -- injection -----------------------------------------------------------------------------

    def configure(self, rate: float, seed: int):
        self.rate, self.rng = rate, random.Random(seed)

    def configure_handback(self, rate: float, seed: int):
        self.handback_rate, self.handback_rng = rate, random.Random(seed)

    def inject(self, kind: str, package: str | None = None, **params) -> str | None:
        """Show an anomaly; returns an error text or None."""
        if kind not in KINDS:
            return f"unknown anomaly kind {kind!r}; known: {', '.join(KINDS)}"
        engine = self.engine
        if package is None and engine.foreground is not None:
            package = engine.foreground.package
        scope = KINDS[kind][0]
        anomaly = Anomaly(kind, package, {k: v for k, v in params.items() if v is not None})
        if scope in ("system",):
            if kind in ("permission_dialog", "app_crash", "app_not_responding") and package is None:
                return f"{kind} needs an app: pass --es package PKG or open an app first"
            if kind == "low_battery":
                engine.phone.battery_level = min(engine.phone.battery_level, int(params.get("level") or 15))
            self.system.append(anomaly)
        elif scope == "top":
            anomaly.countdown = HEADS_UP_ACTIONS
            title = params.get("title") or "New message"
            text = params.get("text") or "You have 1 new message"
            anomaly.params.update(title=title, text=text)
            engine.phone.post_notification(package or "com.android.shell", title, text, notify_only=True)
            self.heads_up = anomaly
        else:
            if kind == "slow_network":
                anomaly.countdown = SLOW_NETWORK_OBSERVATIONS
            if kind in LOGS_OUT and package:
                state = engine.phone.app_state(package)
                if "logged_in" in state:
                    state["logged_in"] = False
            task = engine.task_of(package) if package else None
            if task is not None:
                task.anomaly = anomaly
            else:
                self.pending[package] = anomaly
        engine.changed()
        return None

    def clear(self):
        self.system.clear()
        self.heads_up = None
        self.pending.clear()
        for task in self.engine.tasks:
            task.anomaly = None
        self.engine.changed()

    def active(self) -> list[str]:
        kinds = [a.kind for a in self.system]
        if self.heads_up:
            kinds.append(self.heads_up.kind)
        task = self.engine.foreground
        if task is not None and self.engine.surface == "app":
            if task.anomaly:
                kinds.append(task.anomaly.kind)
            elif self.engine.phone.offline and self.engine.apps[task.package].network:
                kinds.append("network_unavailable")
        return kinds

    # -- lifecycle hooks from the engine ---------------------------------------------------------

    def on_app_opened(self, task):
        pending = self.pending.pop(task.package, None) or self.pending.pop(None, None)
        if pending is not None:
            pending.package = task.package
            task.anomaly = pending

    def on_app_stopped(self, package):
        self.system = [a for a in self.system if a.package != package or a.kind in ("low_battery", "storage_full")]
        self.pending.pop(package, None)

    def on_home(self):
        # Home leaves app-owned system dialogs (crash, permission) in place, as Android does.
        pass

    def before_action(self):
        pass

    def after_action(self):
        if self.heads_up is not None:
            self.heads_up.countdown -= 1
            if self.heads_up.countdown <= 0:
                self.heads_up = None
                self.engine.changed()
        if self.rate and self.rng.random() < self.rate:
            self._inject_random()
        self._schedule_handback()

    def _inject_random(self):
        kind = self.rng.choice(RANDOM_KINDS)
        if KINDS[kind][0] != "top" and self.engine.foreground is None:
            return
        self.inject(kind)

    def _schedule_handback(self):
        """The phone's own hand-back states: only over a third-party app in front that shows none
        already (a system app such as Settings never walls a region or asks for a login)."""
        engine = self.engine
        task = engine.foreground
        if not self.handback_rate or engine.surface != "app" or task is None or task.anomaly is not None:
            return
        app = engine.apps.get(task.package)
        if app is None or app.system:
            return
        if self.handback_rng.random() < self.handback_rate:
            self.inject(self.handback_rng.choice(HANDBACK_SCHEDULE_KINDS), package=task.package)

    def observed(self):
        """A screenshot or dump happened: slow pages finish loading after a few looks."""
        task = self.engine.foreground
        if task is not None and task.anomaly is not None and task.anomaly.kind == "slow_network":
            task.anomaly.countdown -= 1
            if task.anomaly.countdown <= 0:
                task.anomaly = None
                self.engine.changed()

    def time_passed(self, seconds: float):
        task = self.engine.foreground
        if seconds >= 1 and task is not None and task.anomaly is not None and task.anomaly.kind == "slow_network":
            task.anomaly = None
            self.engine.changed()

    # -- what the engine asks ----------------------------------------------------------------------

    def _app_anomaly(self):
        engine = self.engine
        if engine.surface != "app" or engine.foreground is None:
            return None
        anomaly = engine.foreground.anomaly
        return anomaly if anomaly is not None and KINDS[anomaly.kind][0] == "app" else None

    def covers_app(self) -> bool:
        return bool(self.system) or self._app_anomaly() is not None

    def page_placeholder(self, task, ctx):
        anomaly = task.anomaly
        offline = self.engine.phone.offline and self.engine.apps[task.package].network
        if anomaly is not None and anomaly.kind == "slow_network":
            return lambda top, bottom: views.loading_body(self.engine.metrics, task.package, top, bottom)
        if offline or (anomaly is not None and anomaly.kind == "network_unavailable"):
            return lambda top, bottom: views.network_body(self.engine.metrics, task.package, top, bottom,
                                                          lambda *a: self.retry(task))
        return None

    def retry(self, task):
        if self.engine.phone.offline:
            self.engine.show_toast("No internet connection")
            return
        if task.anomaly is not None and task.anomaly.kind == "network_unavailable":
            task.anomaly = None
        self.engine.changed()

    def windows(self):
        out = []
        app_anomaly = self._app_anomaly()
        if app_anomaly is not None:
            out.append(views.build(self, app_anomaly))
        for anomaly in self.system:
            out.append(views.build(self, anomaly))
        return out

    def top_windows(self):
        return [views.heads_up(self, self.heads_up)] if self.heads_up is not None else []

    def focus(self):
        for anomaly in reversed(self.system):
            return views.focus_of(self, anomaly)
        anomaly = self._app_anomaly()
        if anomaly is not None:
            return views.focus_of(self, anomaly)
        return None

    # -- handling ----------------------------------------------------------------------------------

    def dismiss(self, anomaly):
        if anomaly in self.system:
            self.system.remove(anomaly)
        elif self.heads_up is anomaly:
            self.heads_up = None
        else:
            for task in self.engine.tasks:
                if task.anomaly is anomaly:
                    task.anomaly = None
        self.engine.changed()

    def handle_back(self) -> bool:
        if self.system:
            anomaly = self.system[-1]
            views.on_back(self, anomaly)
            return True
        anomaly = self._app_anomaly()
        if anomaly is not None:
            views.on_back(self, anomaly)
            return True
        return False

    def handle_swipe(self, x1, y1, x2, y2) -> bool:
        heads_up = self.heads_up
        if heads_up is not None and y2 < y1 and y1 < self.engine.metrics.px(560):
            self.heads_up = None  # flick a heads-up notification away
            self.engine.changed()
            return True
        return False

    def type_text(self, text):
        target = self.system[-1] if self.system else self._app_anomaly()
        if target is not None and target.kind in ("payment_authentication", "risk_control"):
            views.type_code(self, target, text)
