"""ECDM dispatch (§2.5.2): which repair path a failed trajectory takes, from its attribution alone.

The ECDM does not re-judge: it consumes the cascaded attribution's conclusion (§2.5.1).
"""
from dataclasses import dataclass

STEP_CORRECTION = "step"            # occasional single-step slip → Teacher rewrites step N → SFT
RQA = "rqa"                         # over-scoped task, correct prefix → Q′ fits the prefix → SFT
COUNTERFACTUAL = "counterfactual"   # recurring error class → adversarial queries → RL pool + generation
ENV_REPAIR = "env"                  # Env_ERROR with a known interruption → "close the pop-up and resume"
NO_REPAIR = ""                      # not the model's failure (Level 2), or nothing to anchor a repair on

# Level-3 causes (§2.5.1) and Level-1 interruptions that a synthesised dismissal can repair.
PERCEPTION_DRIFT, STATE_TRACKING, CONSTRAINT_VIOLATION = "perception_drift", "state_tracking", "constraint_violation"
OVER_SCOPED = "over_scoped"
DISMISSIBLE_INTERRUPTIONS = ("popup", "permission")


@dataclass(frozen=True)
class AttributionFacts:
    """What the cascade concluded, in the terms dispatch needs.

    level: 1 environment, 2 task/verifier defect, 3 model. cause: the structured cause.
    first_bad_step: index of the first wrong step (None: not located). good_prefix: executed steps
    before it that were right (the golden prefix). wrong_steps: how many steps went wrong.
    correctable: the right action at the first bad step can be determined offline (a page that
    is still on screen, not a state the trajectory never reached). recurring: its failure class
    recurs across several queries. interruption_known: Level 1 found where the pop-up came.
    """

    level: int
    cause: str
    first_bad_step: int | None = None
    good_prefix: int = 0
    wrong_steps: int = 0
    correctable: bool = False
    recurring: bool = False
    interruption_known: bool = False


def ecdm_dispatch(facts: AttributionFacts) -> str:
    """The report's mapping, in its order of precedence.

    - Level 1 (environment): not the model's error. A known, dismissible interruption gets the
      "close the pop-up and resume" synthesis (§2.4.2); anything else only self-heals and re-collects.
    - Level 2 (task or verifier defect): owned by query generation or evaluation, never repaired as
      a model failure.
    - Level 3: an occasional single-step slip (one wrong step, the right action determinable
      offline) → step-level correction; a task over-scoped for the model, with a correct prefix →
      RQA; a recurring error class that neither can salvage case by case → counterfactual
      derivation. A failure with no correct prefix and no recurrence still gets a step-level
      correction attempt at its first bad step (the Teacher, else a person), so nothing is lost.
    """
    if facts.level == 1:
        if facts.interruption_known and facts.cause in DISMISSIBLE_INTERRUPTIONS:
            return ENV_REPAIR
        return NO_REPAIR
    if facts.level == 2:
        return NO_REPAIR
    single_slip = facts.wrong_steps <= 1 and facts.correctable
    if facts.first_bad_step is not None and single_slip and facts.cause != OVER_SCOPED:
        return STEP_CORRECTION
    if facts.good_prefix > 0 and (facts.cause == OVER_SCOPED or not facts.correctable):
        return RQA
    if facts.recurring:
        return COUNTERFACTUAL
    if facts.good_prefix > 0:
        return RQA
    return STEP_CORRECTION if facts.first_bad_step is not None else NO_REPAIR
