"""System B: milestone decomposition (§2.4.2; Xiaomi-GUI-0 §5.3.2's executable rules).

The query's ordered subgoals are checked over the screens of the trajectory by rules on the UI
hierarchy (text, resource-id, content-desc, XPath); each must hold at a step at or after the
previous one. Then a global judgment: every milestone reached and the trajectory ended by
declaring success.

How many milestones must hold is a threshold that adjudicators' decisions calibrate (§2.4.2,
flywheel/judging/calibration.py, read through thresholds.py): by default all of them; a calibrated share below 1 lets a
trajectory that skipped an intermediate page (a shortcut) pass, the final milestone always holding.
"""
from flywheel.endpoints.chat import JudgeUnavailable
from flywheel.judging import SystemVote
from flywheel.judging.llm_judge import derive_milestones
from flywheel.screens.ocr import ocr_text
from flywheel.judging.thresholds import MILESTONE_SHARE, active_thresholds
from flywheel.judging.trajectory_view import TrajectoryView
from flywheel.screens.selectors import find


def _seen_by_ocr(loader, milestone) -> bool:
    """Where the hierarchy lacks the text, read the screenshot (text milestones only)."""
    wanted = milestone.get("text") or milestone.get("text_contains")
    if not wanted or loader is None:
        return False
    text = ocr_text(loader())
    return bool(text) and wanted.lower() in " ".join(text.split()).lower()


def calibrated_thresholds() -> dict:
    """System B's thresholds: the latest calibration round's, else the defaults."""
    return active_thresholds("B")


def milestone_progress(view: TrajectoryView, milestones: list, skip_missing: bool = False) -> list:
    """For each milestone in order, (index of the screen where it first held after the previous
    one, "hierarchy" or "ocr"), or None when it never held. The list stops at the first milestone
    that never held, unless `skip_missing` (then the next ones are looked for from the same place)."""
    screens, loaders = view.screens(), view.screenshot_loaders()
    reached, cursor = [], 0
    for milestone in milestones:
        hit = next(((i, "hierarchy") for i in range(cursor, len(screens)) if find(screens[i], milestone)), None)
        if hit is None:
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
    if not enough:
        return SystemVote("B", "false", f"milestone not reached: {missing[0]}{derived_note}", details=details)
    last = view.last_action or {}
    if last.get("action") == "terminate" and last.get("status") == "failure":
        seen = "all milestones seen" if not missing else f"{held} of {len(milestones)} milestones seen"
        return SystemVote("B", "false", f"{seen}, but the agent declared failure",
                          details=details)
    if missing:
        details["share"] = share
        return SystemVote("B", "true", f"{held} of {len(milestones)} milestones reached in order, the last one "
                                       f"included (calibrated share {share:g}; not seen: {', '.join(missing)})"
                                       f"{derived_note}", details=details)
    return SystemVote("B", "true", f"all {len(milestones)} milestones reached in order{derived_note}",
                      details=details)
