"""The environment service over HTTP (docs/env-service.md): JSON in, JSON out.

Two ways in: the service token (`Authorization: Bearer <settings.ENV_SERVICE_TOKEN>`, for programs,
no CSRF), or a signed-in manager or admin (Django's session, with its CSRF check, as DRF's
SessionAuthentication enforces it). Annotators and everyone else get 403: phones driven from
here are the RL line's, not a person's session.
"""
from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from drf_spectacular.utils import extend_schema
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.parsers import JSONParser
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import ADMIN, MANAGER, has_role
from flywheel.policies.protocol import DEFAULT_K, TAGS
from training import env_service
from training.env_service import EnvError, Principal

TOKEN_AUTH = "env-service-token"
MAX_K = 10
MAX_ID = 2**63 - 1


class EnvTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer <token>`; no header: the session decides. With ENV_SERVICE_TOKEN
    empty, token access is off and a bearer header is refused.

    No `authenticate_header`: DRF then answers a refused request 403, as the service documents."""

    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header.lower().startswith("bearer "):
            return None
        expected = settings.ENV_SERVICE_TOKEN
        if not expected:
            raise AuthenticationFailed("token access to the environment service is off (ENV_SERVICE_TOKEN is empty)")
        given = header[len("bearer "):].strip()
        if not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
            raise AuthenticationFailed("wrong environment service token")
        return AnonymousUser(), TOKEN_AUTH


class DrivesPhones(BasePermission):
    message = "The environment service needs its token or the manager or admin role."

    def has_permission(self, request, view):
        if request.auth == TOKEN_AUTH:
            return True
        return bool(request.user and request.user.is_authenticated and has_role(request.user, MANAGER, ADMIN))


def principal_of(request) -> Principal:
    return Principal(user=None) if request.auth == TOKEN_AUTH else Principal(user=request.user)


@extend_schema(exclude=True)  # an intended 503 (no free phone) is no server error: docs/env-service.md documents them
class EnvView(APIView):
    read_roles = write_roles = (MANAGER, ADMIN)  # for the route checks; DrivesPhones also admits the token
    authentication_classes = [EnvTokenAuthentication, SessionAuthentication]
    permission_classes = [DrivesPhones]
    parser_classes = [JSONParser]
    fields: dict = {}   # name -> (required, check)

    def post(self, request):
        try:
            data = self.validated(request.data)
            return Response(self.act(principal_of(request), data))
        except EnvError as error:
            response = Response({"detail": str(error), **error.extra}, status=error.status)
            if getattr(error, "retry_after", None):
                response["Retry-After"] = str(error.retry_after)
            return response

    def validated(self, data) -> dict:
        if not isinstance(data, dict):
            raise EnvError("the body must be a JSON object")
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise EnvError(f"unknown field {unknown[0]!r}; this endpoint takes: {', '.join(self.fields)}")
        out = {}
        for name, (required, check) in self.fields.items():
            if name not in data or data[name] is None:
                if required:
                    raise EnvError(f"{name!r} is required")
                continue
            out[name] = check(name, data[name])
        return out

    def act(self, principal, data) -> dict:
        raise NotImplementedError


def an_id(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_ID:
        raise EnvError(f"{name!r} must be a positive integer id")
    return value


def a_flag(name, value):
    if not isinstance(value, bool):
        raise EnvError(f"{name!r} must be true or false")
    return value


def a_k(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_K:
        raise EnvError(f"{name!r} must be an integer from 1 to {MAX_K}")
    return value


def a_text(name, value):
    if not isinstance(value, str):
        raise EnvError(f"{name!r} must be a string (the model's raw output)")
    return value


def an_object(name, value):
    if not isinstance(value, dict):
        raise EnvError(f"{name!r} must be a JSON object")
    return value


def a_cot(name, value):
    an_object(name, value)
    unknown = sorted(set(value) - set(TAGS))
    if unknown:
        raise EnvError(f"{name!r} has no tag {unknown[0]!r}; the tags are {', '.join(TAGS)}")
    if not all(isinstance(text, str) for text in value.values()):
        raise EnvError(f"every tag of {name!r} is a string")
    return value


class ResetView(EnvView):
    """POST {"query_id", "model_version"?, "hierarchy"?, "screenshots_k"?} → env_id, observation, messages."""

    fields = {"query_id": (True, an_id), "model_version": (False, an_id), "hierarchy": (False, a_flag),
              "screenshots_k": (False, a_k)}

    def act(self, principal, data):
        return env_service.reset(principal, data["query_id"], model_version_id=data.get("model_version"),
                                 hierarchy=data.get("hierarchy", False), k=data.get("screenshots_k", DEFAULT_K))


class StepView(EnvView):
    """POST {"env_id", "output" | "action" (+ "cot"?), "hierarchy"?, "screenshots_k"?} → the next observation."""

    fields = {"env_id": (True, an_id), "output": (False, a_text), "action": (False, an_object),
              "cot": (False, a_cot), "hierarchy": (False, a_flag), "screenshots_k": (False, a_k)}

    def validated(self, data):
        out = super().validated(data)
        if ("output" in out) == ("action" in out):
            raise EnvError("give exactly one of 'output' (the model's raw text) or 'action' (a JSON action)")
        if "cot" in out and "action" not in out:
            raise EnvError("'cot' goes with 'action'; raw 'output' carries its own reasoning tags")
        return out

    def act(self, principal, data):
        return env_service.step(principal, data["env_id"], output=data.get("output"), action=data.get("action"),
                                cot=data.get("cot"), hierarchy=data.get("hierarchy", False),
                                k=data.get("screenshots_k", DEFAULT_K))


class CloseView(EnvView):
    """POST {"env_id"} → the trajectory, its status and verdict; closing twice answers the same."""

    fields = {"env_id": (True, an_id)}

    def act(self, principal, data):
        return env_service.close(principal, data["env_id"])


reset_view = ResetView.as_view()
step_view = StepView.as_view()
close_view = CloseView.as_view()
