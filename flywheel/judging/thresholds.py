"""What the evaluation systems read of calibration (§2.4.2): their default thresholds, the active
round's thresholds over them (Systems B and C) and its examples for the LLM judge's prompt.

The rounds themselves are made in flywheel/judging/calibration.py, which re-runs the systems;
the systems read only this module, so neither imports the other's maker.
"""
import logging

from flywheel.models import CalibrationRound

log = logging.getLogger(__name__)

MILESTONE_SHARE = 1.0    # System B: share of the milestones that must hold, in order (the last one always)
LOOP_LENGTH = 3          # System C: this many identical consecutive actions on an unchanged screen
DETOUR_FACTOR = 3        # System C: steps beyond this multiple of the shortest known path
DEFAULT_THRESHOLDS = {"B": {"milestone_share": MILESTONE_SHARE},
                      "C": {"loop_length": LOOP_LENGTH, "detour_factor": float(DETOUR_FACTOR)}}


def latest_round() -> CalibrationRound | None:
    """The active round. Evaluation never stops for calibration: whatever keeps the table from
    being read (the database away, a process without database access) leaves the defaults."""
    try:
        return CalibrationRound.objects.order_by("-number").first()
    except Exception as error:  # see the docstring
        log.debug("calibration not readable, defaults hold: %s", error)
        return None


def active_thresholds(system: str | None = None) -> dict:
    """{system: {parameter: value}} (or one system's dict): the latest round's over the defaults."""
    chosen = (latest_round() or CalibrationRound(number=0)).thresholds or {}
    merged = {name: {**defaults, **{k: v for k, v in (chosen.get(name) or {}).items() if k in defaults}}
              for name, defaults in DEFAULT_THRESHOLDS.items()}
    return merged[system] if system else merged


def judge_examples() -> list[dict]:
    """The adjudicated cases the active round chose for the LLM judge's prompt ([] without one)."""
    current = latest_round()
    return list(current.examples or []) if current else []
