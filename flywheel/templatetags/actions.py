"""`{{ step|action_text }}`: what a step did, in a few words a person reads at a glance.

    {"action": "click", "point": [540, 880]}   -> Tap at (540, 880)
    {"action": "open", "app": "com.sim.translator"} -> Open Translator
    a step the safety audit blocked           -> blocked: <reason>
    a step whose action failed                -> failed: <error>
    a step not executed yet                   -> …
    None, text, anything else                 -> –

Pages render whatever a step holds (old rows, half-written steps, odd model output), so the
filter never raises.
"""
from django import template

from flywheel.models import App
from flywheel.policies.protocol import describe_action

register = template.Library()

NOTHING = "–"
PENDING = "…"


@register.filter
def action_text(value):
    """Short words for an action dict, a step (its executed action or what stopped it) or an audit dict."""
    try:
        if hasattr(value, "executed_action"):  # a Step
            if isinstance(value.executed_action, dict):
                return _describe(value.executed_action)
            return _outcome(getattr(value, "audit", None)) or PENDING
        if isinstance(value, dict):
            if "action" in value:
                return _describe(value)
            return _outcome(value) or NOTHING
    except Exception:  # a page must render whatever a step holds
        pass
    return NOTHING


def _describe(action):
    try:
        app = action.get("app") or action.get("package")
        if action.get("action") == "open" and isinstance(app, str) and app:
            # The app by its name, not its package id (describe_action's sentence is the model's own).
            return f"Open {App.display_labels([app])[app]}"
        return describe_action(action)
    except (TypeError, ValueError, KeyError, IndexError):  # e.g. a point that is not two numbers
        return str(action.get("action") or NOTHING)


def _outcome(audit):
    """What happened instead, for a step that did not execute; None when the audit says nothing."""
    if not isinstance(audit, dict):
        return None
    if audit.get("blocked"):
        return f"blocked: {audit['reason']}" if audit.get("reason") else "blocked"
    if audit.get("error"):
        return f"failed: {audit['error']}"
    return None
