"""The endpoints page: managers and admins register OpenAI-compatible servers and check health."""
import pytest

from flywheel.models import ModelVersion
from tests.flywheel.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db


def test_register_and_check_an_endpoint(client_as):
    client = client_as("manager")
    assert client.get("/endpoints/").status_code == 200
    with StubOpenAI() as stub:
        response = client.post("/endpoints/add/", {"name": "agent-v1", "endpoint_url": stub.url + "/",
                                                    "served_model_name": stub.model,
                                                    "sampling": '{"temperature": 0.1, "k_screenshots": 3}'},
                               follow=True)
        assert b"Registered agent-v1: healthy" in response.content
        version = ModelVersion.objects.get(name="agent-v1")
        assert version.kind == "endpoint" and version.endpoint_url == stub.url
        assert version.health["ok"] and version.health["models"] == [stub.model]
        page = client.get("/endpoints/").content.decode()
        assert "healthy" in page and stub.model in page
    row = client.post(f"/endpoints/{version.pk}/check/", HTTP_HX_REQUEST="true").content.decode()
    assert "down" in row and f'id="endpoint-{version.pk}"' in row and "<html" not in row
    version.refresh_from_db()
    assert not version.health["ok"] and version.health_checked_at


def test_bad_registrations_are_refused_with_a_reason(client_as):
    client = client_as("admin")
    response = client.post("/endpoints/add/", {"name": "x", "endpoint_url": "http://h:1/v1", "sampling": "[1]"},
                           follow=True)
    assert b"Sampling config: the sampling config is a JSON object" in response.content
    response = client.post("/endpoints/add/", {"name": "x", "endpoint_url": "http://h:1/v1",
                                                "sampling": '{"temprature": 1}'}, follow=True)
    assert b"unknown sampling key" in response.content
    response = client.post("/endpoints/add/", {"name": "x", "endpoint_url": "ftp://h"}, follow=True)
    assert b"http(s) URL" in response.content
    assert not ModelVersion.objects.filter(name="x").exists()


def test_annotators_cannot_manage_endpoints(client_as):
    assert client_as("annotator").get("/endpoints/").status_code == 403
    assert client_as("annotator").post("/endpoints/add/", {"name": "y"}).status_code == 403
