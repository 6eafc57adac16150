"""SFT intake's consistency gate (§2.3.6, issue #35), on every line: a step whose [Decision] disagrees
with its executed action is no training label, whichever line collected it; it stays in its
trajectory, and exports give it no sample."""
import json
from pathlib import Path

import pytest
from django.utils import timezone

from flywheel import jobs
from flywheel.collection.semi_auto import route_verified
from flywheel.judging.destinations import route_trajectory
from flywheel.models import Line, Outcome, Query, SftEntry, Step, Trajectory
from flywheel.policies.teacher import TeacherAnswer, TeacherContext, TeacherFailed
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


@pytest.fixture
def queued(monkeypatch):
    """The regeneration jobs intake queues (trajectory ids), instead of sending them to Celery."""
    sent = []
    monkeypatch.setattr(jobs.task(jobs.REGENERATE_REASONING), "delay", sent.append)
    return sent


@pytest.mark.parametrize("line", list(INTAKES))
def test_a_step_whose_decision_disagrees_with_its_action_is_no_training_label_on_every_line(
        line, queued, django_capture_on_commit_callbacks):
    trajectory = trajectory_with(line, [AGREES, DISAGREES, AGREES])
    with django_capture_on_commit_callbacks(execute=True):
        route_trajectory(trajectory, Outcome.TRUE, "judged", intake=INTAKES[line])
    # kept: the trajectory is in the pool, every step stays
    assert SftEntry.objects.filter(trajectory=trajectory, intake=INTAKES[line]).exists()
    steps = list(trajectory.steps.order_by("index"))
    assert [s.label_gate for s in steps] == ["passed", "regenerating", "passed"]
    assert steps[1].label_issues == ["decision_matches_action"]
    assert steps[1].cot == DISAGREES  # nothing rewritten after the fact
    trajectory.refresh_from_db()
    assert [(i["step"], i["rule"]) for i in trajectory.consistency_issues] == [(1, "decision_matches_action")]
    # the export gives the steps that are labels only (no screenshots here: each is a skipped sample)
    assert [step.index for step, _ in trajectory_samples(trajectory, 2, FrameCache(), {})] == [0, 2]
    # routing never waits on a model: the regeneration is a job, queued once intake has committed
    assert queued == [trajectory.pk]


def test_a_trajectory_that_passes_queues_no_regeneration(queued, django_capture_on_commit_callbacks):
    trajectory = trajectory_with(Line.AUTOMATIC, [AGREES, AGREES])
    with django_capture_on_commit_callbacks(execute=True):
        route_trajectory(trajectory, Outcome.TRUE, "judged")
    assert set(trajectory.steps.values_list("label_gate", flat=True)) == {"passed"} and queued == []


def test_the_semi_automatic_line_sends_a_disagreeing_step_back_to_its_person():
    trajectory = trajectory_with(Line.SEMI_AUTO, [AGREES, DISAGREES], stated_outcome="success")
    issues = route_verified(trajectory)
    assert [(i.step_index, i.rule) for i in issues] == [(1, "decision_matches_action")]
    assert not SftEntry.objects.filter(trajectory=trajectory).exists()
    Step.objects.filter(trajectory=trajectory, index=1).update(cot=AGREES)  # the person fixes it
    assert route_verified(trajectory) == []
    assert SftEntry.objects.filter(trajectory=trajectory, intake="semi_auto_verified").exists()
    assert set(trajectory.steps.values_list("label_gate", flat=True)) == {"passed"}


class Teacher:
    """A Teacher that answers `action` with `cot` on every screen, and remembers what it was shown."""
    name = "teacher-under-test"

    def __init__(self, action=TAP, cot=None, fails=False):
        self.action, self.cot, self.fails, self.shown = action, cot or {**AGREES, "Plan": PLAN}, fails, []

    def suggest(self, context):
        self.shown.append(context)
        if self.fails:
            raise TeacherFailed("the Teacher endpoint failed: HTTP 503")
        return TeacherAnswer(action=self.action, cot=self.cot, confidence=0.9, source="known_path", rationale="")


PLAN = "Bluetooth is the second row: open it"


@pytest.fixture
def screens(monkeypatch):
    """Every step has a screen to show the Teacher (the context a stored frame gives)."""
    monkeypatch.setattr(sft, "context_for_step", lambda trajectory, index: TeacherContext(
        goal=trajectory.query.text, wrong_action=TAP, step_index=index))


def routed(line, cots, **fields):
    trajectory = trajectory_with(line, cots, **fields)
    route_trajectory(trajectory, Outcome.TRUE, "judged")
    return trajectory


@pytest.mark.parametrize("teacher_taps, regenerated", [(TAP, True), ({**TAP, "point": [540, 900]}, False)])
def test_the_teacher_regenerates_forward_only_when_its_own_choice_is_the_executed_action(
        screens, client_as, teacher_taps, regenerated):
    """§2.3.6: the reasoning is derived again from the screen; it replaces the step's only when it
    leads to the action the phone executed (never words fitted to that action afterwards)."""
    trajectory = routed(Line.RL, [AGREES, DISAGREES])
    teacher = Teacher(action=teacher_taps)
    result = sft.regenerate_reasoning(trajectory.pk, teacher=teacher)
    step = trajectory.steps.get(index=1)
    assert [c.step_index for c in teacher.shown] == [1]                      # only the failing step is asked
    assert all(c.wrong_action is None for c in teacher.shown)                # it chooses; it is not told what was done
    if regenerated:
        assert result == {"waiting": 1, "regenerated": 1, "unanswered": 0}
        assert step.label_gate == "regenerated" and step.cot["Plan"] == PLAN and step.label_issues == []
        assert step.edit["reasoning_regenerated"]["cot_before"] == DISAGREES  # the step's own words are kept
        assert step.edit["reasoning_regenerated"]["by"] == "teacher-under-test"
        trajectory.refresh_from_db()
        assert trajectory.consistency_issues == []
        assert [s.index for s, _ in trajectory_samples(trajectory, 2, FrameCache(), {})] == [0, 1]
        page = client_as("manager").get(f"/trajectories/{trajectory.pk}/").content.decode()
        before = page.split('data-testid="reasoning-before"')[1].split("</details>")[0]
        assert 'data-testid="regenerated"' in page and DISAGREES["Decision"] in before
    else:
        assert step.label_gate == "inconsistent" and step.cot == DISAGREES
    assert sft.regenerate_reasoning(trajectory.pk, teacher=teacher) == {"waiting": 0}   # idempotent
    assert len(teacher.shown) == 1


def test_a_step_still_failing_after_the_allowed_regenerations_is_inconsistent(screens):
    calls = []

    def regenerate(step, issues):
        calls.append(step.index)
        return {**step.cot, "Decision": f"Scroll down instead ({len(calls)})"}

    trajectory = routed(Line.SCHEMA, [DISAGREES])
    outcome = sft.run_gate(trajectory, regenerate, eligible={0})
    assert calls == [0] * sft.MAX_REGENERATIONS
    sft.record_labels(outcome)
    step = trajectory.steps.get(index=0)
    assert (step.label_gate, step.label_issues) == ("inconsistent", ["decision_matches_action"])


def test_the_teachers_own_takeover_step_is_not_put_back_to_it(screens):
    trajectory = trajectory_with(Line.AUTOMATIC, [AGREES, DISAGREES], teacher_assisted=True)
    Step.objects.filter(trajectory=trajectory, index=1).update(takeover=True)
    route_trajectory(trajectory, Outcome.TRUE, "judged")
    assert trajectory.steps.get(index=1).label_gate == "teacher_fails"
    teacher = Teacher()
    assert sft.regenerate_reasoning(trajectory.pk, teacher=teacher) == {"waiting": 0}
    assert teacher.shown == [] and trajectory.steps.get(index=1).cot == DISAGREES


def test_a_teacher_that_does_not_answer_leaves_the_step_waiting_then_no_regenerator(screens):
    trajectory = routed(Line.AUTOMATIC, [DISAGREES])
    teacher = Teacher(fails=True)
    for attempt in range(1, sft.MAX_ATTEMPTS + 1):
        sft.regenerate_reasoning(trajectory.pk, teacher=teacher)
        step = trajectory.steps.get()
        assert step.edit["regeneration_attempts"] == attempt
        assert step.label_gate == ("no_regenerator" if attempt == sft.MAX_ATTEMPTS else "regenerating")
    assert len(teacher.shown) == sft.MAX_ATTEMPTS


def test_the_sweep_queues_steps_left_waiting(queued):
    trajectory = routed(Line.AUTOMATIC, [DISAGREES])
    fresh = routed(Line.AUTOMATIC, [DISAGREES])
    Step.objects.filter(trajectory=trajectory).update(created_at=timezone.now() - sft.SWEEP_AFTER * 2)
    assert sft.regenerate_waiting() == [trajectory.pk] and queued == [trajectory.pk]   # not the fresh one
    assert fresh.pk not in queued
    recent = (timezone.now() - sft.SWEEP_AFTER / 2).isoformat()
    Step.objects.filter(trajectory=trajectory).update(edit={"regeneration_tried_at": recent})
    assert sft.regenerate_waiting() == []          # tried lately: not again before SWEEP_AFTER


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
    assert "its reasoning is being regenerated <strong>1</strong>" in section


def test_a_lost_ui_dump_does_not_stop_routing_and_the_observation_is_then_not_compared():
    trajectory = trajectory_with(Line.AUTOMATIC, [AGREES])
    Step.objects.filter(trajectory=trajectory).update(hierarchy="blobs/gone/never-stored.xml")
    route_trajectory(trajectory, Outcome.TRUE, "judged")
    assert trajectory.steps.get().label_gate == "passed"
    assert SftEntry.objects.filter(trajectory=trajectory).exists()
