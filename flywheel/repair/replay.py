"""Replaying a corrected prefix on a phone (§2.5.2: "a complete multi-step deviate–diagnose–recover
trajectory ... can only be re-obtained on real devices").

An idle phone that meets the query's requirements is leased and reset to its baseline; the kept
steps 1..N−1 run again through the executor (each input audited on the screen as it is), and each
screen they reach must be the page recorded then. On step N's screen the correction runs, then the
original trajectory's policy carries on in the collection engine's own step loop (collect_steps).
Only a prefix that replayed becomes a trajectory (line ECDM, derived from the original, no run),
judged with the phone like any collected one; the correction feeds the CPT pool as every executed
step does (recorder.clean_for_cpt / feed_cpt).

A prefix that no longer replays is recorded on the repair (replay.status "failed" and why); the
sample made from the stored frames stays in the SFT pool: nothing is lost.
"""
from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from devices import leases
from devices.actions import RESOLVED_FIELDS
from devices.executor import ActionExecutor
from devices.models import Device
from devices.observation import observe
from devices.phone import PhoneConnection, PhoneUnavailable
from devices.profiles import satisfies
from devices.reset import ResetError, reset_phone
from flywheel.collection import recorder
from flywheel.collection.engine import CollectionConfig, PhoneLost, collect_steps, crashed, finish_trajectory
from flywheel.models import App, Line, Repair, Step, Trajectory
from flywheel.policies import policy_for
from flywheel.repair.samples import kept_steps
from flywheel.repair.screens import screen_heading, stored_hierarchy, stored_print
from flywheel.rules.stops import Stop, StopKind
from flywheel.screens.page_identity import fingerprint, same_page, thresholds_for

log = logging.getLogger(__name__)
SETTLE_TRIES, SETTLE_S = 3, 0.5      # a page still loading gets a second and a third look
STALE_RUN = timedelta(minutes=30)   # a replay "running" longer than this belongs to a dead worker
DONE = ("replayed", "failed", "skipped")


class ReplayFailed(Exception):
    """The prefix no longer replays (the reason says where and why)."""


def lease_ttl() -> timedelta:
    return timedelta(seconds=settings.COLLECTION_LEASE_SECONDS)


def claim(repair_id: int) -> Repair | None:
    """The one right to run this replay: queued, not already running in a live worker."""
    now = timezone.now()
    with transaction.atomic():
        repair = Repair.objects.select_for_update().select_related("trajectory__query").get(pk=repair_id)
        replay = dict(repair.replay or {})
        if replay.get("status") in DONE or repair.sample_id is None or not repair.correction:
            return None
        since = replay.get("running_since")
        if since and datetime.fromisoformat(since) > now - STALE_RUN:
            return None
        replay.update(status="queued", running_since=now.isoformat())
        Repair.objects.filter(pk=repair_id).update(replay=replay)
    return repair


def lease_phone(query, repair_id: int, preferred=None):
    """(device, lease) of an idle phone that can run the query (the original's first), or (None, None)."""
    requirements = query.phone_requirements()
    phones = Device.objects.filter(status=Device.Status.IDLE, adb_server__in=settings.ADB_SERVERS).order_by("serial")
    for device in sorted(phones, key=lambda d: d.pk != getattr(preferred, "pk", None)):
        if not satisfies(device.readiness_profile, requirements):
            continue
        try:
            return device, leases.acquire(device, holder=f"repair:replay:{repair_id}", ttl=lease_ttl(),
                                          purpose=f"ECDM replay of repair #{repair_id}")
        except leases.LeaseRefused:
            continue
    return None, None


def heading(xml: str) -> str:
    return screen_heading(xml) or "a screen without text"


def settle_on(phone, step: Step):
    """Observe until the phone shows the page recorded at `step`; ReplayFailed when it does not."""
    wanted, wanted_xml = stored_print(step), stored_hierarchy(step)
    app = App.objects.filter(package=step.foreground_package).first()
    thresholds = thresholds_for(app)
    for attempt in range(SETTLE_TRIES):
        seen = observe(phone)
        if same_page(fingerprint(seen.png, seen.hierarchy_xml), wanted, thresholds):
            return seen
        if attempt < SETTLE_TRIES - 1:
            time.sleep(SETTLE_S)
    raise ReplayFailed(f"step {step.index}: the phone shows another page than the one recorded "
                       f"(recorded {heading(wanted_xml)!r}, now {heading(seen.hierarchy_xml)!r})")


def runnable(action: dict) -> dict:
    """A recorded action as the executor takes it again (open: the package it resolved to)."""
    action = dict(action)
    if action.get("action") == "open" and action.get("package"):
        action["app"] = action["package"]
    return {k: v for k, v in action.items() if k not in RESOLVED_FIELDS}


def run_on(executor, action: dict, seen, where: str):
    result = executor.execute(runnable(action), hierarchy_xml=seen.hierarchy_xml)
    if result.ok:
        return result
    if result.phone_lost:
        raise PhoneUnavailable(result.error)
    why = ("the lease on the phone was lost" if result.lease_lost else
           f"the safety audit blocked it: {result.reason}" if result.blocked else f"it failed: {result.error}")
    raise ReplayFailed(f"{where} did not run again: {why}"[:300])


def replay_prefix(repair: Repair, phone, executor, device) -> list[tuple]:
    """Reset, replay steps < N, run the correction on step N's screen: [(observation, result, source)]."""
    original, query, index = repair.trajectory, repair.trajectory.query, repair.step_index
    target = original.steps.filter(index=index).first()
    prefix = kept_steps(original, index)
    for step in [*prefix, target]:
        if step is None or not step.screenshot or not step.hierarchy:
            raise ReplayFailed(f"step {index if step is None else step.index} has no stored screen to compare with")
    outcome = reset_phone(phone, query.reset or None, apps=query.app_packages, baseline=device.baseline or None)
    if not outcome["ok"]:
        log.info("replay of repair %s: reset reported %s", repair.pk, outcome["errors"])
    done = []
    for step in prefix:
        seen = settle_on(phone, step)
        done.append((seen, run_on(executor, step.executed_action, seen, f"step {step.index}"), step))
    seen = settle_on(phone, target)
    done.append((seen, run_on(executor, repair.correction["action"], seen, f"the correction of step {index}"), None))
    return done


def write_step(trajectory: Trajectory, index: int, seen, result, source: Step | None, repair: Repair) -> Step:
    """A replayed step of the continuation; the correction also feeds the CPT pool (a new sample)."""
    step = recorder.record_observation(trajectory, index, seen)
    step.executed_action = step.proposed_action = result.action
    step.audit = recorder.audit_record(result)
    cpt_sample = None
    if source is not None:
        step.cot, step.edit = source.cot, {"replayed_from": source.pk, **(
            {"clarify_answer": source.edit["clarify_answer"]} if (source.edit or {}).get("clarify_answer") else {})}
    else:
        step.cot = repair.correction.get("cot") or {}
        step.edit = {"ecdm": "correction", "repair": repair.pk, "by": repair.correction.get("by", ""),
                     **({"explanation": repair.correction["explanation"]} if repair.correction.get("explanation") else {})}
        cpt_sample = recorder.clean_for_cpt(step, result.action, tuple(step.timings.get("screen") or (1080, 2400)))
    with transaction.atomic():
        step.save()
        recorder.feed_cpt(cpt_sample)
    if result.control and result.control.get("kind") == "take_notes":
        recorder.remember(trajectory, result.control["text"])
    return step


def continuation(repair: Repair, done: list, phone, executor, lease, device) -> dict:
    """The replayed steps, then the original's policy goes on from the corrected step: the engine's
    step loop, without a reset, where no person waits for a clarify."""
    original = repair.trajectory
    trajectory = Trajectory.objects.create(query=original.query, device=device, line=Line.ECDM,
                                           model_version=original.model_version, derived_from=original,
                                           status=Trajectory.Status.RUNNING)
    try:
        for index, (seen, result, source) in enumerate(done):
            write_step(trajectory, index, seen, result, source, repair)
        stop = recorder.StepOutcome(trajectory.steps.get(index=len(done) - 1), done[-1][1]).stop
        if stop is None:  # the correction did not end it
            config = CollectionConfig.from_dict(original.run.config if original.run_id else {})
            config.anomaly_rates = {}
            executed = [result.action for _seen, result, _source in done]
            stop = collect_steps(trajectory, phone, policy_for(original.model_version), config, executor, len(done),
                                 executed, lease=lease, lease_ttl=lease_ttl(), people_answer=False)
    except Exception as error:  # whatever broke, what was collected is judged and routed
        log.exception("replay of repair %s: the continuation broke", repair.pk)
        lost = isinstance(error, (PhoneLost, PhoneUnavailable))
        stop = Stop(StopKind.PHONE_LOST, f"phone lost: {error}") if lost else crashed(error)
        finish_trajectory(trajectory, stop, phone=None)
        return {"status": "failed", "reason": f"the continuation broke off: {stop.detail}"[:300],
                "trajectory": trajectory.pk, "prefix_steps": len(done) - 1, "device": device.serial}
    finish_trajectory(trajectory, stop, phone=phone)
    trajectory.refresh_from_db(fields=["verdict", "destination", "status"])
    return {"status": "replayed", "trajectory": trajectory.pk, "steps": trajectory.steps.count(),
            "prefix_steps": len(done) - 1, "stop_kind": stop.kind.value, "stop_reason": stop.detail,
            "verdict": trajectory.verdict, "device": device.serial}


def replay_and_continue(repair_id: int) -> dict:
    """Lease, reset, replay, correct, continue, judge; the outcome is written to repair.replay."""
    repair = claim(repair_id)
    if repair is None:
        return dict(Repair.objects.get(pk=repair_id).replay or {})
    device, lease = lease_phone(repair.trajectory.query, repair_id, preferred=repair.trajectory.device)
    if device is None:
        result = {"status": "skipped", "reason": "no idle phone"}
    else:
        phone = PhoneConnection.for_device(device)
        executor = ActionExecutor(phone, holder=f"repair:replay:{repair_id}", device=device, lease=lease,
                                  lease_ttl=lease_ttl())
        try:
            with leases.kept_alive(lease, ttl=lease_ttl()):
                done = replay_prefix(repair, phone, executor, device)
            result = continuation(repair, done, phone, executor, lease, device)
        except ReplayFailed as error:
            result = {"status": "failed", "reason": str(error)[:300], "device": device.serial}
        except ResetError as error:
            result = {"status": "failed", "reason": f"the phone could not be reset: {error}"[:300]}
        except PhoneUnavailable as error:
            result = {"status": "failed", "reason": f"the phone stopped answering: {error}"[:300]}
        except Exception as error:  # recorded on the repair; the sample stays
            log.exception("replay of repair %s broke", repair_id)
            result = {"status": "failed", "reason": f"{type(error).__name__}: {error}"[:300]}
        finally:
            leases.release(lease)
    result["finished_at"] = timezone.now().isoformat()
    Repair.objects.filter(pk=repair_id).update(replay=result)
    return result
