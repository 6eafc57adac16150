"""The seeded trajectories planned in memory before anything is written: which line, run, phone,
policy and person; how long; how HTSC voted and where each went; what adjudicators decided; how
each failure was attributed and repaired; which repairs became ECDM samples.

Outcomes come from the report's own rules (flywheel.rules): votes are drawn per system around a
hidden truth, HTSC's consensus decides, its routing gives the destination, the RL metabolism rule
decides each group. So the seeded data has the shapes real data has, by construction.
"""
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from flywheel.models import ModelVersion
from flywheel.rules.htsc import ADJUDICATION_OUTCOMES, htsc_consensus, route_outcome
from flywheel.rules.pools import WAIT, rl_pool_metabolism
from flywheel.rules.stops import StopKind
from perf.scale_seed.catalog import L3_CAUSES, Catalog, pick

BASE_LINES = [("semi_auto", 0.11), ("automatic", 0.37), ("schema", 0.15), ("external", 0.06), ("rl", 0.24),
              ("benchmark", 0.07)]
ECDM_SHARE = 0.12                 # samples the ECDM made from failures (prefix + correction)
MEAN_STEPS = {"semi_auto": 8, "automatic": 11, "schema": 9, "external": 10, "rl": 12, "benchmark": 10}
SUCCESS = {"automatic": 0.3, "schema": 0.72, "external": 0.35, "rl": 0.45, "benchmark": 0.25}
RUN_SIZE = {"automatic": (60, 400), "schema": (60, 300), "external": (40, 200), "benchmark": (100, 300)}
GROUP_SIZE = 4                    # G rollouts per RL-pool query
L1_CAUSES = ["popup", "permission", "network", "crash", "login"]
L2_CAUSES = [("unverifiable", "query_review"), ("ambiguous", "query_review"), ("verifier_rule", "rule_fix")]


@dataclass(slots=True)
class Planned:
    id: int
    query_id: int
    line: str
    started_at: datetime
    run_id: int | None = None
    device_id: int | None = None
    version_id: int | None = None
    annotator_id: int | None = None
    status: str = "completed"
    verdict: str = "pending"
    destination: str = ""
    steps: int = 1
    finished_at: datetime | None = None
    stop_kind: str = ""
    stop_reason: str = ""
    votes: tuple | None = None          # (A, B, C, safety violation)
    htsc: str | None = None             # the Verdict row's outcome; None: no Verdict row
    flagged: str = ""
    adjudication: tuple | None = None   # (decision or "", adjudicator id, claimed_until, decided_at)
    attribution: tuple | None = None    # (level, cause, owner, ecdm path, first bad step, capability, class id)
    repair: dict | None = None
    sft_intake: str = ""
    recollection_of: int | None = None
    derived_from: int | None = None
    consistency_issues: list = field(default_factory=list)


@dataclass
class Plan:
    runs: list = field(default_factory=list)          # dicts
    trajectories: list = field(default_factory=list)  # Planned, in id order
    rollouts: list = field(default_factory=list)      # (entry id, run id, outcomes, decision, created_at)


def plan_trajectories(rng, catalog: Catalog, count: int, total_steps: int, first_id: int, first_run_id: int,
                      now: datetime) -> Plan:
    plan = Plan()
    samples_wanted = round(count * ECDM_SHARE)
    base = _plan_base(rng, catalog, count - samples_wanted, first_id, first_run_id, now, plan)
    _judge(rng, catalog, base, now)
    _link_recollections(rng, base)
    _attribute_and_repair(rng, catalog, base)
    samples = _samples(rng, base, samples_wanted, first_id + len(base))
    plan.trajectories = base + samples
    for run in plan.runs:
        members = [t for t in base if t.run_id == run["id"]]
        run["completed"] = sum(t.status != "running" for t in members)
        run["total"] = len(members)
    _fit_steps(rng, plan.trajectories, total_steps)
    _rl_groups(catalog, plan)
    return plan


def _run_times(rng, count, now):
    return sorted(now - timedelta(days=90 * (1 - rng.random() ** 0.6)) for _ in range(count))


def _plan_base(rng, catalog, count, first_id, first_run_id, now, plan):
    by_line = {line: round(count * share) for line, share in BASE_LINES}
    by_line["automatic"] += count - sum(by_line.values())
    lines = []
    for line, n in by_line.items():
        if line == "semi_auto":
            continue
        left = n
        while left > 0:
            if line == "rl":
                size = min(left, GROUP_SIZE * rng.randint(10, 60))
            else:
                size = min(left, rng.randint(*RUN_SIZE[line]))
            lines.append((line, size))
            left -= size
    rng.shuffle(lines)
    starts = _run_times(rng, len(lines), now - timedelta(minutes=30))
    trajectories = []
    queries = catalog.query_ids
    for n, ((line, size), created) in enumerate(zip(lines, starts)):
        run_id = first_run_id + n
        live = n >= len(lines) - 2          # the two newest runs are still collecting
        version = _run_version(rng, catalog, line)
        plan.runs.append({"id": run_id, "line": line, "version_id": version, "created_at": created,
                          "status": "running" if live else pick(rng, [("done", 0.95), ("cancelled", 0.03), ("failed", 0.02)]),
                          "created_by_id": rng.choice(catalog.managers), "size": size})
        if line == "rl":
            pool = rng.sample(catalog.rl_query_ids, min(size // GROUP_SIZE, len(catalog.rl_query_ids)))
            run_queries = [q for q in pool for _ in range(GROUP_SIZE)]
            run_queries += [rng.choice(queries) for _ in range(size - len(run_queries))]
        else:
            run_queries = [rng.choice(queries) for _ in range(size)]
        devices = rng.sample(catalog.devices, min(8, len(catalog.devices)))
        for position, query_id in enumerate(run_queries):
            started = created + timedelta(seconds=position * rng.uniform(3, 8))
            running = live and position >= size - 8
            trajectories.append(Planned(
                id=0, query_id=query_id, line=line, run_id=run_id, started_at=started, version_id=version,
                device_id=devices[position % len(devices)], status="running" if running else "completed"))
    for _ in range(by_line["semi_auto"]):
        started = now - timedelta(days=90 * (1 - rng.random() ** 0.6))
        trajectories.append(Planned(id=0, query_id=rng.choice(queries), line="semi_auto", started_at=started,
                                    annotator_id=rng.choice(catalog.annotators), device_id=rng.choice(catalog.devices),
                                    version_id=_semi_auto_version(rng, catalog)))
    trajectories.sort(key=lambda t: t.started_at)
    open_sessions = set()
    for n, t in enumerate(trajectories):
        t.id = first_id + n
        if t.line == "semi_auto" and t.started_at > now - timedelta(hours=2) and t.annotator_id not in open_sessions:
            open_sessions.add(t.annotator_id)
            t.status = rng.choice(["running", "paused"])
    return trajectories


def _run_version(rng, catalog, line):
    endpoints = [pk for pk, kind in catalog.versions if kind in (ModelVersion.Kind.ENDPOINT, ModelVersion.Kind.COMPACT)] or [catalog.versions[0][0]]
    if line == "schema":
        return catalog.versions[0][0]
    return rng.choice(endpoints) if rng.random() < 0.7 else catalog.versions[0][0]


def _semi_auto_version(rng, catalog):
    endpoints = [pk for pk, kind in catalog.versions if kind == ModelVersion.Kind.ENDPOINT]
    return rng.choice(endpoints) if endpoints and rng.random() < 0.4 else catalog.versions[0][0]


def _vote(rng, truth, right, abstain):
    roll = rng.random()
    if roll < abstain:
        return "abstain"
    if roll < abstain + right:
        return truth
    return rng.choice([v for v in ("true", "false", "env_error") if v != truth])


def _judge(rng, catalog, trajectories, now):
    """Votes → HTSC → destination; people's decisions on Undetermined ones; semi-auto verification."""
    for t in trajectories:
        if t.status in ("running", "paused"):
            continue
        t.finished_at = t.started_at + timedelta(minutes=rng.uniform(0.5, 6))
        if t.line == "semi_auto":
            _verify_semi_auto(rng, t)
            continue
        if rng.random() < 0.03:
            t.status, t.stop_kind, t.stop_reason = "interrupted", StopKind.WORKER_STOPPED, "worker lost (heartbeat expired)"
        else:
            t.stop_kind, t.stop_reason = pick(rng, [
                ((StopKind.SUCCESS, "terminate: success"), 0.55), ((StopKind.FAILURE, "terminate: failure"), 0.15),
                ((StopKind.MAX_STEPS, "max steps reached"), 0.15), ((StopKind.REPEATED_ACTIONS, "3 identical actions"), 0.1),
                ((StopKind.HANDOFF, "call_user: needs login"), 0.05)])
        if t.finished_at > now - timedelta(minutes=20) and rng.random() < 0.5:
            continue  # just finished: the judge has not got to it yet
        roll = rng.random()
        truth = "env_error" if roll < 0.06 else "true" if roll < 0.06 + SUCCESS[t.line] else "false"
        if t.line == "benchmark":  # judged by the benchmark's own judges, never routed
            t.verdict = truth if rng.random() < 0.9 else "undetermined"
            continue
        if rng.random() < 0.003:
            t.flagged, t.htsc = "flagged for a person: the verification spec has no terminal check", "undetermined"
            outcome = "undetermined"
        else:
            t.votes = (_vote(rng, truth, 0.93, 0.12), _vote(rng, truth, 0.85, 0.05), _vote(rng, truth, 0.8, 0.05),
                       "payment screen tapped" if rng.random() < 0.01 else "")
            outcome = t.htsc = htsc_consensus(*t.votes[:3], safety_violation=bool(t.votes[3]))
        t.verdict, t.destination = outcome, route_outcome(outcome)
        if outcome == "true":
            t.sft_intake = "htsc_true"
        elif outcome == "undetermined":
            _adjudicate(rng, catalog, t, truth, now)


def _link_recollections(rng, trajectories):
    """Most Env_ERROR rollouts of a run are collected again by a later item of the same run."""
    by_run: dict = {}
    for t in trajectories:
        if t.run_id and t.line != "rl":
            by_run.setdefault(t.run_id, []).append(t)
    for members in by_run.values():
        for current, following in zip(members, members[1:]):
            if current.verdict == "env_error" and following.recollection_of is None and rng.random() < 0.8:
                following.query_id, following.recollection_of = current.query_id, current.id


def _verify_semi_auto(rng, t):
    roll = rng.random()
    if roll < 0.02:
        t.status, t.stop_kind, t.stop_reason = ("not_executable", StopKind.NOT_EXECUTABLE,
                                                "not executable: the app asks for a login")
    elif roll < 0.07:
        t.stop_kind, t.stop_reason = StopKind.SUCCESS, "terminate: success"
        t.consistency_issues = [{"step": 1, "rule": "decision_matches_action", "message": "[Decision] names another element"}]
    else:
        t.stop_kind, t.stop_reason = StopKind.SUCCESS, "terminate: success"
        t.verdict, t.destination, t.sft_intake = "true", "sft", "semi_auto_verified"


def _adjudicate(rng, catalog, t, truth, now):
    adjudicator = rng.choice(catalog.adjudicators)
    roll = rng.random()
    if roll < 0.72 and t.finished_at < now - timedelta(hours=1):
        decision = {"true": "correct", "false": "wrong", "env_error": "environment"}[truth]
        t.adjudication = (decision, adjudicator, None, t.finished_at + timedelta(hours=rng.uniform(1, 48)))
        t.verdict = ADJUDICATION_OUTCOMES[decision]
        t.destination = route_outcome(t.verdict)
        t.sft_intake = "adjudicated" if decision == "correct" else ""
    elif roll < 0.76:  # someone is judging it right now
        t.adjudication = ("", adjudicator, now + timedelta(minutes=rng.uniform(1, 9)), None)


def _attribute_and_repair(rng, catalog, trajectories):
    """Cascaded attribution of each failure (the newest ones not yet), then its ECDM repair."""
    classes = catalog.failure_classes
    for t in trajectories:
        if t.verdict not in ("false", "env_error") or t.line in ("benchmark", "semi_auto") or rng.random() < 0.06:
            continue
        first_bad = rng.randrange(max(1, MEAN_STEPS[t.line]))
        capability = rng.choice([c for _, c in classes] or [""])
        if t.verdict == "env_error" or rng.random() < 0.08:
            cause = rng.choice(L1_CAUSES)
            path = "env" if cause == "popup" else ""
            t.attribution = (1, cause, "environment", path, None, "", None)
        elif rng.random() < 0.09:
            cause, owner = rng.choice(L2_CAUSES)
            t.attribution = (2, cause, owner, "", None, "", None)
            continue
        else:
            cause = rng.choice(L3_CAUSES)
            path = pick(rng, [("step", 0.6), ("rqa", 0.15), ("counterfactual", 0.12), ("", 0.13)])
            if cause == "over_scoped" and path == "step":
                path = "rqa"
            t.attribution = (3, cause, "ecdm", path, first_bad, capability, classes.get((cause, capability)))
        if path:
            t.repair = _repair(rng, path, first_bad)


def _repair(rng, path, first_bad):
    if path == "counterfactual":
        return {"path": path, "status": "done", "step_index": None}
    confidence = round(rng.uniform(0.2, 0.98), 2)
    human = path == "step" and confidence < 0.6
    status = ("needs_human" if rng.random() < 0.45 else pick(rng, [("done", 0.6), ("failed", 0.4)])) if human else \
        pick(rng, [("done", 0.86), ("pending", 0.06), ("failed", 0.08)])
    return {"path": path, "status": status, "step_index": first_bad if path == "step" else None,
            "confidence": confidence, "human": human}


def _samples(rng, base, wanted, first_id):
    """ECDM samples (prefix + correction) of done step/RQA/env repairs; the rest of the done ones
    are made without a sample (their sample's budget went elsewhere) and count as failed here."""
    candidates = [t for t in base if t.repair and t.repair["status"] == "done" and t.repair["path"] != "counterfactual"]
    rng.shuffle(candidates)
    chosen, rest = candidates[:wanted], candidates[wanted:]
    for t in rest:
        t.repair["status"] = "failed"
    samples = []
    for n, original in enumerate(sorted(chosen, key=lambda t: t.finished_at)):
        started = original.finished_at + timedelta(minutes=rng.uniform(1, 30))
        sample = Planned(id=first_id + n, query_id=original.query_id, line="ecdm", started_at=started,
                         version_id=original.version_id, finished_at=started + timedelta(seconds=2),
                         verdict="true", destination="sft", sft_intake="ecdm_repaired", derived_from=original.id,
                         stop_kind=StopKind.REPAIRED_SAMPLE,
                         stop_reason=f"ECDM {original.repair['path']} repair of #{original.id}")
        original.repair["sample_id"] = sample.id
        samples.append(sample)
    for n in range(wanted - len(chosen)):  # too few failures (a tiny seed): more verified sessions instead
        samples.append(Planned(id=first_id + len(chosen) + n, query_id=rng.choice(base).query_id, line="semi_auto",
                               started_at=base[-1].started_at, finished_at=base[-1].started_at, verdict="true",
                               destination="sft", sft_intake="semi_auto_verified", stop_kind=StopKind.SUCCESS,
                               stop_reason="terminate: success"))
    return samples


def _fit_steps(rng, trajectories, total):
    """Steps per trajectory around each line's mean, scaled so they add up to `total` exactly."""
    originals = {t.id: t for t in trajectories}
    base = [t for t in trajectories if t.line != "ecdm"]
    raw = [max(1.0, rng.gammavariate(3, MEAN_STEPS[t.line] / 3)) for t in base]
    sample_share = sum(1 for t in trajectories if t.line == "ecdm") * 4
    scale = max(total - sample_share, len(base)) / sum(raw)
    for t, r in zip(base, raw):
        t.steps = max(1, round(r * scale))
    for t in trajectories:
        if t.line == "ecdm":
            original = originals[t.derived_from]
            cut = original.repair["step_index"]
            cut = min(cut if cut is not None else original.steps - 1, original.steps - 1)
            original.repair["step_index"] = cut if original.repair["path"] == "step" else None
            t.steps = cut + 1
    adjustable = [t for t in base if not (t.repair and t.repair.get("sample_id"))]
    residual = total - sum(t.steps for t in trajectories)
    while residual and adjustable:
        t = rng.choice(adjustable)
        step = 1 if residual > 0 else -1
        if t.steps + step >= 1:
            t.steps += step
            residual -= step


def _rl_groups(catalog, plan):
    """Each finished RL run's groups, metabolised by the report's rule."""
    entry_of = catalog.rl_entry_of
    groups: dict = {}
    for t in plan.trajectories:
        if t.line == "rl" and t.query_id in entry_of:
            groups.setdefault((t.run_id, t.query_id), []).append(t)
    for (run_id, query_id), members in groups.items():
        outcomes = [t.verdict for t in members]
        decision = rl_pool_metabolism(outcomes)
        if decision != WAIT:
            last = max(t.finished_at or t.started_at for t in members)
            plan.rollouts.append((entry_of[query_id], run_id, outcomes, decision, last + timedelta(seconds=5)))
