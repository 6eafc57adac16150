"""Schema-guided collection (§2.3.4): follow the known path; ask before irreversible steps.

The known path reaches the policy through the prompt (agent_protocol.system_prompt). Before a tap
on an irreversible toggle or a system confirmation dialog, the policy must emit `clarify`; this
wrapper enforces that for any policy, and the run answers as the query's spec says.
"""
from devices.uitree import node_at, parse_hierarchy
from flywheel.policies.base import Proposal
from flywheel.policies.protocol import describe_action

CONFIRM_WORDS = ("ok", "confirm", "reset", "erase", "delete", "remove", "yes", "continue", "turn off",
                 "disable", "unpair", "forget", "clear", "sign out", "log out")
DIALOG_BUTTON_IDS = ("android:id/button1", "android:id/button2")


def needs_confirmation(action: dict, hierarchy_xml: str) -> str:
    """Why this action needs the user's confirmation first ('' when it does not)."""
    if action.get("action") not in ("click", "long_press") or not action.get("point"):
        return ""
    node = node_at(parse_hierarchy(hierarchy_xml), *action["point"])
    if node is None:
        return ""
    label = node.all_text().strip().lower()
    if node.resource_id in DIALOG_BUTTON_IDS or "dialog" in node.resource_id.lower():
        if any(word in label for word in CONFIRM_WORDS):
            return f"a system confirmation dialog ('{node.all_text().strip()}')"
    if "switch" in node.cls.lower() or "toggle" in node.resource_id.lower():
        if any(word in label for word in ("reset", "erase", "delete", "factory", "wipe")):
            return f"an irreversible toggle ('{node.all_text().strip()}')"
    return ""


class SchemaGuidedPolicy:
    """Wraps a policy: a tap that needs confirmation becomes a `clarify` until answered."""

    def __init__(self, inner, confirmed: set | None = None):
        self.inner = inner
        self.name = f"{getattr(inner, 'name', 'policy')}+schema"
        self.confirmed = confirmed if confirmed is not None else set()

    def propose(self, state) -> Proposal:
        proposal = self.inner.propose(state)
        reason = needs_confirmation(proposal.action, state.hierarchy_xml)
        key = (reason, tuple(proposal.action.get("point") or ()))
        if reason and key not in self.confirmed:
            self.confirmed.add(key)  # once the run answers, the same step goes ahead
            question = f"About to {describe_action(proposal.action)} on {reason}. Go ahead?"
            cot = {**proposal.cot, "Decision": f"Ask the user first: {question}"}
            return Proposal(cot=cot, action={"action": "clarify", "question": question,
                                             "choices": ["yes", "no"]},
                            confidence=proposal.confidence, model_io=proposal.model_io,
                            policy=self.name)
        return proposal
