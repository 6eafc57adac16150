"""An LLM judge for Systems B and C when an OpenAI-compatible endpoint is configured.

Set JUDGE_MODEL_VERSION to the name of a registered endpoint model version. System B then asks it
to decompose a query without milestones into ordered subgoals; System C asks it whether the
action–observation history is a coherent, complete path. Any failure of the judge falls back to
the rules (and says so), so evaluation never stops for an endpoint.

The path prompt carries the examples of the latest calibration round (§2.4.2): a few trajectories
the systems disagreed on, with the adjudicators' decisions, so the judge learns from its blind spots.
"""
from django.conf import settings

from devices.uitree import page_text, parse_hierarchy
from flywheel.endpoints.chat import JudgeUnavailable, ask_json
from flywheel.judging import SystemVote
from flywheel.judging.thresholds import judge_examples
from flywheel.models import ModelVersion
from flywheel.policies.protocol import describe_action

VOTES = ("true", "false", "env_error")


def judge_model_version():
    name = settings.JUDGE_MODEL_VERSION
    if not name:
        return None
    return ModelVersion.objects.filter(name=name, kind=ModelVersion.Kind.ENDPOINT).first()


def derive_milestones(version, goal: str) -> list[dict]:
    answer = ask_json(version,
                      "You decompose a phone task into an ordered checklist of milestones. Answer JSON: "
                      '{"milestones": [{"name": short name, "text_contains": text visible on screen '
                      "when the milestone is reached}]}",
                      f"Task: {goal}")
    milestones = [m for m in answer.get("milestones", []) if isinstance(m, dict)
                  and isinstance(m.get("text_contains") or m.get("text"), str)]
    if not milestones:
        raise JudgeUnavailable("the judge derived no usable milestone")
    return milestones


def history_text(view) -> str:
    lines = []
    for step in view.steps:
        screen = " | ".join(page_text(parse_hierarchy(step.hierarchy)).split("\n")[:25])
        action = describe_action(step.action) if step.action else "(no action)"
        lines.append(f"Step {step.index}: screen shows: {screen}\n  action: {action}")
    return "\n".join(lines)


def handoff_note(view) -> str:
    if view.expected_handoff:
        return f"The task expects the agent to end by handing over to the user ({view.expected_handoff}).\n"
    return ""


def calibration_examples() -> str:
    """The active calibration round's adjudicated cases as prompt text ('' when there is none)."""
    examples = judge_examples()
    if not examples:
        return ""
    lines = ["Cases people decided where automatic judges went wrong or disagreed; judge similar "
             "trajectories the way people did:"]
    for n, example in enumerate(examples, 1):
        note = f" (their note: {example['note']})" if example.get("note") else ""
        lines.append(f"Example {n}. Task: {example.get('goal', '')}\n{example.get('history', '')}\n"
                     f"People's verdict: {example.get('outcome', '')}{note}")
    return "\n".join(lines) + "\n\n"


def path_vote(version, view) -> SystemVote:
    final = " | ".join(page_text(parse_hierarchy(view.final_hierarchy)).split("\n")[:40])
    answer = ask_json(version,
                      "You judge whether a phone agent's trajectory completed the user's task by a "
                      "coherent path: no loops, no meaningless detours, no pseudo-completion (declaring "
                      "success while the goal state is not on screen). Handing over to the user "
                      "(call_user, clarify) is a correct ending where the task leaves a step to the "
                      "user, such as confirming a payment. Vote env_error when a pop-up, "
                      "network failure, missing permission or crash blocked it. Answer JSON: "
                      '{"vote": "true"|"false"|"env_error", "rationale": one sentence}',
                      f"{calibration_examples()}Task: {view.goal}\n{handoff_note(view)}\n{history_text(view)}\n\nFinal screen: {final}")
    vote = str(answer.get("vote", "")).lower()
    if vote not in VOTES:
        raise JudgeUnavailable(f"the judge voted {vote!r}")
    return SystemVote("C", vote, f"LLM judge: {answer.get('rationale', '')}"[:1000],
                      details={"judge": version.name})
