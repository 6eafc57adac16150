"""Django admin shows what a workflow owns and never changes it; users and groups stay editable."""
import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User

from accounts.read_only_admin import ReadOnlyAdmin
from flywheel import models as m
from flywheel_demo.models import DemoRun

pytestmark = pytest.mark.django_db

WORKFLOW_OWNED = [m.Trajectory, m.Step, m.Vote, m.Verdict, m.Adjudication, m.Attribution, m.Repair, m.CptEntry,
                  m.SftEntry, m.RlQueryEntry, m.RlRollout, m.CollectionRun, m.EvolutionLoop, m.LoopRound, DemoRun]


def test_every_workflow_owned_model_is_read_only_in_the_admin():
    for model in WORKFLOW_OWNED:
        assert isinstance(admin.site._registry[model], ReadOnlyAdmin), model.__name__
    for model in (User, Group):
        assert not isinstance(admin.site._registry[model], ReadOnlyAdmin)


def test_a_post_to_a_change_view_changes_nothing(client):
    root = User.objects.create_superuser("root", password="a long secret")
    client.force_login(root)
    entry = m.RlQueryEntry.objects.create(query=m.Query.objects.create(key="q1", text="q1", verification={}),
                                          state="banked", channel="phase0")
    url = f"/admin/flywheel/rlqueryentry/{entry.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()  # shown, without a save button
    answer = client.post(url, {"query": entry.query_id, "state": "retired", "channel": "counterfactual"})
    assert answer.status_code == 403
    entry.refresh_from_db()
    assert (entry.state, entry.channel) == ("banked", "phase0")
    assert client.post(f"/admin/flywheel/rlqueryentry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    assert m.RlQueryEntry.objects.filter(pk=entry.pk).exists()
    # People stay editable there.
    assert client.post(f"/admin/auth/user/{root.pk}/change/", {}).status_code == 200
