"""Shared fixtures of the benchmark tests."""
import pytest

from flywheel.models import App, Query

BLUETOOTH_CHECKS = {
    "terminal": [{"check": "foreground", "package": "com.android.settings"},
                 {"check": "screen", "contains": "bluetooth_switch"}],
    "milestones": [{"name": "bluetooth page", "resource_id": "com.android.settings:id/bluetooth_switch"}]}


def make_benchmark_query(key, text="Open the Bluetooth settings", labels=None, verification=None,
                         package="com.android.settings", known_path=None, **fields):
    """A query the virtual farm can run (Settings is on every virtual phone)."""
    query = Query.objects.create(
        key=key, text=text, tier=fields.pop("tier", "L2"), labels=labels or {}, known_path=known_path,
        verification=verification if verification is not None else BLUETOOTH_CHECKS,
        reset={"force_stop": [package], "clear": [], "home": True}, **fields)
    query.set_apps([App.objects.get_or_create(package=package, defaults={"category": "system", "is_system": True})[0]])
    return query


@pytest.fixture
def manager(role_users):
    return role_users["manager"]
