"""Shared fixtures: role users, and real worker / web processes on the test database."""
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from accounts.roles import ROLES
from tests.farm import stop  # one process stopper for tests and perf scripts

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PASSWORD = "test-password-123"


@pytest.fixture
def role_users(db):
    """One user per role, plus one with no role, all with PASSWORD."""
    users = {}
    for role in ROLES:
        group, _ = Group.objects.get_or_create(name=role)
        user = User.objects.create_user(username=f"{role}-user", password=PASSWORD)
        user.groups.add(group)
        users[role] = user
    users[None] = User.objects.create_user(username="nobody", password=PASSWORD)
    return users


@pytest.fixture
def client_as(client, role_users):
    def login(role):
        client.force_login(role_users[role])
        return client

    return login


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port, process, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")


def test_database_url():
    """A DATABASE_URL for the test database, so other processes see what the test wrote."""
    from django.db import connection

    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    user = settings.get("USER") or "postgres"
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    return (f"postgres://{user}{password}@{settings.get('HOST') or '127.0.0.1'}:"
            f"{settings.get('PORT') or 5432}/{settings['NAME']}")


test_database_url.__test__ = False


def process_env(**extra):
    # The ECDM is started by routing only where a test asks for it (ecdm_on): elsewhere a False
    # verdict would make a worker attribute, repair and replay on phones a test is counting.
    env = dict(os.environ, DATABASE_URL=test_database_url(), PYTHONUNBUFFERED="1", ECDM_AUTOMATIC="0",
               ECDM_REPLAY="0")
    env.update(extra)
    return env



@pytest.fixture
def celery_worker_process(transactional_db, tmp_path, request):
    """A real Celery worker process (not eager mode) on every queue, against the test database.
    A test module's WORKER_ENV (a dict) adds to its environment (e.g. ECDM_AUTOMATIC="1")."""
    from flywheel.collection.runs import host_queue

    log = open(tmp_path / "worker.log", "wb")
    hosts = [host_queue(a) for a in os.environ.get("ADB_SERVERS", "").split(",") if a.strip()]
    queues = ",".join(["default", "collection", "evaluation", "repair", "training", "benchmark", *hosts])
    process = subprocess.Popen(
        [str(BIN / "celery"), "-A", "config", "worker", "--pool", "solo", "-l", "info", "-Q", queues,
         "-n", f"test{os.getpid()}@%h", "--without-mingle", "--without-gossip"],
        cwd=ROOT, env=process_env(COLLECTION_LEASE_SECONDS="6", **getattr(request.module, "WORKER_ENV", {})),
        stdout=log, stderr=subprocess.STDOUT)
    from config.celery import app

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError((tmp_path / "worker.log").read_text())
        if app.control.ping(timeout=0.5, destination=[f"test{os.getpid()}@{socket.gethostname()}"]):
            break
    else:
        stop(process)
        raise TimeoutError("worker did not answer ping: " + (tmp_path / "worker.log").read_text())
    yield process
    stop(process)


@pytest.fixture
def asgi_server(transactional_db, tmp_path):
    """The real ASGI app under uvicorn, against the test database; yields its base URL."""
    port = free_port()
    log = open(tmp_path / "web.log", "wb")
    process = subprocess.Popen(
        [str(BIN / "uvicorn"), "config.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--ws-per-message-deflate", "false"],  # as scripts/up.py starts it
        cwd=ROOT, env=process_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, process)
    except Exception:
        stop(process)
        raise RuntimeError((tmp_path / "web.log").read_text())
    yield f"http://127.0.0.1:{port}"
    stop(process)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def browser(monkeypatch):
    """Headless Debian chromium through Playwright (no browser download).

    Playwright's sync API keeps an event loop in the test's thread, which Django would take for
    async code; the test itself is synchronous, so database access stays safe.
    """
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    if not CHROMIUM:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no chromium is installed (apt-get install chromium)")
        pytest.skip("no chromium installed: apt-get install chromium to run browser tests")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield instance
        # Database connections opened while Playwright's loop ran belong to that context: close
        # them here, or the test database cannot be dropped at the end of the run.
        from django.db import connections

        connections.close_all()
        instance.close()


@pytest.fixture(scope="session")
def virtual_farm(tmp_path_factory):
    """Three virtual phones behind a real ADB server on a free port, for the whole session."""
    from tests.farm import running_farm

    with running_farm(devices=3, log_path=tmp_path_factory.mktemp("farm") / "farm.log") as farm:
        yield farm


@pytest.fixture
def farm_settings(virtual_farm, settings, monkeypatch):
    """Point the console (this process and the processes it starts) at the virtual farm."""
    settings.ADB_SERVERS = [virtual_farm.address]
    monkeypatch.setenv("ADB_SERVERS", virtual_farm.address)
    return virtual_farm


@pytest.fixture(autouse=True)
def ecdm_off_by_default():
    """Routing does not start the ECDM, and a correction queues no phone replay, in tests unless a
    test turns them on (see process_env). Not through pytest-django's `settings` fixture: a test
    module may define a fixture of that name (the phone tests' Settings app) and an autouse fixture
    asking for it would run theirs in every test of the module."""
    from django.test import override_settings

    with override_settings(ECDM_AUTOMATIC=False, ECDM_REPLAY=False):
        yield


@pytest.fixture(scope="session", autouse=True)
def forget_cached_embeddings():
    """Gate 3's shared embedding cache lives in Redis under this run's key prefix: drop it after."""
    yield
    import redis
    from django.conf import settings

    try:
        client = redis.Redis.from_url(settings.REDIS_URL)
        keys = list(client.scan_iter(f"{settings.REDIS_KEY_PREFIX}emb:*", count=1000))
        if keys and settings.REDIS_KEY_PREFIX:
            client.delete(*keys)
    except redis.RedisError:
        pass
