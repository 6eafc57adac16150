"""The virtual farm as a real ADB server in a subprocess on a free port, and phones on it.

Every test that touches a phone gets a PhoneConnection to a phone that was reset to the home
screen (all apps force-stopped, overlays and network trouble cleared).
"""
from __future__ import annotations

import importlib.util

import pytest

from devices.phone import PhoneConnection
from tests.devices.streaming_fixtures import screen_phones  # noqa: F401  (a fixture for the modules here)
from tests.farm import running_farm

FARM_DEVICES = 2


def farm_is_built() -> bool:
    return importlib.util.find_spec("simfarm.farm") is not None


@pytest.fixture(autouse=True)
def _stream_sources_start_fresh():
    """A source one test found unavailable on a phone is not remembered by the next test."""
    from devices.streaming import capture

    capture._unavailable.clear()
    yield
    capture._unavailable.clear()


@pytest.fixture(scope="session")
def farm(tmp_path_factory):
    """(port, serials) of `python -m simfarm --devices 2 --port 0 --seed 0`."""
    if not farm_is_built():
        pytest.skip("the virtual farm (simfarm/farm.py) is not built yet")
    log_path = tmp_path_factory.mktemp("device-farm") / "farm.log"
    with running_farm(FARM_DEVICES, seed=0, log_path=log_path) as running:
        yield running.port, running.serials


@pytest.fixture
def phone(farm):
    """sim-0001 (it has every app), back on a clean home screen."""
    port, serials = farm
    connection = PhoneConnection(address=f"127.0.0.1:{port}", serial=serials[0])
    _clean(connection)
    yield connection
    _clean(connection)


def _clean(connection):
    from devices.anomaly_injection import clear_anomalies

    clear_anomalies(connection)
    packages = [line.split(":", 1)[1] for line in connection.shell("pm list packages").split()
                if line.startswith("package:")]
    connection.shell("; ".join(f"am force-stop {p}" for p in packages) + "; input keyevent KEYCODE_HOME")


def texts(connection) -> list[str]:
    """Every text and content-desc on the phone's screen now."""
    from devices.uitree import all_nodes, parse_hierarchy

    roots = parse_hierarchy(connection.dump_hierarchy())
    return [part for node in all_nodes(roots) for part in (node.text, node.desc) if part]


def find(connection, text: str = None, resource_id: str = None):
    """The first node whose text/desc equals `text` (or whose resource-id ends with `resource_id`)."""
    from devices.uitree import all_nodes, parse_hierarchy

    for node in all_nodes(parse_hierarchy(connection.dump_hierarchy())):
        if text is not None and text in (node.text, node.desc):
            return node
        if resource_id is not None and node.resource_id.endswith(resource_id):
            return node
    return None
