"""Model endpoints: register OpenAI-compatible servers (vLLM) as model versions, check their health."""
import json

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.roles import ADMIN, MANAGER, role_required
from flywheel.models import ModelVersion
from flywheel.policies import check_endpoint_health
from flywheel.policies.endpoint import PINNED_SAMPLING, PROTOCOL_KEYS, SAMPLING_KEYS


@role_required(MANAGER, ADMIN)
def endpoint_list(request):
    return render(request, "flywheel/endpoints.html", {
        "versions": ModelVersion.objects.order_by("kind", "name"),
        "pinned": json.dumps(PINNED_SAMPLING),
        "allowed_keys": sorted(SAMPLING_KEYS | PROTOCOL_KEYS),
    })


@role_required(MANAGER, ADMIN)
@require_POST
def endpoint_add(request):
    name = request.POST.get("name", "").strip()
    url = request.POST.get("endpoint_url", "").strip().rstrip("/")
    try:
        sampling = json.loads(request.POST.get("sampling") or "{}")
        if not isinstance(sampling, dict):
            raise ValueError("the sampling config is a JSON object")
        unknown = sorted(set(sampling) - SAMPLING_KEYS - PROTOCOL_KEYS)
        if unknown:
            raise ValueError(f"unknown sampling key {unknown[0]!r}")
    except ValueError as error:
        messages.error(request, f"Sampling config: {error}")
        return redirect("endpoint-list")
    if not name or not url:
        messages.error(request, "A name and an http(s) URL (e.g. http://gpu-host:8000/v1) are required.")
        return redirect("endpoint-list")
    if ModelVersion.objects.filter(name=name).exists():
        messages.error(request, f"A model version named {name!r} exists already.")
        return redirect("endpoint-list")
    version = ModelVersion(name=name, kind=ModelVersion.Kind.ENDPOINT, endpoint_url=url, sampling=sampling,
                           served_model_name=request.POST.get("served_model_name", "").strip())
    try:
        # The model's own rules (url_safety's endpoint rule among them), as the API applies them.
        version.full_clean()
    except ValidationError as error:
        for field, problems in error.message_dict.items():
            label = "Endpoint URL" if field == "endpoint_url" else field.replace("_", " ").capitalize()
            messages.error(request, f"{label}: {' '.join(problems)}")
        return redirect("endpoint-list")
    version.save()
    _check(version)
    messages.info(request, f"Registered {name}: {'healthy' if version.health.get('ok') else 'not answering yet'}.")
    return redirect("endpoint-list")


def _check(version):
    version.health = check_endpoint_health(version.endpoint_url, model=version.served_model_name)
    version.health_checked_at = timezone.now()
    version.save(update_fields=["health", "health_checked_at"])


@role_required(MANAGER, ADMIN)
@require_POST
def endpoint_check(request, pk):
    """GET {url}/models now; htmx swaps in the row."""
    version = get_object_or_404(ModelVersion, pk=pk, kind=ModelVersion.Kind.ENDPOINT)
    _check(version)
    if request.headers.get("HX-Request"):
        return render(request, "flywheel/_endpoint_row.html", {"version": version})
    return redirect("endpoint-list")
