"""Phase 0 from the loop page: a manager banks the naturally difficult queries with one button."""
import pytest
from django.test import Client

from flywheel.models import App, Query, RlQueryEntry

pytestmark = pytest.mark.django_db


def query(key, tier="L1", evaluation_only=False):
    q = Query.objects.create(key=key, text=key, tier=tier, verification={}, known_path={"steps": [{"action": "click"}]},
                             evaluation_only=evaluation_only)
    q.set_apps([App.objects.get_or_create(package="com.a")[0]])
    return q


def messages_of(response) -> str:
    return " ".join(str(m) for m in response.context["messages"])


def test_a_manager_banks_phase0_queries_from_the_page(client, role_users):
    client.force_login(role_users["manager"])
    page = client.get("/loops/").content.decode()
    assert 'data-testid="nothing-to-bank"' in page and 'data-testid="bank-form"' not in page
    query("hard", tier="L3"), query("hard-2", tier="L3")
    easy = query("easy")
    query("held-out", tier="L3", evaluation_only=True)
    page = client.get("/loops/").content.decode()
    assert 'data-testid="bank-form"' in page and 'action="/loops/bank/"' in page and "manage.py" not in page
    answer = client.post("/loops/bank/", follow=True)
    assert "2 of 3 queries not yet in the RL pool banked" in messages_of(answer)
    assert set(RlQueryEntry.objects.values_list("query__key", flat=True)) == {"hard", "hard-2"}
    answer = client.post("/loops/bank/", follow=True)
    assert "none was banked" in messages_of(answer) and RlQueryEntry.objects.count() == 2
    assert not RlQueryEntry.objects.filter(query=easy).exists()


def test_banking_is_for_managers_and_needs_the_csrf_token(client, role_users):
    query("hard", tier="L3")
    for role in ("annotator", "adjudicator", None):
        client.force_login(role_users[role])
        assert client.post("/loops/bank/").status_code == 403
    client.force_login(role_users["manager"])
    assert client.get("/loops/bank/").status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(role_users["manager"])
    assert strict.post("/loops/bank/").status_code == 403
    assert not RlQueryEntry.objects.exists()
