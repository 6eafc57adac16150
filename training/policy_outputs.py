"""What the policy answered at a step that nothing ran: output that did not parse, or an action the
executor could not carry out. The cascade reward (training/step_judge.py, Xiaomi-GUI-0 §4.3) pays
−1.0 for either, so they become samples; training/rl_data.py trains on the raw text of the first.

Facts only, from typed fields: the trajectory's stop kind and the parse error the endpoint policy
keeps in the step's model_io (flywheel/policies/endpoint.py); no message text is matched.
"""
from __future__ import annotations

from flywheel.rules.stops import StopKind


def raw_output(step) -> str:
    """The text the policy answered at this step as its server returned it ("" when none was kept)."""
    try:
        content = (step.model_io or {})["response"]["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return ""
    if isinstance(content, list):  # some servers answer content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def unparsed(step) -> bool:
    """The policy answered, but its output did not parse into a protocol action (the endpoint policy
    keeps the parse error in model_io; an endpoint that failed leaves none)."""
    return (step.executed_action is None and step.proposed_action is None
            and "parse_error" in (step.model_io or {}) and bool(raw_output(step).strip()))


def ended_on_output(trajectory, steps: list):
    """The last step when the trajectory stopped on what the policy answered but nothing ran: output
    that did not parse (stop POLICY_ERROR) or an action the executor could not carry out
    (ACTION_FAILED; a lost lease or phone is no fault of the policy's and gives no sample). None else."""
    last = steps[-1] if steps else None
    if last is None or last.executed_action is not None:
        return None
    if trajectory.stop_kind == StopKind.POLICY_ERROR and unparsed(last):
        return last
    if (trajectory.stop_kind == StopKind.ACTION_FAILED and last.proposed_action
            and not (last.audit or {}).get("blocked")):
        return last
    return None
