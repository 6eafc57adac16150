"""Teacher takeover during automatic collection (Xiaomi-GUI-0 §3.4): "a teacher also takes over for
bounded steps after sustained low scores to return execution to a workable path".

The Teacher scores every policy step (flywheel/rules/takeover.py step_score: the policy's own
confidence, whether the Teacher would do the same here, a repeated action, a screen the step before
left unchanged). After K low scores in a row the Teacher acts for at most M steps, while it is sure
enough and never to end the trajectory; each step it acts on is a recovery demonstration
(Step.takeover, its cot and model_io). Only the automatic line: RL rollouts, the benchmark and the
schema-guided line measure or follow the policy alone. The Teacher failing only ends a takeover.
"""
from __future__ import annotations

import logging

from django.db import transaction

from devices.actions import RESOLVED_FIELDS, ActionError, normalize_action
from flywheel.collection import recorder
from flywheel.models import Line, Step, Trajectory
from flywheel.policies import PolicyError
from flywheel.policies.protocol import AGENT_STOPS
from flywheel.policies.teacher import context_from_state, same_choice, teacher_for
from flywheel.rules.repetition import same_action
from flywheel.rules.takeover import MAX_TAKEOVERS, step_score, takeover_continues, takeover_due

log = logging.getLogger(__name__)
TAKEOVER_LINES = (Line.AUTOMATIC,)


class _Given:
    """A policy that answers one proposal already made (so the recorder persists it as usual)."""

    def __init__(self, proposal, name):
        self.proposal, self.name = proposal, name

    def propose(self, state):
        return self.proposal


def _pixels(action: dict | None, screen) -> dict | None:
    if not action:
        return action
    try:
        return normalize_action({k: v for k, v in action.items() if k not in RESOLVED_FIELDS}, *screen)
    except (ActionError, TypeError, ValueError):
        return action


class Takeover:
    """The takeover state of one trajectory on one phone."""

    def __init__(self, teacher, after: int, steps: int, threshold: float):
        self.teacher, self.after, self.steps, self.threshold = teacher, after, steps, threshold
        self.name = getattr(teacher, "name", "teacher")
        self.scores: list[float] = []     # the policy's step scores since the last takeover
        self.left = 0                     # steps the Teacher may still act in this takeover
        self.acted = 0                    # steps it acted in this takeover
        self.takeovers = 0
        self.dumps: list[str] = []        # the executed steps' dumps (the Teacher's prefix check)
        self.last_dump = None
        self.last_action = None

    @property
    def active(self) -> bool:
        return self.left > 0

    def _facts(self) -> dict:
        return {**self.teacher.facts, "history_hierarchies": list(self.dumps)}

    def _flags(self, action, observation) -> dict:
        return {"repeated": bool(self.last_action) and same_action(action, self.last_action),
                "stalled": self.last_dump is not None and observation.hierarchy_xml == self.last_dump}

    def propose(self, step: Step, observation, k: int):
        """The Teacher's proposal for this step, persisted and marked; None: the policy proposes."""
        state = recorder.policy_state(step.trajectory, observation, k=k)
        self.teacher.facts = self._facts()
        try:
            proposal = self.teacher.propose(state)
        except Exception as error:  # TeacherFailed (timeout, garbage) or a broken Teacher
            log.info("trajectory %s: the Teacher failed during a takeover: %s", step.trajectory_id, error)
            return self._end()
        if not takeover_continues(self.acted, self.steps, proposal.confidence,
                                  ends_trajectory=proposal.action.get("action") in AGENT_STOPS):
            return self._end()
        try:
            proposal = recorder.propose(step, observation, _Given(proposal, self.name), k=k)
        except PolicyError:
            return self._end()
        screen = (observation.width, observation.height)
        step.takeover = True
        step.score = step_score(proposal.confidence, True, proposal.confidence,
                                **self._flags(_pixels(proposal.action, screen), observation))
        mark_takeover(step)
        self.acted += 1
        self.left -= 1
        if not self.left:
            self._end()
        return proposal

    def score(self, step: Step, observation, proposal) -> float:
        """Score the policy's step; after K low scores in a row the Teacher takes the next steps."""
        screen = (observation.width, observation.height)
        action = _pixels(proposal.action, screen)
        agrees, sure = None, None
        try:
            state = recorder.policy_state(step.trajectory, observation, k=1)
            opinion = self.teacher.suggest(context_from_state(state, self._facts()))
            agrees, sure = same_choice(action, _pixels(opinion.action, screen), observation.hierarchy_xml), opinion.confidence
        except Exception as error:  # no opinion: the score rests on the policy's own signs
            log.info("trajectory %s: no Teacher opinion at step %s: %s", step.trajectory_id, step.index, error)
        step.score = step_score(proposal.confidence, agrees, sure, **self._flags(action, observation))
        step.save(update_fields=["score"])
        self.scores.append(step.score)
        if self.takeovers < MAX_TAKEOVERS and takeover_due(self.scores, self.after, self.threshold):
            self.takeovers += 1
            self.left, self.acted, self.scores = self.steps, 0, []
        return step.score

    def executed(self, observation, action: dict) -> None:
        self.dumps.append(observation.hierarchy_xml)
        self.last_dump = observation.hierarchy_xml
        self.last_action = _pixels(action, (observation.width, observation.height))

    def _end(self):
        self.left, self.acted, self.scores = 0, 0, []
        return None


def mark_takeover(step: Step) -> None:
    """The step the Teacher acted on and its trajectory's mark, in one transaction: a trajectory the
    Teacher took over is never counted as the policy's own success (Trajectory.teacher_assisted)."""
    with transaction.atomic():
        step.save(update_fields=["takeover", "score"])
        Trajectory.objects.filter(pk=step.trajectory_id).update(teacher_assisted=True)
    step.trajectory.teacher_assisted = True


def takeover_for(trajectory, config) -> Takeover | None:
    """The trajectory's takeover, or None: another line, or takeover off (K = 0)."""
    after = int(getattr(config, "teacher_takeover_after", 0) or 0)
    if trajectory.line not in TAKEOVER_LINES or after <= 0:
        return None
    try:
        teacher = teacher_for().for_query(trajectory.query)
    except Exception as error:  # no Teacher: collection goes on without takeover
        log.warning("trajectory %s: no Teacher for takeover: %s", trajectory.pk, error)
        return None
    return Takeover(teacher, after, max(1, int(config.teacher_takeover_steps)),
                    float(config.teacher_takeover_threshold))
