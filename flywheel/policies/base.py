"""What every policy sees and returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from flywheel.policies.protocol import HistoryEntry


@dataclass
class PolicyState:
    goal: str
    history: list[HistoryEntry]          # every earlier step as text (all of it: §3.1.2)
    screenshots: list[bytes]             # PNGs, oldest first; the last is the current screen
    hierarchy_xml: str = ""              # the current uiautomator dump
    screen_size: tuple[int, int] = (1080, 2400)
    foreground: dict = field(default_factory=dict)   # package, activity, activity_stack
    known_path: dict | None = None       # the query's known path, when it has one
    # The apps the agent may open: on a line that shows a known path (schema-guided, semi-automatic)
    # the query's packages, first = start; on a goal-only line the phone's apps, and the agent finds
    # which ones the goal needs, as with a user's request.
    apps: list[str] = field(default_factory=list)
    app_labels: dict[str, str] = field(default_factory=dict)  # package -> the name people call it


@dataclass
class Proposal:
    cot: dict                            # the five tags
    action: dict                         # canonical action JSON (explicit "coords")
    confidence: float | None = None
    model_io: dict | None = None         # raw request/response for endpoint policies
    policy: str = ""
    # What was sampled when the server said (temperature, top_p, the completion's tokens and their
    # log-probabilities): the RL trainer checks its π_old against it. None: not known.
    sampled: dict | None = None


class PolicyError(Exception):
    """The policy could not propose (endpoint down, output unparseable); model_io is kept.
    `endpoint_failed`: the model endpoint itself failed or refused the call (not the model's doing)."""

    def __init__(self, message: str, model_io: dict | None = None, endpoint_failed: bool = False):
        super().__init__(message)
        self.model_io = model_io
        self.endpoint_failed = endpoint_failed


class Policy(Protocol):
    name: str

    def propose(self, state: PolicyState) -> Proposal: ...
