"""RL pool metabolism counts True/False rollouts only (§2.4.3): an Undetermined rollout counts once a
person decides, an Env_ERROR rollout counts by its re-collection."""
import pytest
from django.contrib.auth.models import Group, User

from annotation.adjudication import decide
from devices.models import Device, WorkItem
from devices.registry import discover_devices
from flywheel.collection.driver import drive_host
from flywheel.collection.launch import launch_run, refresh_progress
from flywheel.judging.destinations import route_trajectory
from flywheel.models import Query, RlQueryEntry, RlRollout, Trajectory
from flywheel.rules.pools import KEEP, RETIRE, WAIT, rl_pool_metabolism
from tests.flywheel.collection.test_runs import make_query

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_rule_waits_for_every_rollout_to_have_a_verdict():
    assert rl_pool_metabolism(["true", "undetermined"]) == WAIT
    assert rl_pool_metabolism(["true", "pending"]) == WAIT
    assert rl_pool_metabolism(["true", "false"]) == KEEP
    assert rl_pool_metabolism(["true", "true", "env_error"]) == RETIRE  # no re-collection left: not scored


def rl_run_with_rollouts(query, repeats=2):
    """An RL run whose work items were each collected once, their trajectories not judged yet."""
    RlQueryEntry.objects.create(query=query, state="active", channel="phase0")
    run = launch_run("rl", {"keys": [query.key]}, config={"phones": 1, "repeats": repeats}, dispatch=False)
    trajectories = []
    for item in WorkItem.objects.filter(kind=f"collect:run:{run.pk}").order_by("pk"):
        trajectory = Trajectory.objects.create(query=query, run=run, line="rl", status="completed",
                                               model_version=run.model_version)
        WorkItem.objects.filter(pk=item.pk).update(status="done", payload={**item.payload,
                                                                           "trajectories": [trajectory.pk]})
        trajectories.append(trajectory)
    return run, trajectories


def test_an_undetermined_rollout_counts_once_a_person_decides():
    query = make_query("rl-undetermined", tags=("rl",))
    run, (judged, undecided) = rl_run_with_rollouts(query)
    route_trajectory(judged, "true")
    route_trajectory(undecided, "undetermined")
    refresh_progress(run.pk)  # the run is over: its groups are metabolised if they can be
    run.refresh_from_db()
    assert run.status == "done"
    entry = RlQueryEntry.objects.get(query=query)
    assert entry.state == "active" and not entry.rollouts.exists()  # [True, ?] is not "all True"

    adjudicator = User.objects.create_user("judge-rl")
    adjudicator.groups.add(Group.objects.get_or_create(name="adjudicator")[0])
    decide(undecided.pk, adjudicator, "wrong", note="never opened the page")

    entry.refresh_from_db()
    rollout = RlRollout.objects.get(entry=entry)
    assert sorted(rollout.outcomes) == ["false", "true"]
    assert rollout.decision == KEEP and rollout.run_id == run.pk and entry.state == "active"
    assert entry.success_rate == 0.5
    # A late repeat of the same event does not metabolise the group twice.
    from flywheel.pools.rl import metabolize_group

    assert metabolize_group(run.pk, query.pk) == KEEP and RlRollout.objects.filter(entry=entry).count() == 1


def test_an_env_error_rollout_is_re_collected_and_counted_by_its_new_verdict(farm_settings):
    for serial in farm_settings.serials:
        from devices.phone import PhoneConnection

        PhoneConnection(farm_settings.address, serial).shell("settings put global bluetooth_on 0")
    discover_devices()
    device = Device.objects.get(serial=farm_settings.serials[0])
    query = make_query("rl-env", tags=("rl",))
    Query.objects.filter(pk=query.pk).update(tier="L3")
    run, (solved, broken) = rl_run_with_rollouts(query)
    Trajectory.objects.filter(pk=broken.pk).update(device=device)
    broken.device = device
    route_trajectory(solved, "true")
    route_trajectory(broken, "env_error", reason="network failure (wifi and mobile data off)")
    refresh_progress(run.pk)
    entry = RlQueryEntry.objects.get(query=query)
    assert not entry.rollouts.exists()  # the Env_ERROR rollout is being collected again

    drive_host(run.pk, farm_settings.address, 1)  # the re-collection, on the farm

    again = Trajectory.objects.get(recollection_of=broken)
    assert again.run_id == run.pk and again.verdict == "true", [v.rationale for v in again.votes.all()]
    rollout = RlRollout.objects.get(entry=entry)
    assert sorted(rollout.outcomes) == ["true", "true"] and rollout.decision == RETIRE
    entry.refresh_from_db()
    assert entry.state == "retired"
