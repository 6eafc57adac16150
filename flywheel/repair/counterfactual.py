"""Counterfactual query derivation (§2.5.2): turning a class of failures into targeted tasks.

Level-3 failures are clustered by structured attribution: the class key is
"level:cause:capability" (flywheel/rules/recurrence.py), and each class keeps the centroid of its
failures' feature-text embeddings (a failure whose attribution names no capability joins the
nearest class of its cause by that embedding). When a class recurs across several trajectories
AND several queries, its features are induced (triggering scenarios, target flows, the missing
intuition) and adversarial queries are synthesised against it, grounded in GEM pages or, without
a GEM, in the failing trajectories' own screens; the Teacher LLM sharpens them when configured.
Each passes the intake gates (a rejected one is kept, rejected, with its gate and reason); a
passed one is a ready Query of source "derived" linked to the class, with a done counterfactual
Repair; it is offered to the RL query pool (channel "derived") and enters it only once the current
policy has been measured on it (pools/rl.await_measurement, the Phase-1 uniform gate), and query
generation favours the open classes' capabilities (generation.capability_cycle).
"""
from __future__ import annotations

import logging

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from flywheel.endpoints.chat import JudgeUnavailable, ask_json
from flywheel.events import publish
from flywheel.models import App, Attribution, FailureClass, FunctionNode, ModelVersion, Query, Repair, RlQueryEntry
from flywheel.pools.rl import await_measurement
from flywheel.queries.gates import run_gates
from flywheel.repair.counterfactual_drafts import plan_adversarial
from flywheel.repair.counterfactual_features import (
    class_label,
    embed_texts,
    failure_text,
    grounded_contexts,
    induce_features,
    members_of,
)
from flywheel.rules.recurrence import failure_class_key, recurring_error_class, recurs_again_after_derivation

log = logging.getLogger(__name__)
COUNTERFACTUAL = Repair.Path.COUNTERFACTUAL


def recur_minimums() -> tuple[int, int]:
    return settings.ECDM_RECUR_MIN_TRAJECTORIES, settings.ECDM_RECUR_MIN_QUERIES


def per_class() -> int:
    return settings.ECDM_DERIVE_PER_CLASS


def class_similarity() -> float:
    return settings.ECDM_CLASS_SIMILARITY


# --- clustering ------------------------------------------------------------------------------------

def _unit(vector) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def _nearest_capability(level: int, cause: str, vector) -> str:
    """The capability of the most similar class of the same cause (by centroid), if similar enough."""
    best, best_score = "", class_similarity()
    for capability, centroid in (FailureClass.objects.filter(level=level, cause=cause, centroid__isnull=False)
                                 .exclude(capability="").values_list("capability", "centroid")):
        score = float(_unit(centroid) @ vector)
        if score >= best_score:
            best, best_score = capability, score
    return best


def _counts(failure_class, since=None) -> tuple[int, int]:
    rows = Attribution.objects.filter(failure_class=failure_class)
    if since is not None:
        rows = rows.filter(created_at__gt=since)
    return (rows.values("trajectory_id").distinct().count(),
            rows.values("trajectory__query_id").distinct().count())


def _status(failure_class) -> str:
    minimum = recur_minimums()
    if failure_class.status == FailureClass.Status.WATCHING:
        if recurring_error_class(failure_class.trajectory_count, failure_class.query_count, *minimum):
            return FailureClass.Status.RECURRING
    elif failure_class.status == FailureClass.Status.DERIVED and failure_class.derived_at:
        if recurs_again_after_derivation(*_counts(failure_class, since=failure_class.derived_at), *minimum):
            return FailureClass.Status.RECURRING
    return failure_class.status


def assign_class(attribution: Attribution) -> FailureClass | None:
    """Put a Level-3 attribution in its failure class (None for Levels 1 and 2): counts of
    trajectories and distinct queries, the centroid of the failure-feature embeddings, and the
    status (recurring once the class recurs across enough queries). Idempotent."""
    if attribution.level != 3:
        return None
    vector = _unit(embed_texts([failure_text(attribution)])[0])
    capability = attribution.capability or _nearest_capability(attribution.level, attribution.cause, vector)
    key = failure_class_key(attribution.level, attribution.cause, capability)
    with transaction.atomic():
        failure_class, _created = FailureClass.objects.get_or_create(
            key=key, defaults={"level": attribution.level, "cause": attribution.cause, "capability": capability,
                               "label": class_label(attribution.cause, capability)})
        failure_class = FailureClass.objects.select_for_update().get(pk=failure_class.pk)
        if attribution.failure_class_id != failure_class.pk:
            n = failure_class.trajectory_count
            previous = np.asarray(failure_class.centroid, dtype=np.float32) if failure_class.centroid else None
            mean = vector if previous is None or n == 0 else (previous * n + vector) / (n + 1)
            failure_class.centroid = [round(float(x), 5) for x in mean]
            Attribution.objects.filter(pk=attribution.pk).update(failure_class=failure_class)
            attribution.failure_class = failure_class
        failure_class.trajectory_count, failure_class.query_count = _counts(failure_class)
        failure_class.status = _status(failure_class)
        failure_class.save()
    return failure_class


def open_classes():
    """Classes whose gap is open: recurring, or derived and being attacked by their queries."""
    return FailureClass.objects.filter(status__in=[FailureClass.Status.RECURRING, FailureClass.Status.DERIVED])


# --- synthesis ----------------------------------------------------------------------------------------

TEACHER_PROMPT = (
    "You write adversarial phone tasks that target a GUI agent's weakness. Given the weakness, how the agent "
    "failed, and a draft task grounded in real screen labels, rewrite the draft so it forces the agent to "
    "exercise exactly the missing skill. Keep every screen label of the draft verbatim and the app name; at "
    'most two sentences, under 50 words, the way a real person talks. Answer only JSON: {"text": task}')


def teacher_version() -> ModelVersion | None:
    name = settings.TEACHER_MODEL_VERSION
    return ModelVersion.objects.filter(name=name, kind=ModelVersion.Kind.ENDPOINT).first() if name else None


def teacher_rewrite(version, drafts, features: dict, problems: list) -> int:
    """The Teacher LLM sharpens each offline draft; an unusable answer keeps the offline text."""
    how = "; ".join(f"{s['wrong_action']} on {s['screen']!r} ({s['task'][:80]})"
                    for s in features.get("triggering_scenarios", [])[:3])
    rewritten = 0
    for draft in drafts:
        user = (f"Weakness: {features.get('label')}\nMissing intuition: {features.get('missing_intuition')}\n"
                f"How it failed: {how}\nDraft: {draft.text}")
        try:
            text = ask_json(version, TEACHER_PROMPT, user, timeout=30).get("text")
        except JudgeUnavailable as error:
            problems.append(f"Teacher rewrite unusable, offline text kept: {error}"[:200])
            continue
        anchor = draft.labels.get("target_page") or draft.labels.get("leaf") or ""
        if not isinstance(text, str) or not text.strip() or len(text.split()) > 60 or anchor not in text:
            problems.append("Teacher rewrite dropped the grounding or was too long; offline text kept")
            continue
        draft.text, draft.origin = " ".join(text.split()), "llm"
        rewritten += 1
    return rewritten


# --- writing ---------------------------------------------------------------------------------------------

def _write_query(failure_class, draft, key: str) -> Query:
    rejected = bool(draft.rejected_by)
    labels = {**draft.labels, "origin": draft.origin}
    gate1 = draft.gate_results.get("gate1") or {}
    labels.setdefault("complexity", gate1.get("complexity", ""))
    query = Query.objects.create(
        key=key, text=draft.text, tier=draft.tier, subclass=draft.subclass, persona=draft.persona,
        capabilities=list(draft.capabilities), labels=labels, risk=draft.risk or "low",
        prerequisites=list(draft.prerequisites), source="derived", tags=["derived", "adversarial"],
        known_path=draft.known_path, verification=draft.verification, gate_results=draft.gate_results,
        gem_path=list(draft.gem_path), failure_class=failure_class,
        status=Query.Status.REJECTED if rejected else Query.Status.READY,
        status_reason=(f"{draft.rejected_by}: {draft.rejection_reason}" if rejected
                       else f"derived against the failure class {failure_class.key}"))
    apps = [App.objects.get_or_create(package=p, defaults={"label": p})[0] for p in dict.fromkeys(draft.apps)]
    query.set_apps(apps)
    nodes = FunctionNode.objects.in_bulk(list(dict.fromkeys(draft.functions)))
    query.set_functions([nodes[f] for f in dict.fromkeys(draft.functions) if f in nodes])
    return query


def _link_repairs(failure_class, members, passed: list[Query], reason: str, batch: int) -> int:
    """One done counterfactual Repair per passed query: the members' pending counterfactual
    repairs first, new ones on the query's source trajectory after. Pending repairs left over are
    covered by the batch (done), or failed with the reason when every draft was rejected."""
    trajectory_ids = [m.trajectory.pk for m in members]
    pending = list(Repair.objects.select_for_update().filter(
        Q(trajectory_id__in=trajectory_ids) | Q(failure_class=failure_class),
        path=COUNTERFACTUAL, status=Repair.Status.PENDING))
    now, linked = timezone.now(), 0
    by_trajectory = {m.trajectory.pk: m for m in members}
    for query in passed:
        source = query.labels.get("source_trajectory")
        repair = next((r for r in pending if r.trajectory_id == source), None) or (pending[0] if pending else None)
        if repair is not None:
            pending.remove(repair)
        else:
            member = by_trajectory.get(source) or members[0]
            repair = Repair(trajectory=member.trajectory, attribution=member.attribution, path=COUNTERFACTUAL)
        repair.derived_query, repair.failure_class, repair.status = query, failure_class, Repair.Status.DONE
        repair.finished_at = now
        repair.reason = f"adversarial query {query.key} derived against {failure_class.key} (batch {batch})"
        repair.save()
        linked += 1
    for repair in pending:
        repair.failure_class, repair.finished_at = failure_class, now
        if passed:
            repair.derived_query, repair.status = passed[0], Repair.Status.DONE
            repair.reason = f"covered by batch {batch} of {failure_class.key}: {len(passed)} adversarial queries"
        else:
            repair.status, repair.reason = Repair.Status.FAILED, reason
        repair.save()
    return linked


def derive_for_class(failure_class: FailureClass, count: int | None = None, user=None) -> list[Query]:
    """Induce the class's features and synthesise up to `count` adversarial queries (ECDM_DERIVE_
    PER_CLASS by default). Returns every query written: ready ones (offered to the RL pool, each with a
    done Repair) and rejected ones (with their gate and reason). A class with no failed trajectory
    left, or whose apps offer no material, records why in its features and gets nothing."""
    count = per_class() if count is None else max(0, int(count))
    failure_class.refresh_from_db()
    members = members_of(failure_class)
    batch = int((failure_class.features or {}).get("derivations", 0)) + 1
    problems: list[str] = []
    if not members:
        _note(failure_class, batch - 1, "no failed trajectory in this class")
        return []
    features = induce_features(failure_class, members)
    contexts, grounded_in = grounded_contexts(failure_class, members, features)
    drafts = plan_adversarial(contexts, failure_class.cause, failure_class.capability, count,
                              seed=f"{failure_class.key}:{batch}")
    if not drafts:
        _note(failure_class, batch - 1, f"no screen of {', '.join(features['apps']) or 'its apps'} offers material "
                                        "for an adversarial query", features)
        return []
    version = teacher_version()
    if version is not None:
        teacher_rewrite(version, drafts, features, problems)
    run_gates(drafts, version)
    with transaction.atomic():
        locked = FailureClass.objects.select_for_update().get(pk=failure_class.pk)
        if int((locked.features or {}).get("derivations", 0)) + 1 != batch:
            log.info("class %s was derived meanwhile; batch %s dropped", locked.key, batch)
            return []
        queries = [_write_query(locked, draft, f"derived-{locked.pk}-{batch}-{i}") for i, draft in enumerate(drafts)]
        passed = [q for q in queries if q.status == Query.Status.READY]
        for query in passed:  # measured by the current policy before the gate admits it (§2.4.3)
            await_measurement(query, RlQueryEntry.Channel.DERIVED)
        rejected = [q.status_reason for q in queries if q.status == Query.Status.REJECTED]
        why = "every adversarial query was rejected by the intake gates: " + "; ".join(rejected[:3])
        _link_repairs(locked, members, passed, why[:500], batch)
        locked.features = {**features, "derivations": batch, "last_derivation": {
            "batch": batch, "at": timezone.now().isoformat(), "grounded_in": grounded_in, "drafts": len(drafts),
            "passed": len(passed), "rejected": len(rejected), "problems": problems[:10],
            "trajectory_count": locked.trajectory_count,
            "by": getattr(user, "username", "") or "automatic", "teacher": version.name if version else "offline"}}
        locked.label = locked.label or features["label"]
        if passed:
            locked.status, locked.derived_at = FailureClass.Status.DERIVED, timezone.now()
        locked.save()
    if passed:
        publish("pools", pool="rl")
    failure_class.refresh_from_db()
    return queries


def _note(failure_class, derivations: int, why: str, features: dict | None = None) -> None:
    merged = {**(failure_class.features or {}), **(features or {}), "derivations": derivations,
              "last_derivation": {"at": timezone.now().isoformat(), "passed": 0, "note": why,
                                  "trajectory_count": failure_class.trajectory_count}}
    FailureClass.objects.filter(pk=failure_class.pk).update(features=merged)
    failure_class.features = merged


def derivation_due(failure_class) -> bool:
    """A recurring class is derived unless its last attempt yielded nothing and no failure joined
    it since (then another attempt would only write the same rejected queries again)."""
    last = (failure_class.features or {}).get("last_derivation") or {}
    return not (last.get("passed") == 0 and last.get("trajectory_count") == failure_class.trajectory_count)


def derive_recurring() -> dict:
    """Counterfactual derivation for every recurring class that is due (beat). One class that
    breaks does not stop the others."""
    outcome = {"classes": 0, "queries": 0, "rejected": 0, "failed": [], "skipped": 0}
    for failure_class in FailureClass.objects.filter(status=FailureClass.Status.RECURRING):
        if not derivation_due(failure_class):
            outcome["skipped"] += 1
            continue
        try:
            queries = derive_for_class(failure_class)
        except Exception as error:  # recorded; the class is tried again at the next beat
            log.exception("counterfactual derivation of %s failed", failure_class.key)
            outcome["failed"].append(f"{failure_class.key}: {type(error).__name__}: {error}"[:200])
            continue
        outcome["classes"] += 1
        outcome["queries"] += sum(q.status == Query.Status.READY for q in queries)
        outcome["rejected"] += sum(q.status == Query.Status.REJECTED for q in queries)
    return outcome


def counterfactual_repair(repair: Repair) -> Repair:
    """Run one repair of the counterfactual path (for the ECDM's orchestration): its failure is
    classed; a recurring class is derived now (the repair is filled with a query); a class already
    derived covers it with its latest adversarial query; a class that has not recurred yet leaves
    the repair pending, to be filled when it does (derive_recurring)."""
    attribution = repair.attribution or repair.trajectory.attributions.first()
    failure_class = repair.failure_class or (attribution.failure_class if attribution else None) or \
        (assign_class(attribution) if attribution else None)
    if failure_class is None:
        repair.status, repair.finished_at = Repair.Status.FAILED, timezone.now()
        repair.reason = "counterfactual derivation needs a Level-3 (model) failure class; this failure has none"
        repair.save(update_fields=["status", "finished_at", "reason"])
        return repair
    Repair.objects.filter(pk=repair.pk).update(failure_class=failure_class)
    if failure_class.status == FailureClass.Status.RECURRING and derivation_due(failure_class):
        derive_for_class(failure_class)
    elif failure_class.status == FailureClass.Status.DERIVED:
        latest = failure_class.derived_queries.filter(status=Query.Status.READY).order_by("-created_at").first()
        if latest is not None:
            Repair.objects.filter(pk=repair.pk, status=Repair.Status.PENDING).update(
                derived_query=latest, status=Repair.Status.DONE, finished_at=timezone.now(),
                reason=f"the class {failure_class.key} is already derived; {latest.key} targets it")
    elif failure_class.status == FailureClass.Status.RECURRING:
        last = (failure_class.features or {}).get("last_derivation") or {}
        Repair.objects.filter(pk=repair.pk, status=Repair.Status.PENDING).update(
            reason=f"the last derivation of {failure_class.key} yielded no query "
                   f"({last.get('note') or 'all rejected by the gates'}); waiting for more failures of the class")
    else:
        trajectories, queries = failure_class.trajectory_count, failure_class.query_count
        minimum = recur_minimums()
        Repair.objects.filter(pk=repair.pk, status=Repair.Status.PENDING).update(
            reason=f"waiting for {failure_class.key} to recur: {trajectories}/{minimum[0]} trajectories, "
                   f"{queries}/{minimum[1]} queries")
    repair.refresh_from_db()
    return repair

