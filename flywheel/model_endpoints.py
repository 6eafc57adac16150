"""Who may re-point a model version's endpoint, and the one write that does it.

A version's endpoint decides what answers for it everywhere: the judges, the Teacher and the benchmark's
judges resolve their model by version, so re-pointing one re-points all that use it. Admins only,
whichever door asks (the training page, the REST API); the model host re-points the versions it serves
itself (`MODEL_HOST`).
"""
from django.core.exceptions import PermissionDenied
from django.db import transaction

from accounts import history
from accounts.roles import ADMIN, user_roles
from flywheel.models import ModelVersion

MODEL_HOST = "model host"  # the system's own serving, not a person: it registers what it started
ENDPOINT_FIELDS = ("endpoint_url", "served_model_name", "kind")


class EndpointChangeRefused(PermissionDenied):
    """The caller may not change where a model version is served (a 403 on pages and the API)."""


def may_change_endpoint(by) -> bool:
    """Admins (and the model host for what it serves) re-point endpoints; managers and the rest do not."""
    return by == MODEL_HOST or ADMIN in user_roles(by)


def change_endpoint(version: ModelVersion, *, by, endpoint_url: str, served_model_name: str,
                    kind: str = ModelVersion.Kind.ENDPOINT) -> ModelVersion:
    """Point `version` at `endpoint_url` (validated by the model's rules); EndpointChangeRefused when
    `by` may not, ValidationError when the URL is refused. Nothing is written in either case."""
    if not may_change_endpoint(by):
        raise EndpointChangeRefused(f"Only an admin may change where {version.name} is served; "
                                    "it is the model every judge, Teacher or benchmark using it calls.")
    with transaction.atomic(), history.acting_as(by):  # the history names the admin, or the model host
        version = ModelVersion.objects.select_for_update().get(pk=version.pk)
        version.endpoint_url = endpoint_url
        version.served_model_name = served_model_name
        version.kind = kind
        version.full_clean(exclude=["parent"])
        version.save(update_fields=list(ENDPOINT_FIELDS))
    return version
