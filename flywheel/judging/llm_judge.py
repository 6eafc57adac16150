"""An LLM judge for Systems B and C when an OpenAI-compatible endpoint is configured.

Set JUDGE_MODEL_VERSION to the name of a registered endpoint model version. System B then asks it
to decompose a query without milestones into ordered subgoals; System C asks it whether the
action–observation history is a coherent, complete path. Any failure of the judge falls back to
the rules (and says so), so evaluation never stops for an endpoint. The path judge also sees the
frames (the last screens and those milestones are bound to) as image parts; a frame the store lost,
or a True it gives for blank frames as well, is an abstention with the reason (never a guess).

The path prompt carries the examples of the latest calibration round (§2.4.2): a few trajectories
the systems disagreed on, with the adjudicators' decisions, so the judge learns from its blind spots.
"""
from django.conf import settings

from devices.uitree import page_text, parse_hierarchy
from flywheel.endpoints.chat import JudgeUnavailable, ask_json
from flywheel.endpoints.frames import BLANK_PROBE_REASON, FrameMissing, answers_without_looking, load_frames
from flywheel.judging import SystemVote
from flywheel.judging.thresholds import judge_examples
from flywheel.models import ModelVersion
from flywheel.policies.protocol import describe_action
from flywheel.screens.selectors import find

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


PATH_SYSTEM = ("You judge whether a phone agent's trajectory completed the user's task by a "
               "coherent path: no loops, no meaningless detours, no pseudo-completion (declaring "
               "success while the goal state is not on screen). Handing over to the user "
               "(call_user, clarify) is a correct ending where the task leaves a step to the "
               "user, such as confirming a payment. Vote env_error when a pop-up, "
               "network failure, missing permission or crash blocked it. Answer JSON: "
               '{"vote": "true"|"false"|"env_error", "rationale": one sentence}')
FRAMES_RULE = (" The screenshots are what the screen really showed; the screen text read from the UI "
               "dump may be incomplete or wrong (web views, canvases). Vote true only when the "
               "screenshots show the goal state.")
LAST_FRAMES = 3         # the last screens of the trajectory
MAX_PATH_FRAMES = 6     # with the frames milestones are bound to


def milestone_positions(view) -> list[int]:
    """For each milestone that holds in the dump, the position in view.steps of the first screen
    where it holds after the previous one (System B's order; the dump only, no OCR)."""
    positions, cursor = [], 0
    for milestone in (view.verification or {}).get("milestones") or []:
        if not isinstance(milestone, dict):
            continue
        hit = next((i for i in range(cursor, len(view.steps)) if find(view.steps[i].hierarchy, milestone)), None)
        if hit is not None:
            positions.append(hit)
            cursor = hit
    return positions


def path_frame_loaders(view) -> list[tuple[int, object]]:
    """(Step.index, screenshot loader) of the frames the path judge sees, in order: the last
    LAST_FRAMES screens, and the latest screens milestones are bound to, MAX_PATH_FRAMES at most."""
    last = set(range(max(0, len(view.steps) - LAST_FRAMES), len(view.steps)))
    bound = sorted(set(milestone_positions(view)) - last)
    bound = bound[max(0, len(bound) - (MAX_PATH_FRAMES - len(last))):]
    return [(view.steps[i].index, view.steps[i].screenshot) for i in sorted(last | set(bound))]


def frames_text(frames, describe=lambda frame: f"the screen of step {frame.step}") -> str:
    if not frames:
        return ""
    return (f"\n\n{len(frames)} screenshot(s) follow, oldest first: "
            + "; ".join(f"{n}. {describe(frame)}" for n, frame in enumerate(frames, 1)) + ".")


def _abstain(version, reason: str, code: str, **details) -> SystemVote:
    return SystemVote("C", "abstain", f"LLM judge abstains: {reason}"[:1000],
                      details={"judge": version.name, "abstain": code, **details})


def path_vote(version, view) -> SystemVote:
    """The judge's vote on the path, from the dump text and the frames (path_frame_loaders). A frame
    the store lost, or a True the judge gives for blank frames too, is an abstention, not a vote."""
    try:
        frames = load_frames(path_frame_loaders(view))
    except FrameMissing as missing:
        return _abstain(version, str(missing), "frame_missing", step=missing.step)
    final = " | ".join(page_text(parse_hierarchy(view.final_hierarchy)).split("\n")[:40])
    system = PATH_SYSTEM + (FRAMES_RULE if frames else "")
    user = (f"{calibration_examples()}Task: {view.goal}\n{handoff_note(view)}\n{history_text(view)}\n\n"
            f"Final screen: {final}{frames_text(frames)}")

    def ask(pngs):
        answer = ask_json(version, system, user, frames=pngs)
        vote = str(answer.get("vote", "")).lower()
        if vote not in VOTES:
            raise JudgeUnavailable(f"the judge voted {vote!r}")
        return vote, str(answer.get("rationale", ""))

    pngs = [frame.png for frame in frames]
    vote, rationale = ask(pngs)
    shown = [frame.step for frame in frames]
    # Only True is probed: blank frames cannot show a goal state, so a looking judge says false
    # (or env_error, a blank screen) for them as well, and those votes prove nothing either way.
    if vote == "true" and pngs and answers_without_looking(lambda blank: ask(blank)[0], pngs, vote):
        return _abstain(version, BLANK_PROBE_REASON, "blank_probe", frames=shown)
    return SystemVote("C", vote, f"LLM judge: {rationale}"[:1000],
                      details={"judge": version.name, "frames": shown})
