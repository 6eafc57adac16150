"""Level 3 of the cascaded failure attribution (§2.5.1): the model's own failure, located.

Only reached once the environment (Level 1) and the task and its verifiers (Level 2) are cleared.
Structured causes, in the report's words: perception drift (a tap off any element, an element
other than the one the [Decision] named, an element other than the one the path goes through —
checked against the dump, and against the frame's OCR words: the named words shown away from
where the tap landed, or, where the dump is blind, not shown at all),
state-tracking errors (returning to pages already seen without progress: loops across pages),
constraint violations (a required condition skipped, success declared with the query's
milestones only partly met) — and an over-scoped task: a correct prefix with milestone progress,
then a subgoal the model could not reach, so it gave up.

The first wrong step is located from the query's known path when it has one (which step left it),
else from the milestones reached and the GEM distance to the target page, else from the screens.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from devices.uitree import UiNode, all_nodes
from flywheel.rules.attribution_environment import screen_interference
from flywheel.rules.attribution_trace import (
    NEUTRAL_ACTIONS,
    StepFacts,
    Trace,
    clickable_ancestor_hit,
    decision_label,
    distance_to,
    hit_node,
    label_matches,
    roots_of,
    selector_nodes,
    words_near,
    words_showing,
)
from flywheel.rules.ecdm import CONSTRAINT_VIOLATION, OVER_SCOPED, PERCEPTION_DRIFT, STATE_TRACKING
from flywheel.rules.repetition import same_action
from flywheel.rules.stops import AGENT_STOPS

MAX_LOOP_BLOCK = 4         # a cycle of up to this many pages, gone round twice, is a loop
POINTED = ("click", "double_click", "long_press")
PRIORITY = {CONSTRAINT_VIOLATION: 0, STATE_TRACKING: 1, PERCEPTION_DRIFT: 2, OVER_SCOPED: 3}
NEAR_PX = 90               # a tap this close to a word's box landed on it (a row's half height and a margin)


def interfered(step: StepFacts) -> bool:
    """The step's screen shows a pop-up, an error page or another interference."""
    return bool(step.hierarchy) and bool(screen_interference(roots_of(step)))


# -- the known path ------------------------------------------------------------------------------

@dataclass
class Alignment:
    total: int
    position: int = 0                                   # path steps done
    marks: dict = field(default_factory=dict)           # step index -> ok|prep|search|deviation|off
    deviations: list = field(default_factory=list)      # (step index, path position, kind)
    expected_at: dict = field(default_factory=dict)     # step index -> the path position expected there
    last_match: int | None = None                       # step index of the last step on the path


def _same_app(a, b) -> bool:
    a, b = str(a or "").lower().strip(), str(b or "").lower().strip()
    return bool(a and b) and (a == b or a in b or b in a)


def target_words(expected: dict) -> str:
    """The words the path step's target shows on screen ('' when it names none: an id, a description)."""
    target = expected.get("target")
    if not isinstance(target, dict):
        return ""
    return str(target.get("text") or target.get("text_contains") or "")


def expected_targets(step: StepFacts, expected: dict) -> list[UiNode] | None:
    """The path step's target on this screen ([] when absent; None when it names no target)."""
    target = expected.get("target")
    if not isinstance(target, dict) or not target:
        return None
    return selector_nodes(roots_of(step), target)


def path_step_matches(step: StepFacts, expected: dict, following: StepFacts | None = None) -> bool:
    """Whether the executed action is the path step (its target resolved on this screen)."""
    action, want = step.action or {}, expected.get("action")
    name = action.get("action")
    if want == "open":
        return name == "open" and (_same_app(action.get("app"), expected.get("app"))
                                   or (following is not None and following.package == expected.get("app")))
    if want in POINTED:
        if name != want:
            return False
        targets = expected_targets(step, expected)
        if targets is None or not step.hierarchy:
            return True  # nothing to resolve against: the action kind is all that can be checked
        return clickable_ancestor_hit(roots_of(step), targets, action.get("point"))
    if want == "type":
        return name == "type" and str(action.get("text", "")).strip().lower() == str(expected.get("text", "")).strip().lower()
    if want == "system_button":
        return name == "system_button" and action.get("button") == expected.get("button")
    if want == "terminate":
        return name == "terminate" and (action.get("status") or "success") == (expected.get("status") or "success")
    return name == want


def _preparing(step: StepFacts, expected: dict) -> bool:
    """A tap on the field the path's next `type` writes into."""
    action = step.action or {}
    if expected.get("action") != "type" or action.get("action") != "click":
        return False
    targets = expected_targets(step, expected)
    return bool(targets) and clickable_ancestor_hit(roots_of(step), targets, action.get("point"))


def first_required(skipped: list, matched: dict) -> int | None:
    """The first skipped path step that is a condition of the task (its offset), or None when the
    skipped steps only move around (a key, Back, a launch, a scroll, a wait, a note) or focus the
    field the matched step types into: another route to the same step."""
    for offset, step in enumerate(skipped):
        name = step.get("action")
        if name in (*NEUTRAL_ACTIONS, "system_button", "open"):
            continue
        if name == "click" and matched.get("action") == "type" and step.get("target") == matched.get("target"):
            continue
        return offset
    return None


def path_alignment(trace: Trace) -> Alignment | None:
    """Follow the executed steps along the query's known path; a deviation is a step that left it
    (wrong_element), jumped over required steps (skipped), stopped with the path unfinished
    (premature_end), or looked around (scrolled, waited) past the path's next target that was on
    its screen, when that target was then lost (missed). None without a known path."""
    path = trace.spec.path_steps
    if not path:
        return None
    align = Alignment(total=len(path))
    acting = trace.acting
    if acting and path[0].get("action") == "open" and _same_app(acting[0].package, path[0].get("app")) \
            and (acting[0].action or {}).get("action") != "open":
        align.position = 1  # already in the app: the launch is done
    on_path, missed = True, None   # missed: a look-around step that passed the expected target by
    for number, step in enumerate(acting):
        following = acting[number + 1] if number + 1 < len(acting) else None
        if align.position >= align.total:
            align.marks[step.index] = "extra"
            continue
        expected = path[align.position]
        align.expected_at[step.index] = align.position
        name = (step.action or {}).get("action")
        if path_step_matches(step, expected, following):
            align.position += 1
            align.marks[step.index], align.last_match, on_path, missed = "ok", step.index, True, None
            continue
        if _preparing(step, expected):
            align.marks[step.index] = "prep"
            continue
        if interfered(step):
            align.marks[step.index] = "interference"  # handling a pop-up is Level 1's business
            continue
        later = next((j for j in range(align.position + 1, align.total)
                      if path_step_matches(step, path[j], following)), None)
        looked_past = missed is not None and not expected_targets(step, expected)
        if later is not None:
            required = first_required(path[align.position:later], path[later])
            if required is not None and on_path:
                align.deviations.append((missed if looked_past else step.index, align.position + required, "skipped"))
            align.position = later + 1
            align.marks[step.index], align.last_match, on_path, missed = "ok", step.index, True, None
            continue
        if name in NEUTRAL_ACTIONS:
            align.marks[step.index] = "search"
            if on_path and missed is None and expected_targets(step, expected):
                missed = step.index
            continue
        if not on_path:
            align.marks[step.index] = "off"
            continue
        kind = "premature_end" if name in AGENT_STOPS else "wrong_element"
        if looked_past:
            align.deviations.append((missed, align.position, "missed"))  # it looked past the target
            align.marks[missed] = "deviation"
        else:
            align.deviations.append((step.index, align.position, kind))
        align.marks[step.index], on_path = "deviation", False
    if on_path and missed is not None and align.position < align.total:
        align.deviations.append((missed, align.position, "missed"))
        align.marks[missed] = "deviation"
    return align


def resolvable_at(trace: Trace, align: Alignment, step_index: int) -> bool | None:
    """Whether the path step expected at this step can be done on its screen (its target is
    there, or it needs none). None when the step expected nothing."""
    position = align.expected_at.get(step_index)
    if position is None or position >= align.total:
        return None
    step = next(s for s in trace.steps if s.index == step_index)
    expected = trace.spec.path_steps[position]
    targets = expected_targets(step, expected)
    if targets is None:
        return True
    if not targets and step.blind and step.words is not None and target_words(expected):
        return bool(words_showing(step.words, target_words(expected)))  # the dump cannot tell: the pixels do
    return bool(targets) if step.hierarchy else False


# -- milestones, loops, GEM, perception ----------------------------------------------------------

def milestone_progress(trace: Trace) -> list:
    """For each milestone in order, the index of the step where it first held (at or after the
    previous one's step, as System B reads them), or None."""
    reached, cursor = [], 0
    steps = list(trace.steps)
    for number in range(len(trace.spec.milestones)):
        hit = next((p for p in range(cursor, len(steps)) if number in steps[p].milestones), None)
        if hit is None:
            reached.extend([None] * (len(trace.spec.milestones) - number))
            break
        reached.append(steps[hit].index)
        cursor = hit
    return reached


def _progress_by_step(trace: Trace, align: Alignment | None) -> dict:
    """step index -> (milestones reached so far, path steps done after it)."""
    reached = [i for i in milestone_progress(trace) if i is not None]
    progress, done = {}, 0
    for step in trace.steps:
        if align is not None and align.marks.get(step.index) == "ok":
            done += 1
        progress[step.index] = (sum(1 for i in reached if i <= step.index), done)
    return progress


def page_loop(trace: Trace, align: Alignment | None) -> dict | None:
    """The first loop across pages: a cycle of 2..MAX_LOOP_BLOCK pages gone round twice, or one
    page that the same action left unchanged three times — with no milestone or path progress
    while it went round. {first_bad, steps, pages}."""
    seq = [s for s in trace.steps if s.page]
    progress = _progress_by_step(trace, align)
    best = None
    for size in range(1, MAX_LOOP_BLOCK + 1):
        for i in range(size, len(seq) - size + 1):
            if best is not None and seq[i - 1].index >= best["first_bad"]:
                break
            block, again = seq[i - size:i], seq[i:i + size]
            if [s.page for s in block] != [s.page for s in again]:
                continue
            if size == 1:
                if i + 1 >= len(seq) or seq[i + 1].page != block[0].page \
                        or not same_action(block[0].action, again[0].action):
                    continue
                region = seq[i - 1:i + 2]
            else:
                if len({s.page for s in block}) < 2:
                    continue
                region = block + again
            if progress[region[0].index] != progress[region[-1].index]:
                continue
            best = {"first_bad": seq[i - 1].index, "steps": [s.index for s in region], "pages": size}
            break
    return best


def trailing_repeats(trace: Trace) -> list[int]:
    """The steps of the run of identical actions that ends the trajectory (2 or more)."""
    acting = [s for s in trace.acting if (s.action or {}).get("action") not in AGENT_STOPS]
    run = acting[-1:]
    for previous in reversed(acting[:-1]):
        if not same_action(previous.action, run[0].action):
            break
        run.insert(0, previous)
    return [s.index for s in run] if len(run) >= 2 else []


def gem_deviation(trace: Trace) -> int | None:
    """The first step after which the GEM distance to the target page grew."""
    acting = trace.acting
    by_index = {s.index: s for s in trace.steps}
    for step in acting:
        after = next((s for s in trace.steps if s.index > step.index), None)
        if after is None:
            break
        if by_index[step.index].gem_distance is not None and after.gem_distance is not None \
                and after.gem_distance > step.gem_distance:
            return step.index
    return None


def _nearest(roots: list[UiNode], x: int, y: int) -> tuple[UiNode | None, float]:
    best, distance = None, math.inf
    for node in all_nodes(roots):
        if not (node.clickable or node.long_clickable) or not node.area:
            continue
        x1, y1, x2, y2 = node.bounds
        d = math.dist((x, y), (min(max(x, x1), x2), min(max(y, y1), y2)))
        if d < distance:
            best, distance = node, d
    return best, distance


def perception_slip(step: StepFacts, targets: list[UiNode] | None = None, expected_words: str = "") -> str:
    """Why the step's tap shows the model mis-seeing the screen ('' when it does not): a tap off
    every element (an offset), an element other than the one its [Decision] named (confusion),
    or — given the path's targets — not on the element the path goes through. Read on the dump
    where it can be read, then on the frame's OCR words (pixel_slip): a dump taken mid-animation
    or a blind one (web view, canvas) does not get the last word."""
    action = step.action or {}
    point = action.get("point")
    if action.get("action") not in (*POINTED, "type") or not isinstance(point, (list, tuple)) or len(point) != 2:
        return ""
    if step.hierarchy and not step.blind:
        if interfered(step):
            return ""
        slip = _dump_slip(step, targets, point)
        if slip:
            return slip
    return pixel_slip(step, expected_words)


def pixel_slip(step: StepFacts, expected_words: str = "") -> str:
    """The model's claim against the pixels ('' when they agree or were not read): the words its
    [Decision] named are on the frame but not near where the tap landed (confusion); on a blind dump,
    they are not on the frame at all, or the path's target words (`expected_words`) are shown away
    from the tap."""
    point = (step.action or {}).get("point")
    if step.words is None or not isinstance(point, (list, tuple)) or len(point) != 2:
        return ""
    x, y = int(point[0]), int(point[1])
    readable = bool(step.hierarchy) and not step.blind
    near = words_near(step.words, x, y, NEAR_PX) or "no words"
    label = decision_label(step.cot)
    if label:
        shown = words_showing(step.words, label)
        if shown and all(distance_to(box, x, y) > NEAR_PX for box in shown):
            cx, cy = _center(min(shown, key=lambda box: distance_to(box, x, y)))
            return (f"element confusion (read on screen): the [Decision] named \"{label}\", shown at ({cx}, {cy}), "
                    f"but the tap at ({x}, {y}) landed near \"{near}\"")
        if not shown and not readable:  # on a readable dump OCR missing a word is no evidence
            return (f"the [Decision] named \"{label}\", which the screen does not show (OCR); the tap at "
                    f"({x}, {y}) landed near \"{near}\"")
    if expected_words and not readable:
        shown = words_showing(step.words, expected_words)
        if shown and all(distance_to(box, x, y) > NEAR_PX for box in shown):
            cx, cy = _center(shown[0])
            return (f"element confusion (read on screen): the tap at ({x}, {y}) landed near \"{near}\" where the "
                    f"path goes through \"{expected_words}\", shown at ({cx}, {cy})")
    return ""


def _center(box: tuple) -> tuple[int, int]:
    return (box[0] + box[2]) // 2, (box[1] + box[3]) // 2


def _dump_slip(step: StepFacts, targets: list[UiNode] | None, point) -> str:
    roots = roots_of(step)
    hit, label = hit_node(step), decision_label(step.cot)
    x, y = int(point[0]), int(point[1])
    named = [n for n in all_nodes(roots) if label and label_matches(n, label) and n.area]
    if targets:
        if clickable_ancestor_hit(roots, targets, point):
            return ""
        want = targets[0].all_text()[:40] or targets[0].resource_id
        if label and any(label_matches(t, label) for t in targets):
            gap = min(math.dist((x, y), t.center) for t in targets)
            return f"localization offset: the [Decision] named \"{label}\" but the tap at ({x}, {y}) missed it by {gap:.0f} px"
        got = hit.all_text()[:40] if hit is not None else "nothing"
        return f"element confusion: tapped \"{got}\" where the path goes through \"{want}\""
    if hit is None or not (hit.clickable or hit.long_clickable):
        near, gap = _nearest(roots, x, y)
        where = f" (nearest \"{near.all_text()[:40]}\", {gap:.0f} px away)" if near is not None else ""
        return f"localization offset: the tap at ({x}, {y}) is on no element{where}"
    if label and not label_matches(hit, label):
        if named:
            return f"element confusion: the [Decision] named \"{label}\" but the tap hit \"{hit.all_text()[:40]}\""
        return f"the [Decision] named \"{label}\", which is not on the screen; the tap hit \"{hit.all_text()[:40]}\""
    return ""
