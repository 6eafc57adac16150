"""The flywheel demo (issues #16, #34): the compact policy, trained only by our pipeline on what the
query side generates, round over round, measured on tasks no line draws.

    set-up    every farm task frozen as a held-out version; a seeded share of its apps held out whole
              (functions no round trains on); exploration of the other apps starts
    round 0   the untrained compact policy M0, evaluated on the held-out version
    explore   function trees from the explored pages → generated queries for every leaf, several
              phrasings and personas, through intake gates 1–3 → the RL pool banked from them
    round 1   schema-guided collection on the generated queries (GEM paths as known paths) → HTSC →
              SFT pool → snapshot → M1 → evaluated
    round 2,3 the evolution loop (flywheel/repair/loop.py) from M1: roll out M(t) on the RL pool (the
              goal alone) → HTSC → ECDM repair and counterfactual derivation → snapshot → M(t+1) → evaluated
    arms      the experiment: the last round with one part switched off (ARMS), evaluated the same way

`advance_demo(id)` is safe to repeat and to run twice at once (the row is locked): it reads where the
run stands from the database, starts what the next stage needs (Celery workers run the evaluations,
collections and repairs) and moves on when that is done. Beat calls it every 10 s
(flywheel_demo.tasks.advance_demos); `make flywheel-demo` calls it in its own loop as well.
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from benchmark.imports import import_farm_tasks
from benchmark.infer import EvaluationRefused, launch_evaluation
from benchmark.models import Benchmark, EvalRun
from flywheel.collection.launch import cancel_run, launch_run
from flywheel.models import (
    App,
    CollectionRun,
    EvolutionLoop,
    ExplorationRun,
    Line,
    LoopRound,
    ModelVersion,
    Outcome,
    Query,
    RunStatus,
    Trajectory,
)
from flywheel.pools.rl import bank_phase0
from flywheel.queries.exploration.runs import cancel_exploration
from flywheel.queries.recipes import import_recipes
from flywheel.repair.loop import advance_loop, newer_model, pool_sizes, start_loop
from flywheel.repair.loop_control import cancel_loop
from flywheel.rules.numbers import whole_number
from flywheel_demo.models import DemoRun
from flywheel_demo.query_side import generate_training_queries, held_out_apps, spread_over_leaves, start_exploration
from flywheel_demo.report import build_report, write_report
from training import runs as training_runs
from training.compact import CompactTrainingError, train_compact

log = logging.getLogger(__name__)
FARM_TASKS = Path(settings.BASE_DIR) / "simfarm" / "tasks" / "tasks.jsonl"
FARM_RECIPES = Path(settings.BASE_DIR) / "simfarm" / "setup_recipes.jsonl"   # what the tasks' prerequisites need
DEFAULTS = {"phones": 4, "max_steps": 15, "loop_rounds": 2, "group_size": 4, "max_queries": 64, "epochs": 40,
            "seed": 0, "unseen_apps": 2, "explore_seconds": 300, "phrasings": 2, "cross_app": 20,
            "training_queries": 240}
# The experiment's arms: the loop with one part switched off, same seeds, queries and held-out tasks,
# each compared with the last round by a paired test over the tasks. (What it switches off, how.)
ARMS = {
    "no_ecdm": "the ECDM's repaired samples: the last round retrained from M1 without them",
    "no_counterfactual": "counterfactual-derived queries: the last round retrained from M1 without their samples",
    "no_rl_rounds": "the loop's RL rounds: round 1's model (schema-guided data only)",
    "single_judge": "HTSC's second and third judges: the last round retrained from M1 on the judged trajectories "
                    "as judge A (terminal state) alone would have routed them",
    "no_false_claims": "the success claims the judges rejected: the last round retrained from M1 without them as "
                       "examples of where not to stop",
}
DEFAULT_ARMS = list(ARMS)
# The single judge of that arm: A reads the terminal state, what an outcome judge alone would see. No CPT
# arm: the compact policy is trained by SFT only (training/compact.py), so there is no CPT to switch off.
SINGLE_JUDGE = "A"
FINISHED_EVAL = (EvalRun.Status.DONE, EvalRun.Status.FAILED, EvalRun.Status.CANCELLED)
FINISHED_RUN = (CollectionRun.Status.DONE, CollectionRun.Status.FAILED, CollectionRun.Status.CANCELLED)


class DemoError(RuntimeError):
    """The demo cannot go on; the message says why (recorded on the run)."""


def clean_demo_config(raw: dict | None) -> dict:
    config = {**DEFAULTS, "arms": list(DEFAULT_ARMS)}
    for key, value in (raw or {}).items():
        if key == "arms":
            config["arms"] = _clean_arms(value)
            continue
        if key not in DEFAULTS:
            raise ValidationError(f"unknown demo setting {key!r}; the settings are {', '.join(DEFAULTS)}")
        config[key] = whole_number(value)
        if config[key] is None:
            raise ValidationError(f"{key.replace('_', ' ')} must be a whole number, not {value!r}")
    if not 1 <= config["phones"] <= 64 or not 1 <= config["loop_rounds"] <= 5 or not 1 <= config["epochs"] <= 500:
        raise ValidationError("phones must be 1–64, loop rounds 1–5 and epochs 1–500")
    if not 3 <= config["max_steps"] <= 50 or not 1 <= config["group_size"] <= 8 or config["max_queries"] < 1:
        raise ValidationError("steps per rollout must be 3–50, the group size 1–8 and queries per round ≥ 1")
    if not 1 <= config["phrasings"] <= 10 or config["training_queries"] < 1 or config["explore_seconds"] < 30:
        raise ValidationError("phrasings per leaf must be 1–10, training queries ≥ 1 and exploration ≥ 30 s")
    return config


def _clean_arms(value) -> list[str]:
    names = value if isinstance(value, list) else [part for part in str(value).split(",") if part.strip()]
    unknown = [str(name) for name in names if str(name).strip() not in ARMS]
    if unknown:
        raise ValidationError(f"unknown experiment arm {unknown[0]!r}; the arms are {', '.join(ARMS)}")
    return [name for name in ARMS if name in {str(n).strip() for n in names}]


def start_demo(user=None, config: dict | None = None) -> DemoRun:
    """A new demo run (ValidationError for a bad setting, or while another demo is live)."""
    config = clean_demo_config(config)
    if not training_runs.training_extras_installed():  # every round trains: refuse before anything starts
        raise ValidationError(training_runs.INSTALL_HINT)
    if DemoRun.objects.filter(status__in=DemoRun.LIVE).exists():
        raise ValidationError("a flywheel demo is already running: follow it, or cancel it first")
    demo = DemoRun.objects.create(config=config, created_by=user if getattr(user, "pk", None) else None,
                                  detail="queued: set-up starts at the next step")
    transaction.on_commit(lambda: _kick(demo.pk))
    return demo


def _kick(demo_id):
    from flywheel_demo.tasks import advance_demo_task

    advance_demo_task.delay(demo_id)


def cancel_demo(demo: DemoRun, user=None) -> DemoRun:
    with transaction.atomic():
        demo = DemoRun.objects.select_for_update().get(pk=demo.pk)
        if demo.status not in DemoRun.LIVE:
            return demo
        _stop_started(demo, user)
        _finish(demo, DemoRun.Status.CANCELLED, f"cancelled{f' by {user}' if user else ''} during {demo.stage}")
    return demo


def _stop_started(demo, user=None):
    """Cancel the collection and evaluation runs and the loop the demo started that still run."""
    for run in CollectionRun.objects.filter(pk__in=_run_ids(demo), status__in=("queued", "running")):
        cancel_run(run)
    loop = EvolutionLoop.objects.filter(pk=demo.state.get("loop")).first()
    if loop is not None:
        cancel_loop(loop, user)
    exploration = ExplorationRun.objects.filter(pk=demo.state.get("exploration")).first()
    if exploration is not None:
        cancel_exploration(exploration)


def _run_ids(demo) -> list[int]:
    ids = [demo.state.get("collection_run")]
    ids += list(EvalRun.objects.filter(pk__in=(demo.state.get("evals") or {}).values())
                .values_list("collection_run_id", flat=True))
    return [i for i in ids if i]


def advance_demo(demo_id: int) -> DemoRun | None:
    demo = None
    try:
        with transaction.atomic():
            demo = DemoRun.objects.select_for_update().filter(pk=demo_id).first()
            if demo is None or demo.status not in DemoRun.LIVE:
                return demo
            if demo.status == DemoRun.Status.QUEUED:
                demo.status, demo.started_at = DemoRun.Status.RUNNING, timezone.now()
            for _ in range(6):  # each pass moves one stage; stop when the stage waits
                if not STAGES[demo.stage](demo):
                    break
            demo.save()
    except (DemoError, CompactTrainingError, EvaluationRefused, ValidationError) as error:
        message = " ".join(error.messages) if isinstance(error, ValidationError) else str(error)
        failed = DemoRun.objects.filter(pk=demo_id, status__in=DemoRun.LIVE).update(
            status=DemoRun.Status.FAILED, error=message, finished_at=timezone.now(),
            detail=f"stopped during {demo.stage}" if demo else "stopped")
        if failed:  # what it started stops too (collected data stays)
            _stop_started(DemoRun.objects.get(pk=demo_id))
    except Exception:  # a bug or a lost connection: tried again at the next step; the traceback is logged
        log.exception("flywheel demo %s could not advance", demo_id)
        DemoRun.objects.filter(pk=demo_id, status__in=DemoRun.LIVE).update(
            detail="an unexpected error interrupted this step; it is tried again at the next step "
                   "(the worker's log has the details)")
    return DemoRun.objects.filter(pk=demo_id).first()


# -- the stages (each returns True when it moved on) --------------------------------------------------

def _model_name(demo, label) -> str:
    return f"compact-demo{demo.pk}-{label}"


def _train(demo, label, parent, **options) -> ModelVersion:
    model = train_compact(_model_name(demo, label), parent=parent, epochs=options.pop("epochs", demo.config["epochs"]),
                          seed=demo.config["seed"], **options)
    demo.state.setdefault("models", {})[label] = model.pk
    demo.state.setdefault("pools", {})[label] = pool_sizes()
    return model


def _evaluate(demo, label, model):
    benchmark = Benchmark.objects.get(pk=demo.state["benchmark"])
    evaluation = launch_evaluation(benchmark, model, split="held_out", user=demo.created_by,
                                   config={"phones": demo.config["phones"], "max_steps": demo.config["max_steps"]})
    demo.state.setdefault("evals", {})[label] = evaluation.pk


def _setup(demo) -> bool:
    # Every farm task is evaluation material, frozen as a version named by the task file's contents.
    path = Path(settings.FLYWHEEL_DEMO_TASKS or FARM_TASKS)
    version = "held-out-" + hashlib.sha256(path.read_bytes()).hexdigest()[:8]
    benchmark = import_farm_tasks(path, version=version, held_out_share=1, user=demo.created_by)
    if FARM_RECIPES.is_file():
        import_recipes(FARM_RECIPES.read_text(encoding="utf-8"), keep_existing=True)
    held = benchmark.items.filter(split="held_out")
    packages = sorted(set(App.objects.filter(queries__benchmark_items__in=held).values_list("package", flat=True)))
    unseen = held_out_apps(packages, demo.config["unseen_apps"], demo.config["seed"])
    trained = [p for p in packages if p not in unseen]
    exploration = start_exploration(trained, demo.config, demo.created_by)
    demo.state.update(benchmark=benchmark.pk, held_out_queries=held.count(), unseen_apps=unseen,
                      trained_apps=trained, exploration=exploration.pk)
    m0 = _train(demo, "r0", None, epochs=0)
    _evaluate(demo, "r0", m0)
    return _stage(demo, "explore", f"round 0: evaluating {m0} on {held.count()} held-out tasks; exploring "
                                   f"{len(trained)} apps to generate training queries ({len(unseen)} apps held out)")


def _explore(demo) -> bool:
    exploration = ExplorationRun.objects.get(pk=demo.state["exploration"])
    if exploration.status in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.PAUSED):
        return _wait(demo, f"exploring {len(exploration.apps)} apps: {exploration.pages_found} pages, "
                           f"{exploration.actions_taken} actions so far")
    if not exploration.pages_found:
        raise DemoError(f"exploration run #{exploration.pk} {exploration.status} without finding a page: "
                        + "; ".join(map(str, exploration.problems[:2])))
    generation = generate_training_queries(demo.state["trained_apps"], demo.config)
    keys = spread_over_leaves(generation, demo.config["training_queries"])
    if not keys:
        raise DemoError(f"generation run #{generation.pk} wrote no query that passed the intake gates "
                        f"({generation.rejected} rejected)")
    # The RL pool: the generated queries, goal alone (Phase 0 banks the naturally difficult ones).
    ready = Query.objects.filter(generation_run=generation, status=Query.Status.READY)
    demo.state.update(generation=generation.pk, generated=generation.generated, approved=ready.count(),
                      open_queries=len(keys), banked=bank_phase0(list(ready)))
    # Round 1's data: the schema-guided line over the generated queries, the only line that shows the
    # known path (GEM's). Nobody attends the demo: a clarify goes unanswered.
    run = launch_run(Line.SCHEMA, {"keys": keys}, config={
        "phones": demo.config["phones"], "max_steps": demo.config["max_steps"] + 10,
        "clarify_wait_s": 0}, user=demo.created_by)
    demo.state["collection_run"] = run.pk
    return _stage(demo, "round1", f"round 1: schema-guided collection of {len(keys)} generated queries "
                                  f"({ready.count()} passed the gates)")


def _round1(demo) -> bool:
    run = CollectionRun.objects.get(pk=demo.state["collection_run"])
    if run.status not in FINISHED_RUN:
        return _wait(demo, f"round 1: schema-guided run #{run.pk} has collected {run.completed} of {run.total}")
    pending = Trajectory.objects.filter(run_id=run.pk, verdict=Outcome.PENDING).count()
    if pending:
        return _wait(demo, f"round 1: HTSC is judging {pending} trajectories of run #{run.pk}")
    m1 = _train(demo, "r1", ModelVersion.objects.get(pk=demo.state["models"]["r0"]))
    _evaluate(demo, "r1", m1)
    loop = start_loop(demo.created_by, m1, name=f"flywheel demo #{demo.pk}", config={
        "rounds": demo.config["loop_rounds"], "group_size": demo.config["group_size"],
        "phones": demo.config["phones"], "max_steps": demo.config["max_steps"], "max_queries": demo.config["max_queries"],
        # nobody attends the demo: Undetermined rollouts stay queued for people. The demo trains each
        # round's model itself (train=0), with the same settings as the ablation it compares against.
        "wait_for_people": 0, "train": 0})
    demo.state["loop"] = loop.pk
    return _stage(demo, "loop", f"round 2: the loop rolls out {m1} on the RL pool")


def _loop(demo) -> bool:
    loop = advance_loop(demo.state["loop"])
    for loop_round in LoopRound.objects.filter(loop=loop).order_by("number"):
        label = f"r{loop_round.number + 1}"
        if loop_round.stage == LoopRound.Stage.AWAITING_TRAINING and label not in demo.state.get("models", {}):
            # The loop's own trainer is off (train=0): the demo trains M(t+1) itself; the loop picks it up as the
            # model derived from M(t) (its parent) and closes the round.
            _train(demo, label, loop_round.model_version)
            loop = advance_loop(loop.pk)
        loop_round.refresh_from_db()
        if loop_round.stage == LoopRound.Stage.DONE and label not in demo.state.get("evals", {}):
            produced = (demo.state.get("models", {}).get(label)   # trained here, or by EVOLUTION_TRAINER
                        or (loop_round.stats.get("training") or {}).get("model_version"))
            model = ModelVersion.objects.filter(pk=produced).first() if produced else newer_model(loop_round)
            if model is None:
                raise DemoError(f"loop round {loop_round.number} is done but names no trained model")
            demo.state.setdefault("models", {})[label] = model.pk
            demo.state.setdefault("pools", {}).setdefault(label, loop_round.pool_sizes)
            _evaluate(demo, label, model)
    loop.refresh_from_db()
    if loop.status in (EvolutionLoop.Status.FAILED, EvolutionLoop.Status.CANCELLED):
        raise DemoError(f"the evolution loop #{loop.pk} {loop.status}: {loop.state}")
    if loop.status != EvolutionLoop.Status.DONE:
        return _wait(demo, f"loop #{loop.pk}: {loop.state}")
    last = f"r{1 + demo.config['loop_rounds']}"
    if last not in demo.state.get("evals", {}):
        raise DemoError(f"the loop ended before round {last[1:]} ({loop.state})")
    _start_arms(demo, last)
    return _stage(demo, "report", "evaluating the last round and the experiment's arms on the held-out tasks")


def _start_arms(demo, last: str) -> None:
    """Each arm of the experiment is compared with the last round over the same held-out tasks."""
    m1 = ModelVersion.objects.get(pk=demo.state["models"]["r1"])
    arms = {}
    for name in demo.config.get("arms", DEFAULT_ARMS):
        label = "r1" if name == "no_rl_rounds" else f"arm:{name}"
        if name == "no_ecdm":
            _evaluate(demo, label, _train(demo, label, m1, sources={"ecdm_repaired": 0, "*": 1}))
        elif name == "no_counterfactual":
            _evaluate(demo, label, _train(demo, label, m1, counterfactual_queries=False))
        elif name == "single_judge":
            _evaluate(demo, label, _train(demo, label, m1, success_judge=SINGLE_JUDGE))
        elif name == "no_false_claims":
            _evaluate(demo, label, _train(demo, label, m1, false_claims=False))
        arms[name] = {"label": label, "what": ARMS[name], "compare_to": last}
    demo.state["arms"] = arms


def _report(demo) -> bool:
    evals = EvalRun.objects.filter(pk__in=demo.state["evals"].values())
    waiting = [e for e in evals if e.status not in FINISHED_EVAL]
    if waiting:
        return _wait(demo, "evaluating on the held-out tasks: " + ", ".join(
            f"{e.model_version} {e.completed}/{e.total}" for e in waiting))
    demo.report = build_report(demo)
    demo.report_path = str(write_report(demo))
    _finish(demo, DemoRun.Status.DONE, f"done: {demo.report['summary']}")
    return False


STAGES = {"setup": _setup, "explore": _explore, "round1": _round1, "loop": _loop, "report": _report,
          "done": lambda demo: False}


def _stage(demo, stage, detail) -> bool:
    demo.stage, demo.detail = stage, detail[:300]
    return True


def _wait(demo, detail) -> bool:
    demo.detail = detail[:300]
    return False


def _finish(demo, status, detail):
    demo.status, demo.detail, demo.finished_at = status, detail[:300], timezone.now()
    if status == DemoRun.Status.DONE:
        demo.stage = "done"
    demo.save()
