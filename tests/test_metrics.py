"""/metrics (issue #18): who may read it, and that every figure is the database's and the broker's truth."""
from datetime import timedelta

import pytest
import redis
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from devices.models import Device, Lease, PhoneHost
from flywheel import tallies
from flywheel.console.metrics import holder_kind, quantile
from flywheel.models import CptEntry, Query, RlQueryEntry, SftEntry, Step, Trajectory, Verdict
from tests.conftest import free_port

pytestmark = pytest.mark.django_db

TOKEN = "scrape-me-7f3a9c"
HOST_A, HOST_B, HOST_C = "10.0.0.1:5037", "10.0.0.2:5037", "10.0.0.3:5037"  # C: configured, no phones yet
UNCONFIGURED = "198.51.100.9:5037"  # a phone host this console does not list, whose queue has work waiting
# The collector's statements: phones (2: the rows, the phone hosts' names), phone hosts, leases, steps
# (2), judge latency, verdicts, CPT and SFT (2 each: tallies' mark, then tallies + live rows) and the
# RL pool. A signed-in scrape adds the session, the user and the roles.
SCRAPE_QUERIES = 14
SIGNED_IN = 3


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN = TOKEN
    settings.ADB_SERVERS = [HOST_A, HOST_C]
    return TOKEN


def samples(response) -> dict:
    """{(sample name, frozenset of labels): value} of a 200 text exposition."""
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == CONTENT_TYPE_LATEST
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(response.content.decode())
            for sample in family.samples}


def value(found, name, **labels):
    return found[(name, frozenset(labels.items()))]


def names(found, name):
    return {labels for sample_name, labels in found if sample_name == name}


# Access ------------------------------------------------------------------------------------------

def test_the_token_opens_the_metrics(client, token):
    found = samples(client.get("/metrics", headers={"Authorization": f"Bearer {token}"}))
    assert value(found, "flywheel_redis_up") == 1


@pytest.mark.parametrize("header", [f"Bearer {TOKEN}x", "Bearer ", f"bearer {TOKEN[:-1]}"])
def test_a_wrong_token_is_refused_with_401(client, token, header):
    response = client.get("/metrics", headers={"Authorization": header})
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"flywheel_" not in response.content


def test_with_no_token_configured_no_bearer_header_opens_them(client, settings):
    settings.METRICS_TOKEN = ""
    for header in ("Bearer ", f"Bearer {TOKEN}"):
        response = client.get("/metrics", headers={"Authorization": header})
        assert response.status_code == 401 and b"METRICS_TOKEN is empty" in response.content


def test_anonymous_gets_401_not_the_login_page(client, token):
    response = client.get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("role", ["annotator", "adjudicator", None])
def test_signed_in_without_admin_or_manager_role_gets_403(client_as, token, role):
    response = client_as(role).get("/metrics")
    assert response.status_code == 403 and b"flywheel_" not in response.content


@pytest.mark.parametrize("role", ["admin", "manager"])
def test_admins_and_managers_read_them_signed_in(client_as, token, role):
    assert ("flywheel_redis_up", frozenset()) in samples(client_as(role).get("/metrics"))


def test_staff_and_superusers_read_them_signed_in(client, token):
    for user in (User.objects.create_user("ops", password="x", is_staff=True),
                 User.objects.create_superuser("root", password="x")):
        client.force_login(user)
        assert ("flywheel_redis_up", frozenset()) in samples(client.get("/metrics"))


def test_writes_are_refused(client, token):
    assert client.post("/metrics", headers={"Authorization": f"Bearer {token}"}).status_code == 405


# Values ------------------------------------------------------------------------------------------

def make_world(size=1):
    """Phones on two hosts, open and closed leases, recent and old steps, verdicts and pool rows;
    `size` multiplies the rows (the scrape's statements must not)."""
    now = timezone.now()
    for n in (f"{size}-{i}" for i in range(size)):
        Device.objects.create(serial=f"a-idle-{n}", adb_server=HOST_A)
        Device.objects.create(serial=f"a-idle2-{n}", adb_server=HOST_A)
        leased = Device.objects.create(serial=f"a-leased-{n}", adb_server=HOST_A, status="leased")
        console = Device.objects.create(serial=f"a-console-{n}", adb_server=HOST_A, status="leased")
        quarantined = Device.objects.create(serial=f"b-quarantined-{n}", adb_server=HOST_B, status="quarantined")
        Lease.objects.create(device=leased, holder=f"collection:run:{12 + Lease.objects.count()}", expires_at=now + timedelta(minutes=1))
        Lease.objects.create(device=console, holder=f"console:alice{n}", expires_at=now + timedelta(minutes=1))
        # Neither counts: one expired without being released, one released.
        Lease.objects.create(device=quarantined, holder="collection:run:3", expires_at=now - timedelta(seconds=5))
        Lease.objects.create(device=quarantined, holder="collection:run:2", expires_at=now + timedelta(minutes=1),
                             released_at=now)

        query = Query.objects.create(key=f"q{n}", text="Open the settings", tier="L1")
        automatic = Trajectory.objects.create(query=query, line="automatic", status="completed", verdict="true",
                                              finished_at=now - timedelta(minutes=50))
        semi = Trajectory.objects.create(query=query, line="semi_auto", status="completed", verdict="true",
                                         finished_at=now - timedelta(seconds=90))
        steps = [Step.objects.create(trajectory=automatic, index=i) for i in range(3)]
        old = Step.objects.create(trajectory=semi, index=0)
        Step.objects.filter(pk=old.pk).update(created_at=now - timedelta(minutes=5))  # outside the minute
        for step in steps[:2]:
            CptEntry.objects.create(step=step, screenshot="blobs/x.png", action={"action": "click"})
        SftEntry.objects.create(trajectory=semi, intake="semi_auto_verified")
        RlQueryEntry.objects.create(query=query, state="active")

        # Judge latencies 10 s, 30 s and 90 s; a re-evaluation and a verdict from yesterday left out.
        quick = Trajectory.objects.create(query=query, line="automatic", status="completed", verdict="false",
                                          finished_at=now - timedelta(seconds=40))
        verdicts = [(automatic, "true", automatic.finished_at + timedelta(seconds=10)),
                    (quick, "false", quick.finished_at + timedelta(seconds=30)),
                    (semi, "true", semi.finished_at + timedelta(seconds=90)),
                    (automatic, "undetermined", now - timedelta(seconds=1)),  # re-evaluated after a rule fix
                    (quick, "env_error", now - timedelta(days=1))]
        for trajectory, outcome, at in verdicts:
            verdict = Verdict.objects.create(trajectory=trajectory, outcome=outcome)
            Verdict.objects.filter(pk=verdict.pk).update(created_at=at)
    for n, state in enumerate(["banked", "retired", "left"]):
        RlQueryEntry.objects.create(query=Query.objects.create(key=f"rl{size}-{n}", text="x", tier="L2"), state=state)


def test_the_figures_are_the_rows(client, token):
    make_world()
    found = samples(client.get("/metrics", headers={"Authorization": f"Bearer {token}"}))

    assert value(found, "flywheel_phones", host=HOST_A, status="idle") == 2
    assert value(found, "flywheel_phones", host=HOST_A, status="leased") == 2
    assert value(found, "flywheel_phones", host=HOST_A, status="quarantined") == 0
    assert value(found, "flywheel_phones", host=HOST_B, status="quarantined") == 1
    assert value(found, "flywheel_phones", host=HOST_C, status="idle") == 0  # configured, none found yet
    assert sum(v for (name, _), v in found.items() if name == "flywheel_phones") == 5

    assert names(found, "flywheel_leases_open") == {
        frozenset({"host": HOST_A, "holder_kind": "collection:run"}.items()),
        frozenset({"host": HOST_A, "holder_kind": "console"}.items())}
    assert value(found, "flywheel_leases_open", host=HOST_A, holder_kind="collection:run") == 1

    assert value(found, "flywheel_steps_per_second", line="automatic") == pytest.approx(3 / 60)
    assert value(found, "flywheel_steps_per_second", line="semi_auto") == 0

    assert value(found, "flywheel_judge_latency_seconds", quantile="0.5") == pytest.approx(30, abs=0.01)
    assert value(found, "flywheel_judge_latency_seconds", quantile="0.95") == pytest.approx(30 + 60 * 0.9, abs=0.01)
    assert value(found, "flywheel_judged_last_hour") == 3

    assert value(found, "flywheel_verdicts_total", outcome="true") == 2
    assert value(found, "flywheel_verdicts_total", outcome="false") == 1
    assert value(found, "flywheel_verdicts_total", outcome="undetermined") == 1
    assert value(found, "flywheel_verdicts_total", outcome="env_error") == 1

    assert value(found, "flywheel_pool_size", pool="cpt") == 2
    assert value(found, "flywheel_pool_size", pool="sft") == 1
    assert value(found, "flywheel_pool_size", pool="rl") == 2  # active + banked; retired and left are out


def test_verdict_totals_add_the_folded_tallies_and_the_rows_after_them(client, token):
    make_world()
    tallies.rebuild(tallies.VERDICTS, until=timezone.now())  # what beat does, then two new verdicts
    trajectory = Trajectory.objects.first()
    Verdict.objects.create(trajectory=trajectory, outcome="true")
    Verdict.objects.create(trajectory=trajectory, outcome="false")
    found = samples(client.get("/metrics", headers={"Authorization": f"Bearer {token}"}))
    assert value(found, "flywheel_verdicts_total", outcome="true") == 3
    assert value(found, "flywheel_verdicts_total", outcome="false") == 2


def test_with_no_verdict_in_the_last_hour_the_latency_is_absent_not_zero(client, token):
    found = samples(client.get("/metrics", headers={"Authorization": f"Bearer {token}"}))
    assert names(found, "flywheel_judge_latency_seconds") == set()
    assert value(found, "flywheel_judged_last_hour") == 0


def test_a_scrape_costs_the_same_few_statements_whatever_the_rows(client, client_as, token):
    make_world(size=1)
    with CaptureQueriesContext(connection) as small:
        samples(client.get("/metrics", headers={"Authorization": f"Bearer {token}"}))
    make_world(size=4)
    with CaptureQueriesContext(connection) as large:
        found = samples(client.get("/metrics", headers={"Authorization": f"Bearer {token}"}))
    assert value(found, "flywheel_phones", host=HOST_A, status="idle") == 10  # the rows did grow
    assert len(large.captured_queries) == len(small.captured_queries) <= SCRAPE_QUERIES, [
        q["sql"][:120] for q in large.captured_queries]


def test_a_signed_in_scrape_adds_only_the_session_and_roles(client_as, token, django_assert_max_num_queries):
    make_world(size=2)
    client = client_as("manager")
    with django_assert_max_num_queries(SCRAPE_QUERIES + SIGNED_IN):
        samples(client.get("/metrics"))


# The broker -------------------------------------------------------------------------------------

@pytest.fixture
def waiting_tasks(settings):
    """Tasks published through Celery (kombu's real key layout) to two host queues no worker
    consumes; their keys are deleted afterwards."""
    from config.celery import app

    configured, unconfigured = "collection." + HOST_A.replace(":", "-"), "collection." + UNCONFIGURED.replace(":", "-")
    for queue, priority in [(configured, 0), (configured, 9), (unconfigured, 0), (unconfigured, 0),
                            (unconfigured, 0)]:
        app.send_task("flywheel.tasks.ping", ("metrics",), queue=queue, priority=priority)
    yield {configured: 2, unconfigured: 3}
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    keys = [key for queue in (configured, unconfigured)
            for key in client.scan_iter(f"*{queue}*", count=1000) if key.startswith(settings.REDIS_KEY_PREFIX.encode())]
    if keys:
        client.delete(*keys)


def test_queue_depths_come_from_the_brokers_lists(client, token, waiting_tasks):
    found = samples(client.get("/metrics", headers={"Authorization": f"Bearer {token}"}))
    assert value(found, "flywheel_redis_up") == 1
    for queue, waiting in waiting_tasks.items():
        assert value(found, "flywheel_celery_queue_depth", queue=queue) == waiting
    queues = {dict(labels)["queue"] for labels in names(found, "flywheel_celery_queue_depth")}
    assert {"default", "collection", "evaluation", "repair", "training", "benchmark"} <= queues
    assert "collection." + HOST_C.replace(":", "-") in queues  # a configured host, nothing queued yet


def test_an_unreachable_redis_is_a_metric_not_a_failed_scrape(client, token, settings):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"
    make_world()
    found = samples(client.get("/metrics", headers={"Authorization": f"Bearer {token}"}))
    assert value(found, "flywheel_redis_up") == 0
    assert names(found, "flywheel_celery_queue_depth") == set()
    assert value(found, "flywheel_phones", host=HOST_A, status="idle") == 2  # the rest still arrives


# The pieces -------------------------------------------------------------------------------------

def test_holder_kinds_drop_ids_and_names():
    assert holder_kind("collection:run:12") == "collection:run"
    assert holder_kind("collection:trajectory:5") == "collection:trajectory"
    assert holder_kind("semi-auto:trajectory:9") == "semi-auto:trajectory"
    assert holder_kind("gem:recheck:edge:4") == "gem:recheck"
    assert holder_kind("console:alice") == "console"
    assert holder_kind("session:17") == "session"
    assert holder_kind("annotator:17:tab-3") == "annotator"  # an id second is no kind
    assert holder_kind("policy-episode") == "policy-episode"


def test_quantiles_interpolate_between_ranks():
    assert quantile([7.0], 0.95) == 7.0
    assert quantile([10.0, 30.0, 90.0], 0.5) == 30.0
    assert quantile([10.0, 30.0, 90.0], 0.95) == pytest.approx(84.0)
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5


def test_phone_hosts_say_whether_they_are_alive(client, token):
    now = timezone.now()
    for name, seen_ago in (("rack-1", 2), ("rack-2", 600)):
        PhoneHost.objects.create(name=name, machine=name, instance=f"{name}:1:x", queue=f"collection.{name}",
                                 started_at=now, last_seen=now - timedelta(seconds=seen_ago))
    Device.objects.create(serial="r2-0", adb_server="rack-2", status="offline")
    found = samples(client.get("/metrics", headers={"Authorization": f"Bearer {token}"}))
    assert value(found, "flywheel_phone_host_up", host="rack-1") == 1
    assert value(found, "flywheel_phone_host_up", host="rack-2") == 0
    assert 599 <= value(found, "flywheel_phone_host_silent_seconds", host="rack-2") < 660
    assert value(found, "flywheel_phones", host="rack-2", status="offline") == 1
    assert value(found, "flywheel_phones", host="rack-1", status="idle") == 0  # a registered host with no phones
