"""Feeding the CPT pool: every executed step, from any line, after rule-based cleaning (§2.1.2)."""
import threading
from collections import OrderedDict

from flywheel.blobs import read_blob
from flywheel.models import CptEntry
from flywheel.rules.cpt_cleaning import cpt_rejection, frame_facts

# Decoding a phone-sized PNG for its hash is most of a step's CPU in a collection worker (~40 ms of
# a 1080x2400 frame). A blob's name is the hash of its bytes (flywheel/blobs.py), so the facts of a
# frame seen again (a screen an action left unchanged) are kept by name instead of decoded again.
KNOWN_FRAMES = 4096  # per process: far more than the phones of one host take steps on at once
_known: OrderedDict[str, tuple[str, bool]] = OrderedDict()
_known_lock = threading.Lock()


def stored_frame_facts(name: str, png: bytes) -> tuple[str, bool]:
    """frame_facts of the stored blob `name` (whose bytes are `png`), decoded once per process."""
    with _known_lock:
        facts = _known.get(name)
        if facts is not None:
            _known.move_to_end(name)
            return facts
    facts = frame_facts(png)  # outside the lock: the phones of a host decode at the same time
    with _known_lock:
        _known[name] = facts
        if len(_known) > KNOWN_FRAMES:
            _known.popitem(last=False)
    return facts


def cpt_cleaning_verdict(step, action: dict, screen_size: tuple[int, int]) -> tuple[str, str]:
    """(rejection reason or "", perceptual hash) of the step as a single-step sample.

    The hash is compared with the trajectory's previous accepted sample (duplicates are dropped).
    """
    previous = (CptEntry.objects.filter(step__trajectory_id=step.trajectory_id, step__index__lt=step.index)
                .order_by("-step__index").values_list("phash", flat=True).first())
    name = step.screenshot.name if step.screenshot else ""
    png = read_blob(name) if name else None
    return cpt_rejection(png, action, screen_size, previous_hash=previous or "",
                         facts=lambda frame: stored_frame_facts(name, frame))
