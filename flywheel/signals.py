"""Signals of the data engine: parts of the loop that follow routing listen without it knowing them."""
from django.dispatch import Signal

# Sent after a trajectory's destination is committed.
# Arguments: trajectory_id, outcome (an Outcome value), reason (text, may be empty).
trajectory_routed = Signal()
