"""The RL update's data from an RL collection run: rewards, groups, advantages, rollouts.jsonl.

For each query of the run (flywheel Line.RL), its G rollouts form a group; a rollout re-collected
after Env_ERROR counts by its re-collection (as flywheel/pools/rl.py group_verdicts counts it), and
only rollouts with a True/False verdict are scored (Env_ERROR measures the phone, an Undetermined
one waits for a person). Each rollout is judged (training/step_judge.py: eq. 3 and eq. 4, majority
over passes); a group without a success borrows earlier successes of the same query up to a cap,
a group outside the useful success range is dropped (§3.3.3, training/rules/groups.py); advantages
are eq. 5 (grpo) or GiGPO's anchor-state ones (gigpo). The step rewards come from the run's
"step_reward_source": eq. 4's majority (default), Xiaomi-GUI-0's cascade reward or a trained step reward
model (training/step_judge.py); every row names it. One row per policy step (a turn) goes to
rollouts.jsonl in the protocol's chat format, built by the same code as the SFT exports
(training/exports/chat.py build_sample): system prompt, goal alone, the full text history, the last
K screenshots as images/<sha256>.png. A step whose server returned token log-probabilities carries
them ("sampled": temperature, top_p, top_k, tokens, logprobs) for the trainer's π_old check. A row
keeps its trajectory id and turn index and carries its trajectory's own advantage (eq. 5's first term,
the group-normalised R) beside its step's, so that a trainer batching by turn (Xiaomi-GUI-0 §4.4)
can check that every turn of a trajectory inherited the same one.

Read-only over the database: the pools already took every rollout back when the run's groups were
metabolised (flywheel/pools/rl.py); nothing here writes a row.
"""
from __future__ import annotations

import copy
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from django.db.models import Case, Q, Value, When

from flywheel.collection.engine import CollectionConfig
from flywheel.models import Line, Outcome, Trajectory
from flywheel.policies.protocol import DEFAULT_K
from training.exports.chat import FrameCache, SkippedSample, build_sample
from training.policy_outputs import raw_output
from training.rules.advantages import ADVANTAGES, group_advantages, normalized
from training.rules.groups import fallback_successes, success_rate, useful_group
from training.rules.rewards import ALPHA, CASCADE, DEFAULT_PASSES, MAJORITY
from training.step_judge import (
    USE_CONFIGURED,
    check_step_reward_source,
    judge_trajectory,
    query_conditions,
    resolve_judge,
)

ROLLOUTS_FILE = "rollouts.jsonl"
SCORED = (Outcome.TRUE, Outcome.FALSE)
FINISHED = (Trajectory.Status.COMPLETED, Trajectory.Status.INTERRUPTED)


@dataclass
class Group:
    query: int
    goal: str
    members: list = field(default_factory=list)     # [Judgement], the group as trained on (kept groups)
    borrowed: set = field(default_factory=set)      # trajectory ids taken from earlier runs
    advantages: list = field(default_factory=list)  # per member, per sample
    trajectory_advantages: list = field(default_factory=list)  # per member: eq. 5's first term
    dropped: str = ""                               # why the group is not used, "" when kept


def run_rollouts(run) -> dict[int, list[Trajectory]]:
    """{query id: the run's rollouts of it}, each Env_ERROR rollout replaced by its re-collection."""
    trajectories = list(Trajectory.objects.filter(run=run).select_related("query").order_by("pk"))
    replaced = {t.recollection_of_id for t in trajectories if t.recollection_of_id}
    groups: dict[int, list[Trajectory]] = {}
    for trajectory in trajectories:
        if trajectory.pk not in replaced:
            groups.setdefault(trajectory.query_id, []).append(trajectory)
    return dict(sorted(groups.items()))


def has_policy_step(trajectory) -> bool:
    return trajectory.steps.filter(Q(executed_action__isnull=False) | Q(audit__blocked=True, proposed_action__isnull=False)).exists()


def earlier_successes(run, query_id: int):
    """§3.3.3: "when sampling fails we fall back on earlier successful trajectories of the same task" —
    verified successes of the query from runs before this one: the RL line's first (the goal alone, as
    here), then any other line's (a schema-guided or repaired success is a demonstration of the task),
    never the benchmark's; the most recent run first."""
    return (Trajectory.objects.filter(query_id=query_id, verdict=Outcome.TRUE, status__in=FINISHED,
                                      run__created_at__lt=run.created_at).exclude(line=Line.BENCHMARK)
            .select_related("query")
            .order_by(Case(When(line=Line.RL, then=Value(0)), default=Value(1)), "-run__created_at", "-pk"))


def scored_rollouts(rollouts: list[Trajectory], left_out: Counter) -> list[Trajectory]:
    """The rollouts a group is made of: a True/False verdict, finished, with a policy step."""
    scored = []
    for trajectory in rollouts:
        if trajectory.verdict not in SCORED:
            left_out[f"verdict {trajectory.verdict}"] += 1
        elif trajectory.status not in FINISHED:
            left_out[f"status {trajectory.status}"] += 1
        elif not has_policy_step(trajectory):
            left_out["no policy step"] += 1
        else:
            scored.append(trajectory)
    return scored


def judged_groups(run, lam: float = 1.0, advantage: str = "grpo", passes: int = DEFAULT_PASSES,
                  useful: tuple[float, float] = (0.0, 1.0), fallback_cap: int = 1, alpha: float = ALPHA,
                  gamma: float = 0.95, judge=USE_CONFIGURED,
                  step_reward_source: str = MAJORITY, reward_model=None) -> tuple[list[Group], Counter]:
    """Every group of the run filtered, judged and given advantages; and what was left out, and why.

    Usefulness is read from the verdicts before any judging, so a dropped group costs no judge call.
    """
    if run.line != Line.RL:
        raise ValueError(f"{run} is not an RL run (line {run.line!r})")
    if advantage not in ADVANTAGES:
        raise ValueError(f"unknown advantage {advantage!r}: one of {', '.join(ADVANTAGES)}")
    check_step_reward_source(step_reward_source, reward_model)
    low, high = useful
    version = resolve_judge(judge)
    left_out: Counter = Counter()
    groups = []
    for query_id, rollouts in run_rollouts(run).items():
        query = rollouts[0].query
        group = Group(query=query_id, goal=query.text)
        members = scored_rollouts(rollouts, left_out)
        if members and fallback_cap > 0 and not any(t.verdict == Outcome.TRUE for t in members):
            spare = [t for t in earlier_successes(run, query_id)[:fallback_cap * 3] if has_policy_step(t)]
            members = fallback_successes(members, spare, fallback_cap, succeeded=lambda t: t.verdict == Outcome.TRUE)
            group.borrowed = {t.pk for t in members} - {t.pk for t in rollouts}
        group.dropped = _why_dropped([t.verdict == Outcome.TRUE for t in members], low, high)
        if not group.dropped:
            conditions = query_conditions(query, version)
            group.members = [judge_trajectory(t, passes=passes, judge=version, alpha=alpha, conditions=conditions,
                                              step_reward_source=step_reward_source, reward_model=reward_model)
                             for t in members]
            group.advantages = group_advantages(
                advantage, [j.reward for j in group.members], [j.step_rewards for j in group.members],
                anchors=[j.anchors for j in group.members], lam=lam, gamma=gamma)
            # the episode term both advantages share (eq. 5's first, GiGPO's A^E): what each turn inherits
            group.trajectory_advantages = normalized([j.reward for j in group.members])
        groups.append(group)
    return groups, left_out


def _why_dropped(successes: list[bool], low: float, high: float) -> str:
    if useful_group(successes, low, high):
        return ""
    if not successes:
        return "no scored rollout"
    p = success_rate(successes)
    if p == 1.0:
        return "every rollout succeeded"
    if p == 0.0:
        return "every rollout failed (no earlier success to fall back on)"
    return f"success rate {p:.3g} outside [{low:g}, {high:g}]"


def screenshot_window(run, k: int | None) -> int:
    """K as the rollouts were collected: the run's screenshots_k, the policy's k_screenshots if smaller."""
    if k is not None:
        return k
    k = CollectionConfig.from_dict(run.config).screenshots_k or DEFAULT_K
    sampling = (run.model_version.sampling or {}) if run.model_version_id else {}
    return min(k, int(sampling.get("k_screenshots", k)))


def group_samples(group: Group, k: int, frames: FrameCache):
    """(member number, judged position, sample record, images) for each sample of a kept group; a
    sample whose screenshot is missing or corrupt is yielded as a SkippedSample in place of the record."""
    for number, member in enumerate(group.members):
        executed = []
        for t, step in enumerate(member.samples):
            attempted = step
            if step.executed_action is None:  # blocked or failed: the proposal is what the policy emitted
                attempted = copy.copy(step)
                # output that did not parse (cascade): built around a stand-in action, then its raw text
                attempted.executed_action = step.proposed_action or UNPARSED_STAND_IN
            try:
                sample = build_sample(group.goal, executed, attempted, k, frames, meta={})
                if step.executed_action is None and step.proposed_action is None:
                    sample.record["messages"][2]["content"] = raw_output(step)
                yield number, t, sample.record, sample.images
            except SkippedSample as problem:
                yield number, t, problem, {}
            if step.executed_action is not None:
                executed.append(step)


UNPARSED_STAND_IN = {"action": "wait"}


def _write_images(images: dict, out_dir: Path) -> None:
    for relative, data in images.items():
        target = out_dir / relative
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def _rows(groups: list[Group], k: int, out_dir: Path, stats: Counter) -> list[dict]:
    """The kept groups' samples as rollouts.jsonl rows (contract fields, then extras)."""
    frames, rows = FrameCache(), []
    for group in groups:
        if group.dropped:
            continue
        written = []
        for number, t, record, images in group_samples(group, k, frames):
            if isinstance(record, SkippedSample):
                stats["skipped samples"] += 1
                continue
            _write_images(images, out_dir)
            member = group.members[number]
            written.append({
                "messages": record["messages"][:2], "images": record["images"],
                "response": record["messages"][2]["content"],
                "advantage": group.advantages[number][t], "group": group.query, "trajectory": member.trajectory,
                "step": member.samples[t].index, "steps_in_trajectory": 0, "group_size": 0,
                "reward": member.reward, "step_reward": member.step_rewards[t], "turn": t,
                "anchor": member.anchors[t], "success": member.success,
                "fallback": member.trajectory in group.borrowed,
                "trajectory_advantage": group.trajectory_advantages[number],
                "step_reward_source": member.step_reward_source,
            })
            if member.step_reward_source == CASCADE:   # which level the step failed first ("" passed)
                written[-1]["failed_level"] = member.failed_levels[t]
            if (member.samples[t].sampled or {}).get("logprobs"):
                # The policy's own tokens and log-probs as it sampled: the trainer checks its π_old against them.
                written[-1]["sampled"] = member.samples[t].sampled
        per_trajectory = Counter(row["trajectory"] for row in written)
        for row in written:  # T_i and G as written: eq. 6's 1/T_i and 1/G over the rows the trainer gets
            row["steps_in_trajectory"], row["group_size"] = per_trajectory[row["trajectory"]], len(per_trajectory)
        rows += written
    return rows


def summary(groups: list[Group], left_out: Counter, rows: list[dict], stats: Counter, advantage: str,
            passes: int, step_reward_source: str = MAJORITY) -> dict:
    kept = [g for g in groups if not g.dropped]
    rewards = [j.reward for g in kept for j in g.members]
    judges = sorted({j.judge for g in groups for j in g.members if j.judge})
    return {
        "groups": len(groups), "groups_kept": len(kept), "groups_dropped": len(groups) - len(kept),
        "dropped": {str(g.query): g.dropped for g in groups if g.dropped},
        "dropped_reasons": dict(Counter(g.dropped for g in groups if g.dropped)),
        "rollouts_left_out": dict(left_out), "trajectories": len(rewards),
        "fallback_trajectories": sum(len(g.borrowed) for g in kept),
        "rows": len(rows), "skipped_samples": stats["skipped samples"],
        "mean_reward": round(math.fsum(rewards) / len(rewards), 6) if rewards else None,
        "advantage": advantage, "passes": passes, "judge": ", ".join(judges) or "rules",
        "step_reward_source": step_reward_source,
        **({"cascade_failures": dict(Counter(row["failed_level"] for row in rows if row["failed_level"]))}
           if step_reward_source == CASCADE else {}),
    }


def rollout_rows(run, out_dir, lam: float = 1.0, advantage: str = "grpo", passes: int = DEFAULT_PASSES,
                 useful: tuple[float, float] = (0.0, 1.0), fallback_cap: int = 1, alpha: float = ALPHA,
                 gamma: float = 0.95, k: int | None = None, judge=USE_CONFIGURED,
                 step_reward_source: str = MAJORITY, reward_model=None) -> tuple[list[dict], dict]:
    """The rollouts.jsonl rows of an RL run (their screenshots written to out_dir/images/) and the stats."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    groups, left_out = judged_groups(run, lam=lam, advantage=advantage, passes=passes, useful=useful,
                                     fallback_cap=fallback_cap, alpha=alpha, gamma=gamma, judge=judge,
                                     step_reward_source=step_reward_source, reward_model=reward_model)
    stats: Counter = Counter()
    rows = _rows(groups, screenshot_window(run, k), out_dir, stats)
    result = summary(groups, left_out, rows, stats, advantage, passes, step_reward_source)
    if reward_model is not None:
        result["step_reward_model"] = reward_model.name
    return rows, result


def _write_jsonl(rows: list[dict], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def build_rollouts(run, out_dir, lam: float = 1.0, advantage: str = "grpo", passes: int = DEFAULT_PASSES,
                   useful: tuple[float, float] = (0.0, 1.0), fallback_cap: int = 1, alpha: float = ALPHA,
                   gamma: float = 0.95, k: int | None = None, judge=USE_CONFIGURED,
                   step_reward_source: str = MAJORITY, reward_model=None) -> dict:
    """Write out_dir/rollouts.jsonl (and images/) for an RL run; the stats of what went in and why.

    lam: λ of eq. 5 (ω for gigpo); advantage: "grpo" | "gigpo"; passes: judge passes per rollout;
    useful: the success-rate range [low, high] a group must lie in; fallback_cap: at most this many
    earlier successes replace failures of a group without one; alpha: eq. 3's α; gamma: GiGPO's
    discount; k: screenshots per prompt (default: as collected); judge: an endpoint ModelVersion,
    None for the rules alone, default the configured judge; step_reward_source: "majority" (eq. 4),
    "cascade" (Xiaomi-GUI-0 §4.3) or "reward_model" (ClawGUI §3.2: `reward_model`, a trained step
    reward model version, rates each step).
    """
    rows, stats = rollout_rows(run, out_dir, lam=lam, advantage=advantage, passes=passes, useful=useful,
                               fallback_cap=fallback_cap, alpha=alpha, gamma=gamma, k=k, judge=judge,
                               step_reward_source=step_reward_source, reward_model=reward_model)
    _write_jsonl(rows, Path(out_dir) / ROLLOUTS_FILE)
    return stats


def verl_row(row: dict) -> dict:
    """One rollouts.jsonl row as a verl per-step row.

    Field names follow verl's agent loop (volcengine/verl verl/experimental/agent_loop/agent_loop.py:
    AgentLoopOutput.reward_score, num_turns, extra_fields; the RLHFDataset row's data_source, prompt,
    images) and verl-agent's per-step batch (gigpo/core_gigpo.py and its trainer: uid = the episode
    group, traj_uid = the trajectory, rewards = the step reward, episode_rewards, episode_lengths,
    anchor_obs, active_masks). Prompts travel as chat messages: tokenising is the trainer's job.
    """
    return {
        "data_source": "flywheel/rl", "ability": "gui_agent",
        "prompt": row["messages"], "images": [{"image": path} for path in row["images"]],
        "response": row["response"],
        "uid": str(row["group"]), "traj_uid": str(row["trajectory"]), "step": row["turn"],
        "step_index": row["step"], "rewards": float(row["step_reward"]),
        "episode_rewards": float(row["reward"]), "episode_lengths": row["steps_in_trajectory"],
        "reward_score": float(row["reward"]), "num_turns": 2, "is_success": row["success"],
        "anchor_obs": row["anchor"], "active_masks": True,
        "extra_fields": {"advantage": float(row["advantage"]), "group_size": row["group_size"],
                         "fallback": row["fallback"], "step_reward_source": row.get("step_reward_source", MAJORITY),
                         # verl's name for the sampler's per-token log-probs of the response
                         "rollout_log_probs": (row.get("sampled") or {}).get("logprobs"),
                         "sampling_temperature": (row.get("sampled") or {}).get("temperature")},
    }


def export_verl_agent_loop(run, path, **options) -> dict:
    """The run's rollouts and rewards as verl per-step rows at `path` (.parquet, else JSON lines);
    the screenshots beside it in images/. `options` are build_rollouts' (lam, advantage, passes, ...)."""
    path = Path(path)
    rollouts, stats = rollout_rows(run, path.parent, **options)
    rows = [verl_row(row) for row in rollouts]
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), str(path))
    else:
        _write_jsonl(rows, path)
    return {**stats, "verl_rows": len(rows), "path": str(path)}
