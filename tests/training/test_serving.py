"""Trained versions are served by vLLM (the recipe, as text) and health-checked once registered."""
import shlex

import pytest

from flywheel.model_endpoints import MODEL_HOST
from flywheel.models import ModelVersion
from flywheel.policies import PolicyError, policy_for
from tests.flywheel.openai_stub import StubOpenAI
from training import serving
from training.tasks import check_model_endpoints

pytestmark = pytest.mark.django_db


@pytest.fixture
def checkpoint(tmp_path):
    final = tmp_path / "runs" / "3" / "final"
    final.mkdir(parents=True)
    (final / "chat_template.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    base = ModelVersion.objects.create(name="qwen2.5-vl-7b", kind="endpoint", endpoint_url="http://127.0.0.1:9/v1")
    return ModelVersion.objects.create(name="qwen2.5-vl-7b+sft#3", kind="checkpoint", artifact=str(final), parent=base)


def test_the_recipe_is_a_vllm_serve_command(checkpoint):
    text = serving.recipe(checkpoint, max_model_len=12288, images_per_prompt=5, tensor_parallel=2)
    command = shlex.split(next(line for line in text.splitlines() if line.startswith("vllm serve")))
    assert command[:3] == ["vllm", "serve", checkpoint.artifact]
    options = dict(zip(command[3::2], command[4::2]))
    assert options["--served-model-name"] == "qwen2.5-vl-7b-sft-3"
    assert options["--max-model-len"] == "12288"
    assert options["--limit-mm-per-prompt"] == '{"image": 5}'
    assert options["--tensor-parallel-size"] == "2"
    assert options["--chat-template"].endswith("final/chat_template.jinja")


def test_a_checkpoint_is_not_a_policy_until_served(checkpoint):
    with pytest.raises(PolicyError, match="vLLM recipe"):
        policy_for(checkpoint)


def test_registering_the_endpoint_makes_it_usable_and_beat_checks_it(checkpoint):
    with StubOpenAI(model="qwen2.5-vl-7b-sft-3") as stub:
        version = serving.register_endpoint(checkpoint, stub.url + "/", by=MODEL_HOST)
        assert version.kind == "endpoint" and version.endpoint_url == stub.url
        assert version.served_model_name == "qwen2.5-vl-7b-sft-3"
        assert version.health["ok"] is True and version.health_checked_at is not None
        assert policy_for(version).__class__.__name__ == "EndpointPolicy"
        results = check_model_endpoints()
    assert results == {"qwen2.5-vl-7b": False, "qwen2.5-vl-7b+sft#3": True}
    # the server is gone: the next beat records it, the page shows the error
    assert check_model_endpoints()["qwen2.5-vl-7b+sft#3"] is False
    version.refresh_from_db()
    assert version.health["ok"] is False and version.health["error"]


def test_a_server_serving_another_model_is_unhealthy(checkpoint):
    with StubOpenAI(model="something-else") as stub:
        version = serving.register_endpoint(checkpoint, stub.url, "qwen2.5-vl-7b-sft-3", by=MODEL_HOST)
    assert version.health["ok"] is False and "does not serve" in version.health["error"]


def test_a_refused_url_is_a_validation_error(checkpoint):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        serving.register_endpoint(checkpoint, "file:///etc/passwd", by=MODEL_HOST)
    with pytest.raises(ValidationError, match="required"):
        serving.register_endpoint(checkpoint, "  ", by=MODEL_HOST)
    checkpoint.refresh_from_db()
    assert checkpoint.kind == "checkpoint"


def test_no_line_and_no_benchmark_starts_on_an_unserved_checkpoint(checkpoint, client_as):
    from benchmark.infer import EvaluationRefused, launch_evaluation
    from benchmark.models import Benchmark
    from flywheel.models import CollectionRun, Query
    from training.runs import RunError, create_run

    Query.objects.create(key="q-serve", text="Open Settings", tier="L1")
    client = client_as("manager")
    reply = client.post("/runs/", {"line": "automatic", "model_version": checkpoint.pk}, follow=True)
    assert "not served yet" in reply.content.decode() and not CollectionRun.objects.exists()
    reply = client.post("/api/collection-runs/", {"line": "automatic", "model_version": checkpoint.pk,
                                                  "query_filter": {}, "config": {}}, content_type="application/json")
    assert reply.status_code == 400 and "not served yet" in reply.content.decode()
    benchmark = Benchmark(name="b", version="v1", frozen=True)
    with pytest.raises(EvaluationRefused, match="not served yet"):
        launch_evaluation(benchmark, checkpoint)
    with pytest.raises(RunError, match="not served yet"):
        create_run("rl", {"model": {"tiny": {}}}, base_model=checkpoint)
