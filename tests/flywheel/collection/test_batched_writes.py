"""Issue #38: a phone host's step writes are committed in batches (flywheel/collection/step_writer.py):
one statement per kind of row for a whole batch, each stage still committed before the recorder
returns (so before the phone's next input), a failed batch writes none of its rows and fails only
the write that cannot be written, with a clear reason."""
import threading

import pytest
from django.db import IntegrityError, connection

from devices.actions import normalize_action
from flywheel.collection import recorder
from flywheel.collection.step_writer import StepWrite, StepWriteFailed, StepWriter, batched_step_writes, write_rows
from flywheel.models import CptEntry, Step, Trajectory
from tests.flywheel.collection.test_step_writes import (
    CLICK,
    Answers,
    RanWithoutPhone,
    make_trajectory,
    observation,
    screen,
)

pytestmark = pytest.mark.django_db(transaction=True)
PHONES, STEPS = 6, 3


@pytest.fixture
def trajectories(settings, tmp_path):
    """A trajectory per phone, on the same query and phone row (the writes are what is tested)."""
    first = make_trajectory(settings, tmp_path)
    others = [Trajectory.objects.create(query=first.query, device=first.device, line="automatic")
              for _ in range(PHONES - 1)]
    return [first, *others]


def drive(trajectory, frames, barrier, seen_committed):
    """One phone: its steps through the recorder; after each stage, the row is in the database."""
    for index in range(STEPS):
        barrier.wait(timeout=30)  # the phones write at the same moments, so batches form
        seen = observation(frames[index], index)
        step = recorder.record_observation(trajectory, index, seen)
        seen_committed.append(Step.objects.filter(pk=step.pk).exists())
        recorder.propose(step, seen, Answers())
        seen_committed.append(Step.objects.get(pk=step.pk).proposed_action == CLICK)
        outcome = recorder.execute(step, CLICK, RanWithoutPhone(), hierarchy_xml=seen.hierarchy_xml, claim=False)
        assert outcome.ok
        seen_committed.append(Step.objects.get(pk=step.pk).executed_action is not None)
    connection.close()


def test_the_phones_of_a_host_write_in_batches_and_each_stage_is_committed_before_it_returns(trajectories):
    frames = [screen(n) for n in range(STEPS)]
    barrier, seen_committed = threading.Barrier(PHONES), []
    with batched_step_writes() as writer:
        threads = [threading.Thread(target=drive, args=(t, frames, barrier, seen_committed)) for t in trajectories]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(seen_committed) == PHONES * STEPS * 3 and all(seen_committed)
    assert writer.writes == PHONES * STEPS * 3
    assert writer.batches < writer.writes, "concurrent phones' writes share transactions"
    for trajectory in trajectories:
        steps = list(trajectory.steps.order_by("index"))
        assert [s.index for s in steps] == list(range(STEPS))
        assert all(s.model_io and s.executed_action and s.audit["cpt"] == "accepted" for s in steps)
        assert CptEntry.objects.filter(step__trajectory=trajectory).count() == STEPS


def test_a_batch_is_one_statement_per_kind_of_row(trajectories, django_assert_max_num_queries):
    """Observed steps of six phones: one INSERT; their executed actions and samples: one UPDATE and
    one INSERT (BEGIN/COMMIT aside), however many phones are in the batch."""
    seen = observation(screen(1), 0)
    fields = recorder.observation_fields(seen)
    observed = [Step(trajectory=t, index=0, **fields) for t in trajectories]
    with django_assert_max_num_queries(3):  # BEGIN, INSERT … RETURNING, COMMIT
        write_rows([StepWrite(observed=step) for step in observed])
    assert all(step.pk for step in observed)
    for step in observed:
        step.executed_action, step.audit = CLICK, {"cpt": "accepted"}
    samples = [CptEntry(step=step, screenshot=step.screenshot.name, action=CLICK, phash=f"{n:016x}")
               for n, step in enumerate(observed)]
    with django_assert_max_num_queries(4):  # BEGIN, UPDATE, INSERT, COMMIT
        write_rows([StepWrite(updated=(step, ("executed_action", "audit")), cpt_sample=sample)
                    for step, sample in zip(observed, samples)])
    assert Step.objects.filter(executed_action__isnull=False).count() == PHONES
    assert CptEntry.objects.count() == PHONES


def test_a_failed_batch_writes_none_of_its_rows_and_fails_only_the_bad_write(trajectories):
    fields = recorder.observation_fields(observation(screen(2), 0))
    good = StepWrite(observed=Step(trajectory=trajectories[0], index=0, **fields))
    bad = StepWrite(observed=Step(trajectory_id=10**9, index=0, **fields))  # no such trajectory
    with pytest.raises(IntegrityError):  # the foreign key, checked at COMMIT
        write_rows([good, bad])
    assert not Step.objects.exists(), "the failed batch wrote none of its rows"
    good.observed.pk = None

    writer = StepWriter()
    writer._queue.put(good)  # both queued before the thread starts: they form one batch
    writer._queue.put(bad)
    writer.start()
    try:
        good.done.result(timeout=30)
        error = bad.done.exception(timeout=30)
    finally:
        writer.stop()
    assert isinstance(error, StepWriteFailed) and "could not be written" in str(error)
    assert list(Step.objects.values_list("trajectory_id", flat=True)) == [trajectories[0].pk]


def test_a_phone_whose_write_fails_gets_the_reason_and_sends_nothing(trajectories, monkeypatch):
    """The recorder raises StepWriteFailed: the engine stops that trajectory with the reason (crashed)."""
    from flywheel.collection import step_writer

    def broken(writes):
        raise RuntimeError("disk full")

    monkeypatch.setattr(step_writer, "write_rows", broken)
    with batched_step_writes():
        with pytest.raises(StepWriteFailed, match="could not be written: disk full"):
            recorder.record_observation(trajectories[0], 0, observation(screen(1), 0))
    assert not Step.objects.exists()


class Remembers(Answers):
    """Answers, and keeps the history each proposal was given."""

    def __init__(self):
        self.histories = []

    def propose(self, state):
        self.histories.append([(entry.action, entry.reply) for entry in state.history])
        return super().propose(state)


def test_a_hosts_next_step_reads_nothing_and_sees_the_same_history(trajectories, django_assert_num_queries):
    """Under a host's writer, a trajectory's next step takes its history and its previous CPT hash from
    what this process noted at the step before: no statement on the phone's thread; an answer to a
    clarify is read again."""
    trajectory, frames, policy = trajectories[0], [screen(n) for n in range(4)], Remembers()
    with batched_step_writes():
        for index in range(4):
            seen = observation(frames[index], index)
            # The first step reads its history, previous sample and the apps its policy sees (once per
            # trajectory); the step after an answer its history again.
            with django_assert_num_queries({0: 4, 2: 1}.get(index, 0)):
                step = recorder.record_observation(trajectory, index, seen)
                recorder.propose(step, seen, policy)
                assert recorder.execute(step, CLICK, RanWithoutPhone(), hierarchy_xml=seen.hierarchy_xml,
                                        claim=False).ok
            if index == 1:
                recorder.record_answer(step, "the blue one", by="user")
    executed = [normalize_action(CLICK, 1080, 2400)]
    assert policy.histories == [[], [(executed[0], "")], [(executed[0], ""), (executed[0], "the blue one")],
                                [(executed[0], ""), (executed[0], "the blue one"), (executed[0], "")]]
    # The same as a process that knew nothing would read.
    stored = recorder.history_steps(trajectory)
    assert [(s.executed_action, (s.edit or {}).get("clarify_answer", "")) for s in stored] == policy.histories[-1] + [
        (executed[0], "")]
