"""The hand-back channel (§2.3.7): every collected trajectory that met a state a real farm cannot
inject (a login that expired, a CAPTCHA, a payment to verify, a region wall...; the fourteen classes
of flywheel/rules/handback.py) gives a targeted sample of the right behaviour there.

Whatever the model did on that screen, the sample teaches what it should have done: hand back with
call_user where a person must act, or tap the control that closes a safely skippable page. A sample
is a trajectory of the Hand-back line that reuses the source's stored frames: the executed steps
before the state as context (masked: no loss; the model's own steps there were judged, if at all,
with the trajectory), then the written step on the state's screen, which enters the SFT pool through
the SFT intake's consistency gate like every other sample. One sample per state per trajectory;
benchmark rollouts (evaluation, never training data), held-out queries and samples are never read.
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from devices.uitree import parse_hierarchy
from flywheel import jobs
from flywheel.blobs import read_blob
from flywheel.events import publish
from flywheel.models import Destination, HandbackSample, Line, Outcome, SftEntry, Step, Trajectory
from flywheel.pools import sft
from flywheel.rules.handback import HandbackClass, right_step, state_on_screen
from flywheel.rules.stops import StopKind

log = logging.getLogger(__name__)

SOURCE_LINES = (Line.AUTOMATIC, Line.SCHEMA, Line.SEMI_AUTO, Line.EXTERNAL, Line.RL)
# What a sample keeps of each step before the state (the frames by name, the context, the words).
CONTEXT_FIELDS = ("foreground_package", "activity_stack", "cot", "proposed_action", "executed_action", "edit",
                  "confidence", "anomaly", "audit", "takeover")


def on_trajectory_routed(sender, trajectory_id, outcome, reason="", **kwargs):
    """trajectory_routed receiver: look for hand-back states in the routed trajectory, on a worker
    (reading its screens is no part of routing). Which trajectories qualify, the job decides."""
    if settings.HANDBACK_SAMPLES:
        jobs.task(jobs.GATHER_HANDBACK).delay(trajectory_id)


def is_source(trajectory: Trajectory) -> bool:
    return (trajectory.line in SOURCE_LINES and not trajectory.query.evaluation_only
            and trajectory.destination != Destination.BENCHMARK)


def _roots(step: Step) -> list:
    try:
        return parse_hierarchy(read_blob(step.hierarchy.name).decode("utf-8", errors="replace"))
    except OSError:  # a lost dump shows nothing (nothing is invented from it)
        return []


def states_met(trajectory: Trajectory) -> list[tuple[Step, HandbackClass, object, list]]:
    """(step, class, the element that shows it, the screen) for the first screen of each state."""
    found, seen = [], set()
    for step in trajectory.steps.exclude(hierarchy="").order_by("index"):
        roots = _roots(step)
        hit = state_on_screen(roots) if roots else None
        if hit is not None and hit[0].key not in seen:
            seen.add(hit[0].key)
            found.append((step, hit[0], hit[1], roots))
    return found


def gather(trajectory_id: int) -> list[HandbackSample]:
    """The job: the trajectory's hand-back samples, made once (a second run finds them made)."""
    trajectory = Trajectory.objects.select_related("query").filter(pk=trajectory_id).first()
    if trajectory is None or not is_source(trajectory):
        return []
    made = []
    for step, klass, marker, roots in states_met(trajectory):
        written = right_step(klass, marker, roots)
        if written is None:
            log.info("trajectory %s step %s: %s shows no control to close it; no sample", trajectory.pk,
                     step.index, klass.key)
            continue
        sample = make_sample(trajectory, step, klass, *written)
        if sample is not None:
            made.append(sample)
    return made


def make_sample(source: Trajectory, at: Step, klass: HandbackClass, action: dict, cot: dict) -> HandbackSample | None:
    """The sample of `klass` met at step `at` of `source` (None when the source already has one)."""
    with transaction.atomic():
        Trajectory.objects.select_for_update().filter(pk=source.pk).first()  # one maker per source at a time
        if HandbackSample.objects.filter(source=source, state=klass.key).exists():
            return None
        now = timezone.now()
        sample = Trajectory.objects.create(
            query=source.query, line=Line.HANDBACK, device=source.device, model_version=source.model_version,
            derived_from=source, status=Trajectory.Status.COMPLETED, stop_kind=StopKind.HANDBACK_SAMPLE,
            stop_reason=f"{klass.label} at step {at.index} of #{source.pk}"[:200], finished_at=now)
        context = list(source.steps.filter(index__lt=at.index, executed_action__isnull=False).order_by("index"))
        copies = [Step(trajectory=sample, index=s.index, screenshot=s.screenshot.name, hierarchy=s.hierarchy.name,
                       timings={"screen": s.timings["screen"]} if s.timings.get("screen") else {}, label_masked=True,
                       **{name: getattr(s, name) for name in CONTEXT_FIELDS}) for s in context]
        copies.append(Step(
            trajectory=sample, index=at.index, screenshot=at.screenshot.name, hierarchy=at.hierarchy.name,
            foreground_package=at.foreground_package, activity_stack=at.activity_stack, cot=cot,
            proposed_action=action, executed_action=action, anomaly=at.anomaly,
            edit={"handback": {"state": klass.key, "behaviour": klass.behaviour.value, "source_step": at.pk,
                               "source_action": at.executed_action}},
            timings={"screen": at.timings["screen"]} if at.timings.get("screen") else {}))
        Step.objects.bulk_create(copies)
        # The usual door: the consistency gate, on the one step that carries a loss (the context is masked).
        gate = sft.run_gate(sample)
        gate.steps = [step for step in gate.steps if step.index == at.index]
        gate.issues = [issue for issue in gate.issues if issue.step_index == at.index]
        Trajectory.objects.filter(pk=sample.pk).update(verdict=Outcome.TRUE, destination=Destination.SFT)
        sample.verdict, sample.destination = Outcome.TRUE, Destination.SFT
        sft.admit(sample, SftEntry.Intake.HANDBACK, gate)
        made = HandbackSample.objects.create(source=source, sample=sample, step_index=at.index, state=klass.key,
                                             behaviour=klass.behaviour.value)
    publish("pools", pool="handback")
    return made
