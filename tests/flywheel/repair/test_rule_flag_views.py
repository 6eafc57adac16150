"""The rule-flag page: open flags with the failing rule and links to edit the query; Fixed /
Rule was right call flywheel.repair.ecdm.resolve_rule_flag. Managers only."""
import pytest
from django.utils import timezone

from flywheel.models import Query, RuleFlag, Trajectory

pytestmark = pytest.mark.django_db


@pytest.fixture
def flag():
    query = Query.objects.create(key="wifi-off", text="Turn Wi-Fi off", tier="L1", status="ready",
                                 verification={"terminal": [{"check": "settings", "key": "wifi_on", "equals": "0"}]})
    trajectory = Trajectory.objects.create(query=query, line="automatic", status="completed", verdict="false",
                                           destination="ecdm")
    return RuleFlag.objects.create(query=query, trajectory=trajectory, system="A",
                                   rule={"check": "settings", "key": "wifi_on", "equals": "0"},
                                   reason="B and C saw Wi-Fi off; only the terminal check failed it")


@pytest.fixture
def resolver(monkeypatch):
    """Stands in for H1's resolve_rule_flag (it may not exist yet): records its calls."""
    calls = []

    def resolve_rule_flag(flag, user, fixed):
        calls.append((flag.pk, user.username, fixed))
        flag.status = RuleFlag.Status.FIXED if fixed else RuleFlag.Status.DISMISSED
        flag.resolved_by, flag.resolved_at = user, timezone.now()
        flag.save()
        return flag

    monkeypatch.setattr("flywheel.repair.ecdm.resolve_rule_flag", resolve_rule_flag, raising=False)
    return calls


def test_open_flags_show_the_rule_and_how_to_edit_the_query(client_as, flag):
    page = client_as("manager").get("/ecdm/rule-flags/").content.decode()
    assert f'data-testid="rule-flag-{flag.pk}"' in page
    assert "wifi_on" in page and "only the terminal check failed it" in page and "Turn Wi-Fi off" in page
    assert f'href="/trajectories/{flag.trajectory_id}/"' in page
    assert 'href="/query-review/?status=ready&amp;q=wifi-off"' in page
    assert f'action="/ecdm/rule-flags/{flag.pk}/resolve/"' in page
    assert 'name="fixed" value="1"' in page and 'name="fixed" value="0"' in page


def test_fixed_and_dismissed_call_resolve_rule_flag(client_as, role_users, flag, resolver):
    client = client_as("manager")
    response = client.post(f"/ecdm/rule-flags/{flag.pk}/resolve/", {"fixed": "1"})
    assert response.status_code == 302 and resolver == [(flag.pk, "manager-user", True)]
    page = client.get("/ecdm/rule-flags/").content.decode()
    assert "re-evaluated after the fix" in page and 'data-testid="no-flags"' in page
    assert "Fixed, re-evaluated" in page  # in the resolved table
    # a flag already resolved is not resolved again
    client.post(f"/ecdm/rule-flags/{flag.pk}/resolve/", {"fixed": "0"})
    assert len(resolver) == 1

    other = RuleFlag.objects.create(query=flag.query, trajectory=flag.trajectory, system="B", rule={"milestone": 2})
    client.post(f"/ecdm/rule-flags/{other.pk}/resolve/", {"fixed": "0"})
    assert resolver[-1] == (other.pk, "manager-user", False)
    assert RuleFlag.objects.get(pk=other.pk).status == "dismissed"
    client.post(f"/ecdm/rule-flags/{other.pk}/resolve/", {})  # no choice: nothing happens
    assert len(resolver) == 2


def test_a_refused_resolution_is_shown_not_raised(client_as, flag, monkeypatch):
    def refuse(flag, user, fixed):
        raise ValueError("the query's verification spec still fails the trajectory")

    monkeypatch.setattr("flywheel.repair.ecdm.resolve_rule_flag", refuse, raising=False)
    client = client_as("manager")
    client.post(f"/ecdm/rule-flags/{flag.pk}/resolve/", {"fixed": "1"})
    page = client.get("/ecdm/rule-flags/").content.decode()
    assert "still fails the trajectory" in page and f'data-testid="rule-flag-{flag.pk}"' in page


def test_rule_flags_are_for_managers(client_as, flag, resolver):
    for role in ("annotator", "adjudicator"):
        client = client_as(role)
        assert client.get("/ecdm/rule-flags/").status_code == 403
        assert client.post(f"/ecdm/rule-flags/{flag.pk}/resolve/", {"fixed": "1"}).status_code == 403
    assert resolver == [] and client_as("admin").get("/ecdm/rule-flags/").status_code == 200
    assert client_as("manager").get("/ecdm/rule-flags/").status_code == 200
    assert client_as("manager").post("/ecdm/rule-flags/999/resolve/", {"fixed": "1"}).status_code == 404


def test_fixed_sends_the_trajectory_back_to_evaluation(client_as, flag, django_capture_on_commit_callbacks,
                                                        monkeypatch):
    """Through the real resolve_rule_flag: the flag is closed and the trajectory judged again."""
    from flywheel import tasks

    queued = []
    monkeypatch.setattr(tasks.evaluate_trajectory, "delay", queued.append)
    client = client_as("manager")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/ecdm/rule-flags/{flag.pk}/resolve/", {"fixed": "1"})
    flag.refresh_from_db()
    trajectory = Trajectory.objects.get(pk=flag.trajectory_id)
    assert flag.status == "fixed" and flag.resolved_by.username == "manager-user"
    assert trajectory.verdict == "pending" and trajectory.destination == "" and queued == [trajectory.pk]
