"""The tallies (flywheel/tallies.py): folded counts plus the live rows after the mark are exactly
what counting the tables says, before and after folds, across a fold that commits mid-read, and
after a rebuild; the semi-automatic line's open sessions stay live until they finish."""
from datetime import timedelta

import pytest
from django.db.models import Count
from django.db.models.functions import TruncDate
from django.utils import timezone

from flywheel import tallies
from flywheel.console.dashboard import verification_metrics
from flywheel.judging.calibration import consensus_rate_by_day
from flywheel.models import CptEntry, ModelVersion, Query, SftEntry, Step, Tally, Trajectory, Verdict

pytestmark = pytest.mark.django_db


def trajectory(line="automatic", **fields):
    query = Query.objects.create(key=f"q{Query.objects.count()}", text="Do it", tier="L1", verification={})
    return Trajectory.objects.create(query=query, line=line, **fields)


def cpt_rows(package, count, created_at):
    owner = trajectory()
    for index in range(count):
        step = Step.objects.create(trajectory=owner, index=index, foreground_package=package,
                                   executed_action={"action": "wait"})
        entry = CptEntry.objects.create(step=step, screenshot="blobs/x.png", action={"action": "wait"})
        CptEntry.objects.filter(pk=entry.pk).update(created_at=created_at)


def counted_by_package():
    return dict(CptEntry.objects.values_list("step__foreground_package").annotate(n=Count("*")))


def by_key(source):
    return {key: n for key, n, _, _ in tallies.read(source, by=("key",))}


def test_reads_are_exact_before_and_after_folds_and_after_a_rebuild():
    now = timezone.now()
    cpt_rows("com.sim.notes", 3, now - timedelta(days=2))
    cpt_rows("com.sim.shop", 2, now - timedelta(hours=3))
    assert tallies.total(tallies.CPT) == 5 and not Tally.objects.exists()  # nothing folded: all live

    assert tallies.fold(tallies.CPT, until=now - timedelta(hours=1)) == 5
    cpt_rows("com.sim.notes", 4, now - timedelta(minutes=10))  # after the mark: read live
    assert by_key(tallies.CPT) == counted_by_package() == {"com.sim.notes": 7, "com.sim.shop": 2}
    assert tallies.total(tallies.CPT) == 9 and Tally.objects.filter(source="cpt").count() == 2
    days = {day: n for day, n, _, _ in tallies.read(tallies.CPT, by=("day",))}
    assert days == dict(CptEntry.objects.annotate(day=TruncDate("created_at")).values_list("day").annotate(n=Count("*")))

    assert tallies.fold(tallies.CPT, until=now) == 4  # the rest; a second fold adds nothing twice
    assert tallies.fold(tallies.CPT, until=now) == 0 and tallies.total(tallies.CPT) == 9
    CptEntry.objects.filter(step__foreground_package="com.sim.shop").first().delete()  # CPT is append-only...
    assert tallies.total(tallies.CPT) == 9                                              # ...so a fold cannot see this
    tallies.rebuild(tallies.CPT, until=now)                                             # the daily rebuild does
    assert by_key(tallies.CPT) == counted_by_package() == {"com.sim.notes": 7, "com.sim.shop": 1}


def test_a_fold_committing_during_a_read_is_not_counted_twice():
    now = timezone.now()
    cpt_rows("com.sim.notes", 3, now - timedelta(hours=2))
    live = tallies._after_mark(tallies.CPT)  # the read took the mark (none yet) as its literal bound...
    tallies.fold(tallies.CPT, until=now)     # ...then a fold committed before its statement ran
    folded = sum(Tally.objects.filter(source="cpt").values_list("n", flat=True))
    assert folded == 3 and live.count() == 0  # the statement's own snapshot of the mark wins


def test_sft_pool_and_verdicts_by_day_match_their_tables():
    for line, intake in (("automatic", "htsc_true"), ("semi_auto", "semi_auto_verified"), ("automatic", "htsc_true")):
        SftEntry.objects.create(trajectory=trajectory(line), intake=intake)
    for outcome in ("true", "undetermined", "false"):
        Verdict.objects.create(trajectory=trajectory(), outcome=outcome)
    now = timezone.now()
    assert tallies.fold(tallies.SFT, until=now) == 3 and tallies.fold(tallies.VERDICTS, until=now) == 3
    Verdict.objects.create(trajectory=trajectory(), outcome="true")
    assert by_key(tallies.SFT) == {"htsc_true|automatic": 2, "semi_auto_verified|semi_auto": 1}
    assert consensus_rate_by_day()[-1]["verdicts"] == 4 and consensus_rate_by_day()[-1]["rate"] == 0.75


def verified_steps(owner, accepted, moved, verify_ms):
    for index, (ok, distance) in enumerate(zip(accepted, moved)):
        Step.objects.create(trajectory=owner, index=index, executed_action={"action": "click", "point": [1, 2]},
                            edit={"accepted_unchanged": ok, "pixel_distance": distance},
                            timings={"verify_ms": verify_ms})


def test_open_sessions_stay_live_and_finished_ones_are_folded(role_users):
    annotator = role_users["annotator"]
    version = ModelVersion.objects.create(name="policy-x", kind="endpoint", endpoint_url="http://gpu:8000/v1")
    done = trajectory("semi_auto", annotator=annotator, model_version=version, status="completed",
                      finished_at=timezone.now() - timedelta(hours=1))
    verified_steps(done, accepted=[True, False], moved=[None, 12.0], verify_ms=3000)
    open_session = trajectory("semi_auto", annotator=annotator, status="running")
    verified_steps(open_session, accepted=[True], moved=[0.4], verify_ms=1000)
    assert tallies.fold(tallies.VERIFIED) == 2  # the finished session's steps; the open one stays live
    Step.objects.create(trajectory=open_session, index=1, executed_action={"action": "wait"},
                        edit={"accepted_unchanged": False, "pixel_distance": 5.0}, timings={"verify_ms": 5000})

    metrics = verification_metrics()
    assert metrics["by_annotator"] == [("annotator-user", {"steps": 4, "seconds_per_step": 3.0,
                                                           "accepted_share": 0.5, "moved": 2})]
    assert dict(metrics["by_policy"]) == {
        "offline": {"steps": 2, "seconds_per_step": 3.0, "accepted_share": 0.5, "moved": 1},
        "policy-x": {"steps": 2, "seconds_per_step": 3.0, "accepted_share": 0.5, "moved": 1}}
    tallies.rebuild(tallies.VERIFIED)
    assert verification_metrics() == metrics
