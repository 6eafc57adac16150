"""The compact head's negative examples: success claims the judges rejected (issue #34, "stopping is learned").

    arrays, stats = false_claim_arrays()      # neg_x, neg_offsets, neg_target for the torch trainer

The SFT pool says what to do on a screen; it never says when *not* to stop. Every judged trajectory
the agent ended with terminate(success) and the judges call a failure is one such fact: on that
screen, after that history, the task was not done (training/rules/process_reward.py labels that
step −1: FALSE_CLAIM, or FIRST_ERROR where the ECDM's attribution located the error at the claim
itself, as it mostly does). Each becomes a row set like an SFT step's — the screen's candidates,
featurised with the policy's own compact_features — with the terminate candidate as the action the
head should not rank first; training/trainer/compact.py lowers its probability (unlikelihood).

The trajectories are those the step reward model reads (training/reward_data.judged_trajectories:
never a benchmark rollout, never a held-out query's, never an ECDM replay), so evaluation tasks stay
unseen. The ablations read them as the SFT snapshot does: without counterfactual-derived queries,
or with one judge's vote deciding the outcome (training/single_judge.py).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from flywheel.models import VoteValue
from flywheel.models.trajectories import GUIDED_LINES
from flywheel.policies.compact_features import SCALARS, featurize, target_index
from flywheel.rules.stops import StopKind
from training import reward_data
from training.rules import process_reward as rules
from training.single_judge import SYSTEMS, latest_vote

DEFAULT_LIMIT = 3000    # the newest claims one training reads (about 60 ms each to featurise, unseen screens)


def claimed_trajectories(counterfactual_queries: bool = True, success_judge: str | None = None):
    """The judged trajectories the agent ended claiming success, newest first."""
    trajectories = reward_data.judged_trajectories().filter(stop_kind=StopKind.SUCCESS)
    if not counterfactual_queries:
        trajectories = trajectories.filter(query__failure_class__isnull=True)
    if success_judge:
        if success_judge not in SYSTEMS:
            raise ValueError(f"success_judge must be one of {', '.join(SYSTEMS)}, not {success_judge!r}")
        trajectories = (trajectories.filter(verdicts__isnull=False).distinct()
                        .annotate(judge_vote=latest_vote(success_judge)))
    return trajectories


def judged_as(facts: rules.JudgedTrajectory, trajectory, success_judge: str | None) -> rules.JudgedTrajectory:
    """The facts with the outcome one judge's latest vote gives (the single-judge ablation), else as judged."""
    if not success_judge:
        return facts
    vote = getattr(trajectory, "judge_vote", None)
    outcome = {VoteValue.TRUE: rules.Outcome.VERIFIED_SUCCESS,
               VoteValue.FALSE: rules.Outcome.FAILURE}.get(vote, rules.Outcome.UNDECIDED)
    return dataclasses.replace(facts, outcome=outcome)


def false_claim_arrays(counterfactual_queries: bool = True, success_judge: str | None = None,
                       limit: int = DEFAULT_LIMIT) -> tuple[dict, dict]:
    """({neg_x, neg_offsets, neg_target}, stats): one row set per rejected success claim, its
    terminate candidate the target to push down."""
    blocks, offsets, targets = [], [0], []
    stats = {"claims_read": 0, "false_claims": 0, "skipped": 0}
    offered = {}   # the apps (and labels) offered, read once per query (guided lines) or phone, as the export does
    for trajectory in claimed_trajectories(counterfactual_queries, success_judge)[:limit].iterator(chunk_size=200):
        stats["claims_read"] += 1
        steps = list(trajectory.steps.all())
        facts = judged_as(reward_data.judged_facts(trajectory, steps), trajectory, success_judge)
        # The claim is the last step; the judgements call it wrong as a false claim or, where the ECDM's
        # attribution located the first error at the claim itself, as that first error.
        last = facts.steps[-1].index if facts.steps else None
        label = rules.judged_step_labels(facts).get(last)
        if label is None or label.label != rules.WRONG:
            continue
        step = reward_data.step_inputs(trajectory, steps, wanted={last}).get(last)
        if step is None or not step.before:
            stats["skipped"] += 1
            continue
        # The apps the policy was offered (the phone's on a goal-only line), as the SFT export gives them.
        key = (trajectory.query_id,) if trajectory.line in GUIDED_LINES else ("phone", trajectory.device_id)
        if key not in offered:
            offered[key] = (trajectory.policy_apps, trajectory.policy_app_labels)
        apps, labels = offered[key]
        found, features = featurize(step.goal, step.history, step.before, step.screen, apps, step.package,
                                    app_labels=labels)
        index = target_index(found, step.action, step.screen)
        if index is None:
            stats["skipped"] += 1
            continue
        blocks.append(features)
        offsets.append(offsets[-1] + len(found))
        targets.append(index)
    stats["false_claims"] = len(targets)
    x = np.concatenate(blocks) if blocks else np.zeros((0, SCALARS), np.float32)
    return {"neg_x": x, "neg_offsets": np.array(offsets, np.int64), "neg_target": np.array(targets, np.int64)}, stats

