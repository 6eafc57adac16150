"""Error explanations of ECDM corrections (Xiaomi-GUI-0 §3.4): why the original step was wrong,
written into the [Reflection] of the corrected step and kept, structured, beside it.

    explain_correction(repair, step, action, cot, by) -> dict
        the facts (the attribution's error class and level, the step's screen, the original action
        and the correction) → flywheel.rules.error_explanation; the Reflection is a person's reason
        (by "human"), else the Teacher's own rationale (by "teacher"), else the evidence's. The record
        keeps the original action, the error class, the attribution's evidence and the evidence-based
        text (the fallback), so nothing is invented and a page can show where each part came from.
    explained_corrections() -> int
        how many ECDM samples in the SFT pool carry an explanation.

The record sits on the repair (correction["explanation"]) and on the sample's corrected step
(edit["explanation"]); the SFT export copies it into the sample's meta (training/exports/chat.py).
"""
from __future__ import annotations

from devices.uitree import parse_hierarchy
from flywheel.models import Attribution, Repair, SftEntry, Step
from flywheel.repair.screens import label_at, screen_heading, screen_of, stored_hierarchy
from flywheel.rules.error_explanation import ErrorFacts, chosen_explanation, error_explanation

ECDM_REPAIRED = SftEntry.Intake.ECDM_REPAIRED


def concluding_evidence(attribution: Attribution | None) -> str:
    """The words of the level that concluded (the cascade's last finding), as the page shows them."""
    entries = [e for e in (attribution.evidence or []) if isinstance(e, dict)] if attribution else []
    found = [e for e in entries if e.get("conclusion") == "found"]
    return str((found or entries or [{}])[-1].get("detail") or "")[:500]


def _heading(xml: str, step: Step) -> str:
    height = screen_of(step)[1]
    return screen_heading(xml, step.foreground_package or "", height) or screen_heading(xml, "", height)


def explain_correction(repair: Repair, step: Step, action: dict, cot: dict, by: str) -> dict:
    """The structured explanation of correcting `step` (the original) with `action`; `cot` is the
    correction's reasoning, whose [Reflection] is the annotator's or the Teacher's own rationale."""
    attribution = repair.attribution if repair.attribution_id else None
    facts = ((attribution.features or {}).get("facts") or {}) if attribution else {}
    original = step.executed_action or step.proposed_action
    original = original if isinstance(original, dict) else None
    xml = stored_hierarchy(step)
    roots = parse_hierarchy(xml)
    error = ErrorFacts(level=attribution.level if attribution else 0, cause=attribution.cause if attribution else "",
                       original=original, corrected=action, original_label=label_at(roots, original),
                       corrected_label=label_at(roots, action), screen_title=_heading(xml, step),
                       wrong_steps=int(facts.get("wrong_steps") or 0))
    from_evidence = error_explanation(error)
    own = str((cot or {}).get("Reflection") or "")
    text, source = chosen_explanation(annotator=own if by == "human" else "", teacher=own if by == "teacher" else "",
                                      evidence=from_evidence)
    return {"text": text, "source": source, "error_class": error.cause, "level": error.level,
            "original_action": original, "original_label": error.original_label,
            "corrected_label": error.corrected_label, "screen": error.screen_title,
            "evidence": concluding_evidence(attribution), "from_evidence": from_evidence,
            "attribution": attribution.pk if attribution else None, "step": step.index}


def explained_corrections() -> int:
    """ECDM samples in the SFT pool whose corrected step carries an explanation."""
    return (SftEntry.objects.filter(intake=ECDM_REPAIRED, trajectory__steps__edit__has_key="explanation")
            .values("trajectory_id").distinct().count())
