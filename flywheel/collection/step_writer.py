"""Group commit of a phone host's step writes (issue #38): many phones, one writer.

A phone host drives its phones on threads (driver.drive_host). Written one by one, every stage of
every step is a statement and a commit of its own on a connection of its own; at a thousand phones
the database spends more on statements than on rows. Inside `batched_step_writes()` the recorder
hands a stage's rows to the process's StepWriter instead, and waits: the writer's thread takes
whatever the phones have handed in meanwhile and writes it in one transaction, one statement per
kind of row (the observed steps, the proposals, the executed steps, the CPT samples), then wakes
each phone. A phone still sends no input before its step is committed, so a crash loses nothing.

A batch that fails writes none of its rows; each of its phones' writes is then tried again alone,
so one bad row fails one trajectory (StepWriteFailed, a clear reason), not a host's worth.
"""
from __future__ import annotations

import logging
import queue
import threading
from collections import defaultdict
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import connection, transaction

from devices.db_pool import release_connection
from flywheel.models import CptEntry, Step, Trajectory

log = logging.getLogger(__name__)

MAX_BATCH = 256           # writes per transaction: the statements stay a few hundred KB
ANSWER_TIMEOUT_S = 120    # a writer that does not answer in this long has failed the write
OBSERVATION_FIELDS = ("screenshot", "hierarchy", "foreground_package", "activity_stack", "anomaly", "timings")


class StepWriteFailed(Exception):
    """A stage of a step could not be committed; nothing of that write is in the database."""


@dataclass
class StepWrite:
    """What one stage of one step writes, in one transaction."""

    observed: Step | None = None                    # INSERT (a redelivered index: its observation replaced)
    updated: tuple[Step, tuple[str, ...]] | None = None  # these fields of a stored step
    cpt_sample: CptEntry | None = None              # INSERT … ON CONFLICT DO NOTHING
    memory: Trajectory | None = None                # take_notes: the trajectory's memory
    done: Future = field(default_factory=Future)


def write_rows(writes: list[StepWrite]) -> None:
    """The writes in one transaction: one statement per kind of row (per field set for updates)."""
    with transaction.atomic():
        observed = [w.observed for w in writes if w.observed is not None]
        if observed:
            # Sets each new row's pk (RETURNING); a redelivered index keeps its row and what ran on it.
            Step.objects.bulk_create(observed, update_conflicts=True, unique_fields=["trajectory", "index"],
                                     update_fields=list(OBSERVATION_FIELDS))
        by_fields: dict[tuple[str, ...], list[Step]] = defaultdict(list)
        for w in writes:
            if w.updated is not None:
                by_fields[w.updated[1]].append(w.updated[0])
        for fields, steps in by_fields.items():
            Step.objects.bulk_update(steps, list(fields))
        samples = [w.cpt_sample for w in writes if w.cpt_sample is not None]
        if samples:
            CptEntry.objects.bulk_create(samples, ignore_conflicts=True)
        for w in writes:
            if w.memory is not None:
                Trajectory.objects.filter(pk=w.memory.pk).update(memory=w.memory.memory)


class StepWriter:
    """The process's writer thread; `write` blocks until the write is committed or has failed."""

    def __init__(self):
        self._queue: queue.Queue[StepWrite | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="step-writer", daemon=True)
        self.batches = self.writes = self.statements = 0  # for the bench and the tests

    def start(self) -> StepWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=ANSWER_TIMEOUT_S)

    def write(self, write: StepWrite) -> None:
        # Pooled, a connection held while waiting could be the one the writer waits for.
        release_connection()
        self._queue.put(write)
        try:
            write.done.result(timeout=ANSWER_TIMEOUT_S)
        except FutureTimeout:
            raise StepWriteFailed(f"the step writer did not answer in {ANSWER_TIMEOUT_S} s") from None

    def _take(self) -> tuple[list[StepWrite], bool]:
        """The next batch: the first write waited for, then whatever else is queued. (batch, stop?)"""
        first = self._queue.get()
        if first is None:
            return [], True
        batch = [first]
        while len(batch) < MAX_BATCH:
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                break
            if more is None:
                return batch, True
            batch.append(more)
        return batch, False

    def _count(self, execute, sql, params, many, context):
        self.statements += 1
        return execute(sql, params, many, context)

    def _run(self) -> None:
        try:
            with connection.execute_wrapper(self._count):
                stopping = False
                while not stopping:
                    batch, stopping = self._take()
                    if batch:
                        self._commit(batch)
                    if self._queue.empty():
                        release_connection()  # idle: pooled, the connection goes back for the phones' reads
        finally:
            connection.close()

    def _commit(self, batch: list[StepWrite]) -> None:
        try:
            write_rows(batch)
        except Exception:
            connection.close_if_unusable_or_obsolete()
            log.warning("a batch of %d step writes failed; each is tried alone", len(batch), exc_info=True)
            for write in batch:
                self._commit_alone(write)
            return
        self.batches, self.writes = self.batches + 1, self.writes + len(batch)
        for write in batch:
            write.done.set_result(None)

    def _commit_alone(self, write: StepWrite) -> None:
        if write.observed is not None:
            write.observed.pk = None  # the failed batch's RETURNING may have set it
        try:
            write_rows([write])
        except Exception as error:
            connection.close_if_unusable_or_obsolete()
            write.done.set_exception(StepWriteFailed(f"the step could not be written: {error}"[:300]))
            return
        self.batches, self.writes = self.batches + 1, self.writes + 1
        write.done.set_result(None)


_lock = threading.Lock()
_active: StepWriter | None = None
_users = 0


@contextmanager
def batched_step_writes():
    """Within it, the automatic lines' step writes of this process go through one StepWriter
    (shared by every user of the process: a host's several runs batch together)."""
    global _active, _users
    with _lock:
        if _active is None:
            _active = StepWriter().start()
        _users += 1
        writer = _active
    try:
        yield writer
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                _active = None
            else:
                writer = None
        if writer is not None:
            writer.stop()


def active_writer() -> StepWriter | None:
    """The process's writer, unless the calling thread is inside a transaction (its writes must be
    part of it) or none is running: then the caller writes itself."""
    writer = _active
    if writer is None or transaction.get_connection().in_atomic_block:
        return None
    return writer
