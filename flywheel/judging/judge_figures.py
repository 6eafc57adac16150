"""The evaluation systems against the truth: confusion matrices and HTSC's figures over judged cases
(JudgeCase rows, or anything with .truth, .outcome, .screen_kind and .votes).

purity  = share of HTSC True that are truly successful (what the SFT pool would receive)
recall  = share of truly successful trajectories that reach True
undetermined rate = share of all cases HTSC sends to adjudicators
"""
from flywheel.models import ScreenKind
from flywheel.rules.htsc import ABSTAIN, ENV_ERROR, FALSE, TRUE, UNDETERMINED

SYSTEMS = ("A", "B", "C", "HTSC")
VERDICTS = {"A": (TRUE, FALSE, ENV_ERROR, ABSTAIN), "B": (TRUE, FALSE, ENV_ERROR, ABSTAIN),
            "C": (TRUE, FALSE, ENV_ERROR, ABSTAIN), "HTSC": (TRUE, FALSE, ENV_ERROR, UNDETERMINED)}


def verdict_of(case, system: str) -> str:
    if system == "HTSC":
        return case.outcome
    return ((case.votes or {}).get(system) or {}).get("vote", ABSTAIN)


def confusion(cases, system: str, kind: str | None = None) -> dict:
    """{True|False (the truth): {verdict: count}} over the cases of one screen kind (None: all)."""
    matrix = {truth: dict.fromkeys(VERDICTS[system], 0) for truth in (True, False)}
    for case in cases:
        if kind is None or case.screen_kind == kind:
            verdict = verdict_of(case, system)
            row = matrix[bool(case.truth)]
            row[verdict] = row.get(verdict, 0) + 1
    return matrix


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def purity(cases) -> float | None:
    passed = [c for c in cases if c.outcome == TRUE]
    return _share(sum(1 for c in passed if c.truth), len(passed))


def judge_figures(cases) -> dict:
    cases = list(cases)
    successes = [c for c in cases if c.truth]
    return {
        "cases": len(cases),
        "sft_purity": purity(cases),
        "true_recall": _share(sum(1 for c in successes if c.outcome == TRUE), len(successes)),
        "undetermined_rate": _share(sum(1 for c in cases if c.outcome == UNDETERMINED), len(cases)),
        "blind_purity": purity([c for c in cases if c.screen_kind == ScreenKind.BLIND]),
        "trap_purity": purity([c for c in cases if c.screen_kind == ScreenKind.TRAP]),
    }

