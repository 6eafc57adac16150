"""Cascaded failure attribution (§2.5.1): environment first, then the task and its verifiers,
then the model — in that fixed order, each level recording its conclusion and evidence.

    Level 1  environment_failure_check   (attribution_environment.py)  → Env_ERROR, environment maintenance
    Level 2  task_specification_defect   ambiguous / contradictory / unverifiable → query review
             verification_rule_defect    a rule failed a correct trajectory → the rule is fixed, re-judged
    Level 3  model_failure_attribution   perception drift, state tracking, constraint violation,
                                         over-scoped; the first wrong step located → the ECDM

A well-posed task that merely exceeds the current model is not a Level-2 defect: it is Level 3's
over-scoped case (RQA). All functions are pure, over a Trace (attribution_trace.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flywheel.rules.attribution_environment import environment_failure_check
from flywheel.rules.attribution_model import (
    PRIORITY,
    Alignment,
    expected_targets,
    gem_deviation,
    milestone_progress,
    page_loop,
    path_alignment,
    perception_slip,
    resolvable_at,
    target_words,
    trailing_repeats,
)
from flywheel.rules.attribution_trace import CLEAR, FOUND, Finding, Trace, ending, good_prefix_before
from flywheel.rules.ecdm import CONSTRAINT_VIOLATION, OVER_SCOPED, PERCEPTION_DRIFT, STATE_TRACKING, AttributionFacts
from flywheel.rules.stops import ASKING_ACTIONS, NO_USABLE_ACTION, StopKind

UNVERIFIABLE, CONTRADICTORY, AMBIGUOUS = "unverifiable_query", "contradictory_query", "ambiguous_query"
VERIFIER_DEFECT = "verifier_defect"
# §2.2.4 dimensions (flywheel/queries/vocabulary.py) a cause points to, most specific first.
CAUSE_CAPABILITIES = {
    STATE_TRACKING: ("cross_page_state_tracking", "looping", "information_synthesis"),
    CONSTRAINT_VIOLATION: ("multi_constraint_filtering", "conditional_logic", "numerical_reasoning"),
    OVER_SCOPED: ("information_synthesis", "cross_page_state_tracking", "looping", "multi_constraint_filtering",
                  "conditional_logic", "numerical_reasoning"),
    PERCEPTION_DRIFT: (),
}
_BOUND = r"\s*([$¥€£])?\s*(\d+(?:\.\d+)?)\s*([a-z]+)?"
UPPER = re.compile(r"\b(?:under|below|less than|cheaper than|at most|no more than|up to)" + _BOUND)
LOWER = re.compile(r"\b(?:over|above|more than|at least|no less than)" + _BOUND)
MONEY_WORDS = ("yuan", "cny", "rmb", "usd", "dollars", "dollar", "bucks", "euros")


# -- Level 2: the task specification ------------------------------------------------------------

def _bounds(text: str, pattern) -> dict:
    found = {}
    for symbol, number, unit in pattern.findall(text.lower()):
        kind = "money" if symbol or unit in MONEY_WORDS else (unit.rstrip("s") if unit else "")
        if kind:
            found.setdefault(kind, []).append(float(number))
    return found


def contradictory_constraints(spec_text: str, terminal: list) -> str:
    """Why the query cannot be satisfied as written ('' when it can): two terminal checks of one
    fact that cannot both hold, or a lower bound above an upper bound of the same quantity."""
    facts = {}
    for check in terminal:
        if not isinstance(check, dict):
            continue
        key = tuple(str(check.get(k, "")) for k in ("check", "namespace", "key", "uri", "where", "path", "package"))
        facts.setdefault(key, []).append(check)
    for key, checks in facts.items():
        equals = {str(c["equals"]) for c in checks if "equals" in c}
        if len(equals) > 1:
            return f"terminal checks want {key[0]} {key[2] or key[3] or key[4]} to equal {' and '.join(sorted(equals))}"
        contains = {str(c["contains"]) for c in checks if "contains" in c}
        refused = {str(c["not_contains"]) for c in checks if "not_contains" in c}
        if contains & refused:
            return f"terminal checks want {key[0]} both to contain and not to contain {sorted(contains & refused)[0]!r}"
        exists = {bool(c["exists"]) for c in checks if "exists" in c}
        if len(exists) > 1:
            return f"terminal checks want {key[5]} both to exist and not to exist"
    upper, lower = _bounds(spec_text, UPPER), _bounds(spec_text, LOWER)
    for kind in set(upper) & set(lower):
        if max(lower[kind]) > min(upper[kind]):
            return (f"the query asks for {kind} above {max(lower[kind]):g} and below {min(upper[kind]):g} at once")
    return ""


def task_specification_defect(trace: Trace) -> Finding:
    """Level 2, query side: not verifiable as written (no terminal check, no milestone, no
    handover), self-contradictory, or ambiguous (the agent asked, the spec does not answer and
    nobody did)."""
    spec = trace.spec
    if not spec.terminal and not spec.milestones and not spec.handoff:
        return Finding(2, FOUND, UNVERIFIABLE, "the spec names no terminal check, no milestone and no handover: "
                       "nothing can verify the task as written", check="task_specification")
    contradiction = contradictory_constraints(spec.text, spec.terminal)
    if contradiction:
        return Finding(2, FOUND, CONTRADICTORY, f"self-contradictory: {contradiction}", check="task_specification")
    clarify = (spec.verification or {}).get("clarify")
    spec_answers = isinstance(clarify, dict) and bool(clarify.get("answer"))
    asked = [s for s in trace.acting if (s.action or {}).get("action") in ASKING_ACTIONS and not s.answer]
    if asked and not spec_answers and spec.handoff != "clarify":
        question = str(asked[0].action.get("question") or "").strip() or "a question"
        return Finding(2, FOUND, AMBIGUOUS, f"ambiguous: the agent asked \"{question[:160]}\" at step {asked[0].index}; "
                       "the spec does not answer it and nobody did", steps=[s.index for s in asked],
                       check="task_specification")
    return Finding(2, CLEAR, "", "the task is verifiable, consistent, and every question it raised was answered",
                   check="task_specification")


# -- Level 2: the verification rules -------------------------------------------------------------

def failing_rule(vote) -> dict:
    """The check a system failed the trajectory on, as written in the spec."""
    details = vote.details or {}
    if vote.system == "A":
        checks = [r.get("check") for r in details.get("results") or [] if isinstance(r, dict) and not r.get("passed")]
        return {"terminal": checks} if checks else {"rationale": vote.rationale}
    if vote.system == "B":
        missing = [r.get("name") for r in details.get("reached") or [] if isinstance(r, dict) and r.get("at") is None]
        return {"milestones": missing} if missing else {"rationale": vote.rationale}
    return {"rationale": vote.rationale}


def verification_rule_defect(trace: Trace, align: Alignment | None) -> Finding:
    """Level 2, evaluation side: one system failed a correctly completed trajectory — the other
    two said True, the agent declared success, the final screen shows the last milestone, and the
    known path (if any) was followed to its end. A person's "wrong" is not second-guessed."""
    if trace.adjudication == "wrong":
        return Finding(2, CLEAR, "", "a person adjudicated it wrong: no verifier is in question",
                       check="verification_rule")
    votes = {v.system: v for v in trace.votes}
    failing = [v for v in votes.values() if v.vote == "false"]
    if not failing:
        return Finding(2, CLEAR, "", "no system voted False", check="verification_rule")
    final = trace.steps[-1] if trace.steps else None
    milestones = trace.spec.milestones
    shows_last = not milestones or (final is not None and len(milestones) - 1 in final.milestones)
    followed = align is None or (not align.deviations and align.position >= align.total)
    for vote in failing:
        others = [votes.get(s) for s in "ABC" if s != vote.system]
        if not all(o is not None and o.vote == "true" for o in others):
            continue
        if ending(trace) == "success" and shows_last and followed:
            rule = failing_rule(vote)
            detail = (f"System {vote.system} failed a trajectory the other two passed, which declared success"
                      f"{' with the last milestone on its final screen' if milestones else ''}"
                      f"{' after following the known path' if align is not None else ''}: {vote.rationale[:200]}")
            return Finding(2, FOUND, VERIFIER_DEFECT, detail, check="verification_rule",
                           features={"system": vote.system, "rule": rule, "reason": vote.rationale[:500]})
    said = ", ".join(f"{v.system}={v.vote}" for v in trace.votes)
    return Finding(2, CLEAR, "", f"the failing vote is corroborated ({said}; ending {ending(trace)})",
                   check="verification_rule")


# -- Level 3: the model ------------------------------------------------------------------------------

@dataclass
class _Candidate:
    step: int
    cause: str
    detail: str
    correctable: bool = False
    steps: list = field(default_factory=list)


def _describe(path_step: dict) -> str:
    target = path_step.get("target") or {}
    named = next((str(target[k]) for k in ("text", "text_contains", "content_desc", "resource_id") if k in target), "")
    named = named or path_step.get("app") or path_step.get("text") or path_step.get("button") or ""
    return f"{path_step.get('action')} \"{named}\"" if named else str(path_step.get("action"))


def model_failure_attribution(trace: Trace, align: Alignment | None) -> Finding:
    """Level 3: the structured cause and the first wrong step (the earliest problem located)."""
    steps, acting = list(trace.steps), trace.acting
    by_index = {s.index: s for s in steps}
    end, reached = ending(trace), milestone_progress(trace)
    got = [i for i in reached if i is not None]
    features = {"ending": end, "milestones": {"reached": len(got), "of": len(reached), "at": got}}
    if align is not None:
        features["path"] = {"done": align.position, "of": align.total, "deviations": [list(d) for d in align.deviations]}
    if not acting:
        first = steps[0].index if steps else None
        path = trace.spec.path_steps
        correctable = bool(path) and first is not None and expected_targets(by_index[first], path[0]) != []
        return Finding(3, FOUND, PERCEPTION_DRIFT, "the model never executed an action"
                       + (f" ({trace.stop_reason})" if trace.stop_reason else ""), steps=[first] if first is not None else [],
                       check="model", features=features, first_bad_step=first, wrong_steps=int(first is not None),
                       correctable=correctable)
    progressed = bool(got) or (not reached and align is not None and align.position >= 2)
    candidates = []
    last = acting[-1]
    if trace.safety:
        named = re.match(r"step (\d+)", trace.safety)
        at = int(named.group(1)) if named and int(named.group(1)) in by_index else last.index
        candidates.append(_Candidate(at, CONSTRAINT_VIOLATION, f"violated a safety constraint: {trace.safety}"))
    elif trace.stop_kind == StopKind.BLOCKED:
        candidates.append(_Candidate(last.index, CONSTRAINT_VIOLATION, f"attempted an unsafe action: {trace.stop_reason}"))
    if align is not None and align.deviations:
        index, position, kind = align.deviations[0]
        expected = trace.spec.path_steps[position]
        resolvable = resolvable_at(trace, align, index) is not False
        action = by_index[index].action or {}
        if kind == "skipped":
            candidates.append(_Candidate(index, CONSTRAINT_VIOLATION, f"skipped a required step: the path goes through "
                                         f"{_describe(expected)} first", resolvable))
        elif kind == "premature_end" and action.get("action") == "terminate" and action.get("status") == "success":
            candidates.append(_Candidate(index, CONSTRAINT_VIOLATION, f"declared success with the path unfinished "
                                         f"(next: {_describe(expected)})", resolvable))
        elif resolvable:
            targets = expected_targets(by_index[index], expected)
            slip = perception_slip(by_index[index], targets, target_words(expected))
            what = {"premature_end": "gave up", "missed": "looked past the path's next step"}.get(kind, "left the path")
            where = f"{_describe(expected)} was on the screen" if targets else f"the path goes on with {_describe(expected)}"
            candidates.append(_Candidate(index, PERCEPTION_DRIFT, slip or f"{what} where {where}", True))
        else:
            cause = OVER_SCOPED if progressed else PERCEPTION_DRIFT
            candidates.append(_Candidate(index, cause, f"{_describe(expected)} is not on the screen at step {index}: "
                                         "the subgoal was out of the model's reach"))
    unanswered = next((s for s in steps if s.index > last.index and not s.action), None)
    if unanswered is not None and trace.stop_kind in NO_USABLE_ACTION:
        path, done = trace.spec.path_steps, align.position if align is not None else 0
        targets = expected_targets(unanswered, path[done]) if done < len(path) else []
        candidates.append(_Candidate(unanswered.index, PERCEPTION_DRIFT, f"the model gave no usable action at step "
                                     f"{unanswered.index}: {trace.stop_reason}", targets is None or bool(targets)))
    terminate = last if (last.action or {}).get("action") == "terminate" else None
    if terminate is not None and end in ("success", "premature_success") and len(got) < len(reached):
        names = [str(m.get("name") or m) for m, r in zip(trace.spec.milestones, reached) if r is None]
        candidates.append(_Candidate(terminate.index, CONSTRAINT_VIOLATION, f"declared success with milestone(s) "
                                     f"{', '.join(names)} unmet: the query's constraints only partly met"))
    if terminate is not None and end == "premature_success":
        candidates.append(_Candidate(terminate.index, CONSTRAINT_VIOLATION, "declared success where the task hands over "
                                     f"to the user ({trace.spec.handoff})"))
    loop = page_loop(trace, align)
    if loop is not None:
        candidates.append(_Candidate(loop["first_bad"], STATE_TRACKING, f"lost track across pages: a cycle of "
                                     f"{loop['pages']} page(s) revisited without progress (steps {loop['steps']})",
                                     steps=loop["steps"]))
    repeats = trailing_repeats(trace)
    if repeats and trace.stop_kind == StopKind.REPEATED_ACTIONS:
        candidates.append(_Candidate(repeats[0], STATE_TRACKING, f"the same action {len(repeats)} times without "
                                     "progress", steps=repeats))
    if align is None:
        drift = gem_deviation(trace)
        if drift is not None:
            distance = by_index[drift].gem_distance
            candidates.append(_Candidate(drift, PERCEPTION_DRIFT, f"moved away from the target page (GEM distance "
                                         f"{distance} grew after step {drift})", True))
        slipped = next(((s, why) for s in acting if (why := perception_slip(s))), None)
        if slipped is not None:
            step = slipped[0]
            candidates.append(_Candidate(step.index, PERCEPTION_DRIFT, slipped[1],
                                         step.gem_distance is not None and step.gem_distance > 0))
    if candidates:
        chosen = min(candidates, key=lambda c: (c.step, PRIORITY[c.cause]))
        if align is not None and align.deviations:
            wrong = len(align.deviations)
        else:
            wrong = len({c.step for c in candidates if c.step >= chosen.step})
        wrong = max(wrong, 2 if chosen.cause == STATE_TRACKING else 1)
        return _located(trace, chosen, wrong, features)
    # Nothing went visibly wrong on the way: it gave up, ran out of steps, or claimed success.
    if terminate is not None and end == "success":
        vote = trace.vote("A")
        said = f": {vote.rationale[:160]}" if vote is not None and vote.vote == "false" else ""
        return _located(trace, _Candidate(terminate.index, CONSTRAINT_VIOLATION, "declared success but the goal's "
                                          f"conditions do not hold{said}"), 1, features)
    if align is not None and align.last_match is not None:
        after = next((s.index for s in acting if s.index > align.last_match), None)
    else:
        after = got[-1] if got else None
    if progressed and after is not None:
        how = "gave up" if end in ("failure", "handoff") else f"stopped ({trace.stop_reason or 'no ending'})"
        return _located(trace, _Candidate(after, OVER_SCOPED, f"a correct prefix reached {len(got)}/{len(reached)} "
                                          f"milestone(s); then it {how}: the rest was out of its reach"),
                        sum(1 for s in acting if s.index >= after), features)
    return _located(trace, _Candidate(last.index, PERCEPTION_DRIFT, "no progress toward the goal, and nothing on its "
                                      f"screens located a slip; it ended {end} at step {last.index}"), 1, features)


def _located(trace: Trace, chosen: _Candidate, wrong: int, features: dict) -> Finding:
    return Finding(3, FOUND, chosen.cause, chosen.detail, steps=chosen.steps or [chosen.step], check="model",
                   features=features, first_bad_step=chosen.step, good_prefix=good_prefix_before(trace, chosen.step),
                   wrong_steps=wrong, correctable=chosen.correctable)


# -- the cascade -----------------------------------------------------------------------------------

@dataclass
class Conclusion:
    finding: Finding
    evidence: list
    owner: str
    capability: str = ""

    @property
    def level(self) -> int:
        return self.finding.level

    @property
    def cause(self) -> str:
        return self.finding.cause

    def facts(self) -> dict:
        """AttributionFacts fields except `recurring` (the failure class decides that)."""
        f = self.finding
        facts = AttributionFacts(level=f.level, cause=f.cause, first_bad_step=f.first_bad_step,
                                 good_prefix=f.good_prefix, wrong_steps=f.wrong_steps, correctable=f.correctable,
                                 interruption_known=f.interruption_known)
        return {name: getattr(facts, name) for name in AttributionFacts.__dataclass_fields__ if name != "recurring"}


def capability_of(level: int, cause: str, capabilities) -> str:
    """The §2.2.4 dimension a model failure points to: the query's own dimension that the cause
    concerns, else the cause's usual one ('' for Levels 1 and 2)."""
    if level != 3:
        return ""
    wanted = CAUSE_CAPABILITIES.get(cause, ())
    own = [c for c in capabilities or () if isinstance(c, str)]
    for dimension in wanted:
        if dimension in own:
            return dimension
    if own and cause in (PERCEPTION_DRIFT, OVER_SCOPED):
        return own[0]
    return wanted[0] if wanted and cause != OVER_SCOPED else ""


def cascaded_attribution(trace: Trace, skip_verifier: bool = False) -> Conclusion:
    """Level 1 → 2 → 3 in the fixed order; the first level that finds a cause concludes, and the
    evidence keeps every level examined (what was checked, what was found)."""
    evidence = []
    environment = environment_failure_check(trace)
    evidence.append(environment.evidence())
    if environment.found:
        return Conclusion(environment, evidence, "environment")
    align = path_alignment(trace)
    task = task_specification_defect(trace)
    evidence.append(task.evidence())
    if task.found:
        return Conclusion(task, evidence, "query_review")
    if skip_verifier:
        evidence.append(Finding(2, CLEAR, "", "not checked again: the rule flag was dismissed (the rule was right)",
                                check="verification_rule").evidence())
    else:
        verifier = verification_rule_defect(trace, align)
        evidence.append(verifier.evidence())
        if verifier.found:
            return Conclusion(verifier, evidence, "rule_fix")
    model = model_failure_attribution(trace, align)
    evidence.append(model.evidence())
    return Conclusion(model, evidence, "ecdm", capability_of(3, model.cause, trace.spec.capabilities))


__all__ = ["AMBIGUOUS", "CONTRADICTORY", "FOUND", "UNVERIFIABLE", "VERIFIER_DEFECT", "Conclusion",
           "cascaded_attribution", "capability_of", "contradictory_constraints", "model_failure_attribution",
           "task_specification_defect", "verification_rule_defect"]
