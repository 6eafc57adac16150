"""What a process noted about a trajectory at one step, for its very next step (issue #38).

A phone host drives each trajectory on one thread, one step after another; what a step needs from
the steps before (the history, the previous CPT sample) is what this process wrote at the step
before, unless another process took a step meanwhile. So a value noted at step i is handed out only
for step i + 1; anything else is a miss and the caller reads the database.
"""
import threading
from collections import OrderedDict


class NextStepMemo:
    """Per trajectory, the value noted at its last step here; least recently used dropped past `size`."""

    def __init__(self, size: int):
        self.size = size
        self._noted: OrderedDict[int, tuple[int, object]] = OrderedDict()
        self._lock = threading.Lock()

    def before(self, trajectory_id: int, index: int):
        """The value noted at step index − 1 of the trajectory, or None."""
        with self._lock:
            noted = self._noted.get(trajectory_id)
        return noted[1] if noted is not None and noted[0] == index - 1 else None

    def note(self, trajectory_id: int, index: int, value) -> None:
        with self._lock:
            self._noted[trajectory_id] = (index, value)
            self._noted.move_to_end(trajectory_id)
            if len(self._noted) > self.size:
                self._noted.popitem(last=False)

    def forget(self, trajectory_id: int) -> None:
        with self._lock:
            self._noted.pop(trajectory_id, None)
