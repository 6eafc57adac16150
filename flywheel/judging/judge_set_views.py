"""The judges against the truth (§2.4.2): each system's and HTSC's confusion matrix per screen kind on
the judge-evaluation set, HTSC's purity, recall and Undetermined rate beside their targets, and the
cases it got wrong with every vote. Managers and adjudicators."""
from django.shortcuts import get_object_or_404, render

from accounts.roles import ADJUDICATOR, MANAGER, role_required
from flywheel.judging.judge_figures import SYSTEMS, VERDICTS, confusion, judge_figures
from flywheel.judging.judge_set import CURRENT_SET
from flywheel.models import JudgeEvaluation, ScreenKind
from flywheel.rules.numbers import row_id

# (figure, label, target, the target is a floor) — the targets for the offline systems.
TARGETS = (("sft_purity", "SFT purity (True that are truly done)", 0.99, True),
           ("blind_purity", "Purity on dump-blind screens", 0.97, True),
           ("trap_purity", "Purity on trap screens", 0.97, True),
           ("true_recall", "Recall (truly done that reach True)", 0.85, True),
           ("undetermined_rate", "Undetermined (to adjudicators)", 0.10, False))
VERDICT_LABELS = {"true": "True", "false": "False", "env_error": "Env", "abstain": "Abstain",
                  "undetermined": "Undet."}
SYSTEM_LABELS = {"A": "System A · terminal state", "B": "System B · milestones (UI dump)",
                 "C": "System C · path (pixels)", "HTSC": "HTSC consensus"}
WRONG_SHOWN = 40


def _percent(value) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def _figures(cases) -> list[dict]:
    figures = judge_figures(cases)
    rows = []
    for name, label, target, floor in TARGETS:
        value = figures[name]
        met = None if value is None else (value >= target if floor else value <= target)
        rows.append({"name": name, "label": label, "value": _percent(value), "met": met,
                     "target": ("≥ " if floor else "≤ ") + _percent(target)})
    return rows


def _matrices(cases) -> list[dict]:
    kinds = [(None, "All screens")] + [(kind.value, kind.label) for kind in ScreenKind]
    counts = {kind: sum(1 for c in cases if kind is None or c.screen_kind == kind) for kind, _ in kinds}
    rows = []
    for system in SYSTEMS:
        cells = []
        for kind, label in kinds:
            matrix = confusion(cases, system, kind)
            cells.append({"kind": label, "cases": counts[kind],
                          "rows": [("Truly done", [matrix[True][v] for v in VERDICTS[system]]),
                                   ("Not done", [matrix[False][v] for v in VERDICTS[system]])]})
        rows.append({"system": system, "label": SYSTEM_LABELS[system],
                     "columns": [VERDICT_LABELS[v] for v in VERDICTS[system]], "cells": cells})
    return rows, [label for _, label in kinds]


@role_required(MANAGER, ADJUDICATOR)
def judge_evaluations(request):
    evaluations = list(JudgeEvaluation.objects.select_related("created_by")[:20])
    chosen = None
    if row_id(request.GET.get("evaluation", "")):
        chosen = get_object_or_404(JudgeEvaluation, pk=row_id(request.GET["evaluation"]))
    elif evaluations:
        chosen = next((e for e in evaluations if e.status == JudgeEvaluation.Status.DONE), evaluations[0])
    context = {"evaluations": evaluations, "chosen": chosen, "current_set": CURRENT_SET}
    if chosen is not None:
        cases = list(chosen.cases.all())
        matrices, kinds = _matrices(cases)
        wrong = [c for c in cases if (c.outcome == "true") != c.truth and c.outcome != "undetermined"]
        wrong.sort(key=lambda c: (c.truth, c.key))   # impurities (True where not done) first
        context.update(cases=len(cases), figures=_figures(cases), matrices=matrices, kinds=kinds,
                       wrong=wrong[:WRONG_SHOWN], wrong_total=len(wrong),
                       kind_counts={kind.label: sum(1 for c in cases if c.screen_kind == kind) for kind in ScreenKind})
    return render(request, "flywheel/judge_evaluations.html", context)
