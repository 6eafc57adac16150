"""Feeding the CPT pool: every executed step, from any line, after rule-based cleaning (§2.1.2)."""
from flywheel.blobs import read_blob
from flywheel.models import CptEntry
from flywheel.rules.cpt_cleaning import cpt_rejection


def cpt_cleaning_verdict(step, action: dict, screen_size: tuple[int, int]) -> tuple[str, str]:
    """(rejection reason or "", perceptual hash) of the step as a single-step sample.

    The hash is compared with the trajectory's previous accepted sample (duplicates are dropped).
    """
    previous = (CptEntry.objects.filter(step__trajectory_id=step.trajectory_id, step__index__lt=step.index)
                .order_by("-step__index").values_list("phash", flat=True).first())
    png = read_blob(step.screenshot.name) if step.screenshot else None
    return cpt_rejection(png, action, screen_size, previous_hash=previous or "")
