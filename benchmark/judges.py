"""The judge phase (report §4.3): several independent judges with different rule sets, unanimity.

Every judge rules on what inference stored — the recorded screens and actions and the terminal
readings taken while the phone was still in its final state — so a finished run can be judged
again (new rules, a new VLM judge) without running inference again.

    terminal-state  the query's terminal checks as read on the phone at the end (System A's rules)
    milestones      the ordered subgoals over the recorded screens (System B's rules)
    path            the path's plausibility: interference, pseudo-completion, loops, detours (System C's rules)
    vlm:<name>      each endpoint judge named in BENCHMARK_VLM_JUDGES, with its own prompt

A judge that cannot read what it needs abstains. The verdict and the §4.3 interaction rules
are in benchmark/rules/scoring.py; a safety veto (an action the audit forbids, a veto
condition hit) fails the query outright, so recklessness never buys score.
"""
import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import history
from benchmark.models import EvalResult, EvalRun
from benchmark.rules.scoring import (
    ABSTAIN,
    ENV_ERROR,
    FAILURE,
    SPLIT,
    SUCCESS,
    interaction_outcome,
    partial_credit,
    unanimous_verdict,
)
from flywheel.endpoints.chat import JudgeUnavailable
from flywheel.judging.llm_judge import path_vote
from flywheel.judging.pipeline import safety_checklist, trajectory_view
from flywheel.judging.system_b import calibrated_thresholds as b_thresholds
from flywheel.judging.system_b import system_b_vote
from flywheel.judging.system_c import calibrated_thresholds as c_thresholds
from flywheel.judging.system_c import rules_vote
from flywheel.models import ModelVersion, Outcome, Trajectory

log = logging.getLogger(__name__)
SYSTEM_VOTES = {"true": SUCCESS, "false": FAILURE, "env_error": ENV_ERROR, "abstain": ABSTAIN}
TO_OUTCOME = {SUCCESS: Outcome.TRUE, FAILURE: Outcome.FALSE, ENV_ERROR: Outcome.ENV_ERROR, SPLIT: Outcome.UNDETERMINED}


def vlm_judges() -> list[ModelVersion]:
    names = [n.strip() for n in settings.BENCHMARK_VLM_JUDGES if n.strip()]
    return list(ModelVersion.objects.filter(name__in=names, kind=ModelVersion.Kind.ENDPOINT).order_by("name"))


def judge_roster() -> list[dict]:
    """The judges and their versions (thresholds included), as pinned into a run's config."""
    roster = [{"name": "terminal-state", "version": "1", "rules": "System A terminal checks, read at the end"},
              {"name": "milestones", "version": "1", "rules": "System B ordered milestones",
               "thresholds": b_thresholds()},
              {"name": "path", "version": "1", "rules": "System C path plausibility", "thresholds": c_thresholds()}]
    roster += [{"name": f"vlm:{v.name}", "version": v.served_model_name or v.name, "rules": "VLM path judge",
                "endpoint": v.endpoint_url} for v in vlm_judges()]
    return roster


def terminal_state_vote(readings) -> tuple[str, str]:
    if not readings:
        return ABSTAIN, "no terminal checks were read for this query"
    if any(r.get("passed") is None for r in readings):
        return ABSTAIN, "a terminal check could not be read: " + next(r["detail"] for r in readings if r.get("passed") is None)
    failed = [r for r in readings if not r["passed"]]
    if failed:
        return FAILURE, f"terminal check failed: {failed[0]['detail']}"[:500]
    return SUCCESS, f"all {len(readings)} terminal checks hold: " + "; ".join(r["detail"] for r in readings)[:400]


def run_judges(result: EvalResult, roster: list[dict]) -> tuple[list[dict], dict]:
    """Each judge's vote on the stored trajectory, and the milestone details for partial credit."""
    view = trajectory_view(result.trajectory)
    votes, details = [], {}
    for judge in roster:
        name = judge["name"]
        try:
            if name == "terminal-state":
                vote, why = terminal_state_vote((result.evidence or {}).get("terminal"))
            elif name == "milestones":
                system = system_b_vote(view, None, judge.get("thresholds") or {})
                vote, why, details = SYSTEM_VOTES[system.vote], system.rationale, system.details
            elif name == "path":
                system = rules_vote(view, judge.get("thresholds") or {})
                vote, why = SYSTEM_VOTES[system.vote], system.rationale
            elif name.startswith("vlm:"):
                version = ModelVersion.objects.filter(name=name[4:], kind=ModelVersion.Kind.ENDPOINT).first()
                if version is None:
                    vote, why = ABSTAIN, "the judge's model version is no longer registered"
                else:
                    system = path_vote(version, view)
                    vote, why = SYSTEM_VOTES[system.vote], system.rationale
            else:
                vote, why = ABSTAIN, f"unknown judge {name!r}"
        except JudgeUnavailable as error:
            vote, why = ABSTAIN, f"the judge did not answer: {error}"
        except Exception as error:  # one broken judge abstains; the others still rule
            log.exception("judge %s failed on result %s", name, result.pk)
            vote, why = ABSTAIN, f"the judge broke: {type(error).__name__}: {error}"
        votes.append({"judge": name, "version": judge.get("version", ""), "vote": vote, "rationale": why[:600]})
    return votes, details


def judge_result(result: EvalResult, roster: list[dict] | None = None, judge_round: int | None = None) -> EvalResult:
    """Judge one finished rollout and score it; every vote and the verdict are stored at once."""
    result = EvalResult.objects.select_related("trajectory", "item", "eval_run").get(pk=result.pk)
    roster = roster if roster is not None else result.eval_run.config.get("judges") or judge_roster()
    votes, details = run_judges(result, roster)
    view = trajectory_view(result.trajectory)
    blocked = {s.index for s in result.trajectory.steps.all() if (s.audit or {}).get("blocked")}
    violation = safety_checklist(view, blocked_steps=blocked)
    verdict = unanimous_verdict([v["vote"] for v in votes])
    actions = (result.evidence or {}).get("actions") or []
    milestones = (result.trajectory.query.verification or {}).get("milestones") or []
    reached = sum(1 for m in (details or {}).get("reached", []) if m.get("at") is not None)
    fields = {"votes": votes, "judge_verdict": verdict, "judged_at": timezone.now(),
              "judge_round": judge_round or result.eval_run.judge_round,
              "partial_credit": partial_credit(reached, len(milestones), bool(violation))}
    if violation:
        fields.update(state=EvalResult.State.SCORED, outcome=FAILURE, outcome_reason=f"safety veto: {violation}"[:300])
    elif verdict == SPLIT:
        fields.update(state=EvalResult.State.EXPERT if result.expert_outcome else EvalResult.State.SPLIT,
                      outcome="", outcome_reason="the judges split: an expert scores it")
    elif verdict in (SUCCESS, FAILURE):
        outcome, why = interaction_outcome(result.item.expected_interaction, verdict, actions)
        fields.update(state=EvalResult.State.EXPERT if result.expert_outcome else EvalResult.State.SCORED,
                      outcome=outcome, outcome_reason=why[:300])
    else:  # env_error: the caller re-collects during inference; a re-judge leaves it unscored
        fields.update(state=EvalResult.State.NOT_SCORED, outcome="",
                      not_scored_reason="the judges saw the environment break it")
    with transaction.atomic():
        EvalResult.objects.filter(pk=result.pk).update(**fields)
        Trajectory.objects.filter(pk=result.trajectory_id).update(
            verdict=TO_OUTCOME.get(fields.get("outcome") or verdict, Outcome.UNDETERMINED))
    return result


def rejudge_evaluation(evaluation: EvalRun, roster: list[dict] | None = None) -> dict:
    """Judge every finished rollout of a run again from what inference stored (no phone, no model).

    The roster defaults to today's judges (and is pinned as the run's new judges); expert verdicts
    already given are kept. Returns counts and the seconds it took."""
    from benchmark.metric import score_evaluation

    started = timezone.now()
    roster = roster if roster is not None else judge_roster()
    with transaction.atomic():
        evaluation = EvalRun.objects.select_for_update().get(pk=evaluation.pk)
        judge_round = evaluation.judge_round + 1
        config = {**evaluation.config, "judges": roster,
                  "rejudged": [*evaluation.config.get("rejudged", []),
                               {"round": judge_round, "at": started.isoformat()}]}
        previous = evaluation.status
        # A finished run shows "Judging" while its verdicts are replaced, then "Done" again.
        status = EvalRun.Status.JUDGING if previous == EvalRun.Status.DONE else previous
        EvalRun.objects.filter(pk=evaluation.pk).update(judge_round=judge_round, config=config, status=status)
        evaluation.config, evaluation.judge_round = config, judge_round
    try:
        judged = _rejudge_results(evaluation, roster, judge_round)
    finally:
        EvalRun.objects.filter(pk=evaluation.pk, status=EvalRun.Status.JUDGING).update(status=previous)
    score_evaluation(evaluation.pk)
    return {"judged": judged, "round": judge_round, "seconds": (timezone.now() - started).total_seconds()}


def _rejudge_results(evaluation: EvalRun, roster: list[dict], judge_round: int) -> int:
    judged = 0
    results = EvalResult.objects.filter(eval_run=evaluation, superseded=False, trajectory__isnull=False).exclude(
        state=EvalResult.State.RUNNING)
    for result in results:
        if (result.evidence or {}).get("stop_kind") != "finished":
            continue
        judge_result(result, roster, judge_round)
        judged += 1
    return judged


def record_expert_verdict(result: EvalResult, outcome: str, user, note: str = "") -> EvalResult:
    """An expert scores a split (or overrides a judged) result; the run's scores follow."""
    from benchmark.metric import score_evaluation

    if outcome not in (SUCCESS, FAILURE):
        raise ValueError("an expert verdict is success or failure")
    with transaction.atomic():
        updated = EvalResult.objects.filter(pk=result.pk, superseded=False).exclude(
            state__in=[EvalResult.State.RUNNING, EvalResult.State.NOT_SCORED]).update(
            expert_outcome=outcome, expert_note=note[:2000], expert_by=user, expert_at=timezone.now(),
            state=EvalResult.State.EXPERT)
        if not updated:
            raise ValueError("this result cannot be scored by hand (not judged yet, not scored, or replaced)")
        Trajectory.objects.filter(pk=result.trajectory_id).update(verdict=TO_OUTCOME[outcome])
        history.record(result, {"expert_outcome": (result.expert_outcome, outcome),
                                "state": (result.state, EvalResult.State.EXPERT),
                                "expert_note": (result.expert_note, note[:2000]),
                                "expert_by": (result.expert_by_id, getattr(user, "pk", None))}, actor=user)
    score_evaluation(result.eval_run_id)
    return EvalResult.objects.get(pk=result.pk)
