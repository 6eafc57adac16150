"""Trajectory judging (the report's "evaluation" of a trajectory): the three heterogeneous systems of HTSC (§2.4.2)."""
from dataclasses import dataclass, field


@dataclass
class SystemVote:
    system: str            # "A", "B" or "C"
    vote: str              # true / false / env_error / abstain
    rationale: str
    safety_violation: str = ""
    details: dict = field(default_factory=dict)
