"""System B: milestone decomposition (§2.4.2; Xiaomi-GUI-0 §5.3.2's executable rules).

The query's ordered subgoals are checked over the screens of the trajectory by rules on the UI
hierarchy (text, resource-id, content-desc, XPath); each must hold at a step at or after the
previous one. Then a global judgment: every milestone reached and the trajectory ended by
declaring success.
"""
from flywheel.evaluation import SystemVote
from flywheel.evaluation.ocr import ocr_text
from flywheel.evaluation.screens import find
from flywheel.evaluation.trajectory_view import TrajectoryView


def _seen_by_ocr(loader, milestone) -> bool:
    """Where the hierarchy lacks the text, read the screenshot (text milestones only)."""
    wanted = milestone.get("text") or milestone.get("text_contains")
    if not wanted or loader is None:
        return False
    text = ocr_text(loader())
    return bool(text) and wanted.lower() in " ".join(text.split()).lower()


def milestone_progress(view: TrajectoryView, milestones: list) -> list:
    """For each milestone in order, (index of the screen where it first held after the previous
    one, "hierarchy" or "ocr"), or None when it never held."""
    screens, loaders = view.screens(), view.screenshot_loaders()
    reached, cursor = [], 0
    for milestone in milestones:
        hit = next(((i, "hierarchy") for i in range(cursor, len(screens)) if find(screens[i], milestone)), None)
        if hit is None:
            hit = next(((i, "ocr") for i in range(cursor, len(screens))
                        if _seen_by_ocr(loaders[i], milestone)), None)
        reached.append(hit)
        if hit is None:
            break
        cursor = hit[0]
    return reached


def system_b_vote(view: TrajectoryView, judge=None) -> SystemVote:
    milestones = view.verification.get("milestones") or []
    derived_note = ""
    if not milestones and judge is not None:
        from flywheel.evaluation.llm_judge import JudgeUnavailable, derive_milestones

        try:
            milestones = derive_milestones(judge, view.goal)
            derived_note = f" (milestones derived by {judge.name})"
        except JudgeUnavailable as error:
            return SystemVote("B", "abstain", f"no milestones, and the judge could not derive them: {error}")
    if not milestones:
        return SystemVote("B", "abstain", "no milestones for this query")
    reached = milestone_progress(view, milestones)
    details = {"reached": [{"name": m.get("name", ""), "at": r[0] if r else None, "by": r[1] if r else None}
                           for m, r in zip(milestones, reached)]}
    missing = [m.get("name") or str(m) for m, r in zip(milestones, reached) if r is None]
    if len(reached) < len(milestones):
        missing += [m.get("name") or str(m) for m in milestones[len(reached):]]
    if missing:
        return SystemVote("B", "false", f"milestone not reached: {missing[0]}{derived_note}", details=details)
    last = view.last_action or {}
    if last.get("action") == "terminate" and last.get("status") == "failure":
        return SystemVote("B", "false", "all milestones seen, but the agent declared failure",
                          details=details)
    return SystemVote("B", "true", f"all {len(milestones)} milestones reached in order{derived_note}",
                      details=details)
