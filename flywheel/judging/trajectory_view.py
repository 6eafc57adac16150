"""What the judges see of a trajectory: its steps as plain records (from the DB or built in tests)."""
from dataclasses import dataclass, field

from flywheel.rules.stops import AGENT_STOPS, agent_ending

TAPS = ("click", "double_click", "long_press")


def screen_point(action: dict, size: tuple[int, int]) -> tuple[int, int]:
    """An action's point in the screen's pixels (a point in thousandths scaled by `size`)."""
    x, y = action["point"][:2]
    if action.get("coords") == "thousandths":
        return round(x * size[0] / 1000), round(y * size[1] / 1000)
    return int(x), int(y)


@dataclass
class StepView:
    index: int
    hierarchy: str                  # uiautomator XML of the screen the action was taken on
    action: dict | None             # the executed action (pixels)
    cot: dict = field(default_factory=dict)
    package: str = ""
    masked: bool = False
    screenshot: object = None       # a callable returning the PNG bytes (loaded only when needed)


@dataclass
class TrajectoryView:
    goal: str
    steps: list                     # [StepView]
    final_hierarchy: str = ""       # the screen after the last action
    verification: dict = field(default_factory=dict)
    known_path: dict | None = None

    @property
    def last_action(self):
        for step in reversed(self.steps):
            if step.action:
                return step.action
        return None

    @property
    def expected_handoff(self) -> str:
        """The handover the task asks for ('call_user' at a payment screen...), or ''."""
        return str((self.verification or {}).get("handoff") or "")

    def ending(self) -> str:
        """How the agent ended (Table 3): 'success' (terminate:success, or the handover the task
        expects), 'failure' (terminate:failure), 'handoff' (call_user/clarify the task does not
        ask for), 'premature_success' (declared done where the user was to take over), or 'none'."""
        return agent_ending(self.last_action, self.expected_handoff)

    def path_end(self) -> dict | None:
        """The tap the known path ends on (its last step before the ending), or None when the path
        ends otherwise or names no element. Systems B and C each ask whether it was taken."""
        steps = [s for s in (self.known_path or {}).get("steps") or [] if s.get("action") not in AGENT_STOPS]
        if not steps or steps[-1].get("action") not in TAPS or not isinstance(steps[-1].get("target"), dict):
            return None
        return steps[-1]

    def taps(self) -> list:
        """(position in steps, step) of every tap by point, in order."""
        return [(i, s) for i, s in enumerate(self.steps)
                if s.action and s.action.get("action") in TAPS and s.action.get("point")]

    def screens(self):
        """Every screen seen, in order, ending with the final one."""
        seen = [step.hierarchy for step in self.steps]
        if self.final_hierarchy:
            seen.append(self.final_hierarchy)
        return seen

    def screenshot_loaders(self):
        """Loaders of the screenshots that go with screens(), index for index (None: none)."""
        loaders = [step.screenshot for step in self.steps]
        if self.final_hierarchy:
            loaders.append(self.steps[-1].screenshot if self.steps else None)
        return loaders
