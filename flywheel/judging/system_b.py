"""System B: milestone decomposition (§2.4.2; Xiaomi-GUI-0 §5.3.2's executable rules).

The query's ordered subgoals are checked over the screens of the trajectory by rules on the UI
hierarchy (text, resource-id, content-desc, XPath); each must hold at a step at or after the
previous one. Then a global judgment: every milestone reached and the trajectory ended by
declaring success.

System B reads the HIERARCHY ONLY (System C reads the pixels), so the two stacks cannot share one
blind spot. Where the dump is blind on a screen a missing milestone would have to be found on (a
web view or canvas: one opaque node, or no node with words), B abstains with the reason instead of
voting False on a page it cannot read.

How many milestones must hold is a threshold that adjudicators' decisions calibrate (§2.4.2,
flywheel/judging/calibration.py, read through thresholds.py): by default all of them; a calibrated share below 1 lets a
trajectory that skipped an intermediate page (a shortcut) pass, the final milestone always holding.
"""
from devices.uitree import all_nodes, node_at, parse_hierarchy
from flywheel.endpoints.chat import JudgeUnavailable
from flywheel.judging import SystemVote
from flywheel.judging.llm_judge import derive_milestones
from flywheel.judging.thresholds import MILESTONE_SHARE, active_thresholds
from flywheel.judging.trajectory_view import TrajectoryView, screen_point
from flywheel.rules.step_words import target_name
from flywheel.screens.blindness import readability
from flywheel.screens.labels import label_of
from flywheel.screens.ocr import OcrFailed, ocr_text
from flywheel.screens.selectors import find, find_target


def _seen_by_ocr(loader, milestone) -> bool:
    """The milestone's words on the screenshot (text milestones only). Not System B's: only the RL
    step judge binds milestones to frames this way (pixels=True); a frame that cannot be read or
    OCR'd binds nothing."""
    wanted = milestone.get("text") or milestone.get("text_contains")
    if not wanted or loader is None:
        return False
    try:
        text = ocr_text(loader())
    except (OSError, OcrFailed):
        return False
    return bool(text) and wanted.lower() in " ".join(text.split()).lower()


def calibrated_thresholds() -> dict:
    """System B's thresholds: the latest calibration round's, else the defaults."""
    return active_thresholds("B")


def milestone_progress(view: TrajectoryView, milestones: list, skip_missing: bool = False,
                       pixels: bool = False) -> list:
    """For each milestone in order, (index of the screen where it first held after the previous
    one, "hierarchy" or "ocr"), or None when it never held. The list stops at the first milestone
    that never held, unless `skip_missing` (then the next ones are looked for from the same place).
    The hierarchy only (System B), unless `pixels`: then a text milestone the dump lacks is looked
    for in the screenshots too (the RL step judge, which binds milestones to frames)."""
    screens, loaders = view.screens(), view.screenshot_loaders()
    reached, cursor = [], 0
    for milestone in milestones:
        hit = next(((i, "hierarchy") for i in range(cursor, len(screens)) if find(screens[i], milestone)), None)
        if hit is None and pixels:
            hit = next(((i, "ocr") for i in range(cursor, len(screens))
                        if _seen_by_ocr(loaders[i], milestone)), None)
        reached.append(hit)
        if hit is None:
            if skip_missing:
                continue
            break
        cursor = hit[0]
    return reached


def system_b_vote(view: TrajectoryView, judge=None, thresholds: dict | None = None) -> SystemVote:
    """`thresholds`: {"milestone_share": s}; None reads the active calibration."""
    milestones = view.verification.get("milestones") or []
    derived_note = ""
    if not milestones and judge is not None:
        try:
            milestones = derive_milestones(judge, view.goal)
            derived_note = f" (milestones derived by {judge.name})"
        except JudgeUnavailable as error:
            return SystemVote("B", "abstain", f"no milestones, and the judge could not derive them: {error}")
    if not milestones:
        return SystemVote("B", "abstain", "no milestones for this query")
    share = float((thresholds if thresholds is not None else calibrated_thresholds()).get(
        "milestone_share", MILESTONE_SHARE))
    reached = milestone_progress(view, milestones, skip_missing=share < 1)
    return milestone_vote(view, milestones, reached, share, derived_note)


def milestone_vote(view: TrajectoryView, milestones: list, reached: list, share: float = MILESTONE_SHARE,
                   derived_note: str = "") -> SystemVote:
    """The global judgment over milestone_progress: enough milestones (`share` of them, the last
    one always) reached in order, and the trajectory did not end by declaring failure."""
    details = {"reached": [{"name": m.get("name", ""), "at": r[0] if r else None, "by": r[1] if r else None}
                           for m, r in zip(milestones, reached)]}
    missing = [m.get("name") or str(m) for m, r in zip(milestones, reached) if r is None]
    if len(reached) < len(milestones):
        missing += [m.get("name") or str(m) for m in milestones[len(reached):]]
    held = sum(1 for r in reached if r is not None)
    final_held = len(reached) == len(milestones) and reached[-1] is not None
    # a share is met up to rounding (2 of 3 milestones meet a share of 0.67)
    enough = not missing or (share < 1 and final_held and held / len(milestones) + 0.01 >= share)
    last = view.last_action or {}
    declared_failure = last.get("action") == "terminate" and last.get("status") == "failure"
    if not enough and not declared_failure:
        blind = blind_where_missing(view, milestones, reached)
        if blind is not None:
            step, name, why = blind
            details["blind"] = {"step": step, "milestone": name}
            return SystemVote("B", "abstain", f"the UI dump is blind on step {step}'s screen ({why}): milestone "
                                              f"{name} cannot be read{derived_note}", details=details)
    if not enough:
        return SystemVote("B", "false", f"milestone not reached: {missing[0]}{derived_note}", details=details)
    if declared_failure:
        seen = "all milestones seen" if not missing else f"{held} of {len(milestones)} milestones seen"
        return SystemVote("B", "false", f"{seen}, but the agent declared failure",
                          details=details)
    untaken = untaken_path_end(view) if view.ending() == "success" else ""
    if untaken:
        details["untaken"] = untaken
        return SystemVote("B", "false", f"milestones reached, but {untaken}{derived_note}", details=details)
    if missing:
        details["share"] = share
        return SystemVote("B", "true", f"{held} of {len(milestones)} milestones reached in order, the last one "
                                       f"included (calibrated share {share:g}; not seen: {', '.join(missing)})"
                                       f"{derived_note}", details=details)
    return SystemVote("B", "true", f"all {len(milestones)} milestones reached in order{derived_note}",
                      details=details)


def untaken_path_end(view: TrajectoryView) -> str:
    """In the dumps: the known path ends by tapping an element, and the last tap hit another one on a
    screen that showed it, or the trajectory ended with it on screen untouched (a near-miss, a
    pseudo-completion). '' when it was tapped, or when the dumps cannot tell (a blind screen, an
    element not shown, a path that ends otherwise)."""
    end = view.path_end()
    if end is None:
        return ""
    target, name = end["target"], target_name(end["target"])
    taps = view.taps()
    if taps:
        step = taps[-1][1]
        roots = parse_hierarchy(step.hierarchy)
        nodes = list(all_nodes(roots))
        element = find_target(nodes, target)
        if element is not None:
            size = (max(n.bounds[2] for n in nodes), max(n.bounds[3] for n in nodes))
            point = screen_point(step.action, size)
            hit = node_at(roots, *point)
            # on the element, or on the clickable row that holds it (a row's title is its child)
            if element.contains(*point) or (hit is not None and hit.clickable and hit.contains(*element.center)):
                return ""
            return f'the last tap hit "{label_of(hit) if hit is not None else "nothing"}", not "{name}" where the path ends'
    final = view.final_hierarchy or (view.steps[-1].hierarchy if view.steps else "")
    if find_target(list(all_nodes(parse_hierarchy(final))), target) is not None:
        return f'"{name}", where the path ends, is on the final screen and was never tapped'
    return ""


def _blindness(xml: str) -> str:
    """Why the dump cannot be read ('' when it can)."""
    if not (xml or "").strip():
        return "no dump was stored"
    seen = readability(xml)
    if not seen.blind:
        return ""
    return "web view / canvas" if seen.opaque_regions else "no node with text or a description"


def blind_where_missing(view: TrajectoryView, milestones: list, reached: list) -> tuple | None:
    """(step index, milestone name, why) of the first blind screen a missing milestone would have to
    be found on — the screens from the previous reached milestone on — or None when every such
    screen can be read (then "not reached" is what the dump shows)."""
    screens = view.screens()
    cursor = 0
    for number, milestone in enumerate(milestones):
        hit = reached[number] if number < len(reached) else None
        if hit is not None:
            cursor = hit[0]
            continue
        for i in range(cursor, len(screens)):
            why = _blindness(screens[i])
            if why:
                step = view.steps[min(i, len(view.steps) - 1)].index
                return step, milestone.get("name") or str(milestone), why
    return None
