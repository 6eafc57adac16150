"""Schemathesis fuzzes every operation of /api/schema/ as each role: whatever it sends, no 500.

The API runs in this process as a WSGI app on the test database. Each operation gets a few schema-
conforming requests and a few that break the schema (negative mode), some aimed at rows that exist.
"""
import re
import time
import traceback
from contextlib import contextmanager

import pytest
import schemathesis
from django.contrib.auth.models import Group, User
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import got_request_exception, request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from django.urls import resolve
from django.utils import timezone
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from accounts.roles import ROLES
from benchmark.models import Benchmark, EvalRun
from devices.models import Device, Lease
from flywheel.models import CollectionRun, ModelVersion
from tests.annotation.test_adjudication import undetermined_trajectory
from tests.test_api_scoping import session_of

pytestmark = pytest.mark.django_db

EXAMPLES = 4  # per operation, mode and target: ~2,600 requests, about 40 s on two CPUs
SKIPPED = re.compile(r"/export/$")  # streams every row, takes no input to break


class InProcessApp(WSGIHandler):
    """Django as the test client runs it: requests share the test's transaction, and the session
    cookie alone authenticates (no CSRF round trip), so writes are fuzzed too."""

    def get_response(self, request):
        request._dont_enforce_csrf_checks = True
        return super().get_response(request)


@pytest.fixture
def app():
    """The WSGI app, and the server errors it logged (shown when a request got a 500)."""
    application, errors = InProcessApp(), []

    def remember(sender, request=None, **kwargs):
        errors.append(f"{request.method} {request.get_full_path()}\n{traceback.format_exc()}")

    got_request_exception.connect(remember, weak=False)
    application.errors = errors
    yield application
    got_request_exception.disconnect(remember)


@contextmanager
def connection_kept():
    """Requests share the test's connection and transaction; Django's per-request cleanup would
    close it (the test client switches it off the same way)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def seed(owner):
    """One of each record, so requests aimed at existing rows reach the code behind them."""
    session_of(owner, 33)
    undetermined_trajectory(steps=1)
    version = ModelVersion.objects.create(name="fuzz-policy")
    device = Device.objects.create(serial="fuzz-1", adb_server="127.0.0.1:5037", accounts=["a@example.com"])
    Lease.objects.create(device=device, holder="fuzz", expires_at=timezone.now())
    EvalRun.objects.create(benchmark=Benchmark.objects.create(name="fuzz", version="v1"), model_version=version)
    CollectionRun.objects.create(line="automatic", model_version=version)


def viewset_of(path):
    return getattr(resolve(path.replace("{id}", "1")).func, "cls", None)


def existing_id(path):
    """The pk of a row the operation at `path` can reach, if any."""
    queryset = getattr(viewset_of(path), "queryset", None)
    row = queryset.order_by("pk").first() if queryset is not None else None
    return row.pk if row else None


def may_call(role, operation):
    """Whether the role passes the operation's role check (a refused role gets one request, to see the 403)."""
    viewset = viewset_of(operation.path)
    if viewset is None or role == "admin":
        return True
    roles = viewset.read_roles if operation.method.upper() in ("GET", "HEAD", "OPTIONS") else viewset.write_roles
    return role in roles


def user_with(role):
    user = User.objects.create(username=f"fuzz-{role}")
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def drawn(strategy, examples):
    """The `examples` cases hypothesis draws from `strategy`. Derandomized, they are the same for
    every role, so each operation's cases are drawn once and sent as every role (drawing them
    cost as much as sending them)."""
    cases = []

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def draw(case):
        cases.append(case)

    try:
        draw()
    except Unsatisfiable:  # negative mode on an operation with nothing to break
        pass
    return cases


def fuzz(cases, cookies, failures, calls):
    """The cases' requests with a session; any 5xx is a failure."""
    for case in cases:
        response = case.call(cookies=cookies)
        calls.append(response.status_code)
        if response.status_code >= 500:
            failures.setdefault(f"{case.method} {case.operation.path}", []).append(
                f"{case.formatted_path} query={case.query} body={case.body!r:.300} → {response.status_code}")


def test_the_api_never_answers_500_to_any_role(app):
    users = {role: user_with(role) for role in ROLES}
    seed(users["annotator"])
    sessions, clients = {}, {}
    for role, user in users.items():
        clients[role] = Client()
        clients[role].force_login(user)
        sessions[role] = {"sessionid": clients[role].cookies["sessionid"].value}
    published = clients["admin"].get("/api/schema/", HTTP_ACCEPT="application/json")
    schema = schemathesis.openapi.from_dict(published.json())
    schema.app = app  # requests go to the WSGI app, not over the network
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 60
    failures, started, calls, drawn_once = {}, time.monotonic(), [], {}

    def cases_of(index, mode=None, path_parameters=None, examples=EXAMPLES):
        key = (index, mode, tuple(sorted((path_parameters or {}).items())), examples)
        if key not in drawn_once:
            options = {} if mode is None else {"generation_mode": mode, "path_parameters": path_parameters}
            drawn_once[key] = drawn(operations[index].as_strategy(**options), examples)
        return drawn_once[key]

    with connection_kept():
        for role in ROLES:
            for index, operation in enumerate(operations):
                if SKIPPED.search(operation.path):
                    continue
                if not may_call(role, operation):
                    fuzz(cases_of(index, examples=1), sessions[role], failures, calls)
                    continue
                targets = [None]
                if "{id}" in operation.path and existing_id(operation.path) is not None:
                    targets.append({"id": existing_id(operation.path)})
                for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                    for path_parameters in targets:
                        fuzz(cases_of(index, mode, path_parameters), sessions[role], failures, calls)
    print(f"{len(calls)} requests in {time.monotonic() - started:.0f} s")
    assert not failures, "\n".join(f"{operation}: {len(cases)} answered 5xx, e.g. {cases[0]}"
                                    for operation, cases in failures.items()) + "\n\n" + "\n".join(app.errors[:2])
