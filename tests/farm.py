"""The virtual phone farm as a real ADB server in a subprocess, for any test package.

The implementation is simfarm's public launcher (simfarm/launch.py), which perf scripts use too;
tests keep importing it from here.
"""
from simfarm.launch import RunningFarm, _announced_port, die_with_parent, list_serials, running_farm, stop

__all__ = ["RunningFarm", "_announced_port", "die_with_parent", "list_serials", "running_farm", "stop"]
