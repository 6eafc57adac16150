"""Env_ERROR repair (§2.4.2): "the correction module can synthetically derive 'close the popup and
resume the task' repair steps into the trajectory, recovering usable supervision from these samples".

Where the cascade located the interruption (repair.step_index, the step whose screen shows the
pop-up), the sample is the prefix before it, then a synthesised step that closes the pop-up on its
frozen screen (the dialog's Close / Cancel / Not now / Deny button, flywheel.policies.teacher's
dismissal_action), then — only when the original went on from the page the pop-up interrupted —
the one step with which the model resumed there. The model's later steps are not copied: the
trajectory failed, and only the resumption is known to be right.
"""
from __future__ import annotations

from django.db import transaction

from flywheel.models import App, Repair, Step
from flywheel.policies.protocol import AGENT_STOPS, describe_action
from flywheel.policies.teacher import dismissal_action
from flywheel.repair.explanations import explain_correction
from flywheel.repair.samples import make_sample
from flywheel.repair.screens import (
    has_screenshot,
    missing_screenshots,
    no_screenshot_reason,
    screen_heading,
    stored_hierarchy,
    stored_print,
)
from flywheel.repair.step_correction import decision_label, fail, to_human, validated_action
from flywheel.rules.repetition import same_action
from flywheel.screens.page_identity import same_page, thresholds_for

KIND_WORDS = {"permission": "permission dialog", "permission_dialog": "permission dialog",
              "permission_denied": "permission dialog", "popup": "pop-up", "ad_popup": "ad pop-up"}


def interrupted_step(repair: Repair) -> int | None:
    if repair.step_index is not None:
        return repair.step_index
    features = (repair.attribution.features or {}) if repair.attribution_id else {}
    step = features.get("step")
    return step if isinstance(step, int) else None


def popup_words(repair: Repair) -> str:
    """What to call the interruption: the type Level 1 recorded, else its cause."""
    attribution = repair.attribution if repair.attribution_id else None
    kind = str(((attribution.features or {}).get("type") if attribution else "") or (attribution.cause if attribution else ""))
    return KIND_WORDS.get(kind) or kind.replace("_", " ") or "pop-up"


def dismissal_cot(repair: Repair, step: Step, action: dict) -> dict:
    goal = repair.trajectory.query.text
    what = popup_words(repair)
    title = screen_heading(stored_hierarchy(step))
    return {"Observation": f"A {what} covers the screen" + (f": \"{title}\"." if title else "."),
            "Reflection": f"The {what} is not part of the task; it interrupted it and has to be closed first.",
            "Plan": f"Close the {what} and resume the task: {goal}",
            "Decision": describe_action(action, decision_label(action, step)),
            "Memory": ""}


def resuming_step(repair: Repair, popup: Step, dismissal: dict) -> Step | None:
    """The model's step after the pop-up, kept only when it acts on the page the pop-up interrupted:
    the next screen is the same page as the one before the pop-up, or the model's own action closed
    the pop-up (then the next screen is the page under it)."""
    original = repair.trajectory
    after = original.steps.filter(index__gt=popup.index, executed_action__isnull=False).order_by("index").first()
    if after is None or not has_screenshot(after) or not after.hierarchy:
        return None
    if (after.executed_action or {}).get("action") in AGENT_STOPS:
        return None  # the model gave up or asked there: no resumption to learn
    if popup.executed_action and same_action(popup.executed_action, dismissal):
        return after
    before = (original.steps.filter(index__lt=popup.index, executed_action__isnull=False)
              .order_by("-index").first())
    if before is None or not has_screenshot(before) or not before.hierarchy:
        return None
    thresholds = thresholds_for(App.objects.filter(package=before.foreground_package).first())
    return after if same_page(stored_print(after), stored_print(before), thresholds) else None


def repair_interruption(repair: Repair) -> Repair:
    """Prefix + "close the pop-up" (+ the resuming step) → the SFT pool; no button found → a person."""
    original, index = repair.trajectory, interrupted_step(repair)
    if index is None:
        return fail(repair, "the attribution did not say at which step the pop-up came")
    step = original.steps.filter(index=index).first()
    if step is None:
        return fail(repair, f"step {index} of trajectory #{original.pk} is not stored")
    missing = missing_screenshots(original, index)
    if missing:
        return to_human(repair, no_screenshot_reason(missing))
    found = dismissal_action(stored_hierarchy(step))
    if not found:
        return to_human(repair, f"no Close / Cancel / Not now button found on step {index}'s screen: "
                                "a person chooses how to close the pop-up")
    try:
        action = validated_action(found, step, reject_wrong=False)
    except ValueError as error:
        return to_human(repair, f"the dismissal found on step {index} is not usable: {error}")
    cot = dismissal_cot(repair, step, action)
    explanation = explain_correction(repair, step, action, cot, by="env")
    if explanation["text"]:  # why the step at the pop-up was wrong, from Level 1's evidence
        cot["Reflection"] = explanation["text"]
    resume = resuming_step(repair, step, action)
    written = {"index": index, "screenshot": step.screenshot.name, "hierarchy": step.hierarchy.name,
               "action": action, "cot": cot, "edit": {"by": "env", "synthesized": "dismissal", "explanation": explanation}}
    more = [{"index": resume.index, "screenshot": resume.screenshot.name, "hierarchy": resume.hierarchy.name,
             "action": resume.executed_action, "cot": resume.cot, "edit": {"resumed_after_popup": True}}] if resume else []
    output = {"action": action, "cot": cot, "confidence": None, "source": "dismissal",
              "rationale": f"the dialog's own button closes it ({cot['Decision']})"}
    with transaction.atomic():
        make_sample(original, repair, keep_until=index, final_step=written, more_steps=more)
        Repair.objects.filter(pk=repair.pk).update(
            teacher_output=output, step_index=index,
            correction={"action": action, "cot": cot, "by": "teacher", "synthesized": "dismissal",
                        "resumed_step": resume.index if resume else None, "explanation": explanation})
    repair.refresh_from_db()
    return repair
