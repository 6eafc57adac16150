"""Function-tree coverage (to be written)."""


def on_trajectory_routed(sender, trajectory_id, outcome, reason="", **kwargs):
    pass
