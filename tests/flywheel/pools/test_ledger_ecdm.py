"""The ledger counts every failure's path through attribution and the ECDM: by level, by path, by
stage (the stages add up to the failures: nothing disappears) and the salvage yield."""
import pytest
from django.utils import timezone

from flywheel.models import Attribution, CollectionRun, Query, Repair, Trajectory
from flywheel.pools.ledger import failure_ledger, filter_stage

pytestmark = pytest.mark.django_db


def make_failure(run, verdict="false", attribution=None, repairs=(), line="automatic"):
    query = Query.objects.create(key=f"q{Query.objects.count()}", text=f"task {Query.objects.count()}",
                                 tier="L2", verification={})
    trajectory = Trajectory.objects.create(query=query, run=run, line=line, status="completed", verdict=verdict,
                                           destination="ecdm" if verdict == "false" else "env_healing",
                                           finished_at=timezone.now())
    made = None
    if attribution:
        level, cause, owner, path = attribution
        made = Attribution.objects.create(trajectory=trajectory, level=level, cause=cause, owner=owner,
                                          ecdm_path=path, first_bad_step=1)
    for path, status, by in repairs:
        sample = None
        if status == "done" and path != "counterfactual":
            sample = Trajectory.objects.create(query=query, line="ecdm", status="completed", verdict="true",
                                               destination="sft", derived_from=trajectory)
        Repair.objects.create(trajectory=trajectory, attribution=made, path=path, status=status, sample=sample,
                              correction={"by": by} if by else None)
    return trajectory


L3_STEP = (3, "perception_drift", "ecdm", "step")


def every_stage(run):
    """One failure at every stage (and a few that must not count), keyed by its expected stage."""
    made = {
        "unattributed": make_failure(run),
        "repaired_teacher": make_failure(run, attribution=L3_STEP,
                                         repairs=[("step", "failed", None), ("step", "done", "teacher")]),
        "repaired_human": make_failure(run, attribution=L3_STEP, repairs=[("step", "done", "human")]),
        "repaired_rqa": make_failure(run, attribution=(3, "over_scoped", "ecdm", "rqa"), repairs=[("rqa", "done", "")]),
        "repaired_env": make_failure(run, verdict="env_error", attribution=(1, "popup", "environment", "env"),
                                     repairs=[("env", "done", "")]),
        "needs_human": make_failure(run, attribution=L3_STEP, repairs=[("step", "needs_human", None)]),
        "pending": make_failure(run, attribution=(3, "over_scoped", "ecdm", "rqa"), repairs=[("rqa", "pending", None)]),
        "repair_failed": make_failure(run, attribution=L3_STEP, repairs=[("step", "failed", None)]),
        "counterfactual": make_failure(run, attribution=(3, "constraint_violation", "ecdm", "counterfactual")),
        "environment": make_failure(run, verdict="env_error", attribution=(1, "network", "environment", "")),
        "query_review": make_failure(run, attribution=(2, "ambiguous_query", "query_review", "")),
        "rule_fix": make_failure(run, attribution=(2, "verifier_defect", "rule_fix", "")),
        "no_repair": make_failure(run, attribution=(3, "state_tracking", "ecdm", "")),
    }
    # not failures of their own: a success, and a judged ECDM continuation that failed
    make_failure(run, verdict="true")
    make_failure(run, line="ecdm")
    return made


def test_every_failure_is_at_exactly_one_stage_and_counted():
    run = CollectionRun.objects.create(line="automatic", total=15)
    made = every_stage(run)
    ledger = failure_ledger(Trajectory.objects.filter(run=run))
    assert ledger["failed"] == 13 and ledger["accounted"] == 13 and ledger["attributed"] == 12
    assert ledger["stage"] == {"unattributed": 1, "repaired": 4, "needs_human": 1, "pending": 1, "repair_failed": 1,
                               "counterfactual": 1, "environment": 1, "query_review": 1, "rule_fix": 1,
                               "no_repair": 1}
    assert {level: n for level, _, n in ledger["levels"]} == {1: 2, 2: 2, 3: 8}
    assert {path: n for path, _, n in ledger["paths"]} == {"step": 4, "rqa": 2, "counterfactual": 1, "env": 1,
                                                           "none": 4}
    assert {path: n for path, _, n in ledger["salvaged"]} == {"step": 1, "rqa": 1, "human": 1, "env": 1}
    assert ledger["salvaged_total"] == 4 and ledger["salvage_yield"] == round(4 / 13, 3)
    for stage in ("needs_human", "counterfactual", "unattributed", "rule_fix"):
        assert list(filter_stage(Trajectory.objects.filter(run=run), stage)) == [made[stage]]
    assert set(filter_stage(Trajectory.objects.all(), "repaired")) == {
        made[key] for key in ("repaired_teacher", "repaired_human", "repaired_rqa", "repaired_env")}


def test_the_newest_attribution_counts_and_runs_are_counted_apart():
    first, second = (CollectionRun.objects.create(line="automatic", total=1) for _ in range(2))
    trajectory = make_failure(first, attribution=(2, "verifier_defect", "rule_fix", ""))
    Attribution.objects.create(trajectory=trajectory, level=3, cause="perception_drift", owner="ecdm",
                               ecdm_path="step")  # attributed again after the flag was dismissed
    Repair.objects.create(trajectory=trajectory, path="step", status="needs_human")
    make_failure(second)
    by_run = failure_ledger(Trajectory.objects.all(), group_by="run_id")
    assert by_run[first.pk]["stage"]["needs_human"] == 1 and by_run[first.pk]["stage"]["rule_fix"] == 0
    assert {level: n for level, _, n in by_run[first.pk]["levels"]} == {1: 0, 2: 0, 3: 1}
    assert by_run[second.pk]["failed"] == 1 and by_run[second.pk]["stage"]["unattributed"] == 1
    assert failure_ledger(Trajectory.objects.none())["salvage_yield"] is None


def test_ledger_pages_show_the_counts_and_link_every_trajectory(client_as):
    run = CollectionRun.objects.create(line="automatic", total=15)
    made = every_stage(run)
    outside = make_failure(None, attribution=L3_STEP, repairs=[("step", "done", "teacher")])
    client = client_as("manager")
    overview = client.get("/ledger/").content.decode()
    row = overview.split(f'data-testid="ledger-run-{run.pk}"')[1].split("</tr>")[0]
    # failed, not attributed, repaired, needs human, repair failed, salvage yield
    assert "<td>13</td><td>1</td><td>4</td><td>1</td><td>1</td>" in row and "31%" in row
    assert 'data-testid="accounted">14 of 14<' in overview  # every failure, in runs or not
    assert 'data-testid="salvage-yield">36%<' in overview  # 5 of 14

    detail = client.get(f"/ledger/runs/{run.pk}/").content.decode()
    assert 'data-testid="failed">13<' in detail and 'data-testid="accounted">13 of 13<' in detail
    assert '<tr data-testid="stage-needs_human"><td><a href="?stage=needs_human">' in detail
    for trajectory in made.values():
        assert f'href="/trajectories/{trajectory.pk}/"' in detail
    assert "L3 perception_drift → step → Needs a person (repair queue)" in detail

    waiting = client.get(f"/ledger/runs/{run.pk}/?stage=needs_human").content.decode()
    assert f'href="/trajectories/{made["needs_human"].pk}/"' in waiting
    assert f'href="/trajectories/{made["repair_failed"].pk}/"' not in waiting
    assert 'data-testid="stage-filter"' in waiting

    unattached = client.get("/ledger/unattached/").content.decode()
    assert f'href="/trajectories/{outside.pk}/"' in unattached and 'data-testid="failed">1<' in unattached


def test_the_ledger_is_for_managers(client_as):
    for role in ("annotator", "adjudicator"):
        assert client_as(role).get("/ledger/").status_code == 403
