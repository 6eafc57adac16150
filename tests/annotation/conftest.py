"""A virtual farm for session tests: its ADB server on a thread of the test process, phones
registered in the test database, and the farm's own tasks as queries."""
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from simfarm.farm import Farm
from simfarm.serve import ServerThread

TASKS = Path(__file__).resolve().parents[2] / "simfarm" / "tasks" / "tasks.jsonl"


def farm_task(key):
    for line in TASKS.read_text().splitlines():
        if line.strip() and json.loads(line)["key"] == key:
            return json.loads(line)
    raise KeyError(key)


@pytest.fixture
def thread_farm():
    """Two phones; the Device rows point at this server, so any process of the test can drive them."""
    phones = Farm(devices=2, seed=0)
    with ServerThread(phones) as server:
        yield SimpleNamespace(farm=phones, address=f"127.0.0.1:{server.port}")


@pytest.fixture
def farm_devices(thread_farm):
    def register():
        from devices.registry import discover_devices

        summary = discover_devices([thread_farm.address])
        assert summary["seen"] == 2, summary
        return thread_farm

    return register


@pytest.fixture
def import_task():
    def load(key, **changes):
        from flywheel.models import Query
        from flywheel.queries.jsonl import import_queries

        import_queries(json.dumps({**farm_task(key), **changes}))
        return Query.objects.get(key=key)

    return load
