"""Shared fixtures: role users, and real worker / web processes on the test database."""
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from accounts.roles import ROLES
from tests.farm import stop  # one process stopper for tests and perf scripts

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PASSWORD = "test-password-123"


# Tiers, by what a test starts (README, Tests). A test's tier is read from the fixtures it uses,
# never written by hand, so no test can sit in a tier that is too light for it: `make test-fast`
# runs pure and database tests, `make test` runs them all.
TIERS = ("pure", "database", "farm", "worker", "browser", "slow")
TIER_OF_FIXTURE = {
    "db": "database", "transactional_db": "database", "django_db_setup": "database",
    "virtual_farm": "farm", "farm_settings": "farm", "farm": "farm", "farm_server": "farm", "thread_farm": "farm",
    "celery_worker_process": "worker", "asgi_server": "worker", "own_processes": "worker",
    "browser": "browser",
    "torch": "slow", "demo_settings": "slow", "network_namespaces": "slow",
}
PROCESS_TIERS = {"farm", "worker", "browser", "slow"}


def tier_of(item) -> str:
    named = {TIER_OF_FIXTURE[name] for name in getattr(item, "fixturenames", ()) if name in TIER_OF_FIXTURE}
    if item.get_closest_marker("django_db"):
        named.add("database")
    return max(named, key=TIERS.index, default="pure")


def pytest_collection_modifyitems(config, items):
    for item in items:
        written = [mark.name for mark in item.iter_markers() if mark.name in TIERS]
        if written:
            raise pytest.UsageError(f"{item.nodeid}: a tier mark ({written[0]}) is written by hand; tiers come "
                                    "from the fixtures a test uses (tests/conftest.py, TIER_OF_FIXTURE)")
        tier = tier_of(item)
        item.add_marker(tier)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    # Only worksteal sends contiguous shares; other modes keep pytest-django's order, which they
    # hand out in increasing positions (so each worker still sees Django's order).
    if workers > 1 and config.getoption("dist", "no") == "worksteal":
        items[:] = dealt_to_workers(items, workers)


# What a module's tests took in a whole-suite run (seconds, modules of 2 s or more), to start the long
# ones first; a module not listed costs what its tests' tiers usually do. Refresh it from a run's
# `--durations=0` when the long tests change (README, Tests); a stale figure only costs balance.
MODULE_SECONDS = json.loads((Path(__file__).parent / "module_seconds.json").read_text())
TIER_COST = {"pure": 0.005, "database": 0.05, "farm": 1, "worker": 2, "browser": 3, "slow": 10}


def dealt_to_workers(items, workers: int) -> list:
    """The tests in an order for `--dist worksteal`, which gives each worker an equal contiguous count
    of tests and lets one that runs dry steal another's tail: whole modules (their fixtures set up
    once) go to the share of least cost that has room, heaviest first, and each share starts with its
    heaviest module, so that no long test starts near the end and holds the suite up. Every worker
    computes the same order (xdist checks that they collected the same)."""
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    cost = {name: MODULE_SECONDS.get(name) or sum(TIER_COST[tier_of(item)] for item in tests)
            for name, tests in modules.items()}
    room, left = [], len(items)
    for share in range(workers):   # the counts worksteal sends, in its order
        room.append(left // (workers - share))
        left -= room[-1]
    shares: list[list[tuple[float, list]]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for name in sorted(modules, key=lambda name: (-cost[name], name)):
        tests = modules[name]
        while tests:
            fits = [share for share in range(workers) if room[share] >= len(tests)]
            share = min(fits or [share for share in range(workers) if room[share]], key=lambda s: loads[s])
            part, tests = tests[:room[share]], tests[room[share]:]
            shares[share].append((cost[name], part))
            room[share] -= len(part)
            loads[share] += cost[name] * len(part) / len(modules[name])
    # In each share, as pytest-django orders the whole run (Django's order): tests on the database in a
    # rolled-back transaction, then transactional ones (their flush drops what migrations seeded), then
    # the rest; within each, the heaviest module first.
    return [item for share in shares
            for _, _, item in sorted(((django_order(item), -cost, item) for cost, part in share for item in part),
                                     key=lambda entry: entry[:2])]


def django_order(item) -> int:
    """pytest-django's (and Django's) order: 0 database in a transaction, 1 transactional, 2 no database."""
    marker = item.get_closest_marker("django_db")
    fixtures = getattr(item, "fixturenames", ())
    if (marker and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")
                    or (marker.args and marker.args[0]))) or "transactional_db" in fixtures or "live_server" in fixtures:
        return 1
    return 0 if marker or "db" in fixtures else 2


@pytest.fixture(autouse=True)
def starts_only_what_its_tier_says(request, monkeypatch):
    """A pure or database test that starts one of our processes (this interpreter or a program of
    the virtual environment: the farm, a worker, torchrun, manage.py) or imports torch fails, naming
    the fixture that would put it in the right tier."""
    if tier_of(request.node) in PROCESS_TIERS:
        yield
        return
    ours = {Path(sys.executable).resolve(), *(path.resolve() for path in BIN.iterdir())}

    class TieredPopen(subprocess.Popen):
        def __init__(self, args, *more, **options):
            program = args if isinstance(args, str | os.PathLike) else args[0]
            if Path(str(program).split()[0]).resolve() in ours:
                raise RuntimeError(f"this test starts {program}: ask for the `own_processes` fixture (or the "
                                   "fixture that starts it) so that it runs in its tier (tests/conftest.py)")
            super().__init__(args, *more, **options)

    monkeypatch.setattr(subprocess, "Popen", TieredPopen)
    had_torch = "torch" in sys.modules
    yield
    if not had_torch and "torch" in sys.modules:
        pytest.fail("this test imported torch: ask for the `torch` fixture so that it runs in the slow tier")


@pytest.fixture
def own_processes():
    """Declares that the test starts processes of ours itself (its tier is `worker`)."""


@pytest.fixture
def network_namespaces(own_processes):
    """Declares that the test builds network namespaces for several hosts (the slow tier)."""


@pytest.fixture
def torch(monkeypatch):
    """The torch module, for tests that train (the slow tier); skipped without the training extras.

    Torch runs on one thread, in this process and in those the test starts (OMP_NUM_THREADS): the
    tiny model's ops gain nothing from a second, and with the cores taken (the other xdist worker,
    the farm) OpenMP's threads wait for each other: a training step took 5-8× longer on two."""
    module = pytest.importorskip("torch")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    with torch_on_one_thread():
        yield module


@contextlib.contextmanager
def torch_on_one_thread():
    """The `torch` fixture's one thread, for a module-scoped fixture that trains (set up before it)."""
    import torch as module

    threads = module.get_num_threads()
    module.set_num_threads(1)
    try:
        yield
    finally:
        module.set_num_threads(threads)


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


def log_in_browser(page, base, user, next_path=""):
    """Sign `user` in through the login form in a real browser; returns when the home (or
    `next_path`) page has loaded."""
    page.goto(base + "/login/" + (f"?next={next_path}" if next_path else ""))
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    page.wait_for_load_state("load")


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


_HANDED_OUT: set[int] = set()


def free_first_port(block: int = 8) -> int:
    """The first of `block` free ports below the kernel's ephemeral range, for a model host, which serves
    from its first port upward and probes each port before its server binds it: in the ephemeral range
    (where free_port's are) any outgoing connection may take the port in between (seen as "Address
    already in use" under a busy machine's connection churn). Each xdist worker searches its own stretch,
    and a block is handed out once per process (two hosts of one test get two)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    start = 20000 + 1000 * (int(worker) if worker.isdigit() else 0) + os.getpid() % 50 * 16
    for first in range(start, start + 1000 - block, block):
        if first in _HANDED_OUT:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for port in range(first, first + block):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
            _HANDED_OUT.add(first)
            return first
        except OSError:
            continue
    raise RuntimeError(f"no {block} free ports from {start}")


def wait_for_port(port, process, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                # Nothing listening yet, the kernel may pick the port itself as this connection's
                # source port (both in the ephemeral range) and connect the socket to itself: that
                # answer is not the process's (a browser test then met a refused connection).
                if sock.getsockname() != sock.getpeername():
                    return
        except OSError:
            pass
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
               ECDM_REPLAY="0", HANDBACK_SAMPLES="0")
    env.update(extra)
    return env



def start_celery_worker(log_path, extra_env):
    """A real Celery worker process (not eager mode) on every queue, against the test database."""
    from devices.hosts import host_queue

    hosts = [host_queue(a) for a in os.environ.get("ADB_SERVERS", "").split(",") if a.strip()]
    queues = ",".join(["default", "collection", "evaluation", "repair", "training", "benchmark", *hosts])
    name = f"test{os.getpid()}-{free_port()}@{socket.gethostname()}"
    process = subprocess.Popen(
        [str(BIN / "celery"), "-A", "config", "worker", "--pool", "solo", "-l", "info", "-Q", queues,
         "-n", name, "--without-mingle", "--without-gossip"],
        cwd=ROOT, env=process_env(COLLECTION_LEASE_SECONDS="6", **extra_env),
        stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
    from config.celery import app

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(Path(log_path).read_text())
        if app.control.ping(timeout=0.5, destination=[name]):
            process.worker_name, process.queues, process.log_path = name, queues.split(","), Path(log_path)
            return process
    stop(process)
    raise TimeoutError("worker did not answer ping: " + Path(log_path).read_text())


def worker_is_idle(process, timeout=20) -> bool:
    """True once the worker runs, holds and schedules no task (within `timeout` seconds)."""
    from config.celery import app

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        inspect = app.control.inspect(destination=[process.worker_name], timeout=1)
        held = [inspect.active() or {}, inspect.reserved() or {}, inspect.scheduled() or {}]
        if all(held) and not any(any(tasks.values()) for tasks in held):
            return True
        time.sleep(0.5)
    return False


def purge_queues(process) -> int:
    """Drop the messages waiting in the worker's queues (the per-host ones too): what a test's
    tasks queued belongs to its database, and must not run in the next test's."""
    from config.celery import app

    purged = 0
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        for queue in process.queues:
            try:
                purged += channel.queue_purge(queue) or 0
            except Exception:  # a queue nothing was ever sent to may not exist
                pass
    return purged


def worker_is_drained(process) -> bool:
    """The worker may serve the next test: its queues emptied and it idle, then emptied again of
    whatever its last task queued (so nothing starts while the test's database is flushed)."""
    purge_queues(process)
    if not worker_is_idle(process):
        return False
    purge_queues(process)
    return worker_is_idle(process, timeout=2)


@pytest.fixture(scope="module")
def shared_workers(tmp_path_factory):
    """The workers a test module's tests share, one per environment (ADB servers, WORKER_ENV)."""
    workers = {}
    yield workers
    for process in workers.values():
        stop(process)


@pytest.fixture
def celery_worker_process(transactional_db, shared_workers, tmp_path_factory, request):
    """A real Celery worker process on every queue, against the test database, shared by the tests
    of one module: started once (about 5 s each time it is saved), started again when a test killed
    it, and stopped when a test leaves it busy. A test module's WORKER_ENV (a dict) adds to its
    environment (e.g. ECDM_AUTOMATIC="1")."""
    extra_env = getattr(request.module, "WORKER_ENV", {})
    key = (os.environ.get("ADB_SERVERS", ""), tuple(sorted(extra_env.items())))
    process = shared_workers.get(key)
    if process is None or process.poll() is not None:
        log_path = tmp_path_factory.mktemp("worker") / "worker.log"
        process = shared_workers[key] = start_celery_worker(log_path, extra_env)
    yield process
    if process.poll() is None and not worker_is_drained(process):
        stop(process)  # a task still running would write into the next test's database
    if process.poll() is not None:
        purge_queues(process)  # what it left queued
    if process.poll() is not None:
        shared_workers.pop(key, None)


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


SEEDING_MIGRATIONS = ("devices.migrations.0003_default_safety_rules", "devices.migrations.0007_safety_rules_by_meaning")


@pytest.fixture(autouse=True)
def seeded_rows_as_migrated(request):
    """A transactional test starts from what `migrate` leaves, as every deployment does: the default
    safety rules too. (pytest-django empties the tables after each transactional test, the seeded
    rows with them, so without this a test saw the rules only when it ran first in its worker: the
    audit then blocked what it never blocked in the others.)"""
    if django_order(request.node) != 1:
        yield
        return
    import importlib

    from django.apps import apps

    request.getfixturevalue("transactional_db")
    for name in SEEDING_MIGRATIONS:
        importlib.import_module(name).seed(apps, None)
    yield


@pytest.fixture(autouse=True)
def ecdm_off_by_default():
    """Routing does not start the ECDM or the hand-back channel, and a correction queues no phone
    replay, in tests unless a test turns them on (see process_env). Not through pytest-django's `settings` fixture: a test
    module may define a fixture of that name (the phone tests' Settings app) and an autouse fixture
    asking for it would run theirs in every test of the module."""
    from django.test import override_settings

    with override_settings(ECDM_AUTOMATIC=False, ECDM_REPLAY=False, HANDBACK_SAMPLES=False):
        yield


@pytest.fixture(scope="session", autouse=True)
def session_media_removed_after():
    """tests/settings.py made this session's media folder under the temporary directory: drop it after."""
    yield
    from django.conf import settings

    media = Path(settings.MEDIA_ROOT)
    if media.name.startswith("flywheel-test-media-") and media.parent == Path(tempfile.gettempdir()):
        shutil.rmtree(media, ignore_errors=True)


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
