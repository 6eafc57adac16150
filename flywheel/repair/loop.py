"""The self-evolution loop (§2.5): rollout of M(t) on the RL query pool → HTSC + cascaded
attribution → ECDM → training → re-rollout of M(t+1), round after round.

`advance_loop(loop_id)` is called by beat every 30 s, and may be called again at any time (after a
crash, twice at once): it reads where a round stands from the database alone and moves it on when
what it waits for is done. A round's stages:

    ROLLOUT    its RL run (created with the round, in one transaction, so one run per round)
               collects G rollouts of M(t) per RL-pool query; the pool metabolises per group
    JUDGING    every rollout has a verdict (Undetermined waits for a person, Env_ERROR for its
               re-collection) and the ECDM has attributed every failure
    ECDM       no repair of the round's failures is pending (repairs waiting for a person do not
               hold the loop; they count in the salvage yield when they are done)
    TRAINING   the trainer named by settings.EVOLUTION_TRAINER trains M(t+1) — or, with none (or
               a loop set to train=0),
    AWAITING_TRAINING  the loop says it stopped before training and waits for a model version
               derived from M(t) (parent = M(t)), made by hand or by the training issue's runs
    DONE       M(t+1) exists: the next round rolls it out

The trainer contract: EVOLUTION_TRAINER is a dotted path to `trainer(loop_round) -> dict` with
"status" ("running" | "done" | "paused" | "failed"), "model_version" (the ModelVersion or its id, when
done) and "detail" (words for the page). "paused" stops the loop with the detail as its reason until a
person resumes it (loop_control.resume_loop); the trainer is then asked again. It is asked at every step while the round trains, so it must
start one training per round (key it by loop_round.pk) and answer how that training stands.
"""
import logging
from collections import Counter

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone
from django.utils.module_loading import import_string

from flywheel.collection.launch import launch_run, select_queries
from flywheel.collection.run_config import clean_run_config
from flywheel.events import publish
from flywheel.models import (
    CollectionRun,
    CptEntry,
    EvolutionLoop,
    Line,
    LoopRound,
    ModelVersion,
    Outcome,
    Repair,
    RlQueryEntry,
    RlRollout,
    SftEntry,
    Trajectory,
)
from flywheel.policies import default_policy_version
from flywheel.rules.numbers import ROW_ID_MAX, whole_number
from flywheel.rules.salvage import SUPERVISION_PATHS, salvage_yield

log = logging.getLogger(__name__)
Stage = LoopRound.Stage
Status = EvolutionLoop.Status
LIVE = (Status.QUEUED, Status.RUNNING)
FAILED = (Outcome.FALSE, Outcome.ENV_ERROR)
TEACHER_ASSISTED = "teacher_assisted"   # round_stats' key for True rollouts the Teacher took over in
NO_TRAINER = ("stopped before training: no trainer is set up on this console, so no new model was made "
              "(an administrator sets EVOLUTION_TRAINER)")
OWN_TRAINING = "stopped before training: this loop was started to have its models trained outside it (train = 0)"
RULES_UNTRAINED = ("stopped before training: the current model is the built-in rule policy, which has no weights "
                   "to train (start a loop from a compact model or a served checkpoint to have it trained)")
EMPTY_POOL = ("The RL query pool has no active or banked query to roll out. Bank Phase-0 queries first (the "
              "button on the Self-evolution loops page), or let counterfactual derivation add queries, then start "
              "the loop.")
# name: (lowest, default, highest) — whole numbers
# wait_for_people: 1 = an Undetermined rollout holds its round until a person adjudicates it; 0 = the
# round goes on without it (it stays in the adjudication queue), for a loop nobody attends.
# train: 1 = the console's trainer trains M(t+1); 0 = the round waits for a model made elsewhere.
# rl_iterations: RL iterations after each round's SFT stage (a served model's trainer; the report
# gives no number per round: 2 lets a round learn from its own fresh rollouts twice).
LOOP_FIELDS = {"rounds": (1, 3, 50), "group_size": (1, 4, 100), "max_queries": (1, 50, 10_000),
               "phones": (1, 4, 256), "max_steps": (1, 25, 500), "wait_for_people": (0, 1, 1),
               "train": (0, 1, 1), "rl_iterations": (0, 2, 20)}


def clean_loop_config(raw) -> dict:
    """Rounds, group size G (rollouts per query), queries per round, phones, steps per rollout."""
    if not isinstance(raw, dict):
        raise ValidationError("config must be an object")
    unknown = set(raw) - set(LOOP_FIELDS)
    if unknown:
        raise ValidationError(f"unknown loop settings: {', '.join(sorted(map(str, unknown)))}")
    config = {}
    for name, (lowest, default, highest) in LOOP_FIELDS.items():
        value = raw.get(name)
        if value in (None, ""):
            config[name] = default
            continue
        config[name] = whole_number(value, minimum=-ROW_ID_MAX)
        if config[name] is None:
            raise ValidationError(f"{name.replace('_', ' ')} must be a whole number, not {value!r}")
        if not lowest <= config[name] <= highest:
            raise ValidationError(f"{name.replace('_', ' ')} must be {lowest}–{highest}")
    return config


def rollout_filter(loop: EvolutionLoop) -> dict:
    """The RL pool's live queries (active, and Phase-0 banked ones, which their first rollout
    activates or lets go through metabolism), at most max_queries per round."""
    return {"pool": "rl", "limit": loop.config.get("max_queries", LOOP_FIELDS["max_queries"][1])}


def rollout_config(loop: EvolutionLoop) -> dict:
    config = {name: loop.config.get(name, LOOP_FIELDS[name][1]) for name in ("phones", "max_steps")}
    return clean_run_config({**config, "repeats": loop.config.get("group_size", LOOP_FIELDS["group_size"][1])})


def pool_sizes() -> dict:
    rl = dict(RlQueryEntry.objects.order_by().values_list("state").annotate(n=Count("pk")))
    return {"cpt": CptEntry.objects.count(), "sft": SftEntry.objects.count(),
            "sft_ecdm": SftEntry.objects.filter(intake=SftEntry.Intake.ECDM_REPAIRED).count(),
            "rl_live": rl.get("banked", 0) + rl.get("active", 0), "rl_active": rl.get("active", 0),
            "rl_banked": rl.get("banked", 0), "rl_retired": rl.get("retired", 0), "rl_left": rl.get("left", 0)}


def salvage_path(path: str, by: str | None) -> str:
    """The salvage-yield path of a repair that produced a sample: a step correction counts under
    who wrote it (the Teacher: "step", a person: "human"); RQA and pop-up repair by their path."""
    if path == Repair.Path.STEP:
        return "human" if by == "human" else "step"
    return path


def salvaged_by_path(failed_trajectories) -> dict[str, int]:
    """Each failed trajectory once, under the first of its repairs that is done with a sample."""
    rows = (Repair.objects.filter(trajectory__in=failed_trajectories, status=Repair.Status.DONE,
                                  sample__isnull=False, path__in=[Repair.Path.STEP, Repair.Path.RQA, Repair.Path.ENV])
            .order_by("created_at", "pk").values_list("trajectory_id", "path", "correction"))
    first = {}
    for trajectory_id, path, correction in rows:
        first.setdefault(trajectory_id, salvage_path(path, (correction or {}).get("by")))
    counts = Counter(first.values())
    return {path: counts.get(path, 0) for path in SUPERVISION_PATHS}


def round_stats(loop_round: LoopRound) -> dict:
    """The round's rollouts by verdict, failures, how many the ECDM attributed and repaired, the
    salvage yield overall and per path, and the RL pool's metabolism decisions of the round."""
    run_id = loop_round.rollout_run_id
    rollouts = Trajectory.objects.filter(run_id=run_id).exclude(line=Line.ECDM) if run_id else Trajectory.objects.none()
    verdicts = dict(rollouts.order_by().values_list("verdict").annotate(n=Count("pk")))
    # True is the policy's own successes; the ones the Teacher took over in are counted apart.
    assisted = rollouts.filter(verdict=Outcome.TRUE, teacher_assisted=True).count()
    if assisted:
        verdicts[Outcome.TRUE] -= assisted
        verdicts[TEACHER_ASSISTED] = assisted
    failed_trajectories = rollouts.filter(verdict__in=FAILED)
    failed = sum(verdicts.get(v, 0) for v in FAILED)
    salvaged = salvaged_by_path(failed_trajectories)
    repairs = Repair.objects.filter(trajectory__in=failed_trajectories).order_by()
    return {
        "rollouts": sum(verdicts.values()), "verdicts": verdicts, "failed": failed,
        "attributed": failed_trajectories.filter(attributions__isnull=False).distinct().count(),
        "salvaged": salvaged, "salvaged_total": sum(salvaged.values()),
        "salvage_yield": salvage_yield(failed, salvaged),
        "yield_by_path": {path: round(n / failed, 3) if failed else None for path, n in salvaged.items()},
        "repairs": dict(repairs.values_list("status").annotate(n=Count("pk"))),
        "dispatched": dict(repairs.values_list("path").annotate(n=Count("pk"))),
        "metabolism": dict(RlRollout.objects.filter(run_id=run_id).order_by().values_list("decision")
                           .annotate(n=Count("pk"))) if run_id else {},
    }


def load_trainer(loop=None):
    """(the trainer callable or None, why there is none) — for `loop` when given (its train setting, and
    its current model: the rule policy has nothing a trainer could train)."""
    if loop is not None and not (loop.config or {}).get("train", 1):
        return None, OWN_TRAINING
    path = settings.EVOLUTION_TRAINER
    if not path:
        return None, NO_TRAINER
    try:
        trainer = import_string(path)
    except ImportError as error:
        return None, f"stopped before training: EVOLUTION_TRAINER = {path!r} does not import ({error})"
    if loop is not None and (loop.model_version is None or loop.model_version.kind == ModelVersion.Kind.OFFLINE):
        return None, RULES_UNTRAINED
    return trainer, ""


def start_loop(user, model_version: ModelVersion | None = None, config: dict | None = None,
               name: str = "") -> EvolutionLoop:
    """A loop over the RL pool from `model_version` (the built-in offline policy when None); its
    first round is launched at once. ValidationError: a bad setting, or nothing to roll out."""
    config = clean_loop_config(config or {})
    if not select_queries({"pool": "rl"}).exists():
        raise ValidationError(EMPTY_POOL)
    model_version = model_version or default_policy_version()
    loop = EvolutionLoop.objects.create(
        name=(name or f"{model_version} · {config['rounds']} rounds · G={config['group_size']}")[:200],
        model_version=model_version, config=config, status=Status.QUEUED, created_by=user,
        state="queued: round 1 is launched at the next step")
    advance_loop(loop.pk)
    loop.refresh_from_db()
    return loop


def advance_loop(loop_id: int) -> EvolutionLoop | None:
    """Move the loop on as far as what it waits for allows. Safe to repeat and to run twice at
    once (the loop's row is locked; a round number is unique, and its run is made with it)."""
    try:
        with transaction.atomic():
            loop = EvolutionLoop.objects.select_for_update().filter(pk=loop_id).first()
            if loop is None or loop.status not in LIVE:
                return loop
            for _ in range(8):  # each pass moves one stage; stop when the round waits
                current = loop.rounds.order_by("-number").first()
                if not _step(loop, current):
                    break
            publish("runs", throttle_s=1.0, loop=loop.pk)
    except Exception as error:  # this loop is stuck for now; the next step tries again
        log.exception("evolution loop %s could not advance", loop_id)
        EvolutionLoop.objects.filter(pk=loop_id, status__in=LIVE).update(
            state=f"error: {type(error).__name__}: {error}; tried again at the next step (every 30 s)"[:300])
    return EvolutionLoop.objects.filter(pk=loop_id).first()


def _step(loop, current) -> bool:
    """One stage of the newest round; True when something moved (look again)."""
    if current is None or current.stage == Stage.DONE:
        return _next_round(loop, current)
    if current.stage == Stage.FAILED:  # a failed round ends its loop (normally already said)
        _finish(loop, Status.FAILED, f"failed in round {current.number}: {current.detail}")
        return False
    handler = {Stage.ROLLOUT: _rollout, Stage.JUDGING: _judging, Stage.ECDM: _ecdm,
               Stage.TRAINING: _training, Stage.AWAITING_TRAINING: _awaiting_training}[current.stage]
    return handler(loop, current)


def _say(loop, loop_round, detail: str, state: str = ""):
    loop_round.detail = detail[:300]
    loop_round.save(update_fields=["detail", "stage", "stats", "pool_sizes", "finished_at"])
    loop.state = f"round {loop_round.number} · {state or f'{loop_round.get_stage_display()}: {detail}'}"[:300]
    loop.save(update_fields=["state", "status", "model_version"])


def _move(loop_round, stage):
    loop_round.stage = stage
    loop_round.save(update_fields=["stage", "stats", "pool_sizes"])
    return True


def _snapshot(loop_round):
    loop_round.stats = {**(loop_round.stats or {}), **round_stats(loop_round)}
    loop_round.pool_sizes = pool_sizes()


def _finish(loop, status, state):
    loop.status, loop.state, loop.finished_at = status, state[:300], timezone.now()
    loop.save(update_fields=["status", "state", "finished_at"])


def _fail(loop, loop_round, reason):
    loop_round.stage, loop_round.finished_at = Stage.FAILED, timezone.now()
    _snapshot(loop_round)
    _say(loop, loop_round, reason)
    _finish(loop, Status.FAILED, f"failed in round {loop_round.number}: {reason}")


def _next_round(loop, previous) -> bool:
    number = previous.number + 1 if previous else 1
    rounds = loop.config.get("rounds", LOOP_FIELDS["rounds"][1])
    if number > rounds:
        _finish(loop, Status.DONE, f"done: {rounds} round{'s' if rounds > 1 else ''}; "
                                   f"the current model is {loop.model_version}")
        return False
    if not select_queries(rollout_filter(loop)).exists():
        _finish(loop, Status.DONE, f"done after round {number - 1}: the RL pool is exhausted (every query was "
                                   "retired or left); bank or derive queries and start a new loop")
        return False
    model = loop.model_version or default_policy_version()
    if start_round(loop, number, model) is None:
        return True  # another step made this round a moment ago: look again
    loop.status = Status.RUNNING
    loop.save(update_fields=["status"])
    return True


def start_round(loop, number: int, model_version) -> LoopRound | None:
    """Round `number` with its rollout run, both or neither. None: that round exists already."""
    try:
        with transaction.atomic():  # a savepoint: a round number taken elsewhere leaves no run behind
            loop_round = LoopRound.objects.create(loop=loop, number=number, model_version=model_version,
                                                  stage=Stage.ROLLOUT, pool_sizes=pool_sizes())
            run = launch_run(Line.RL, rollout_filter(loop), model_version, rollout_config(loop),
                             user=loop.created_by)
            loop_round.rollout_run = run
            loop_round.stats = {"pools_at_start": loop_round.pool_sizes}
            loop_round.save(update_fields=["rollout_run", "stats"])
    except IntegrityError:
        return None
    log.info("evolution loop %s: round %s rolls out %s in %s", loop.pk, number, model_version, run)
    return loop_round


def _rollout(loop, loop_round) -> bool:
    run = CollectionRun.objects.filter(pk=loop_round.rollout_run_id).first()
    if run is None:
        _fail(loop, loop_round, "its rollout run was deleted")
        return False
    if run.status in (CollectionRun.Status.CANCELLED, CollectionRun.Status.FAILED):
        _fail(loop, loop_round, f"its rollout run #{run.pk} was {run.get_status_display().lower()}")
        return False
    if run.status in (CollectionRun.Status.QUEUED, CollectionRun.Status.RUNNING):
        group = loop.config.get("group_size", LOOP_FIELDS["group_size"][1])
        _say(loop, loop_round, f"run #{run.pk} of {loop_round.model_version} has collected {run.completed} of "
                               f"{run.total} rollouts (G = {group} per query); waiting for the phones")
        return False
    return _move(loop_round, Stage.JUDGING)


def _judging(loop, loop_round) -> bool:
    run_id = loop_round.rollout_run_id
    rollouts = Trajectory.objects.filter(run_id=run_id).exclude(line=Line.ECDM)
    verdicts = dict(rollouts.order_by().values_list("verdict").annotate(n=Count("pk")))
    failed = rollouts.filter(verdict__in=FAILED)
    unattributed = failed.filter(attributions__isnull=True).count()
    run = CollectionRun(pk=run_id)
    open_work = run.work_items().open().count()
    waits = []
    if open_work:
        waits.append(f"{open_work} rollout{'s' if open_work > 1 else ''} to collect (re-collection after Env_ERROR)")
    if verdicts.get(Outcome.PENDING):
        waits.append(f"{verdicts[Outcome.PENDING]} rollout(s) being judged by HTSC")
    if verdicts.get(Outcome.UNDETERMINED) and loop.config.get("wait_for_people", 1):
        waits.append(f"{verdicts[Outcome.UNDETERMINED]} Undetermined rollout(s) waiting for a person's adjudication")
    if unattributed:
        waits.append(f"{unattributed} of {failed.count()} failures not attributed yet (the ECDM's sweep "
                     "attributes any that routing missed)")
    if waits:
        _say(loop, loop_round, "waiting for " + "; ".join(waits))
        return False
    return _move(loop_round, Stage.ECDM)


def _ecdm(loop, loop_round) -> bool:
    repairs = Repair.objects.filter(trajectory__run_id=loop_round.rollout_run_id, trajectory__verdict__in=FAILED)
    pending = repairs.filter(status=Repair.Status.PENDING).count()
    with_people = repairs.filter(status=Repair.Status.NEEDS_HUMAN).count()
    people = (f"; {with_people} in the human repair queue (counted when done, not waited for)"
              if with_people else "")
    if pending:
        _say(loop, loop_round, f"waiting for {pending} repair(s) to finish (step correction, RQA, pop-up "
                               f"repair){people}")
        return False
    _snapshot(loop_round)
    trainer, _ = load_trainer(loop)
    return _move(loop_round, Stage.TRAINING if trainer else Stage.AWAITING_TRAINING)


def _model_of(reply) -> ModelVersion | None:
    version = reply.get("model_version")
    if isinstance(version, ModelVersion):
        return version
    if isinstance(version, int) and not isinstance(version, bool):
        return ModelVersion.objects.filter(pk=version).first()
    return None


def _training(loop, loop_round) -> bool:
    trainer, _ = load_trainer(loop)
    if trainer is None:
        return _move(loop_round, Stage.AWAITING_TRAINING)
    try:
        with transaction.atomic():
            reply = trainer(loop_round)
        if not isinstance(reply, dict):
            raise TypeError(f"the trainer answered {type(reply).__name__}, not a dict")
    except Exception as error:
        log.exception("evolution loop %s: the trainer failed", loop.pk)
        _say(loop, loop_round, f"the trainer failed ({type(error).__name__}: {error}); asked again at the next step")
        return False
    status, detail = reply.get("status", "running"), str(reply.get("detail") or "")
    model = _model_of(reply)
    loop_round.stats = {**(loop_round.stats or {}), "training": {
        "status": status, "detail": detail[:300], "model_version": model.pk if model else None}}
    if status == "failed":
        _fail(loop, loop_round, f"training failed: {detail or 'no reason given'}")
        return False
    if status == "paused":  # a person must act; nothing is lost, resuming asks the trainer again
        loop.status = Status.PAUSED
        _say(loop, loop_round, f"paused: {detail or 'the trainer gave no reason'}")
        return False
    if status == "done" and model is not None:
        return _close_round(loop, loop_round, model)
    if status == "done":
        detail = f"the trainer says done but names no model version ({detail or 'no detail'}); asked again"
    _say(loop, loop_round, f"training M(t+1) from {loop_round.model_version}: {detail or status}")
    return False


def newer_model(loop_round) -> ModelVersion | None:
    """A model version derived from the round's model after the round began (M(t+1))."""
    return (ModelVersion.objects.filter(parent_id=loop_round.model_version_id, created_at__gt=loop_round.started_at)
            .order_by("-created_at", "-pk").first()) if loop_round.model_version_id else None


def _awaiting_training(loop, loop_round) -> bool:
    trainer, why = load_trainer(loop)
    if trainer is not None:
        return _move(loop_round, Stage.TRAINING)
    model = newer_model(loop_round)
    if model is not None:
        return _close_round(loop, loop_round, model)
    _snapshot(loop_round)  # people go on repairing: the round's yield still grows
    detail = (f"The next round starts when a model version derived from {loop_round.model_version} exists "
              f"(its parent is {loop_round.model_version}).")
    _say(loop, loop_round, detail, state=f"{why}. {detail}")
    return False


def _close_round(loop, loop_round, model) -> bool:
    loop_round.stage, loop_round.finished_at = Stage.DONE, timezone.now()
    _snapshot(loop_round)
    loop.model_version = model
    _say(loop, loop_round, f"M(t+1) = {model}")
    return True
