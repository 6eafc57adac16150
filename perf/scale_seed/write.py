"""Writing the planned trajectories and everything around them: runs with their work items and
phone leases, trajectories, steps with the CPT pool, votes, verdicts, adjudications, attributions,
repairs, the SFT pool and the RL metabolism of each group."""
import time
from datetime import timedelta

from django.utils import timezone

from devices.models import Lease, WorkItem
from flywheel.models import (
    Adjudication,
    Attribution,
    CollectionRun,
    CptEntry,
    ModelVersion,
    Repair,
    RlRollout,
    SftEntry,
    Step,
    Trajectory,
    Verdict,
    Vote,
)
from perf.scale_seed.steps import FrameNames, trajectory_steps

CHUNK = 4000  # trajectories whose steps are generated and written together


def write_runs(writer, plan, catalog, now):
    rows, items, leases = [], [], []
    members = {}
    for t in plan.trajectories:
        if t.run_id:
            members.setdefault(t.run_id, []).append(t)
    for run in plan.runs:
        queued = 20 if run["status"] == "running" else 0
        done = members.get(run["id"], [])
        finished = None if run["status"] == "running" else max((t.finished_at or t.started_at) for t in done)
        rows.append({"id": run["id"], "line": run["line"], "model_version_id": run["version_id"],
                     "query_filter": {"apps": [], "tiers": [], "tags": []} if run["line"] != "rl" else {"pool": "rl"},
                     "config": {"phones": 8, "repeats": 4 if run["line"] == "rl" else 1, "max_steps": 25, "timeout_s": 300},
                     "status": run["status"], "total": len(done) + queued, "completed": run["completed"],
                     "created_by_id": run["created_by_id"], "created_at": run["created_at"],
                     "dispatched_at": run["created_at"], "finished_at": finished, "celery_task_id": f"seed-{run['id']}"})
        kind = f"collect:run:{run['id']}"
        repeats = {}
        for t in done:
            status = "assigned" if t.status == "running" else "failed" if t.status == "interrupted" else "done"
            repeat = repeats[t.query_id] = repeats.get(t.query_id, -1) + 1
            items.append({"kind": kind, "payload": {"run_id": run["id"], "query_id": t.query_id, "repeat": repeat},
                          "requirements": {"apps": catalog.packages_of(t.query_id)}, "status": status,
                          "device_id": t.device_id, "attempts": 1, "created_at": run["created_at"],
                          "assigned_at": t.started_at, "finished_at": t.finished_at})
        for n in range(queued):
            items.append({"kind": kind, "payload": {"run_id": run["id"], "query_id": catalog.query_ids[n], "repeat": 0},
                          "requirements": {"apps": catalog.packages_of(catalog.query_ids[n])},
                          "created_at": run["created_at"]})
        for device in sorted({t.device_id for t in done}):
            live = run["status"] == "running"
            leases.append({"device_id": device, "holder": f"collection:run:{run['id']}", "purpose": "collection",
                           "acquired_at": run["created_at"], "expires_at": now + timedelta(seconds=60) if live else finished,
                           "released_at": None if live else finished})
    writer.copy(CollectionRun, rows, total=len(rows))  # their ids were reserved when planned
    writer.copy(WorkItem, _with_ids(writer, WorkItem, items), total=len(items))
    _write_leases(writer, plan, leases, now)


def _write_leases(writer, plan, leases, now):
    """One lease per run and phone, one per annotator session; a phone has one open lease at most."""
    for t in plan.trajectories:
        if t.line == "semi_auto":
            live = t.status in ("running", "paused")
            end = t.finished_at or t.started_at
            leases.append({"device_id": t.device_id, "holder": f"session:{t.id}", "user_id": t.annotator_id,
                           "purpose": "semi-automatic session", "acquired_at": t.started_at,
                           "expires_at": now + timedelta(minutes=5) if live else end, "released_at": None if live else end})
    held = set()
    for lease in sorted(leases, key=lambda row: row["acquired_at"], reverse=True):
        if lease["released_at"] is None:
            if lease["device_id"] in held:
                lease["released_at"] = lease["acquired_at"]
            held.add(lease["device_id"])
    writer.copy(Lease, _with_ids(writer, Lease, leases), total=len(leases))


def _with_ids(writer, model, rows):
    first = writer.reserve(model, len(rows))
    for n, row in enumerate(rows):
        row["id"] = first + n
    return rows


def _trajectory_row(t):
    # A benchmark rollout's destination is its evaluation; a finished session's outcome is stated by
    # its annotator (the seed's sessions all end with terminate: success).
    stated = t.line == "semi_auto" and t.status == "completed" and t.stop_kind == "terminate_success"
    return {"id": t.id, "query_id": t.query_id, "run_id": t.run_id, "device_id": t.device_id, "line": t.line,
            "model_version_id": t.version_id, "annotator_id": t.annotator_id, "status": t.status,
            "stop_kind": str(t.stop_kind), "stop_reason": t.stop_reason, "verdict": t.verdict,
            "destination": "benchmark" if t.line == "benchmark" else t.destination,
            "stated_outcome": "success" if stated else "", "stated_by_id": t.annotator_id if stated else None,
            "stated_at": t.finished_at if stated else None,
            "consistency_issues": t.consistency_issues, "recollection_of_id": t.recollection_of,
            "derived_from_id": t.derived_from, "flag": t.flagged, "started_at": t.started_at,
            "finished_at": t.finished_at, "judging_since": t.finished_at if t.htsc else None}


def write_trajectories(writer, plan):
    # Recollections and samples point at earlier ids: every trajectory is written before any link is
    # needed, in one COPY whose rows are in id order.
    writer.copy(Trajectory, (_trajectory_row(t) for t in plan.trajectories), total=len(plan.trajectories))


def write_steps(writer, rng, plan, catalog, total_steps):
    """Steps and CPT entries, CHUNK trajectories at a time (memory stays flat at any size)."""
    frames = FrameNames([app.package for app in catalog.apps])
    endpoints = {pk for pk, kind in catalog.versions if kind in (ModelVersion.Kind.ENDPOINT, ModelVersion.Kind.COMPACT)}
    next_step = writer.reserve(Step, total_steps)
    started, written, cpt_written = time.monotonic(), 0, 0
    for offset in range(0, len(plan.trajectories), CHUNK):
        steps, cpt = [], []
        for t in plan.trajectories[offset:offset + CHUNK]:
            rows, samples = trajectory_steps(rng, t, catalog.packages_of(t.query_id), catalog.text_of(t.query_id),
                                             frames, t.version_id in endpoints, next_step)
            next_step += len(rows)
            steps.extend(rows)
            cpt.extend(samples)
        written += writer.copy(Step, steps, quiet=True)
        cpt_written += writer.copy(CptEntry, _with_ids(writer, CptEntry, cpt), quiet=True)
        rate = written / max(time.monotonic() - started, 1e-6)
        writer.out.write(f"  steps: {written:,}/{total_steps:,}, CPT entries: {cpt_written:,} ({rate:,.0f} steps/s)")
    return written, cpt_written


def write_judging(writer, plan, catalog):
    votes, verdicts, adjudications = [], [], []
    for t in plan.trajectories:
        when = t.finished_at
        if t.votes:
            for system, vote in zip("ABC", t.votes[:3]):
                votes.append({"trajectory_id": t.id, "system": system, "vote": vote, "safety_violation": t.votes[3],
                              "rationale": _vote_rationale(system, vote), "details": {"checks": 2 if system == "A" else 4},
                              "created_at": when + timedelta(seconds=2)})
        if t.htsc:
            rationale = t.flagged or "; ".join(f"{s}={v}: {_vote_rationale(s, v)}" for s, v in zip("ABC", t.votes[:3]))
            verdicts.append({"trajectory_id": t.id, "outcome": t.htsc, "safety_vetoed": bool(t.votes and t.votes[3]),
                             "rationale": rationale, "created_at": when + timedelta(seconds=3)})
        if t.adjudication:
            decision, adjudicator, claimed_until, decided_at = t.adjudication
            adjudications.append({"trajectory_id": t.id, "adjudicator_id": adjudicator, "claimed_until": claimed_until,
                                  "decision": decision, "note": "checked the final screen" if decision else "",
                                  "created_at": (decided_at or claimed_until) - timedelta(minutes=3),
                                  "decided_at": decided_at})
    writer.copy(Vote, _with_ids(writer, Vote, votes), total=len(votes))
    writer.copy(Verdict, _with_ids(writer, Verdict, verdicts), total=len(verdicts))
    writer.copy(Adjudication, _with_ids(writer, Adjudication, adjudications), total=len(adjudications))


def _vote_rationale(system, vote):
    if vote == "abstain":
        return "the terminal state could not be read" if system == "A" else "no milestone applies"
    return {"A": "terminal check", "B": "milestones in order", "C": "path plausible"}[system] + \
        (" passed" if vote == "true" else " failed" if vote == "false" else ": network unreachable")


def write_repair_side(writer, plan, catalog):
    attributed = [t for t in plan.trajectories if t.attribution]
    attributions = []
    for t in attributed:
        level, cause, owner, path, first_bad, capability, class_id = t.attribution
        first_bad = None if first_bad is None else min(first_bad, max(t.steps - 1, 0))
        attributions.append({"trajectory_id": t.id, "level": level, "cause": cause, "first_bad_step": first_bad,
                             "features": {"cause": cause, "stop_reason": t.stop_reason}, "owner": owner,
                             "evidence": [{"level": n, "conclusion": "no" if n < level else cause}
                                          for n in range(1, level + 1)],
                             "capability": capability, "ecdm_path": path, "failure_class_id": class_id,
                             "created_at": t.finished_at + timedelta(seconds=30)})
    writer.copy(Attribution, _with_ids(writer, Attribution, attributions), total=len(attributions))
    repairs = [_repair_row(t, row, catalog.annotators) for t, row in zip(attributed, attributions) if t.repair]
    sft = [{"trajectory_id": t.id, "intake": t.sft_intake, "created_at": t.finished_at + timedelta(seconds=4)}
           for t in plan.trajectories if t.sft_intake]
    repair_of_sample = {}
    for row in _with_ids(writer, Repair, repairs):
        if row["sample_id"]:
            repair_of_sample[row["sample_id"]] = row["id"]
    writer.copy(Repair, repairs, total=len(repairs))
    for row in sft:
        row["repair_id"] = repair_of_sample.get(row["trajectory_id"])
    writer.copy(SftEntry, _with_ids(writer, SftEntry, sft), total=len(sft))
    rollouts = [{"entry_id": entry, "run_id": run, "outcomes": outcomes, "decision": decision, "created_at": when}
                for entry, run, outcomes, decision, when in plan.rollouts]
    writer.copy(RlRollout, _with_ids(writer, RlRollout, rollouts), total=len(rollouts))


def _repair_row(t, attribution, annotators):
    repair = t.repair
    when = attribution["created_at"] + timedelta(seconds=10)
    status, path = repair["status"], repair["path"]
    human = repair.get("human", False)
    person = annotators[t.id % len(annotators)]
    by_human = human and status in ("done", "failed")
    row = {"trajectory_id": t.id, "attribution_id": attribution["id"], "path": path, "status": status,
           "step_index": repair.get("step_index"), "confidence": repair.get("confidence"), "human_fallback": human,
           "human_reason": f"Teacher confidence {repair.get('confidence')} < 0.6" if human else "",
           "teacher_output": {"action": {"action": "click", "point": [0.5, 0.4], "coords": "unit"},
                              "cot": {"Decision": "tap the right control"}, "confidence": repair.get("confidence"),
                              "source": "known_path"} if path == "step" else None,
           "correction": {"by": "human" if by_human else "teacher", "action": {"action": "click", "point": [540, 960]}}
           if status == "done" and path == "step" else None,
           "replay": {"status": "replayed"} if status == "done" and path == "step" else {},
           "repaired_by_id": person if by_human and status == "done" else None,
           "claimed_by_id": person if by_human or (status == "needs_human" and t.id % 9 == 0) else None,
           "claimed_until": when + timedelta(minutes=10) if by_human else None,
           "sample_id": repair.get("sample_id"), "reason": "" if status != "failed" else "the prefix no longer replays",
           "created_at": when, "finished_at": when + timedelta(minutes=2) if status in ("done", "failed") else None}
    if status == "needs_human" and t.id % 9 == 0:  # someone is on it now
        row["claimed_until"] = timezone.now() + timedelta(minutes=8)
    return row
