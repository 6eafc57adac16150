"""`perf/seed_scale.py` (issue #17; the generator is perf/scale_seed/): refuses a database with data
unless --force; writes exactly the sizes asked for, with the shapes real data has (HTSC's rule behind
every verdict, one destination each, the pools fed only as the report says, ledger stages that add
up), and leaves a database the application goes on writing to and whose pages answer."""
import pytest
from django.conf import settings
from django.db.models import Count

from flywheel import tallies
from flywheel.models import (
    Adjudication,
    CollectionRun,
    CptEntry,
    Query,
    Repair,
    SftEntry,
    Step,
    Trajectory,
    Verdict,
    Vote,
)
from flywheel.pools.ledger import failure_ledger
from flywheel.rules.htsc import htsc_consensus
from perf.scale_seed.cli import SeedRefused
from perf.scale_seed.cli import run as seed_scale

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"),
                                 reason="seed_scale writes with PostgreSQL's COPY")]
SIZES = ["--steps", "3000", "--trajectories", "300", "--queries", "80", "--batch", "1000"]


def test_it_refuses_a_database_with_data_unless_forced():
    Query.objects.create(key="real", text="A real query", tier="L1")
    with pytest.raises(SeedRefused, match="Refusing to seed.*1 queries.*--force"):
        seed_scale(SIZES)
    assert Trajectory.objects.count() == 0
    seed_scale([*SIZES, "--force"])
    assert Query.objects.filter(key="real").exists() and Query.objects.count() == 81


def test_it_writes_the_sizes_asked_with_the_shapes_of_real_data(client_as):
    seed_scale(SIZES)
    assert (Step.objects.count(), Trajectory.objects.count(), Query.objects.count()) == (3000, 300, 80)
    assert not Trajectory.objects.annotate(n=Count("steps")).filter(n=0).exists()
    assert set(Trajectory.objects.values_list("line", flat=True)) >= {"semi_auto", "automatic", "schema", "rl", "ecdm"}

    votes = {}
    for trajectory_id, system, vote, safety in Vote.objects.values_list("trajectory_id", "system", "vote",
                                                                       "safety_violation"):
        votes.setdefault(trajectory_id, {})[system] = vote
        votes[trajectory_id]["safety"] = votes[trajectory_id].get("safety") or bool(safety)
    for trajectory_id, outcome in Verdict.objects.exclude(rationale__startswith="flagged").values_list(
            "trajectory_id", "outcome"):
        cast = votes[trajectory_id]
        assert htsc_consensus(cast["A"], cast["B"], cast["C"], safety_violation=cast["safety"]) == outcome

    decided = Adjudication.objects.exclude(decision="").values_list("trajectory__verdict", "decision")
    assert all({"correct": "true", "wrong": "false", "environment": "env_error"}[d] == v for v, d in decided)
    assert not SftEntry.objects.exclude(trajectory__destination="sft").exists()
    assert set(SftEntry.objects.values_list("intake", flat=True)) <= {"htsc_true", "adjudicated", "ecdm_repaired",
                                                                      "semi_auto_verified"}
    assert not Repair.objects.filter(sample__isnull=False).exclude(sample__line="ecdm").exists()
    assert CptEntry.objects.filter(step__executed_action__isnull=True).count() == 0
    assert tallies.total(tallies.CPT) == CptEntry.objects.count() > 2000
    ledger = failure_ledger(Trajectory.objects.all())
    assert ledger["failed"] == ledger["accounted"] > 0 and ledger["salvaged_total"] > 0

    run = CollectionRun.objects.order_by("pk").last()
    Query.objects.create(key="after-the-seed", text="The application goes on writing", tier="L1")  # ids moved on
    for role, url in (("manager", "/dashboard/"), ("manager", "/ledger/"), ("manager", f"/ledger/runs/{run.pk}/"),
                      ("manager", "/pools/"), ("manager", f"/runs/{run.pk}/"), ("annotator", "/queue/"),
                      ("annotator", "/repairs/"), ("adjudicator", "/adjudication/")):
        assert client_as(role).get(url).status_code == 200, url
