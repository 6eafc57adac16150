"""Bad or oversized API input is refused with a 400 and a reason, never a 500 or a runaway job."""
import pytest

from devices.models import WorkItem
from flywheel.models import App, CollectionRun, ModelVersion, Query, Trajectory
from tests.flywheel.collection.test_runs import make_query

pytestmark = pytest.mark.django_db

JSON = "application/json"


def test_pages_have_a_size_the_client_picks_up_to_a_maximum(client_as):
    from accounts.api_defaults import ApiPagination

    App.objects.bulk_create(App(package=f"com.example.app{i}", label=f"App {i}")
                            for i in range(ApiPagination.max_page_size + 5))
    client = client_as("annotator")
    small = client.get("/api/apps/?page_size=2").json()
    assert len(small["results"]) == 2 and "page=2" in small["next"]
    huge = client.get("/api/apps/?page_size=1000000").json()
    assert len(huge["results"]) == ApiPagination.max_page_size


@pytest.mark.parametrize("config,reason", [
    ({"repeats": 101}, "repeats must be 1–100"),
    ({"phones": 0}, "phones must be 1–256"),
    ({"max_steps": 100000}, "max_steps must be 1–500"),
    ({"phones": "many"}, "a number is malformed"),
    ({"anomaly_notification": "2"}, "anomaly rates are probabilities"),
])
def test_the_run_api_checks_config_exactly_like_the_form(client_as, config, reason):
    make_query("q-1", tags=("cfg",))
    client = client_as("manager")
    page = client.post("/runs/", {"line": "automatic", "tags": "cfg", **config}, follow=True)
    assert reason.encode() in page.content
    api_config = {k: v for k, v in config.items() if not k.startswith("anomaly_")}
    if "anomaly_notification" in config:
        api_config["anomaly_rates"] = {"notification": config["anomaly_notification"]}
    response = client.post("/api/collection-runs/", {"line": "automatic", "query_filter": {"tags": ["cfg"]},
                                                     "config": api_config}, content_type=JSON)
    assert response.status_code == 400 and reason in str(response.json())
    assert not CollectionRun.objects.exists() and not WorkItem.objects.exists()


@pytest.mark.parametrize("body", [
    {"line": "automatic", "config": [1, 2]},
    {"line": "automatic", "config": {"repeats": 2000}},
    {"line": "automatic", "config": {"phones": 2, "surprise": 1}},
    {"line": "automatic", "query_filter": {"apps": "com.android.settings"}},
    {"line": "automatic", "query_filter": {"limit": "ten"}},
    {"line": "automatic", "query_filter": {"tags": ["nothing-has-this"]}},
])
def test_malformed_runs_are_refused_before_anything_is_planned(client_as, body):
    make_query("q-1", tags=("cfg",))
    response = client_as("manager").post("/api/collection-runs/", body, content_type=JSON)
    assert response.status_code == 400 and response.json()
    assert not CollectionRun.objects.exists() and not WorkItem.objects.exists()


@pytest.mark.parametrize("url,field", [
    ("/api/trajectories/?query=abc", "query"),
    ("/api/trajectories/?run=1.5", "run"),
    ("/api/trajectories/?verdict=maybe", "verdict"),
    ("/api/steps/?trajectory=%00", "trajectory"),
    ("/api/function-nodes/?is_leaf=perhaps", "is_leaf"),
    ("/api/queries/?tier=L1%00", "tier"),
])
def test_bad_filters_are_a_400_that_names_the_filter(client_as, url, field):
    response = client_as("manager").get(url)
    assert response.status_code == 400 and field in response.json()


def test_bad_ids_and_bodies_are_client_errors(client_as):
    client = client_as("manager")
    assert client.get("/api/trajectories/abc/").status_code == 404
    assert client.get(f"/api/trajectories/{10 ** 30}/").status_code == 404
    assert client.get(f"/api/steps/?trajectory={10 ** 30}").status_code == 400
    broken = client.post("/api/apps/", '{"package": "com.x", ', content_type=JSON)
    assert broken.status_code == 400 and "JSON parse error" in broken.json()["detail"]


def test_deleting_a_record_that_others_need_is_a_conflict(client_as):
    version = ModelVersion.objects.create(name="policy-v1")
    query = Query.objects.create(key="k", text="t", tier="L1", verification={})
    Trajectory.objects.create(query=query, line="automatic", model_version=version)
    response = client_as("admin").delete(f"/api/model-versions/{version.pk}/")
    assert response.status_code == 409 and "still used" in response.json()["detail"]
    assert ModelVersion.objects.filter(pk=version.pk).exists()
