"""The ECDM's samples (§2.5.2): a failed trajectory's kept prefix plus the step(s) the repair wrote,
as a trajectory of the ECDM line that enters the SFT pool as `ecdm_repaired`.

A sample reuses the original's stored frames (the same content-addressed blob names): nothing is
copied on disk, and the correction sits on the frozen screen it was made for. It is never judged,
never attributed and never re-collected (its line is ECDM), and a repair has at most one sample.
"""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from flywheel.judging.destinations import route_trajectory
from flywheel.models import Line, Outcome, Repair, SftEntry, Step, Trajectory
from flywheel.policies.protocol import TAGS
from flywheel.rules.stops import StopKind

INTAKE = "ecdm_repaired"
# What a sample keeps of each original step (the frames by name, the step's context and reasoning).
COPIED_FIELDS = ("foreground_package", "activity_stack", "cot", "proposed_action", "executed_action", "edit",
                 "confidence", "model_io", "anomaly", "audit", "label_masked", "score", "takeover")


def kept_steps(original: Trajectory, keep_until: int) -> list[Step]:
    """The executed steps before `keep_until` (a proposal the audit blocked taught nothing)."""
    return list(original.steps.filter(index__lt=keep_until, executed_action__isnull=False).order_by("index"))


def clean_cot(cot: dict | None) -> dict:
    return {tag: str((cot or {}).get(tag) or "").strip() for tag in TAGS}


def _written_step(sample: Trajectory, original: Trajectory, written: dict, repair: Repair) -> Step:
    """A step the repair wrote: `written` = {"index", "screenshot", "hierarchy", "action", "cot"}
    (+ optional "edit", "screen"); the original's step at that index lends its context."""
    source = original.steps.filter(index=written["index"]).first()
    screen = written.get("screen") or (source.timings.get("screen") if source else None)
    return Step(trajectory=sample, index=written["index"], screenshot=written.get("screenshot") or "",
                hierarchy=written.get("hierarchy") or "",
                foreground_package=source.foreground_package if source else "",
                activity_stack=source.activity_stack if source else [],
                cot=clean_cot(written.get("cot")), proposed_action=written["action"],
                executed_action=written["action"], anomaly=source.anomaly if source else None,
                edit={"ecdm": repair.path, "repair": repair.pk, **(written.get("edit") or {})},
                timings={"screen": screen} if screen else {})


def make_sample(original: Trajectory, repair: Repair, keep_until: int, final_step: dict | None,
                query=None, more_steps: list[dict] | None = None) -> Trajectory:
    """Prefix (executed steps with index < keep_until) + `final_step` (+ `more_steps`, e.g. the step
    that resumes after a closed pop-up), routed True into the SFT pool as `ecdm_repaired`, linked to
    the repair, which is done. `query` (RQA's Q′) replaces the original's query. Idempotent: a
    repair that has a sample returns it.
    """
    written = [step for step in [final_step, *(more_steps or [])] if step]
    last_kept = keep_until - 1
    for step in written:
        if step["index"] <= last_kept:
            raise ValueError(f"a written step (index {step['index']}) must come after the kept prefix "
                             f"(steps before {keep_until})")
        last_kept = step["index"]
    with transaction.atomic():
        locked = Repair.objects.select_for_update().get(pk=repair.pk)
        if locked.sample_id:
            repair.sample_id, repair.status = locked.sample_id, locked.status
            return locked.sample
        prefix = kept_steps(original, keep_until)
        if not prefix and not written:
            raise ValueError("nothing to keep: no executed step before the cut and no step written")
        now = timezone.now()
        notes = [s.executed_action.get("text", "") for s in prefix if s.executed_action.get("action") == "take_notes"]
        sample = Trajectory.objects.create(
            query=query or original.query, line=Line.ECDM, model_version=original.model_version,
            derived_from=original, status=Trajectory.Status.COMPLETED, memory=[n for n in notes if n],
            stop_kind=StopKind.REPAIRED_SAMPLE, stop_reason=f"ECDM {repair.get_path_display().lower()} of #{original.pk}"[:200],
            teacher_assisted=any(s.takeover for s in prefix), finished_at=now)
        copies = [Step(trajectory=sample, index=s.index, screenshot=s.screenshot.name, hierarchy=s.hierarchy.name,
                       timings={"screen": s.timings.get("screen")} if s.timings.get("screen") else {},
                       **{name: getattr(s, name) for name in COPIED_FIELDS}) for s in prefix]
        copies += [_written_step(sample, original, step, repair) for step in written]
        Step.objects.bulk_create(copies)
        route_trajectory(sample, Outcome.TRUE, reason=f"ECDM {repair.path} repair of #{original.pk}", intake=INTAKE)
        SftEntry.objects.filter(trajectory=sample, intake=INTAKE).update(repair=locked)
        Repair.objects.filter(pk=repair.pk).update(sample=sample, status=Repair.Status.DONE, finished_at=now)
        repair.sample, repair.status, repair.finished_at = sample, Repair.Status.DONE, now
    return sample
