"""Feeding the CPT pool: every executed step, from any line, after rule-based cleaning (§2.1.2)."""
from .blobs import read_blob
from .cpt_cleaning import cpt_rejection
from .models import CptEntry


def feed_cpt_pool(step, action: dict, screen_size: tuple[int, int]) -> str:
    """Append the step as a single-step sample at once, unless cleaning rejects it.

    Returns "accepted" or the rejection reason (kept on the step's audit record by callers).
    """
    previous = (CptEntry.objects.filter(step__trajectory_id=step.trajectory_id, step__index__lt=step.index)
                .order_by("-step__index").values_list("phash", flat=True).first())
    png = read_blob(step.screenshot.name) if step.screenshot else None
    rejection, phash = cpt_rejection(png, action, screen_size, previous_hash=previous or "")
    if rejection:
        return rejection
    CptEntry.objects.get_or_create(step=step, defaults={
        "screenshot": step.screenshot.name, "action": action, "phash": phash})
    return "accepted"
