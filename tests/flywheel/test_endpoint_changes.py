"""Issue #35: one rule for who re-points a model version's endpoint (admins), at every door."""
import json

import pytest

from flywheel.model_endpoints import MODEL_HOST, EndpointChangeRefused, change_endpoint, may_change_endpoint
from flywheel.models import ModelVersion
from tests.flywheel.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db
JUDGE_URL = "http://127.0.0.1:9/v1"


@pytest.fixture
def judge():
    """A version the judges (and a benchmark's judge) call; re-pointing it re-points them all."""
    return ModelVersion.objects.create(name="judge-72b", kind="endpoint", endpoint_url=JUDGE_URL,
                                       served_model_name="judge", artifact="/ckpt/judge")


def _unchanged(version):
    version.refresh_from_db()
    return (version.endpoint_url, version.served_model_name, version.kind) == (JUDGE_URL, "judge", "endpoint")


def test_the_rule_admins_and_the_model_host_only(role_users):
    assert may_change_endpoint(role_users["admin"]) and may_change_endpoint(MODEL_HOST)
    assert not any(may_change_endpoint(role_users[role]) for role in ("manager", "adjudicator", "annotator", None))


def test_the_service_refuses_a_manager_and_writes_nothing(role_users, judge):
    with pytest.raises(EndpointChangeRefused):
        change_endpoint(judge, by=role_users["manager"], endpoint_url="http://127.0.0.1:8/v1",
                        served_model_name="mine")
    assert _unchanged(judge)


def test_a_manager_cannot_repoint_a_judge_from_the_training_page(client_as, judge):
    reply = client_as("manager").post(f"/training/models/{judge.pk}/endpoint/",
                                      {"endpoint_url": "http://127.0.0.1:8/v1", "served_model_name": "mine"})
    assert reply.status_code == 403 and "Only an admin" in reply.content.decode()
    assert _unchanged(judge)


def test_an_admin_repoints_it_from_the_training_page(client_as, judge):
    with StubOpenAI(model="judge-2") as stub:
        reply = client_as("admin").post(f"/training/models/{judge.pk}/endpoint/",
                                        {"endpoint_url": stub.url, "served_model_name": "judge-2"})
    assert reply.status_code == 302
    judge.refresh_from_db()
    assert judge.endpoint_url == stub.url and judge.served_model_name == "judge-2" and judge.health["ok"]


def test_a_manager_cannot_repoint_it_through_the_api(client_as, judge):
    reply = client_as("manager").patch(f"/api/model-versions/{judge.pk}/",
                                       json.dumps({"endpoint_url": "http://127.0.0.1:8/v1"}),
                                       content_type="application/json")
    assert reply.status_code == 403
    assert _unchanged(judge)


def test_an_admin_repoints_it_through_the_api_via_the_service(client_as, judge):
    reply = client_as("admin").patch(f"/api/model-versions/{judge.pk}/",
                                     json.dumps({"endpoint_url": "http://127.0.0.1:8/v1", "served_model_name": "j2",
                                                 "sampling": {"temperature": 0}}),
                                     content_type="application/json")
    assert reply.status_code == 200, reply.content
    judge.refresh_from_db()
    assert (judge.endpoint_url, judge.served_model_name, judge.sampling) == ("http://127.0.0.1:8/v1", "j2",
                                                                             {"temperature": 0})


def test_a_refused_url_through_the_api_writes_nothing(client_as, judge):
    reply = client_as("admin").patch(f"/api/model-versions/{judge.pk}/",
                                     json.dumps({"endpoint_url": "file:///etc/passwd", "sampling": {"x": 1}}),
                                     content_type="application/json")
    assert reply.status_code == 400
    assert _unchanged(judge) and judge.sampling == {}


def test_serve_it_now_never_hands_an_admin_registered_version_to_a_model_host(client_as, judge):
    """A model host serving a version re-points its endpoint: asking for that is a checkpoint's door only."""
    from training.model_host.host import request_serving
    from training.models import Serving

    with pytest.raises(ValueError, match="only an admin"):
        request_serving(judge)
    reply = client_as("manager").post(f"/training/models/{judge.pk}/serve/")
    assert reply.status_code == 302 and not Serving.objects.filter(version=judge).exists() and _unchanged(judge)
    checkpoint = ModelVersion.objects.create(name="sft-r2", kind="checkpoint", artifact="/ckpt/sft-r2")
    assert request_serving(checkpoint).version == checkpoint


def test_the_django_admin_keeps_the_endpoint_fields_to_those_the_rule_allows(rf, role_users, judge):
    from django.contrib import admin

    model_admin = admin.site._registry[ModelVersion]
    for role, editable in (("admin", True), ("manager", False)):
        request = rf.get("/")
        request.user = role_users[role]
        readonly = model_admin.get_readonly_fields(request, judge)
        assert ("endpoint_url" not in readonly) == editable and ("served_model_name" not in readonly) == editable
