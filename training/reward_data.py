"""The step reward model's data: the judged steps the database holds, as labels and feature rows.

    dataset = build_dataset()                      # every labelled step of the judged trajectories
    held_out = split_by_query(query_ids, 0.2, seed) # the queries (tasks) whose trajectories are held out

A trajectory's judged facts (judged_facts) are read from what the judges and people already
recorded: its verdict and a person's adjudication, the newest System B vote (the screen where each
milestone first held; the last step executed before that screen made it hold, as training/step_judge.py
binds them), the newest attribution (Level 3: the first error step the ECDM repairs from) and the
steps the safety audit blocked. training/rules/process_reward.py turns them into labels.

Left out: the ECDM's and the hand-back samples (made, never judged), benchmark rollouts and every
trajectory of a held-out query (evaluation uses what no training draws), and unfinished ones.
"""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Prefetch

from flywheel.models import Adjudication, Attribution, Line, Outcome, Step, Trajectory, Vote
from flywheel.policies.protocol import history_text
from flywheel.repair.screens import stored_hierarchy
from flywheel.rules.stops import StopKind
from training.exports.chat import history_entry
from training.reward_features import FEATURES, StepInput, in_thousandths, recorded_size, screen_size, step_features
from training.rules import process_reward as rules

log = logging.getLogger(__name__)

NOT_JUDGED_LINES = (Line.ECDM, Line.HANDBACK, Line.BENCHMARK)
UNFINISHED = (Trajectory.Status.RUNNING, Trajectory.Status.PAUSED)
DEFAULT_LIMIT = 20000          # the newest trajectories one training looks at
# The labelled steps one training featurises at most (about 60 ms a screen the embedding cache has
# not seen, measured on this machine's dumps): minutes at worst, inside a task's time limit.
DEFAULT_MAX_STEPS = 5000
DEFAULT_HELD_OUT_SHARE = 0.2


def is_blocked(step: Step) -> bool:
    return step.executed_action is None and bool((step.audit or {}).get("blocked")) and bool(step.proposed_action)


def step_action(step: Step) -> dict | None:
    """What the policy emitted at the step: the executed action, or the proposal the audit blocked."""
    if step.executed_action is not None:
        return step.executed_action
    return step.proposed_action if is_blocked(step) else None


def judged_trajectories():
    """The trajectories whose steps may be labelled, newest first, with what judged_facts reads."""
    return (Trajectory.objects.exclude(line__in=NOT_JUDGED_LINES).exclude(status__in=UNFINISHED)
            .exclude(query__evaluation_only=True).exclude(destination="benchmark")
            .select_related("query").order_by("-pk")
            .prefetch_related(Prefetch("steps", queryset=Step.objects.order_by("index")),
                              Prefetch("votes", queryset=Vote.objects.filter(system=Vote.System.B)
                                       .order_by("-created_at", "-pk"), to_attr="b_votes"),
                              Prefetch("attributions", queryset=Attribution.objects.order_by("-created_at", "-pk"),
                                       to_attr="newest_attributions"),
                              Prefetch("adjudications", queryset=Adjudication.objects.exclude(decision="")
                                       .order_by("-decided_at", "-pk"), to_attr="decided"),
                              "query__app_links__app"))


def _prefetched(trajectory, name: str, queryset):
    return getattr(trajectory, name) if hasattr(trajectory, name) else list(queryset)


def milestone_steps(steps: Sequence[Step], vote: Vote | None) -> frozenset[int]:
    """The Step.index of each step that made one of the vote's milestones first hold: the last
    executed step before the screen (System B's screen index) where it first held."""
    made = set()
    for reached in ((vote.details or {}).get("reached") or []) if vote is not None else []:
        at = reached.get("at") if isinstance(reached, dict) else None
        if not isinstance(at, int) or at <= 0:
            continue   # never held, or held on the first screen already: no step made it hold
        before = [s for s in steps[:at] if s.executed_action is not None]
        if before:
            made.add(before[-1].index)
    return frozenset(made)


def judged_facts(trajectory: Trajectory, steps: Sequence[Step]) -> rules.JudgedTrajectory:
    """The trajectory's judged facts (training/rules/process_reward.py reads them)."""
    decided = _prefetched(trajectory, "decided", trajectory.adjudications.exclude(decision="")
                          .order_by("-decided_at", "-pk"))
    b_votes = _prefetched(trajectory, "b_votes", trajectory.votes.filter(system=Vote.System.B)
                          .order_by("-created_at", "-pk"))
    attributions = _prefetched(trajectory, "newest_attributions", trajectory.attributions.order_by("-created_at", "-pk"))
    if trajectory.verdict == Outcome.TRUE:
        adjudicated = bool(decided) and decided[0].decision == Adjudication.Decision.CORRECT
        outcome = rules.Outcome.ADJUDICATED_SUCCESS if adjudicated else rules.Outcome.VERIFIED_SUCCESS
    else:
        outcome = {Outcome.FALSE: rules.Outcome.FAILURE,
                   Outcome.ENV_ERROR: rules.Outcome.ENVIRONMENT}.get(trajectory.verdict, rules.Outcome.UNDECIDED)
    newest = attributions[0] if attributions else None
    first_error = newest.first_bad_step if newest is not None and newest.level == 3 else None
    judged = tuple(rules.JudgedStep(index=s.index, masked=s.label_masked, blocked=is_blocked(s))
                   for s in steps if step_action(s) is not None)
    return rules.JudgedTrajectory(steps=judged, outcome=outcome,
                                  milestone_steps=milestone_steps(steps, b_votes[0] if b_votes else None),
                                  first_error_step=first_error,
                                  claimed_success=trajectory.stop_kind == StopKind.SUCCESS)


def step_inputs(trajectory: Trajectory, steps: Sequence[Step], wanted: set[int] | None = None) -> dict[int, StepInput]:
    """{Step.index: StepInput} of the trajectory's policy steps (those in `wanted` when given): the
    screen before and after, the history of the executed steps before it, the action in thousandths."""
    query = trajectory.query
    apps = tuple(link.app.package for link in query.app_links.all())
    dumps = {}

    def dump(step):
        if step.pk not in dumps:
            dumps[step.pk] = stored_hierarchy(step)
        return dumps[step.pk]

    def screen_of(step):   # the recorded size; the dump is read only when none was recorded
        return recorded_size((step.timings or {}).get("screen")) or screen_size(None, dump(step))

    inputs, history, previous, number = {}, [], None, 0
    for i, step in enumerate(steps):
        action = step_action(step)
        if action is not None:
            if wanted is None or step.index in wanted:
                before, screen = dump(step), screen_of(step)
                following = steps[i + 1] if i + 1 < len(steps) else None
                inputs[step.index] = StepInput(
                    goal=query.text, history=history_text(history), before=before,
                    after=dump(following) if following is not None else None, screen=screen, apps=apps,
                    package=step.foreground_package, next_package=following.foreground_package if following else "",
                    action=in_thousandths(action, screen), previous_action=previous, blocked=is_blocked(step),
                    position=number)
            number += 1
        if step.executed_action is not None:
            history.append(history_entry(step))
            previous = in_thousandths(step.executed_action, screen_of(step))
    return inputs


@dataclass
class Dataset:
    x: np.ndarray                  # [steps, FEATURES]
    label: np.ndarray              # ±1
    trajectory: np.ndarray         # the trajectory id of each row
    query: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # the query (task) of each row
    source: list = field(default_factory=list)   # LabelSource value of each row
    stats: dict = field(default_factory=dict)


def build_dataset(limit: int = DEFAULT_LIMIT, max_steps: int = DEFAULT_MAX_STEPS,
                  progress: Callable[[int, int], None] | None = None) -> Dataset:
    """Every labelled step of the newest `limit` judged trajectories, featurised, newest first until
    `max_steps` are (a trajectory's steps are never cut). `progress(done, total)` is called as
    trajectories are read."""
    started = time.perf_counter()
    rows, labels, owners, tasks, sources = [], [], [], [], []
    considered = labelled = 0
    total = min(limit, judged_trajectories().count())
    truncated = False
    for trajectory in judged_trajectories()[:limit].iterator(chunk_size=200):
        if len(labels) >= max_steps:
            truncated = True
            break
        considered += 1
        steps = list(trajectory.steps.all())
        found = rules.judged_step_labels(judged_facts(trajectory, steps))
        if found:
            labelled += 1
            inputs = step_inputs(trajectory, steps, wanted=set(found))
            for index, step_label in sorted(found.items()):
                rows.append(step_features(inputs[index]))
                labels.append(step_label.label)
                owners.append(trajectory.pk)
                tasks.append(trajectory.query_id)
                sources.append(step_label.source.value)
        if progress is not None and (considered % 25 == 0 or considered == total):
            progress(considered, total)
    x = np.stack(rows) if rows else np.zeros((0, FEATURES), np.float32)
    stats = {"trajectories_considered": considered, "trajectories_labelled": labelled, "truncated": truncated,
             "sources": rules.source_counts(rules.StepLabel(label, rules.LabelSource(source))
                                            for label, source in zip(labels, sources)),
             "featurise_seconds": round(time.perf_counter() - started, 2)}
    return Dataset(x=x.astype(np.float32), label=np.array(labels, np.int64), trajectory=np.array(owners, np.int64),
                   query=np.array(tasks, np.int64), source=sources, stats=stats)


def split_by_query(query_ids: Sequence[int], share: float = DEFAULT_HELD_OUT_SHARE, seed: int = 0) -> set[int]:
    """The queries (tasks) held out: a seeded `share` of them (at least one, never all, when there are
    two or more). Every trajectory of a held-out query is held out, so the held-out accuracy is on tasks
    the model never trained on (rollouts of one task are near copies of each other)."""
    if not 0.0 < share < 1.0:
        raise ValueError(f"the held-out share lies strictly between 0 and 1, not {share!r}")
    ids = sorted({int(i) for i in query_ids})
    if len(ids) < 2:
        return set()
    random.Random(seed).shuffle(ids)
    count = min(len(ids) - 1, max(1, round(share * len(ids))))
    return set(ids[:count])
