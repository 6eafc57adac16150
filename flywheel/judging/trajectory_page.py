"""The trajectory page (/trajectories/<id>/): everything that happened to one trajectory and every
failure's path through attribution and the ECDM (§2.5), so nothing disappears.

Steps (screens with the action drawn, reasoning, takeover marks, step scores), HTSC votes and
verdicts, adjudications, attributions with each level's evidence, the ECDM path, repairs (Teacher
output, why a person had to take it, the correction, the prefix replay), the samples and RQA /
derived queries made from it, and, for an ECDM sample, where it came from.

Anyone with a role may open it; object access is flywheel.access.trajectories_visible_to (a
trajectory the person may not see is a 404, as if it did not exist).
"""
import struct
import xml.etree.ElementTree as ET

from django.http import Http404
from django.shortcuts import render

from accounts.roles import ADJUDICATOR, ANNOTATOR, MANAGER, role_required
from devices.uitree import node_at, parse_hierarchy
from flywheel.access import repairs_visible_to, sees_everything, trajectories_visible_to
from flywheel.blobs import read_blob
from flywheel.models import App, Attribution, Line, Outcome, Repair, SftEntry, Trajectory
from flywheel.pools.ledger import STAGE_LABELS, with_failure_path

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LEVEL_NAMES = dict(Attribution.LEVELS)


def _png_size(name: str):
    """(width, height) of a stored PNG, or None (missing, unreadable, not a PNG)."""
    try:
        header = read_blob(name)[:24]
    except (OSError, ValueError):
        return None
    if header[:8] != PNG_MAGIC or len(header) < 24:
        return None
    return struct.unpack(">II", header[16:24])


def _element_at(hierarchy_name: str, point) -> dict | None:
    """The element a tap at `point` hit on the step's stored dump (None when it cannot be told)."""
    if not hierarchy_name or not isinstance(point, (list, tuple)) or len(point) != 2:
        return None
    try:
        xml = read_blob(hierarchy_name).decode("utf-8", "replace")
        node = node_at(parse_hierarchy(xml), int(point[0]), int(point[1]))
    except (OSError, ValueError, TypeError, ET.ParseError):
        return None
    return node.describe() if node else None


def _overlay(action) -> dict:
    """What to draw of an action on its screen: a tap point, a swipe line (pixels), or nothing."""
    if not isinstance(action, dict):
        return {}
    point, start, end = action.get("point"), action.get("start"), action.get("end")
    drawn = {}
    if isinstance(point, (list, tuple)) and len(point) == 2:
        drawn["point"] = list(point)
    if isinstance(start, (list, tuple)) and isinstance(end, (list, tuple)) and len(start) == len(end) == 2:
        drawn["start"], drawn["end"] = list(start), list(end)
    return drawn


def player_frames(trajectory: Trajectory, attribution: Attribution | None, repairs) -> list[dict]:
    """One frame per step, in order: screenshot, the action drawn on it, the element it hit, the
    reasoning, and the marks the ECDM put on it (first bad step, the steps the evidence names, the
    correction a repair wrote for it)."""
    steps = list(trajectory.steps.order_by("index"))
    flagged = set()
    for level in (attribution.evidence if attribution and isinstance(attribution.evidence, list) else []):
        if isinstance(level, dict) and level.get("conclusion") == "found":
            flagged.update(i for i in level.get("steps") or [] if isinstance(i, int))
    first_bad = attribution.first_bad_step if attribution else None
    corrections = {}
    for repair in repairs:
        if repair.step_index is not None and (repair.correction or repair.teacher_output):
            corrections.setdefault(repair.step_index, []).append(repair)
    apps = App.display_labels(step.foreground_package for step in steps)
    frames = []
    for step in steps:
        action = step.executed_action if isinstance(step.executed_action, dict) else (step.proposed_action or {})
        screenshot = step.screenshot.name if step.screenshot else ""
        fixes = []
        for repair in corrections.get(step.index, []):
            fix = (repair.correction or {}).get("action") or (repair.teacher_output or {}).get("action")
            fixes.append({"repair": repair, "action": fix if isinstance(fix, dict) else None,
                          "by": (repair.correction or {}).get("by") or "teacher (not applied)",
                          "drawn": _overlay(fix)})
        frames.append({
            "step": step, "action": action, "drawn": _overlay(action),
            "size": _png_size(screenshot) if screenshot else None,
            "element": _element_at(step.hierarchy.name if step.hierarchy else "", (action or {}).get("point")),
            "screenshot": step.screenshot.url if screenshot else "",
            "first_bad": first_bad is not None and step.index == first_bad,
            "flagged": step.index in flagged, "fixes": fixes, "app": apps.get(step.foreground_package, ""),
            "cot": step.cot if isinstance(step.cot, dict) else {},
        })
    return frames


def failure_path(trajectory: Trajectory, attribution: Attribution | None, repairs, stage: str) -> list[str]:
    """The trajectory's path in words, verdict → adjudication → attribution → ECDM → repair → sample."""
    if trajectory.line in (Line.ECDM, Line.HANDBACK):
        origin = f"#{trajectory.derived_from_id}" if trajectory.derived_from_id else "a failed trajectory"
        made = "ECDM sample" if trajectory.line == Line.ECDM else "Hand-back sample (written by rule)"
        return [f"{made} made from {origin}", f"verdict {trajectory.get_verdict_display()}",
                f"destination {trajectory.get_destination_display()}"]
    path = [f"Verdict {trajectory.get_verdict_display()}"]
    if trajectory.stated_outcome:  # the person behind it (a semi-automatic session's annotator)
        who = trajectory.stated_by.get_username() if trajectory.stated_by_id else "a former user"
        path[0] += f", stated by {who}"
    decided = trajectory.adjudications.exclude(decision="").order_by("-decided_at").first()
    if decided:
        path.append(f"adjudicated: {decided.get_decision_display()}")
    path.append(f"destination {trajectory.get_destination_display()}")
    if trajectory.verdict not in (Outcome.FALSE, Outcome.ENV_ERROR) or trajectory.line == Line.BENCHMARK:
        return path  # a benchmark rollout is scored by its evaluation, never attributed or repaired
    if attribution is None:
        return [*path, f"now: {STAGE_LABELS['unattributed']}"]
    located = f", first bad step {attribution.first_bad_step}" if attribution.first_bad_step is not None else ""
    path.append(f"attributed Level {LEVEL_NAMES.get(attribution.level, attribution.level)}: "
                f"{attribution.cause}{located}")
    if attribution.owner:
        path.append(f"to {attribution.get_owner_display()}")
    path.append(f"ECDM path: {attribution.ecdm_path or 'none'}")
    for repair in repairs:
        words = f"{repair.get_path_display()} repair #{repair.pk}: {repair.get_status_display()}"
        if repair.sample_id:
            words += f" → sample #{repair.sample_id}"
        if repair.derived_query_id:
            words += f" → query {repair.derived_query.key}"
        path.append(words)
    path.append(f"now: {STAGE_LABELS.get(stage, stage)}")
    return path


def _visible_ids(user, trajectory_ids) -> set:
    ids = {pk for pk in trajectory_ids if pk}
    if not ids:
        return set()
    return set(trajectories_visible_to(user, Trajectory.objects.filter(pk__in=ids)).values_list("pk", flat=True))


def _replayed(repair: Repair) -> int | None:
    """The continuation trajectory a repair's prefix replay collected (its id), if any."""
    replayed = (repair.replay or {}).get("trajectory") if isinstance(repair.replay, dict) else None
    return replayed if isinstance(replayed, int) else None


def _continuation_of(trajectory: Trajectory) -> Repair | None:
    """For an ECDM-line trajectory collected after a replayed prefix: the repair that collected it."""
    if not trajectory.derived_from_id:
        return None
    return next((r for r in Repair.objects.filter(trajectory_id=trajectory.derived_from_id)
                 if _replayed(r) == trajectory.pk), None)


def trajectory_context(trajectory: Trajectory, user) -> dict:
    attributions = list(trajectory.attributions.select_related("failure_class").order_by("-created_at", "-pk"))
    attribution = attributions[0] if attributions else None
    repairs = list(repairs_visible_to(user, trajectory.repairs.all()).select_related(
        "derived_query", "failure_class", "repaired_by", "claimed_by", "sample", "attribution").order_by(
        "created_at", "pk"))
    for repair in repairs:
        repair.continuation_id = _replayed(repair)
    samples = list(trajectory.derived_samples.select_related("query").order_by("pk"))
    made_by = Repair.objects.filter(sample=trajectory).select_related("trajectory").first()
    continuation_of = _continuation_of(trajectory)
    related = [trajectory.derived_from_id, trajectory.recollection_of_id, *(s.pk for s in samples),
               *(r.sample_id for r in repairs), *(_replayed(r) for r in repairs),
               *trajectory.recollections.values_list("pk", flat=True)]
    stage = with_failure_path(Trajectory.objects.filter(pk=trajectory.pk)).values_list("ecdm_stage", flat=True).first()
    return {
        "trajectory": trajectory, "frames": player_frames(trajectory, attribution, repairs),
        "votes": trajectory.votes.order_by("created_at", "system"),
        "verdicts": trajectory.verdicts.order_by("-created_at"),
        "adjudications": trajectory.adjudications.select_related("adjudicator").order_by("-created_at"),
        "attributions": [(a, _evidence_rows(a)) for a in attributions], "attribution": attribution,
        "repairs": repairs, "samples": samples, "made_by": made_by, "continuation_of": continuation_of,
        "rqa_queries": trajectory.rqa_queries.order_by("pk"),
        "rule_flags": trajectory.rule_flags.order_by("-created_at"),
        "sft_entries": SftEntry.objects.filter(trajectory=trajectory).order_by("pk"),
        "recollections": trajectory.recollections.order_by("pk"),
        "path": failure_path(trajectory, attribution, repairs, stage or ""),
        "visible": _visible_ids(user, related), "manager": sees_everything(user),
    }


def _evidence_rows(attribution: Attribution) -> list[dict]:
    """The cascade's levels in the fixed order, each with its conclusion and what it rests on."""
    rows = []
    for entry in attribution.evidence if isinstance(attribution.evidence, list) else []:
        if not isinstance(entry, dict):
            rows.append({"level": "?", "conclusion": "", "cause": "", "detail": str(entry), "steps": []})
            continue
        rows.append({"level": entry.get("level", "?"), "conclusion": entry.get("conclusion", ""),
                     "cause": entry.get("cause", ""), "detail": entry.get("detail", ""),
                     "steps": [i for i in entry.get("steps") or [] if isinstance(i, int)]})
    return sorted(rows, key=lambda row: row["level"] if isinstance(row["level"], int) else 99)


@role_required(ANNOTATOR, ADJUDICATOR, MANAGER)
def trajectory_page(request, trajectory_id):
    visible = trajectories_visible_to(request.user, Trajectory.objects.filter(pk=trajectory_id))
    trajectory = visible.select_related("query", "device", "run", "model_version", "annotator", "stated_by").first()
    if trajectory is None:
        raise Http404("No such trajectory.")
    return render(request, "flywheel/trajectory.html", trajectory_context(trajectory, request.user))
