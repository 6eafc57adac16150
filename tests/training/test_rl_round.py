"""Which queries an RL run rolls out: curriculum sampling over the RL pool (Xiaomi-GUI-0 §4.4)."""
from collections import Counter

import pytest

from flywheel.models import ModelVersion, Query, RlQueryEntry, RlRollout
from training.models import TrainingRun
from training.rl_round import curriculum_keys, curriculum_progress
from training.runs import RunError

pytestmark = pytest.mark.django_db


def pool(successes_by_key: dict[str, tuple[int, int]]):
    for key, (wins, tries) in successes_by_key.items():
        entry = RlQueryEntry.objects.create(query=Query.objects.create(key=key, text=f"goal {key}", tier="L2"),
                                            state="active", channel="routing")
        RlRollout.objects.create(entry=entry, outcomes=["true"] * wins + ["false"] * (tries - wins),
                                 decision="keep")


def draws(config, base=None, rounds=200):
    counts = Counter()
    for seed in range(rounds):
        counts.update(curriculum_keys({**config, "seed": seed}, base))
    return counts


def test_early_training_favours_easy_queries_and_late_training_hard_ones():
    pool({"easy": (7, 8), "hard": (1, 8), "middle": (4, 8)})
    config = {"queries_per_iteration": 1, "curriculum": {"temperature": 0.25}}
    early = draws({**config, "curriculum": {"progress": 0.0, "temperature": 0.25}})
    late = draws({**config, "curriculum": {"progress": 1.0, "temperature": 0.25}})
    assert early["easy"] > early["middle"] > early["hard"]
    assert late["hard"] > late["middle"] > late["easy"]


def test_held_out_queries_are_never_drawn_and_an_empty_pool_says_what_to_do():
    with pytest.raises(RunError, match="no active or banked"):
        curriculum_keys({"queries_per_iteration": 2})
    pool({"train": (1, 2)})
    held_out = Query.objects.create(key="held", text="held out", tier="L2", evaluation_only=True)
    RlQueryEntry.objects.create(query=held_out, state="active")
    assert curriculum_keys({"queries_per_iteration": 5}) == ["train"]


def test_progress_follows_the_lineage_when_the_config_does_not_set_it():
    base = ModelVersion.objects.create(name="sft")
    once = ModelVersion.objects.create(name="rl-1", parent=base)
    TrainingRun.objects.create(stage="rl", produced_model=once, status="done")
    twice = ModelVersion.objects.create(name="rl-2", parent=once)
    TrainingRun.objects.create(stage="rl", produced_model=twice, status="done")
    config = {"curriculum": {"progress": None, "iterations": 4}}
    assert curriculum_progress(config, base) == 0.0
    assert curriculum_progress(config, twice) == 0.5
    assert curriculum_progress({"curriculum": {"progress": 0.9, "iterations": 4}}, twice) == 0.9
    assert curriculum_progress({"curriculum": {"progress": None, "iterations": 1}}, twice) == 1.0


def test_rollouts_ended_by_the_policys_server_are_never_learnt_from(db):
    from flywheel.models import CollectionRun, Trajectory
    from training.rl_round import endpoint_failures

    query = Query.objects.create(key="q-endpoint", text="Open Settings")
    collection = CollectionRun.objects.create(line="rl", total=4)
    for kind in ("endpoint_failed", "endpoint_failed", "endpoint_failed", "terminate_failure"):
        Trajectory.objects.create(query=query, run=collection, line="rl", status="completed", stop_kind=kind,
                                  stop_reason="policy error: the endpoint's answer has no choices[0].message.content")
    with pytest.raises(RunError, match="endpoint failed on 3 of 4 rollouts"):
        endpoint_failures(collection)
    Trajectory.objects.filter(run=collection, stop_kind="endpoint_failed").first().delete()
    Trajectory.objects.filter(run=collection, stop_kind="endpoint_failed").first().delete()
    endpoint_failures(collection)  # 1 of 2: the rollouts are the policy's own


def test_the_runs_step_reward_source_reaches_the_rollouts_file(db, tmp_path):
    """A run configured for the cascade (Xiaomi-GUI-0 §4.3) gets cascade step rewards in rollouts.jsonl;
    a config saved before the key existed keeps eq. 4's majority."""
    import json

    from flywheel.models import CollectionRun
    from tests.training.test_rl_data import HOME, MILESTONES, SETTINGS, click, ended_on, make_query, rollout
    from training.config import validate_config
    from training.rl_round import READY, poll_rollouts

    collection = CollectionRun.objects.create(line="rl", status="done", config={"screenshots_k": 2})
    query = make_query("round-cascade", MILESTONES)
    rollout(collection, query, "true", [(HOME, click(1, 1)), (SETTINGS, {"action": "terminate", "status": "success"})])
    ended_on(rollout(collection, query, "false", [(HOME, click(1, 1))]), 1, SETTINGS, unparsed=True)
    for name, config in (("cascade", validate_config("rl", {"rl_run": collection.pk, "step_reward_source": "cascade"})),
                         ("before", {key: value for key, value in validate_config("rl", {"rl_run": collection.pk}).items()
                                     if key != "step_reward_source"})):
        run = TrainingRun.objects.create(stage="rl", config=config, status="running")
        state, path = poll_rollouts(run, tmp_path / name)
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        run.refresh_from_db()
        expected = "cascade" if name == "cascade" else "majority"
        assert state == READY and {row["step_reward_source"] for row in rows} == {expected}
        assert run.progress["rollouts"]["step_reward_source"] == expected
        assert len(rows) == (2 + 2 if name == "cascade" else 2 + 1)   # the cascade also rewards the unparsed answer
