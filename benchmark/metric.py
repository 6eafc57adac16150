"""The metric phase (report §4.3, eq. 7): binary SR over scored queries, broken down by dimension.

Scores are recomputed from the stored results whenever one changes (a rollout judged, an expert
verdict, a re-judge), so they are never out of date and never a second source of truth.
"""
from collections import Counter

from benchmark.models import EvalResult, EvalRun
from benchmark.rules.scoring import FAILURE, SUCCESS, breakdown, success_rate

FINAL = (EvalResult.State.SCORED, EvalResult.State.EXPERT)


def current_results(evaluation_id: int):
    """The latest result of each item (a re-collection supersedes the one it replaces)."""
    return (EvalResult.objects.filter(eval_run_id=evaluation_id, superseded=False)
            .select_related("item__query", "trajectory").order_by("item__position", "item_id"))


def teacher_assisted(result) -> bool:
    return bool(result.trajectory_id and result.trajectory.teacher_assisted)


def policy_success(result) -> bool:
    """A success of the policy alone: one the Teacher took over in is scored, but not as a success
    (issue #35; benchmark runs switch takeover off, this keeps any that slipped in out of the SR)."""
    return result.final_outcome == SUCCESS and not teacher_assisted(result)


def compute_scores(evaluation_id: int) -> dict:
    results = list(current_results(evaluation_id))
    scored = [r for r in results if r.state in FINAL and r.final_outcome in (SUCCESS, FAILURE)]
    successes = sum(1 for r in scored if policy_success(r))
    judged = [r for r in results if r.judge_verdict and r.judge_verdict != "env_error"]
    unanimous = [r for r in judged if r.judge_verdict in (SUCCESS, FAILURE)]
    by_hand = [r for r in results if r.expert_outcome]
    overridden = [r for r in by_hand if r.judge_verdict in (SUCCESS, FAILURE) and r.outcome
                  and r.expert_outcome != r.outcome]
    not_scored = Counter((r.evidence or {}).get("stop_kind") or "judges: environment" for r in results
                         if r.state == EvalResult.State.NOT_SCORED)
    credits = [r.partial_credit for r in scored if r.partial_credit is not None]
    sr = success_rate(successes, len(scored))
    return {
        "sr": None if sr is None else round(sr, 4),
        "successes": successes, "scored": len(scored),
        "teacher_assisted": sum(1 for r in scored if r.final_outcome == SUCCESS and teacher_assisted(r)),
        "waiting_for_expert": sum(1 for r in results if r.state == EvalResult.State.SPLIT),
        "not_scored": dict(not_scored),
        "attempts": EvalResult.objects.filter(eval_run_id=evaluation_id).count(),
        "recollected": EvalResult.objects.filter(eval_run_id=evaluation_id, superseded=True).count(),
        "judge_agreement": round(len(unanimous) / len(judged), 4) if judged else None,
        "judged": len(judged),
        "expert_scored": len(by_hand),
        "expert_override_rate": round(len(overridden) / len(by_hand), 4) if by_hand else None,
        "partial_credit": round(sum(credits) / len(credits), 4) if credits else None,
        "by_dimension": breakdown([(r.item.labels or {}, policy_success(r)) for r in scored]),
    }


def score_evaluation(evaluation_id: int) -> dict:
    scores = compute_scores(evaluation_id)
    EvalRun.objects.filter(pk=evaluation_id).update(scores=scores)
    return scores
