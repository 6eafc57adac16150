"""Issue #35: the query API never releases a held-out, frozen query; only the benchmark's workflow does."""
import json

import pytest

from flywheel.models import Query

pytestmark = pytest.mark.django_db


@pytest.fixture
def frozen():
    """A held-out query frozen into a benchmark version (as benchmark/versions.py leaves it)."""
    return Query.objects.create(key="held-out", text="Open Settings", tier="L1", verification={},
                                evaluation_only=True, locked=True)


def _patch(client, query, changes):
    return client.patch(f"/api/queries/{query.pk}/", json.dumps(changes), content_type="application/json")


def test_a_manager_cannot_release_a_held_out_query_by_patch(client_as, frozen):
    reply = _patch(client_as("manager"), frozen, {"evaluation_only": False, "locked": False})
    frozen.refresh_from_db()
    assert frozen.evaluation_only is True and frozen.locked is True
    assert reply.status_code == 200 and reply.json()["evaluation_only"] is True and reply.json()["locked"] is True


def test_a_manager_cannot_release_a_held_out_query_by_put(client_as, frozen):
    client = client_as("manager")
    body = client.get(f"/api/queries/{frozen.pk}/").json()
    body.update(evaluation_only=False, locked=False)
    reply = client.put(f"/api/queries/{frozen.pk}/", json.dumps(body), content_type="application/json")
    assert reply.status_code == 200, reply.content
    frozen.refresh_from_db()
    assert frozen.evaluation_only is True and frozen.locked is True


def test_editing_what_a_frozen_query_asks_is_a_conflict_not_a_crash(client_as, frozen):
    reply = _patch(client_as("manager"), frozen, {"text": "Open Wi-Fi", "locked": False})
    assert reply.status_code == 409
    assert "frozen into a benchmark version" in reply.json()["detail"]
    frozen.refresh_from_db()
    assert frozen.text == "Open Settings" and frozen.locked is True


def test_a_manager_cannot_hold_out_or_lock_a_query_either(client_as):
    query = Query.objects.create(key="open", text="Open Settings", tier="L1", verification={})
    reply = _patch(client_as("manager"), query, {"evaluation_only": True, "locked": True, "text": "Open Wi-Fi"})
    assert reply.status_code == 200, reply.content
    query.refresh_from_db()
    assert query.text == "Open Wi-Fi"  # a normal edit still works
    assert query.evaluation_only is False and query.locked is False
