"""Level 1 of the cascaded failure attribution (§2.5.1): the environment-failure check.

Objective, device-side facts first: system pop-up interception, network anomalies, missing
permissions, app crashes, an expired login or another account state that needs a person. They
come from the anomaly records of collection (Step.anomaly: what was injected before a step), from
what the screens show (texts and resource-ids of the real dialogs and error pages), from
how collection stopped, and from the judges' own Env_ERROR findings.

An interference is the failure's cause when the agent never got past it, when it could not be got
past by the agent at all (network down, the app killed, a login or verification that needs a
person), or when it derailed the agent (a tap on the ad instead of its Close, a permission denied,
a dialog that held the agent for several steps). A pop-up the agent dismissed at once is recorded
as seen and handled, and the cascade goes on: a network cut mid-task and lost state tracking look
alike in the action history, so a record or a marker decides, never the look of the history.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from devices.uitree import UiNode, all_nodes
from flywheel.rules.attribution_trace import (
    CLEAR,
    FOUND,
    Finding,
    Trace,
    good_prefix_before,
    hit_node,
    root_of,
    roots_of,
)
from flywheel.rules.stops import CUT_SHORT_BY_THE_ENVIRONMENT

POPUP, PERMISSION, NETWORK, CRASH = "popup", "permission", "network", "crash"
LOGIN_EXPIRED, ACCOUNT_STATE = "login_expired", "account_state"
INTERRUPTED, ENVIRONMENT = "interrupted", "environment"
LEVEL1_CAUSES = (POPUP, PERMISSION, NETWORK, CRASH, LOGIN_EXPIRED, ACCOUNT_STATE, INTERRUPTED, ENVIRONMENT)
NOT_GOT_PAST = (NETWORK, CRASH, LOGIN_EXPIRED, ACCOUNT_STATE)  # no agent action clears these
LINGER = 3                 # a pop-up on this many screens in a row held the agent up
HEADS_UP_STEPS = 3         # a heads-up notification hides itself after this many inputs
DENY_WORDS = ("don't allow", "do not allow", "deny")
DISMISS_WORDS = ("close", "cancel", "not now", "later", "dismiss", "no thanks", "skip", "got it", "ok",
                 "wait", "allow", "while using the app", "only this time", "continue")


@dataclass(frozen=True)
class Marker:
    type: str
    cause: str
    texts: tuple = ()         # lower-case pieces of a node's text or content-desc
    ids: tuple = ()           # pieces of a node's resource-id
    pattern: str = ""         # a regex over a node's lower-case text


MARKERS = (
    Marker("app_crash", CRASH, texts=("keeps stopping", "has stopped")),
    Marker("app_not_responding", CRASH, texts=("isn't responding", "is not responding")),
    Marker("network_unavailable", NETWORK, texts=("network unavailable", "no internet connection",
                                                  "no network connection", "you're offline", "network error")),
    Marker("slow_network", NETWORK, texts=("loading…", "loading..."), ids=(":id/loading",)),
    Marker("permission_dialog", PERMISSION, ids=("permission_allow", "permission_deny", "grant_dialog"),
           pattern=r"^allow .{1,80} to .{1,120}\?$"),
    Marker("login_expired", LOGIN_EXPIRED, texts=("login expired", "session has expired", "please log in again"),
           ids=(":id/btn_relogin",)),
    Marker("captcha", ACCOUNT_STATE, texts=("security verification", "slide to verify"), ids=(":id/captcha_slider",)),
    Marker("risk_control", ACCOUNT_STATE, texts=("unusual activity detected",), ids=(":id/sms_code",)),
    Marker("payment_authentication", ACCOUNT_STATE, texts=("enter payment password",), ids=(":id/pay_password",)),
    # The other states a real farm meets and cannot inject (§2.3.7; flywheel/rules/handback.py).
    Marker("forced_update", ACCOUNT_STATE, texts=("update required", "no longer supported"),
           ids=(":id/btn_force_update",)),
    Marker("region_wall", ACCOUNT_STATE, texts=("not available in your region", "not available in your country"),
           ids=(":id/region_notice",)),
    Marker("identity_verification", ACCOUNT_STATE, texts=("verify your identity", "real-name verification"),
           ids=(":id/btn_start_verify",)),
    Marker("account_restricted", ACCOUNT_STATE, texts=("account restricted", "account has been temporarily restricted",
                                                       "account has been restricted", "account has been suspended"),
           ids=(":id/btn_contact_support",)),
    Marker("device_conflict", ACCOUNT_STATE, texts=("signed in on another device", "logged in on another device"),
           ids=(":id/btn_signin_again",)),
    Marker("age_verification", ACCOUNT_STATE, texts=("age verification", "18 or older"), ids=(":id/btn_verify_age",)),
    Marker("service_maintenance", ACCOUNT_STATE, texts=("under maintenance",), ids=(":id/btn_retry_maintenance",)),
    Marker("rating_prompt", POPUP, texts=("rate us",), ids=(":id/btn_rate",), pattern=r"^enjoying .{1,60}\?$"),
    Marker("ad_popup", POPUP, texts=("advertisement",), ids=(":id/ad_close", ":id/ad_label")),
    Marker("update_prompt", POPUP, texts=("new version available",), ids=(":id/btn_update",)),
    Marker("low_battery", POPUP, texts=("battery may run out soon",)),
    Marker("storage_full", POPUP, texts=("storage space running out", "storage space is running out")),
)
# Anomaly kinds of devices/anomaly_injection.py and of the virtual farm → (type, cause).
RECORD_TYPES = {
    "notification": ("notification", POPUP), "push_notification": ("notification", POPUP),
    "low_battery": ("low_battery", POPUP), "storage_full": ("storage_full", POPUP),
    "ad_popup": ("ad_popup", POPUP), "update_prompt": ("update_prompt", POPUP),
    "permission_dialog": ("permission_dialog", PERMISSION),
    "network_off": ("network_off", NETWORK), "airplane_mode": ("airplane_mode", NETWORK),
    "network_unavailable": ("network_unavailable", NETWORK), "slow_network": ("slow_network", NETWORK),
    "app_crash": ("app_crash", CRASH), "app_not_responding": ("app_not_responding", CRASH),
    "login_expired": ("login_expired", LOGIN_EXPIRED), "captcha": ("captcha", ACCOUNT_STATE),
    "risk_control": ("risk_control", ACCOUNT_STATE), "payment_authentication": ("payment_authentication", ACCOUNT_STATE),
    **{kind: (kind, ACCOUNT_STATE) for kind in ("forced_update", "region_wall", "identity_verification",
                                                "account_restricted", "device_conflict", "age_verification",
                                                "service_maintenance")},
    "rating_prompt": ("rating_prompt", POPUP),
}


def _marker_hit(node: UiNode, marker: Marker) -> bool:
    own = f"{node.text} {node.desc}".lower().strip()
    if own and any(piece in own for piece in marker.texts):
        return True
    if node.resource_id and any(piece in node.resource_id for piece in marker.ids):
        return True
    return bool(marker.pattern and node.text and re.search(marker.pattern, node.text.lower().strip()))


def screen_interference(roots: list[UiNode]) -> dict:
    """What interferes on one screen: {cause: (type, [marker nodes])}, the first marker per cause."""
    seen = {}
    for node in all_nodes(roots):
        for marker in MARKERS:
            if marker.cause in seen and seen[marker.cause][0] != marker.type:
                continue
            if _marker_hit(node, marker):
                seen.setdefault(marker.cause, (marker.type, []))[1].append(node)
    return seen


def record_type(anomaly: dict | None) -> tuple[str, str] | None:
    if not isinstance(anomaly, dict) or not anomaly.get("kind"):
        return None
    kind = str(anomaly["kind"])
    return RECORD_TYPES.get(kind, (kind, POPUP))


@dataclass
class Episode:
    """One interference: from the step it first showed (or was injected before) while it lasted."""

    cause: str
    type: str
    steps: list = field(default_factory=list)
    source: set = field(default_factory=set)
    package: str = ""
    nodes: dict = field(default_factory=dict)      # step index -> marker nodes on that screen
    attributable: bool = False
    reason: str = ""

    @property
    def start(self) -> int:
        return self.steps[0]

    @property
    def end(self) -> int:
        return self.steps[-1]

    def record(self) -> dict:
        return {"type": self.type, "cause": self.cause, "steps": list(self.steps), "source": sorted(self.source),
                "attributable": self.attributable, "reason": self.reason}


def interference_episodes(trace: Trace) -> list[Episode]:
    """Every interference of the trajectory, in order, from records and screens."""
    episodes, open_ = [], {}
    previous_index, recent_heads_up = None, None
    for position, step in enumerate(trace.steps):
        roots = roots_of(step)
        seen = screen_interference(roots)
        recorded = record_type(step.anomaly)
        if recorded and recorded[0] == "notification":
            recent_heads_up = position
        if recent_heads_up is not None and position - recent_heads_up < HEADS_UP_STEPS:
            cards = [n for n in all_nodes(roots) if n.resource_id.endswith("expandableNotificationRow")]
            if cards and POPUP not in seen:
                seen[POPUP] = ("notification", cards)
        causes = dict(seen)
        if recorded and recorded[1] not in causes:
            causes[recorded[1]] = (recorded[0], [])
        for cause, (kind, nodes) in causes.items():
            episode = open_.get(cause)
            if episode is None or episode.end != previous_index:
                episode = Episode(cause=cause, type=kind)
                episodes.append(episode)
                open_[cause] = episode
            if recorded and recorded[1] == cause:
                episode.type = recorded[0]
                episode.source.add("record")
                episode.package = episode.package or str(step.anomaly.get("package") or "")
            if nodes:
                episode.source.add("screen")
                episode.nodes[step.index] = nodes
                episode.package = episode.package or nodes[0].package
            episode.steps.append(step.index)
        previous_index = step.index
    for episode in episodes:
        episode.attributable, episode.reason = interference_is_cause(episode, trace)
    return episodes


def _control_words(node: UiNode) -> str:
    return f"{node.all_text()} {node.resource_id.rsplit('/', 1)[-1].replace('_', ' ')}".lower()


def _says(words: str, vocabulary: tuple) -> bool:
    return any(re.search(rf"(?<![\w']){re.escape(w)}(?![\w'])", words) for w in vocabulary)


def interference_is_cause(episode: Episode, trace: Trace) -> tuple[bool, str]:
    """(whether the interference explains the failure, why)."""
    where = f"{episode.type.replace('_', ' ')} at step {episode.start}"
    last_step = trace.steps[-1].index if trace.steps else None
    if episode.cause == NETWORK and episode.type == "slow_network":
        if episode.end == last_step or len(episode.steps) >= LINGER:
            return True, f"{where}: the page never finished loading while the agent acted"
        return False, f"{where}: loaded after {len(episode.steps)} look(s), not the cause"
    if episode.cause == ACCOUNT_STATE and episode.type == "payment_authentication" and trace.spec.handoff:
        return False, f"{where}: the payment screen the task hands over at ({trace.spec.handoff})"
    if episode.cause in NOT_GOT_PAST:
        return True, f"{where}: {'never got past it' if episode.end == last_step else 'no agent action undoes it'}"
    by_index = {s.index: s for s in trace.steps}
    if not any(by_index[i].hierarchy for i in episode.steps):
        return True, f"{where}: no screen was stored to show it was handled"
    on_popup = False
    for index in episode.steps:
        on_popup, hit = _touched(by_index[index], episode.nodes.get(index) or [])
        words = _control_words(hit) if hit is not None else ""
        if on_popup and _says(words, DENY_WORDS):
            return True, f"{where}: the agent denied the permission (step {index})"
        if on_popup and not _says(words, DISMISS_WORDS):
            return True, (f"{where}: the agent tapped \"{hit.all_text()[:40] or hit.resource_id}\" on it instead of "
                          f"closing it (step {index})")
    if episode.type == "notification":
        return False, f"{where}: not touched; a heads-up notification hides itself, not the cause"
    action = by_index[episode.end].action or {}
    if episode.end == last_step and action.get("action") != "system_button" and not on_popup:
        return True, f"{where}: the agent never got past it"
    if len(episode.steps) >= LINGER:
        return True, f"{where}: it held the agent for {len(episode.steps)} steps"
    how = "dismissed" if on_popup or action.get("action") in ("system_button", "swipe") else "got past"
    return False, f"{where}: {how} at step {episode.end}, not the cause"


def _touched(step, nodes: list) -> tuple[bool, UiNode | None]:
    """(whether the step's tap landed on the interference, the element it hit)."""
    hit = hit_node(step)
    if hit is None or not nodes:
        return False, hit
    roots = roots_of(step)
    windows = {root_of(roots, n) for n in nodes}
    return root_of(roots, hit) in windows or any(n.contains(*hit.center) for n in nodes), hit


def _vote_cause(text: str) -> str:
    lowered = text.lower()
    for words, cause in ((("network", "internet", "wifi"), NETWORK), (("crash", "responding"), CRASH),
                         (("permission",), PERMISSION), (("login",), LOGIN_EXPIRED),
                         (("unreachable",), INTERRUPTED), (("pop-up", "popup", "dialog"), POPUP)):
        if any(word in lowered for word in words):
            return cause
    return ENVIRONMENT


def network_state(trace: Trace, episodes: list[Episode]) -> str:
    """off / slow / on (screens and records show no trouble) / unknown (nothing readable)."""
    network = [e for e in episodes if e.cause == NETWORK]
    judged = " ".join(str((v.details or {}).get("environment") or "") for v in trace.votes).lower()
    if any(e.type != "slow_network" for e in network) or "data off" in judged:
        return "off"
    if network:
        return "slow"
    return "on" if any(s.hierarchy for s in trace.steps) else "unknown"


def environment_failure_check(trace: Trace) -> Finding:
    """Level 1: the first interference that explains the failure, with its features (type,
    timing, network state, package); else the device or operator cut collection short; else the
    judges' or a person's environment finding; else clear. A person who adjudicated the
    trajectory "wrong" (not "environment issue") saw the same screens: their word stands."""
    finding = _environment_finding(trace)
    if finding.found and trace.adjudication == "wrong":
        return Finding(1, CLEAR, "", f"a person adjudicated it the model's failure, not the environment's "
                       f"(seen: {finding.detail})", steps=finding.steps, check="environment",
                       features={"network": finding.features.get("network", "unknown"),
                                 "interruptions": finding.features.get("interruptions", [])})
    return finding


def _environment_finding(trace: Trace) -> Finding:
    episodes = interference_episodes(trace)
    state = network_state(trace, episodes)
    seen = [e.record() for e in episodes]
    features = {"network": state, "interruptions": seen}
    cause_episode = next((e for e in episodes if e.attributable), None)
    if cause_episode is not None:
        features.update(type=cause_episode.type, step=cause_episode.start, package=cause_episode.package,
                        source="+".join(sorted(cause_episode.source)))
        cause = cause_episode.cause
        if "denied the permission" in cause_episode.reason:
            features["type"] = "permission_denied"
        return Finding(1, FOUND, cause, cause_episode.reason, steps=list(cause_episode.steps), check="environment",
                       features=features, first_bad_step=cause_episode.start,
                       good_prefix=good_prefix_before(trace, cause_episode.start),
                       interruption_known=True)
    last = trace.steps[-1].index if trace.steps else None
    if trace.stop_kind in CUT_SHORT_BY_THE_ENVIRONMENT:
        features.update(type=str(trace.stop_kind), step=last, package=trace.steps[-1].package if trace.steps else "",
                        source="stop_reason")
        return Finding(1, FOUND, INTERRUPTED, f"collection was cut short: {trace.stop_reason}",
                       steps=[last] if last is not None else [], check="environment", features=features)
    for vote in trace.votes:
        if vote.vote == "env_error":
            said = str((vote.details or {}).get("environment") or vote.rationale)
            features.update(type=said[:80], step=last, package=trace.steps[-1].package if trace.steps else "",
                            source=f"system {vote.system}")
            return Finding(1, FOUND, _vote_cause(said), f"System {vote.system} found the environment: {said}",
                           steps=[last] if last is not None else [], check="environment", features=features)
    if trace.adjudication == "environment":
        features.update(type="adjudicated", step=last, package="", source="adjudication")
        return Finding(1, FOUND, ENVIRONMENT, "a person adjudicated it an environment issue",
                       check="environment", features=features)
    handled = "; ".join(e.reason for e in episodes)
    detail = (f"no interference explains the failure ({handled})" if episodes
              else "no pop-up, network, permission, crash or login trouble on any screen or record")
    if not trace.steps:
        detail = "the trajectory has no steps: no screen or anomaly record to examine"
    elif not any(s.hierarchy for s in trace.steps):
        detail += " (no screen dump could be read)"
    return Finding(1, CLEAR, "", detail, steps=[i for e in episodes for i in e.steps], check="environment",
                   features=features)
