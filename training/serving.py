"""Serving a trained model version with vLLM, and registering the served endpoint.

vLLM needs a GPU and is not installed on CPU hosts: the recipe is text an operator runs on a GPU
host. Once the server answers, `register_endpoint` turns the checkpoint version into an endpoint
version (health-checked now and by beat every minute) that every line and the benchmark can use.
"""
import shlex
from pathlib import Path

from django.core.exceptions import ValidationError
from django.utils import timezone

from flywheel.model_endpoints import change_endpoint
from flywheel.models import ModelVersion
from flywheel.policies import check_endpoint_health
from flywheel.policies.protocol import DEFAULT_K

DEFAULT_MAX_MODEL_LEN = 12288  # §5.1: the RL prompt cap; SFT/CPT sequences are 10240
DEFAULT_PORT = 8000


def served_name(version: ModelVersion) -> str:
    """A name without spaces or slashes ("tiny+sft#3" → "tiny-sft-3"), the OpenAI `model` field."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in version.name).strip("-")[:120]


def chat_template_path(artifact: str) -> str:
    """The checkpoint's own chat template file, when save_pretrained wrote one."""
    for name in ("chat_template.jinja", "chat_template.json"):
        if artifact and (Path(artifact) / name).is_file():
            return str(Path(artifact) / name)
    return ""


def vllm_command(version: ModelVersion, *, max_model_len: int = DEFAULT_MAX_MODEL_LEN,
                 images_per_prompt: int = DEFAULT_K, tensor_parallel: int = 1, port: int = DEFAULT_PORT,
                 model_path: str = "") -> list[str]:
    """`vllm serve` for the version: one image per screenshot the protocol sends (the last K)."""
    path = model_path or version.artifact
    if not path:
        raise ValueError(f"{version.name} has no checkpoint to serve")
    command = ["vllm", "serve", path, "--served-model-name", served_name(version),
               "--max-model-len", str(int(max_model_len)),
               "--limit-mm-per-prompt", f'{{"image": {int(images_per_prompt)}}}',
               "--tensor-parallel-size", str(int(tensor_parallel)), "--host", "0.0.0.0", "--port", str(int(port))]
    template = chat_template_path(path)
    if template:
        command += ["--chat-template", template]
    return command


def recipe(version: ModelVersion, **options) -> str:
    """The shell text an operator runs on the GPU host, then the registration step."""
    command = vllm_command(version, **options)
    port = options.get("port", DEFAULT_PORT)
    return "\n".join([
        "# on a GPU host with vLLM installed (pip install vllm), the checkpoint copied to the same path:",
        shlex.join(command),
        f"# then register http://<gpu-host>:{port}/v1 with the served model name {served_name(version)} "
        "on the model's page",
    ])


def register_endpoint(version: ModelVersion, endpoint_url: str, served_model_name: str = "", *, by) -> ModelVersion:
    """The served checkpoint becomes an endpoint version; ValidationError when the URL is refused,
    EndpointChangeRefused when `by` (a user, or MODEL_HOST) may not re-point it (admins only).

    The health check runs after the row is saved (a slow server never holds the transaction)."""
    endpoint_url = (endpoint_url or "").strip().rstrip("/")
    if not endpoint_url:
        raise ValidationError("the endpoint URL is required (http://<gpu-host>:8000/v1)")
    version = change_endpoint(version, by=by, endpoint_url=endpoint_url,
                              served_model_name=served_model_name.strip() or served_name(version))
    health = check_endpoint_health(version.endpoint_url, model=version.served_model_name)
    ModelVersion.objects.filter(pk=version.pk).update(health=health, health_checked_at=timezone.now())
    version.refresh_from_db()
    return version
