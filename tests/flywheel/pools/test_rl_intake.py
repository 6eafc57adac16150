"""The RL pool's Phase-1 intake (§2.4.3): "Under Phase 1, all channels pass a uniform gate — sort
by the current policy's success rate and remove all-true / all-false". A new query waits, awaiting
measurement, until G rollouts of the current policy M(t) are judged; it is never admitted unmeasured."""
import pytest

from annotation.review import approve, version_of
from devices.models import WorkItem
from flywheel.collection.launch import select_queries
from flywheel.collection.rl_measurement import measure_awaiting
from flywheel.models import (
    App,
    CollectionRun,
    EvolutionLoop,
    GenerationRun,
    ModelVersion,
    Query,
    RlQueryEntry,
    Trajectory,
)
from flywheel.pools.rl import await_measurement, bank_phase0, current_policy, metabolize_group
from flywheel.rules.pools import rl_intake_refusal

pytestmark = pytest.mark.django_db


def query(key, tier="L2", apps=("com.a",), **fields):
    q = Query.objects.create(key=key, text=f"goal {key}", tier=tier, verification={}, **fields)
    q.set_apps([App.objects.get_or_create(package=p)[0] for p in apps])
    return q


def phase1(group_size=3, name="m1"):
    """A self-evolution loop whose current model M(t) is `name`: Phase 1."""
    model = ModelVersion.objects.create(name=name, kind="endpoint", endpoint_url="http://gpu:8000/v1")
    EvolutionLoop.objects.create(name="loop", model_version=model, config={"group_size": group_size, "max_steps": 12})
    return model


def judge_group(run, q, verdicts):
    """The run's open rollouts of `q`, collected and judged with `verdicts` (in order)."""
    items = list(WorkItem.objects.filter(kind=f"collect:run:{run.pk}", payload__query_id=q.pk)
                 .exclude(status="done").order_by("pk"))
    assert len(items) == len(verdicts)
    for item, verdict in zip(items, verdicts, strict=True):
        Trajectory.objects.create(query=q, run=run, line="rl", status="completed", verdict=verdict,
                                  model_version=run.model_version)
        WorkItem.objects.filter(pk=item.pk).update(status="done")
    return metabolize_group(run.pk, q.pk)


def test_the_gate_rule_refuses_all_true_and_all_false_and_says_why():
    assert rl_intake_refusal(["true", "false", "true"]) == ""
    assert "already mastered" in rl_intake_refusal(["true"] * 4)
    assert "beyond the current boundary" in rl_intake_refusal(["false"] * 4)
    assert "environment errors" in rl_intake_refusal(["env_error"] * 2)
    assert "awaits its verdict" in rl_intake_refusal(["true", "pending"])


def test_phase0_has_no_policy_so_a_new_query_waits_and_is_not_rolled_out():
    derived = query("derived-1", source="derived")
    assert current_policy() is None
    entry = await_measurement(derived, RlQueryEntry.Channel.DERIVED)
    assert entry.state == "measuring" and "no current policy yet (Phase 0)" in entry.note
    assert measure_awaiting(dispatch=False) is None and not CollectionRun.objects.exists()
    # not drawn by the pool's rollouts (loop rounds, training) while it waits
    assert not select_queries({"pool": "rl"}).filter(pk=derived.pk).exists()
    assert bank_phase0([derived]) == 0  # Phase-0 banking does not let it in unmeasured either
    assert RlQueryEntry.objects.get(query=derived).state == "measuring"


def test_phase1_measures_new_queries_with_g_rollouts_of_the_current_policy_then_the_gate_decides():
    model = phase1(group_size=3)
    boundary, mastered, hopeless = query("q-boundary"), query("q-mastered"), query("q-hopeless")
    for q in (boundary, mastered, hopeless):
        assert await_measurement(q, RlQueryEntry.Channel.BADCASE).state == "measuring"
    run = measure_awaiting(dispatch=False)
    assert run.line == "rl" and run.model_version == model and run.config["repeats"] == 3
    assert run.config["max_steps"] == 12  # as the loop rolls the policy out
    assert "measuring: 3 rollouts of m1" in RlQueryEntry.objects.get(query=boundary).note
    assert run.query_filter["pool"] == "measuring" and run.total == 9
    assert set(RlQueryEntry.objects.values_list("measurement_run", flat=True)) == {run.pk}
    assert measure_awaiting(dispatch=False) is None  # measured once, not twice
    late = query("q-late")
    await_measurement(late, RlQueryEntry.Channel.DERIVED)
    assert measure_awaiting(dispatch=False) is None  # one measuring run at a time: the next one takes it
    assert RlQueryEntry.objects.get(query=late).measurement_run is None

    # two rollouts still outstanding: the query keeps waiting, never admitted unmeasured
    first = WorkItem.objects.filter(kind=f"collect:run:{run.pk}", payload__query_id=boundary.pk).order_by("pk")[0]
    Trajectory.objects.create(query=boundary, run=run, line="rl", status="completed", verdict="true")
    WorkItem.objects.filter(pk=first.pk).update(status="done")
    assert metabolize_group(run.pk, boundary.pk) == "wait"
    assert RlQueryEntry.objects.get(query=boundary).state == "measuring"

    assert judge_group(run, boundary, ["false", "false"]) == "admit"
    assert judge_group(run, mastered, ["true"] * 3) == "refuse"
    assert judge_group(run, hopeless, ["false"] * 3) == "refuse"
    admitted = RlQueryEntry.objects.get(query=boundary)
    assert (admitted.state, admitted.channel, admitted.success_rate) == ("active", "badcase", 0.333)
    refused = RlQueryEntry.objects.get(query=mastered)
    assert refused.state == "refused" and "already mastered" in refused.note and "m1" in refused.note
    assert "beyond the current boundary" in RlQueryEntry.objects.get(query=hopeless).note
    assert RlQueryEntry.objects.get(query=boundary).rollouts.get().decision == "admit"
    assert metabolize_group(run.pk, mastered.pk) == "refuse" and refused.rollouts.count() == 1  # recorded once
    # only the admitted one is drawn by the pool's rollouts from now on
    assert list(select_queries({"pool": "rl"}).values_list("key", flat=True)) == ["q-boundary"]


def test_a_measuring_query_is_decided_only_by_its_own_measuring_run():
    phase1()
    q = query("q-wait")
    await_measurement(q, RlQueryEntry.Channel.DERIVED)
    other = CollectionRun.objects.create(line="rl", total=1)
    Trajectory.objects.create(query=q, run=other, line="rl", status="completed", verdict="true")
    assert metabolize_group(other.pk, q.pk) is None
    assert RlQueryEntry.objects.get(query=q).state == "measuring"


def test_held_out_queries_are_never_offered_and_live_ones_stay_as_they_are():
    phase1()
    held = query("held", evaluation_only=True)
    assert await_measurement(held, RlQueryEntry.Channel.BADCASE) is None
    assert not RlQueryEntry.objects.filter(query=held).exists()
    live = query("live")
    RlQueryEntry.objects.create(query=live, state="active", channel="phase0", success_rate=0.5)
    assert await_measurement(live, RlQueryEntry.Channel.BADCASE).state == "active"
    gone = query("gone")
    RlQueryEntry.objects.create(query=gone, state="refused", channel="badcase")
    assert await_measurement(gone, RlQueryEntry.Channel.BADCASE).state == "measuring"  # measured again


def _generated(key, tier):
    run = GenerationRun.objects.create(status="done")
    return query(key, tier=tier, generation_run=run, status="review")


def test_approved_generated_candidates_go_through_the_gate_under_phase1_only():
    hard, easy = _generated("gen-hard", "L3"), _generated("gen-easy", "L1")
    approve({q.pk: version_of(q) for q in (hard, easy)}, None)  # Phase 0: Phase-0 banking screens them
    assert not RlQueryEntry.objects.exists()
    assert bank_phase0([Query.objects.get(pk=hard.pk)]) == 1

    phase1()
    later, simple = _generated("gen-later", "L2"), _generated("gen-simple", "L1")
    approve({q.pk: version_of(q) for q in (later, simple)}, None)
    entry = RlQueryEntry.objects.get(query=later)
    assert (entry.state, entry.channel) == ("measuring", "generated")
    assert not RlQueryEntry.objects.filter(query=simple).exists()  # no difficulty feature: not a candidate


def test_what_arrives_while_a_measuring_run_is_open_is_measured_by_the_next_one():
    phase1(group_size=2)
    await_measurement(query("q-first"), RlQueryEntry.Channel.DERIVED)
    first = measure_awaiting(dispatch=False)
    second = query("q-second")
    await_measurement(second, RlQueryEntry.Channel.DERIVED)
    assert measure_awaiting(dispatch=False) is None
    CollectionRun.objects.filter(pk=first.pk).update(status="done")
    run = measure_awaiting(dispatch=False)
    assert run is not None and run.pk != first.pk and run.total == 2
    assert RlQueryEntry.objects.get(query=second).measurement_run == run
