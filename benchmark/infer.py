"""Evaluation runs, the infer phase (report §4.3; ClawGUI's decoupled infer → judge → metric).

An evaluation run pins everything that decides its score (benchmark version and content hash,
model and sampling, prompt version, judges, phone profiles) and carries out its rollouts as a
collection run on the benchmark line: the same per-host queues, leases, resets and executor as
every other line, the goal alone in the prompt, no injected anomalies, no Teacher. Each finished
rollout comes here (flywheel's engine hands benchmark-line trajectories to
`record_benchmark_rollout`) instead of HTSC routing, so nothing of the benchmark enters a pool.

Not scored, and why: the task's success check passing before any action (android_world's known
flaw), a phone lost or an environment that broke (reset, the audit's executor, a dead worker:
the query is collected again), a model endpoint that stopped answering (the run pauses; its work
stays queued and resumes when the endpoint answers again).
"""
import hashlib
import logging
import threading
import time

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from benchmark.models import Benchmark, EvalResult, EvalRun
from devices.models import Device
from devices.phone import PhoneUnavailable
from flywheel.collection.launch import cancel_run, dispatch_run, launch_run
from flywheel.collection.recollection import recollect
from flywheel.events import publish
from flywheel.judging.terminal_checks import read_and_compare
from flywheel.models import CollectionRun, Destination, Line, ModelVersion, Outcome, Trajectory
from flywheel.policies import check_endpoint_health, unservable_reason
from flywheel.policies.protocol import system_prompt
from flywheel.rules.stops import StopKind, holder_went_away

log = logging.getLogger(__name__)

DEFAULT_INFER = {"max_steps": 25, "timeout_s": 300, "screenshots_k": 5, "seed": 0, "phones": 4,
                 "recollect_limit": 3}
# Fixed for every evaluation (not overridable): a benchmark measures the model alone.
EVALUATION_ONLY = {"anomaly_rates": {}, "teacher_takeover_after": 0, "clarify_wait_s": 0, "repeats": 1}
# The environment broke it (the reset, the audit's executor, the collection code): collected again.
ENVIRONMENT_FAILURES = frozenset({StopKind.RESET_FAILED, StopKind.ACTION_FAILED, StopKind.LEASE_LOST,
                                  StopKind.BLOCKED, StopKind.CRASHED})


class EvaluationRefused(Exception):
    """The run cannot start as asked (the message says what to do)."""


def prompt_version() -> str:
    """A short hash of the system prompt the goal-only lines show: a changed prompt is a new version."""
    return "protocol-" + hashlib.sha256(system_prompt().encode()).hexdigest()[:12]


def phone_profiles() -> list[dict]:
    """The phones an evaluation may run on, as they are when it is pinned (apps, OS, resolution)."""
    return [{"serial": d.serial, "adb_server": d.adb_server, "status": d.status,
             **{k: v for k, v in d.readiness_profile.items() if k != "installed_apps"},
             "installed_apps": sorted(d.installed_apps or [])}
            for d in Device.objects.order_by("adb_server", "serial")]


def eval_items(benchmark: Benchmark, split: str = "all"):
    items = benchmark.items.exclude(review="retired").select_related("query")
    if split in ("open", "held_out"):
        items = items.filter(split=split)
    return items


def pinned_config(benchmark: Benchmark, model_version, split: str, overrides: dict | None) -> dict:
    from benchmark.judges import judge_roster

    unknown = sorted(set(overrides or {}) - set(DEFAULT_INFER))
    if unknown:
        raise EvaluationRefused(f"unknown evaluation setting(s): {', '.join(unknown)} "
                                f"(known: {', '.join(sorted(DEFAULT_INFER))})")
    infer = {**DEFAULT_INFER, **(overrides or {}), **EVALUATION_ONLY}
    return {
        "benchmark": {"id": benchmark.pk, "name": benchmark.name, "version": benchmark.version,
                      "content_hash": benchmark.content_hash, "split": split},
        "model": {"name": model_version.name, "kind": model_version.kind, "endpoint_url": model_version.endpoint_url,
                  "served_model_name": model_version.served_model_name, "sampling": model_version.sampling},
        "prompt_version": prompt_version(),
        "prompt": "goal only (no known path), full text history, last K screenshots",
        "judges": judge_roster(),
        "infer": infer,
        "phone_profiles": phone_profiles(),
        "pinned_at": timezone.now().isoformat(),
    }


def launch_evaluation(benchmark: Benchmark, model_version, split: str = "all", config: dict | None = None,
                      user=None, dispatch: bool = True) -> EvalRun:
    """Pin the config, plan one rollout per executable item, hand the rollouts to the phones."""
    if not benchmark.frozen:
        raise EvaluationRefused(f"{benchmark} is not frozen: review its queries and freeze it first, "
                                "so the score refers to one fixed set of queries")
    if split not in ("all", "open", "held_out"):
        raise EvaluationRefused("split is one of all, open, held_out")
    if unservable_reason(model_version):
        raise EvaluationRefused(unservable_reason(model_version))
    items = list(eval_items(benchmark, split))
    runnable = [item for item in items if item.executable]
    if not runnable:
        raise EvaluationRefused(f"{benchmark} has no executable query in split {split!r} "
                                "(no phone here offers its apps)")
    pinned = pinned_config(benchmark, model_version, split, config)
    with transaction.atomic():
        run = launch_run(Line.BENCHMARK, {"keys": [item.query.key for item in runnable]},
                         model_version=model_version, config=pinned["infer"], user=user, dispatch=False)
        pinned["not_executable"] = [{"key": i.query.key, "reason": i.not_executable_reason}
                                    for i in items if not i.executable]
        evaluation = EvalRun.objects.create(benchmark=benchmark, model_version=model_version, split=split,
                                            config=pinned, collection_run=run, total=len(runnable),
                                            created_by=user, status=EvalRun.Status.QUEUED)
        if dispatch:
            transaction.on_commit(lambda: dispatch_run(run))
    publish("benchmark", eval_run=evaluation.pk)
    return evaluation


def classify_stop(stop_kind: str) -> str:
    """What ended a benchmark rollout: initial_state, endpoint, not_executable (its preconditions
    could not be met), phone_lost (the phone or its worker went away), environment, cancelled, or
    finished (the model's own doing: scored)."""
    if stop_kind == StopKind.ALREADY_DONE:
        return "initial_state"
    if stop_kind == StopKind.ENDPOINT_FAILED:
        return "endpoint"
    if stop_kind == StopKind.PREREQUISITE_UNMET:
        return "not_executable"  # the item's environment (its preconditions) could not be set up
    if holder_went_away(stop_kind):
        return "phone_lost"  # the collection run re-queues the work item itself
    if stop_kind == StopKind.CANCELLED:
        return "cancelled"
    if stop_kind in ENVIRONMENT_FAILURES:
        return "environment"
    return "finished"


def terminal_readings(phone, verification: dict) -> list[dict]:
    """What the phone's terminal state says for each terminal check, read now (the judges rule on
    these stored readings, so a re-judge needs no phone)."""
    readings = []
    for check in (verification or {}).get("terminal") or []:
        try:
            passed, detail = read_and_compare(phone, check)
            readings.append({"check": check, "passed": passed, "detail": detail})
        except PhoneUnavailable:
            raise
        except Exception as error:  # an unreadable check is evidence too: that judge abstains
            readings.append({"check": check, "passed": None, "detail": f"{type(error).__name__}: {error}"[:300]})
    return readings


def record_benchmark_rollout(trajectory: Trajectory, phone):
    """The engine's finisher for the benchmark line: store the evidence, judge, score or re-collect."""
    from benchmark.judges import judge_result

    evaluation = EvalRun.objects.filter(collection_run_id=trajectory.run_id).select_related("benchmark").first()
    if evaluation is None:
        log.warning("benchmark trajectory %s has no evaluation run; it is left unjudged", trajectory.pk)
        return None
    item = evaluation.benchmark.items.get(query_id=trajectory.query_id)
    trajectory.refresh_from_db(fields=["flag", "stop_kind", "stop_reason", "status"])
    kind = classify_stop(trajectory.stop_kind)
    actions = [s.executed_action for s in trajectory.steps.exclude(executed_action__isnull=True).order_by("index")]
    evidence = {"stop_reason": trajectory.stop_reason, "stop_kind": kind, "actions": actions, "terminal": None}
    if kind == "finished" and phone is not None:
        try:
            evidence["terminal"] = terminal_readings(phone, trajectory.query.verification)
        except PhoneUnavailable:
            evidence["terminal"] = None
    with transaction.atomic():
        attempt = (EvalResult.objects.filter(eval_run=evaluation, item=item).aggregate(n=Max("attempt"))["n"] or 0) + 1
        EvalResult.objects.filter(eval_run=evaluation, item=item).update(superseded=True)
        result, _ = EvalResult.objects.get_or_create(
            trajectory=trajectory, defaults={"eval_run": evaluation, "item": item, "attempt": attempt,
                                             "evidence": evidence})
        evaluation.trajectories.add(trajectory)
        # The evaluation is its destination (set when the run created it; kept whatever made it).
        Trajectory.objects.filter(pk=trajectory.pk).exclude(destination=Destination.BENCHMARK).update(
            destination=Destination.BENCHMARK)
    if kind == "finished":
        judge_result(result)
        result.refresh_from_db()
        if result.judge_verdict == "env_error":
            _not_scored(result, "the judges saw the environment break it: re-collected", recollect_it=True)
    elif kind == "initial_state":
        _not_scored(result, f"initial-state check: {trajectory.flag}"[:300])
    elif kind == "not_executable":
        _not_scored(result, f"not executable here: {trajectory.stop_reason}"[:300])
    elif kind == "endpoint":
        _not_scored(result, f"the model endpoint stopped answering: {trajectory.stop_reason}"[:300], recollect_it=True)
        pause_evaluation(evaluation, f"the model endpoint stopped answering ({trajectory.stop_reason})"[:300])
    elif kind == "phone_lost":
        # The collection run gives the work item to another phone itself (the phone is quarantined).
        _not_scored(result, f"{trajectory.stop_reason[:250]}: re-collected when a phone takes its work again")
    elif kind == "environment":
        _not_scored(result, f"the environment broke it ({trajectory.stop_reason[:200]}): re-collected",
                    recollect_it=True)
    else:
        _not_scored(result, "cancelled before it finished")
    refresh_evaluation(evaluation.pk)
    return result


def _not_scored(result: EvalResult, reason: str, recollect_it: bool = False):
    with transaction.atomic():
        EvalResult.objects.filter(pk=result.pk).update(state=EvalResult.State.NOT_SCORED,
                                                       not_scored_reason=reason[:300], outcome="")
        Trajectory.objects.filter(pk=result.trajectory_id).update(verdict=Outcome.ENV_ERROR)
    if recollect_it:
        trajectory = Trajectory.objects.select_related("run", "query").get(pk=result.trajectory_id)
        if recollect(trajectory, reason) is None:
            EvalResult.objects.filter(pk=result.pk).update(
                not_scored_reason=(reason + "; not collected again (re-collection limit)")[:300])


def refresh_evaluation(evaluation_id: int, rescore: bool = False):
    """Progress from the results; the run is done once its rollouts are over and nothing waits.

    Scoring reads every result of the run, and a running evaluation is refreshed twice per rollout:
    its scores are brought up to date at most every SCORE_EVERY_S per process while it runs (the
    sweep's `rescore` always), and always once it stops running."""
    from benchmark.metric import score_evaluation

    evaluation = EvalRun.objects.select_related("collection_run").get(pk=evaluation_id)
    current = EvalResult.objects.filter(eval_run=evaluation, superseded=False)
    finished = current.exclude(state=EvalResult.State.RUNNING).values("item").distinct().count()
    EvalRun.objects.filter(pk=evaluation_id).update(completed=finished)
    status = {}
    if evaluation.status == EvalRun.Status.QUEUED:
        status.update(status=EvalRun.Status.RUNNING, started_at=timezone.now())
    run = evaluation.collection_run
    if evaluation.status in (EvalRun.Status.QUEUED, EvalRun.Status.RUNNING) and run is not None and (
            run.status == CollectionRun.Status.DONE) and not _open_rollouts(run):
        status.update(status=EvalRun.Status.DONE, finished_at=timezone.now())
    if status:  # a run paused, cancelled or finished meanwhile keeps its status
        EvalRun.objects.filter(pk=evaluation_id, status__in=[EvalRun.Status.QUEUED, EvalRun.Status.RUNNING]).update(
            **status)
    running = status.get("status", evaluation.status) in (EvalRun.Status.QUEUED, EvalRun.Status.RUNNING)
    if rescore or not running or _scoring_due(evaluation_id):
        score_evaluation(evaluation_id)
    publish("benchmark", throttle_s=1.0, eval_run=evaluation_id)


SCORE_EVERY_S = 5.0
_last_scored: dict[int, float] = {}
_last_scored_lock = threading.Lock()


def _scoring_due(evaluation_id: int) -> bool:
    """True at most once per SCORE_EVERY_S per evaluation in this process (a running run's scores)."""
    now = time.monotonic()
    with _last_scored_lock:
        if now - _last_scored.get(evaluation_id, float("-inf")) < SCORE_EVERY_S:
            return False
        _last_scored[evaluation_id] = now
        if len(_last_scored) > 256:   # long-finished runs
            for stale in [pk for pk, at in _last_scored.items() if now - at > 60 * SCORE_EVERY_S]:
                del _last_scored[stale]
        return True


def _open_rollouts(run) -> bool:
    return CollectionRun.objects.filter(pk=run.pk).with_open_work().exists()


def pause_evaluation(evaluation: EvalRun, reason: str):
    """Stop taking work (the queued rollouts stay queued) until the endpoint answers again."""
    with transaction.atomic():
        EvalRun.objects.filter(pk=evaluation.pk, status__in=[EvalRun.Status.QUEUED, EvalRun.Status.RUNNING]).update(
            status=EvalRun.Status.PAUSED, status_reason=reason[:300])
        CollectionRun.objects.filter(pk=evaluation.collection_run_id, status__in=[
            CollectionRun.Status.QUEUED, CollectionRun.Status.RUNNING]).update(status=CollectionRun.Status.PAUSED)
    log.warning("evaluation %s paused: %s", evaluation.pk, reason)
    publish("benchmark", eval_run=evaluation.pk)


def resume_evaluation(evaluation: EvalRun, check_endpoint: bool = True) -> str:
    """Resume a paused run ('' when resumed, else why not): its queued rollouts are dispatched again."""
    evaluation.refresh_from_db()
    if evaluation.status != EvalRun.Status.PAUSED:
        return f"the run is {evaluation.get_status_display().lower()}, not paused"
    version = evaluation.model_version
    if check_endpoint and version.kind == ModelVersion.Kind.ENDPOINT:
        health = check_endpoint_health(version.endpoint_url, model=version.served_model_name)
        if not health.get("ok"):
            return f"the model endpoint still does not answer: {health.get('error') or health}"
    with transaction.atomic():
        EvalRun.objects.filter(pk=evaluation.pk).update(status=EvalRun.Status.RUNNING, status_reason="")
        CollectionRun.objects.filter(pk=evaluation.collection_run_id).update(
            status=CollectionRun.Status.RUNNING, finished_at=None)
        run = evaluation.collection_run
        transaction.on_commit(lambda: dispatch_run(run))
    publish("benchmark", eval_run=evaluation.pk)
    return ""


def resume_paused_evaluations() -> dict:
    """Beat: every paused run whose endpoint answers again goes on."""
    resumed, waiting = [], []
    for evaluation in EvalRun.objects.filter(status=EvalRun.Status.PAUSED).select_related("model_version"):
        (waiting if resume_evaluation(evaluation) else resumed).append(evaluation.pk)
    return {"resumed": resumed, "waiting": waiting}


def cancel_evaluation(evaluation: EvalRun):
    if evaluation.collection_run is not None:
        CollectionRun.objects.filter(pk=evaluation.collection_run_id, status=CollectionRun.Status.PAUSED).update(
            status=CollectionRun.Status.RUNNING)
        cancel_run(evaluation.collection_run)
    EvalRun.objects.filter(pk=evaluation.pk).exclude(status__in=[EvalRun.Status.DONE, EvalRun.Status.FAILED]).update(
        status=EvalRun.Status.CANCELLED, finished_at=timezone.now())
    publish("benchmark", eval_run=evaluation.pk)


def sweep_evaluations() -> dict:
    """Beat: bring every running evaluation's progress and status up to date (a worker that died
    between a rollout and its count leaves nothing behind)."""
    swept = []
    for evaluation_id in EvalRun.objects.filter(status__in=[EvalRun.Status.QUEUED, EvalRun.Status.RUNNING]).values_list(
            "pk", flat=True):
        refresh_evaluation(evaluation_id, rescore=True)
        swept.append(evaluation_id)
    return {"swept": swept}
