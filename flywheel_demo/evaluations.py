"""One demo evaluation read task by task: which held-out tasks were solved, which the policy claimed to
have solved, and which need an app the training never saw; the SR with its bootstrap interval, the
false-success rate, the SR by kind of task, and paired comparisons between two evaluations.

A task is solved when its current (not superseded) result's final outcome is a success in a final state,
as benchmark/metric.py counts successes (an expert's verdict included; one the Teacher took over in
is not the policy's); a task not scored counts as not
solved, so every evaluation is read over the same tasks.
"""
from __future__ import annotations

from benchmark.infer import eval_items
from benchmark.metric import FINAL, current_results, policy_success
from benchmark.models import EvalRun
from benchmark.stats import bootstrap_ci, paired_difference
from flywheel.rules.stops import StopKind

PHRASING, FUNCTION = "unseen_phrasing", "unseen_function"
KIND_WORDS = {PHRASING: "new phrasing of a trained function", FUNCTION: "an app never trained on"}


def task_outcomes(evaluation: EvalRun, unseen_apps: set[str]) -> dict[str, dict]:
    """{query key: {solved, claimed, kind}} for every task of the evaluation."""
    items = [item for item in eval_items(evaluation.benchmark, evaluation.split)
             .prefetch_related("query__app_links__app") if item.executable]
    results = {r.item_id: r for r in current_results(evaluation.pk).select_related("trajectory")}
    outcomes = {}
    for item in items:
        result = results.get(item.pk)
        stop = ""
        if result is not None:
            stop = result.trajectory.stop_kind if result.trajectory else (result.evidence or {}).get("stop_kind", "")
        apps = {link.app.package for link in item.query.app_links.all()}
        outcomes[item.query.key] = {
            "solved": result is not None and result.state in FINAL and policy_success(result),
            "claimed": stop == StopKind.SUCCESS,
            "kind": FUNCTION if apps & unseen_apps else PHRASING}
    return outcomes


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _interval(outcomes: list[bool]) -> list[float | None]:
    return [None if bound is None else round(bound, 4) for bound in bootstrap_ci(outcomes)]


def outcome_figures(outcomes: dict[str, dict], kinds: tuple[str, ...]) -> dict:
    """The SR over the tasks with its 95% interval, claimed and false successes, and the SR by kind."""
    solved = [task["solved"] for task in outcomes.values()]
    failed = [task for task in outcomes.values() if not task["solved"]]
    by_kind = {}
    for kind in kinds:
        these = [task["solved"] for task in outcomes.values() if task["kind"] == kind]
        by_kind[kind] = {"tasks": len(these), "successes": sum(these), "sr": _rate(sum(these), len(these)),
                         "ci95": _interval(these)}
    return {"ci95": _interval(solved), "claimed_success": sum(task["claimed"] for task in outcomes.values()),
            "false_successes": sum(task["claimed"] for task in failed),
            # A claimed success on a task that was not solved, over the tasks not solved.
            "false_success": _rate(sum(task["claimed"] for task in failed), len(failed)), "by_kind": by_kind}


def evaluation_row(evaluation: EvalRun | None, unseen_apps: set[str] | None) -> tuple[dict, dict]:
    """(the report's fields of one evaluation, its per-task outcomes); unseen_apps None: no task is of
    an unseen function (the run did not say which apps it kept out)."""
    if evaluation is None:
        return {}, {}
    scores = evaluation.scores or {}
    outcomes = task_outcomes(evaluation, unseen_apps or set())
    tasks = len(outcomes) or evaluation.total
    successes = sum(task["solved"] for task in outcomes.values())
    kinds = (PHRASING,) if unseen_apps is None else (PHRASING, FUNCTION)
    return ({"eval_run": evaluation.pk, "status": evaluation.status, "tasks": tasks, "successes": successes,
             "scored": scores.get("scored", 0), "sr": _rate(successes, tasks),
             "benchmark_sr": scores.get("sr"), "waiting_for_expert": scores.get("waiting_for_expert", 0),
             "not_scored": scores.get("not_scored", {}), **outcome_figures(outcomes, kinds)}, outcomes)


def points(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 1)


def compare(before: dict[str, dict], after: dict[str, dict]) -> dict:
    """after minus before over the tasks both evaluated (matched by query key), in points."""
    keys = sorted(set(before) & set(after))
    found = paired_difference([before[k]["solved"] for k in keys], [after[k]["solved"] for k in keys])
    return {"tasks": found["tasks"], "gained": found["gained"], "lost": found["lost"],
            "delta_pts": points(found["delta"]), "ci95_pts": [points(bound) for bound in found["ci95"]],
            "p_value": round(found["p_value"], 4)}


def comparison_words(before: str, after: str, found: dict) -> str:
    """"round 1 → round 3: +8.2 points (95% CI +1.1 to +15.3), p = 0.03 over 40 tasks"."""
    if found.get("delta_pts") is None:
        return f"{before} → {after}: no task evaluated by both"
    lo, hi = found["ci95_pts"]
    p = "p < 0.001" if found["p_value"] < 0.001 else f"p = {found['p_value']:.2g}"
    return (f"{before} → {after}: {found['delta_pts']:+.1f} points (95% CI {lo:+.1f} to {hi:+.1f}), {p} over {found['tasks']} tasks ({found['gained']} gained, {found['lost']} lost)")
