"""The judge-evaluation set: labelled trajectories the project collected on the farm with policies of
varying skill (experts, near-misses, pseudo-completions, wanderers), each with the farm's ground
truth, which no judge may read. Replaying a case on a phone and judging it with Systems A, B, C and
HTSC measures how often their verdicts are right (§2.4.2's purity as a figure).

The set is a versioned file (flywheel/judging/judge_sets/<version>.jsonl, made by
perf/judge_set_generate.py): a first line {"meta": {...}} then one case per line with its goal,
verification, reset, the executed actions (taps by point, so a dump-blind screen replays the same),
the truth and the generating policy's skill. Every case is persisted with every vote as it is judged.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from devices.actions import RESOLVED_FIELDS
from devices.executor import execute_action
from devices.observation import observe
from devices.phone import PhoneUnavailable
from devices.reset import reset_phone
from flywheel.blobs import read_blob, store_blob
from flywheel.judging.pipeline import safety_checklist
from flywheel.judging.system_a import system_a_vote
from flywheel.judging.system_b import system_b_vote
from flywheel.judging.system_c import system_c_vote
from flywheel.judging.thresholds import active_thresholds
from flywheel.judging.trajectory_view import StepView, TrajectoryView
from flywheel.models import JudgeCase, JudgeEvaluation, ScreenKind
from flywheel.policies.protocol import AGENT_STOPS
from flywheel.rules.htsc import htsc_consensus
from flywheel.screens.blindness import hierarchy_is_blind

log = logging.getLogger(__name__)
SETS_DIR = Path(__file__).resolve().parent / "judge_sets"
CURRENT_SET = "v1"


class SetInvalid(ValueError):
    pass


def set_path(version: str = CURRENT_SET) -> Path:
    if not version.replace("_", "").replace("-", "").isalnum():
        raise SetInvalid(f"no judge-evaluation set named {version!r}")
    return SETS_DIR / f"{version}.jsonl"


def load_set(version: str = CURRENT_SET) -> tuple[dict, list[dict], str]:
    """(meta, cases, sha256 of the file)."""
    path = set_path(version)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SetInvalid(f"the judge-evaluation set {version} is not readable: {error.strerror}") from error
    lines = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    if not lines or "meta" not in lines[0]:
        raise SetInvalid(f"the judge-evaluation set {version} has no meta line")
    return lines[0]["meta"], lines[1:], hashlib.sha256(data).hexdigest()


def replay(phone, case: dict) -> list[dict]:
    """Reset the phone as the case's query asks, redo what its setup recipes did (a case whose task
    presumes a signed-in app), then run its actions, observing the screen before each one (and after
    the last) as a collection line does; frames go to the blob store."""
    reset_phone(phone, case.get("reset"), apps=case.get("apps") or [])
    for action in case.get("setup") or []:   # as the executor recorded it: without what it resolved
        execute_action(phone, {k: v for k, v in action.items() if k not in RESOLVED_FIELDS},
                       observe(phone).hierarchy_xml)
    steps, actions = [], case["actions"]
    for index, action in enumerate(actions):
        seen = observe(phone)
        steps.append({"index": index, "screenshot": store_blob(seen.png, "png"),
                      "hierarchy": store_blob(seen.hierarchy_xml.encode("utf-8"), "xml"),
                      "package": seen.foreground.get("package", ""), "action": action})
        if index == len(actions) - 1 and action.get("action") in AGENT_STOPS:
            break   # the ending; a clarification asked on the way is carried out like any step
        result = execute_action(phone, action, seen.hierarchy_xml)
        if not result.ok:
            steps[-1]["error"] = (result.error or "the action failed")[:200]
    return steps


def _loader(name: str):
    return (lambda: read_blob(name)) if name else None


def _hierarchy(name: str) -> str:
    try:
        return read_blob(name).decode("utf-8", "replace") if name else ""
    except OSError:
        log.warning("hierarchy %s of a judge case is missing", name)
        return ""


def case_view(case: dict, steps: list[dict]) -> TrajectoryView:
    """What the judges see of a replayed case: the goal alone, never the truth or the skill."""
    views = [StepView(index=s["index"], hierarchy=_hierarchy(s.get("hierarchy", "")), action=s.get("action"),
                      package=s.get("package", ""), screenshot=_loader(s.get("screenshot", "")))
             for s in steps]
    last = views[-1] if views else None
    final = last.hierarchy if last and (last.action or {}).get("action") in AGENT_STOPS else ""
    return TrajectoryView(goal=case["goal"], steps=views, final_hierarchy=final,
                          verification=case.get("verification") or {}, known_path=case.get("known_path"))


def screen_kind(case: dict, view: TrajectoryView) -> str:
    """A trap is the farm's truth (it looks done); a blind screen is one whose dump shows nothing."""
    if case.get("screen_kind") == ScreenKind.TRAP:
        return ScreenKind.TRAP
    if any(hierarchy_is_blind(step.hierarchy) for step in view.steps):
        return ScreenKind.BLIND
    return ScreenKind.ORDINARY


def offline_votes(view: TrajectoryView, vote_a: dict, thresholds: dict) -> tuple[dict, str, str]:
    """(votes, safety violation, HTSC outcome) of the offline systems, A's vote read on the phone."""
    vote_b = system_b_vote(view, None, thresholds.get("B") or {})
    vote_c = system_c_vote(view, None, thresholds.get("C") or {})
    votes = {"A": vote_a,
             "B": {"vote": vote_b.vote, "rationale": vote_b.rationale[:500]},
             "C": {"vote": vote_c.vote, "rationale": vote_c.rationale[:500]}}
    violation = safety_checklist(view)
    outcome = htsc_consensus(votes["A"]["vote"], vote_b.vote, vote_c.vote, bool(violation))
    return votes, violation, outcome


def judge_case(evaluation: JudgeEvaluation, phone, case: dict) -> JudgeCase:
    """Replay one case, vote, persist (an existing case of this evaluation is left as judged)."""
    existing = evaluation.cases.filter(key=case["key"]).first()
    if existing:
        return existing
    steps = replay(phone, case)
    try:
        vote = system_a_vote(phone, case.get("verification") or {})
        vote_a = {"vote": vote.vote, "rationale": vote.rationale[:500]}
    except PhoneUnavailable as error:
        vote_a = {"vote": "abstain", "rationale": f"phone unreachable at the end: {error}"[:500]}
    view = case_view(case, steps)
    votes, violation, outcome = offline_votes(view, vote_a, evaluation.thresholds)
    return JudgeCase.objects.create(
        evaluation=evaluation, key=case["key"], task=case.get("task", ""), skill=case.get("skill", ""),
        screen_kind=screen_kind(case, view), truth=bool(case["truth"]),
        truth_detail=str(case.get("truth_detail", ""))[:300], steps=steps, votes=votes,
        safety=violation[:300], outcome=outcome, step_truth=case.get("step_truth") or [])


def start_evaluation(phone_serial: str, version: str = CURRENT_SET, real_phone: bool = False,
                     blind_share: float = 0.0, user=None, thresholds: dict | None = None) -> JudgeEvaluation:
    meta, cases, digest = load_set(version)
    return JudgeEvaluation.objects.create(
        set_version=version, set_sha256=digest, phone_serial=phone_serial, real_phone=real_phone,
        blind_share=blind_share, thresholds=thresholds if thresholds is not None else active_thresholds(),
        cases_total=len(cases), created_by=user)


def run_evaluation(evaluation: JudgeEvaluation, phone, limit: int | None = None, progress=None,
                   before_case=None) -> JudgeEvaluation:
    """Judge every case of the evaluation's set on `phone` (a PhoneConnection), one row per case as
    it is decided; a phone that goes away fails the evaluation with the reason, keeping what was judged.
    `before_case()` runs before each replay (a harness that can restore its phone to a baseline)."""
    _, cases, digest = load_set(evaluation.set_version)
    if digest != evaluation.set_sha256:
        return _finish(evaluation, "the set file changed since this evaluation started")
    try:
        for number, case in enumerate(cases[:limit] if limit else cases, start=1):
            if before_case:
                before_case()
            judge_case(evaluation, phone, case)
            if progress:
                progress(number, len(cases))
    except PhoneUnavailable as error:
        return _finish(evaluation, f"the phone went away: {error}")
    except BaseException as error:   # stopped (Ctrl-C, a signal, a bug): never left "running"
        _finish(evaluation, f"stopped before the end ({type(error).__name__})")
        raise
    return _finish(evaluation, "")


def _finish(evaluation: JudgeEvaluation, error: str) -> JudgeEvaluation:
    with transaction.atomic():
        evaluation.status = JudgeEvaluation.Status.FAILED if error else JudgeEvaluation.Status.DONE
        evaluation.error = error[:300]
        evaluation.finished_at = timezone.now()
        evaluation.save(update_fields=["status", "error", "finished_at"])
    return evaluation
