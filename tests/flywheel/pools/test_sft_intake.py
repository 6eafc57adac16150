"""SFT intake's consistency gate (§2.3.6, issue #35), on every line: a step whose [Decision] disagrees
with its executed action is no training label, whichever line collected it; it stays in its
trajectory, and exports give it no sample."""
import json
from pathlib import Path

import pytest

from flywheel.collection.semi_auto import route_verified
from flywheel.judging.destinations import route_trajectory
from flywheel.models import Line, Outcome, Query, SftEntry, Step, Trajectory
from flywheel.policies.protocol import describe_action
from flywheel.pools import sft
from training.exports.chat import FrameCache, trajectory_samples
from training.snapshots import create_snapshot

pytestmark = pytest.mark.django_db

TAP = {"action": "click", "point": [540, 200], "coords": "pixel"}
AGREES = {"Observation": "Settings list", "Reflection": "", "Plan": "Open Bluetooth",
          "Decision": "Tap \"Bluetooth\" at (540, 200)", "Memory": ""}
# The report's case: the [Decision] says one thing, the phone did another.
DISAGREES = {**AGREES, "Decision": "Swipe up to see more settings"}
# Which intake each line's True trajectories enter by (the ECDM line's samples: ecdm_repaired).
INTAKES = {Line.AUTOMATIC: "htsc_true", Line.SCHEMA: "htsc_true", Line.EXTERNAL: "adjudicated",
           Line.RL: "htsc_true", Line.ECDM: "ecdm_repaired"}


def trajectory_with(line, cots, **fields):
    query = Query.objects.create(key=f"q-{line}-{Query.objects.count()}", text="Turn on Bluetooth", tier="L1",
                                 verification={})
    trajectory = Trajectory.objects.create(query=query, line=line, status="completed", **fields)
    for index, cot in enumerate(cots):
        Step.objects.create(trajectory=trajectory, index=index, cot=cot, executed_action=TAP,
                            proposed_action=TAP)
    return trajectory


@pytest.mark.parametrize("line", list(INTAKES))
def test_a_step_whose_decision_disagrees_with_its_action_is_no_training_label_on_every_line(line):
    trajectory = trajectory_with(line, [AGREES, DISAGREES, AGREES])
    route_trajectory(trajectory, Outcome.TRUE, "judged", intake=INTAKES[line])
    # kept: the trajectory is in the pool, every step stays
    assert SftEntry.objects.filter(trajectory=trajectory, intake=INTAKES[line]).exists()
    steps = list(trajectory.steps.order_by("index"))
    assert [s.label_gate for s in steps] == ["passed", "no_regenerator", "passed"]
    assert steps[1].label_issues == ["decision_matches_action"]
    assert steps[1].cot == DISAGREES  # nothing rewritten after the fact
    trajectory.refresh_from_db()
    assert [(i["step"], i["rule"]) for i in trajectory.consistency_issues] == [(1, "decision_matches_action")]
    # the export gives the steps that are labels only (no screenshots here: each is a skipped sample)
    assert [step.index for step, _ in trajectory_samples(trajectory, 2, FrameCache(), {})] == [0, 2]


def test_the_semi_automatic_line_sends_a_disagreeing_step_back_to_its_person():
    trajectory = trajectory_with(Line.SEMI_AUTO, [AGREES, DISAGREES], stated_outcome="success")
    issues = route_verified(trajectory)
    assert [(i.step_index, i.rule) for i in issues] == [(1, "decision_matches_action")]
    assert not SftEntry.objects.filter(trajectory=trajectory).exists()
    Step.objects.filter(trajectory=trajectory, index=1).update(cot=AGREES)  # the person fixes it
    assert route_verified(trajectory) == []
    assert SftEntry.objects.filter(trajectory=trajectory, intake="semi_auto_verified").exists()
    assert set(trajectory.steps.values_list("label_gate", flat=True)) == {"passed"}


def test_a_regenerator_rewrites_the_reasoning_until_the_step_passes(monkeypatch):
    calls = []

    def regenerate(step, issues):
        calls.append((step.index, [i.rule for i in issues]))
        return {**step.cot, "Decision": describe_action(step.action)}

    monkeypatch.setattr(sft, "reasoning_regenerator", lambda: regenerate)
    trajectory = trajectory_with(Line.AUTOMATIC, [AGREES, DISAGREES])
    route_trajectory(trajectory, Outcome.TRUE, "judged")
    assert calls == [(1, ["decision_matches_action"])]
    step = trajectory.steps.get(index=1)
    assert step.label_gate == "regenerated" and step.label_issues == []
    assert step.cot["Decision"] == describe_action(TAP)


def test_a_step_still_failing_after_the_allowed_regenerations_is_inconsistent(monkeypatch):
    calls = []

    def regenerate(step, issues):
        calls.append(step.index)
        return {**step.cot, "Decision": "Scroll down instead"}

    monkeypatch.setattr(sft, "reasoning_regenerator", lambda: regenerate)
    trajectory = trajectory_with(Line.SCHEMA, [DISAGREES])
    route_trajectory(trajectory, Outcome.TRUE, "judged")
    assert calls == [0] * sft.MAX_REGENERATIONS
    step = trajectory.steps.get(index=0)
    assert (step.label_gate, step.label_issues) == ("inconsistent", ["decision_matches_action"])


def test_a_step_the_gate_failed_gives_no_sample_in_an_sft_snapshot(settings, tmp_path):
    from tests.training.test_exports import make_trajectory
    settings.TRAINING_ROOT = tmp_path / "training"
    trajectory = make_trajectory(n_steps=3)
    Step.objects.filter(trajectory=trajectory, index=1).update(label_gate="no_regenerator",
                                                              label_issues=["plan_present"])
    SftEntry.objects.create(trajectory=trajectory, intake="htsc_true")
    snapshot = create_snapshot("sft", {"k": 2, "seed": 1}, name="gated")
    assert snapshot.status == "ready", snapshot.error
    lines = (Path(snapshot.directory) / "data.jsonl").read_text().splitlines()
    assert [json.loads(line)["meta"]["step"] for line in lines] == [0, 2]
    assert snapshot.stats["not_training_labels"] == 1


def test_the_pool_page_counts_the_steps_that_are_no_training_labels(client_as):
    trajectory = trajectory_with(Line.AUTOMATIC, [DISAGREES, AGREES])
    route_trajectory(trajectory, Outcome.TRUE, "judged")
    page = client_as("manager").get("/pools/").content.decode()
    section = page.split('data-testid="not-labels"')[1].split("</p>")[0]
    assert "no model is configured to regenerate its reasoning <strong>1</strong>" in section


def test_a_lost_ui_dump_does_not_stop_routing_and_the_observation_is_then_not_compared():
    trajectory = trajectory_with(Line.AUTOMATIC, [AGREES])
    Step.objects.filter(trajectory=trajectory).update(hierarchy="blobs/gone/never-stored.xml")
    route_trajectory(trajectory, Outcome.TRUE, "judged")
    assert trajectory.steps.get().label_gate == "passed"
    assert SftEntry.objects.filter(trajectory=trajectory).exists()
