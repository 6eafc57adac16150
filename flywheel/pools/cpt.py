"""Feeding the CPT pool: every executed step, from any line, after rule-based cleaning (§2.1.2)."""
import threading
from collections import OrderedDict

from devices.db_pool import release_connection
from flywheel.blobs import read_blob
from flywheel.models import CptEntry
from flywheel.rules.cpt_cleaning import cpt_rejection, frame_facts
from flywheel.step_memo import NextStepMemo

# Decoding a phone-sized PNG for its hash is most of a step's CPU in a collection worker (~40 ms of
# a 1080x2400 frame). A blob's name is the hash of its bytes (flywheel/blobs.py), so the facts of a
# frame seen again (a screen an action left unchanged) are kept by name instead of decoded again.
KNOWN_FRAMES = 4096  # per process: far more than the phones of one host take steps on at once
_known: OrderedDict[str, tuple[str, bool]] = OrderedDict()
_known_lock = threading.Lock()
# The decode (libspng) holds the GIL, so a process decodes one frame at a time anyway; the phone
# threads that would queue for the GIL meanwhile wait on this lock instead, blocked.
_decoding = threading.Lock()


def stored_frame_facts(name: str, png: bytes) -> tuple[str, bool]:
    """frame_facts of the stored blob `name` (whose bytes are `png`), decoded once per process."""
    with _known_lock:
        facts = _known.get(name)
        if facts is not None:
            _known.move_to_end(name)
            return facts
    with _decoding:  # one decode at a time: see _decoding
        facts = frame_facts(png)
    with _known_lock:
        _known[name] = facts
        if len(_known) > KNOWN_FRAMES:
            _known.popitem(last=False)
    return facts


# Per trajectory, the hash of the sample accepted last up to the step this process cleaned last: the
# next step of a trajectory driven here needs no read for its previous sample.
_last_accepted = NextStepMemo(KNOWN_FRAMES)


def previous_sample_hash(step) -> str:
    """The hash of the trajectory's accepted sample before this step ("" if none)."""
    known = _last_accepted.before(step.trajectory_id, step.index)
    if known is not None:
        return known
    previous = (CptEntry.objects.filter(step__trajectory_id=step.trajectory_id, step__index__lt=step.index)
                .order_by("-step__index").values_list("phash", flat=True).first())
    release_connection()  # the decode that follows needs no connection
    return previous or ""


def cpt_cleaning_verdict(step, action: dict, screen_size: tuple[int, int]) -> tuple[str, str]:
    """(rejection reason or "", perceptual hash) of the step as a single-step sample.

    The hash is compared with the trajectory's previous accepted sample (duplicates are dropped).
    """
    previous = previous_sample_hash(step)
    name = step.screenshot.name if step.screenshot else ""
    png = read_blob(name) if name else None
    rejection, phash = cpt_rejection(png, action, screen_size, previous_hash=previous,
                                     facts=lambda frame: stored_frame_facts(name, frame))
    note_cleaned_step(step.trajectory_id, step.index, previous if rejection else phash)
    return rejection, phash


def note_cleaned_step(trajectory_id: int, index: int, last_accepted_hash: str) -> None:
    """This process cleaned step `index` of the trajectory; its accepted sample up to there has this hash."""
    _last_accepted.note(trajectory_id, index, last_accepted_hash)
