"""Rewards of one finished RL rollout (report §3.3.2 eqs. 3–4, judged as §5.3.5 asks).

The atomic, frame-bound conditions are the query's verification milestones (System B's rules,
flywheel/judging/system_b.py): N_nec = the number of milestones, N_done = those reached in
order (each after the previous one reached), each bound to the frame where it first held; the
step whose action produced that frame made it hold. A query without milestones has them derived by
the LLM judge when one is configured (as System B does); with no judge either, the HTSC verdict is
the only condition (N_nec = 1, N_done = 1 when True).

The HTSC verdict bounds progress: a True trajectory reached every necessary sub-goal (N_done =
N_nec, e.g. a calibrated shortcut past an intermediate page), a False one did not (N_done ≤ N_nec −
1, e.g. every milestone seen but the terminal check failed or the safety audit vetoed it).

Step rewards (eq. 4) come from several judge passes (default 5) and their majority. With an LLM
judge (flywheel/judging/llm_judge.py judge_model_version()) each pass asks it to rate every step,
sampled with the judge's temperature and a per-pass seed; the frame-bound facts override its
ratings (training/rules/rewards.py step_reward). Each pass sees the frame after each rated step
(the latest RATED_FRAMES) as image parts; a frame the store lost leaves every pass to the rules,
and a pass that rates blank frames the same way is discarded (the judge did not look). Without a judge every pass is the deterministic
rule, so the passes agree; they still go through the same majority. Reads only: nothing is written.

The step rewards' source (the run config's "step_reward_source"): "majority" is the above; "cascade"
is Xiaomi-GUI-0 §4.3's cascade reward (training/rules/rewards.py cascade_reward) over the same facts
reduced to levels — parse, execution, rules, judge — with the judge asked only about the steps whose
rules passed, and the same majority over passes. The cascade also rewards what the policy answered but
never ran: a last step whose output did not parse (the trajectory stopped on POLICY_ERROR; its raw
text is what is trained on) or whose action the executor could not carry out (ACTION_FAILED). Eq. 3's
T counts the policy's actions either way, so the trajectory reward does not depend on the source.
"reward_model" (ClawGUI §3.2's process reward): a trained step reward model version
(training/reward_model.py) rates each policy step +1 / 0 / −1 from its probability band.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from devices.uitree import all_nodes, parse_hierarchy
from flywheel.endpoints.chat import JudgeUnavailable, ask_json
from flywheel.endpoints.frames import Frame, FrameMissing, answers_without_looking, load_frames
from flywheel.judging.llm_judge import derive_milestones, history_text, judge_model_version
from flywheel.judging.pipeline import trajectory_view
from flywheel.judging.system_b import milestone_progress
from flywheel.policies.protocol import AGENT_STOPS
from flywheel.rules.repetition import same_action
from training.policy_outputs import ended_on_output
from training.reward_model import reward_model_step_rewards
from training.rules.rewards import (
    ALPHA,
    CASCADE,
    CASCADE_FAILURE,
    DEFAULT_PASSES,
    JUDGE,
    MAJORITY,
    REWARD_MODEL,
    STEP_REWARD_SOURCES,
    StepFacts,
    atomic_conditions_hold,
    cascade_failure,
    cascade_levels,
    cascade_reward,
    judge_asked,
    majority_cascade_rewards,
    majority_step_rewards,
    step_reward,
    trajectory_reward,
)

USE_CONFIGURED = object()   # judge=...: the configured LLM judge (None: none at all)
NEUTRAL_PACKAGES = ("com.android.systemui", "com.android.permissioncontroller",
                    "com.google.android.permissioncontroller", "com.android.packageinstaller", "android")
JUDGE_TEMPERATURE = 0.7     # a judge version's sampling.temperature overrides it


@dataclass
class Judgement:
    """What the judge decided about one trajectory; the lists run over its samples (the steps where
    the policy emitted an action: executed, or blocked by the audit), in order."""

    trajectory: int
    success: bool                    # the HTSC verdict is True
    n_nec: int
    n_done: int
    reward: float                    # eq. 3
    samples: list = field(default_factory=list)        # the Step rows (blocked ones carry the proposal)
    step_rewards: list = field(default_factory=list)   # eq. 4, the majority over the passes
    anchors: list = field(default_factory=list)        # anchor state of each sample (GiGPO)
    conditions: list = field(default_factory=list)     # [{"name", "at_step", "held"}]
    source: str = "milestones"       # milestones | derived milestones | verdict
    passes: int = DEFAULT_PASSES
    judge: str = ""                  # the LLM judge's name, "" for the rules
    notes: list = field(default_factory=list)
    step_reward_source: str = MAJORITY                  # majority (eq. 4) | cascade
    failed_levels: list = field(default_factory=list)  # cascade: the level each sample failed first, "" passed

    @property
    def steps(self) -> int:
        return len(self.samples)


def anchor_key(hierarchy_xml: str, fallback: str) -> str:
    """The state a step starts from, for GiGPO's anchor groups: a hash of the screen's elements
    (class, id, text, description, package, bounds), the system UI left out so the status bar's
    clock and notifications do not make every screen unique. No hierarchy: `fallback`."""
    nodes = [node for node in all_nodes(parse_hierarchy(hierarchy_xml or ""))
             if not node.package.startswith("com.android.systemui")]
    if not nodes:
        return fallback
    canonical = json.dumps([[n.cls, n.resource_id, n.text, n.desc, n.package, list(n.bounds)] for n in nodes],
                           ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def policy_steps(trajectory, steps=None) -> list:
    """The steps where the policy emitted an action: executed, or blocked by the audit (with the
    proposal it made). Observation-only steps (a policy error) carry no action and no sample.
    `steps`: the trajectory's steps in order, when the caller has read them."""
    chosen = []
    for step in (steps if steps is not None else trajectory.steps.order_by("index")):
        if step.executed_action is not None:
            chosen.append(step)
        elif (step.audit or {}).get("blocked") and step.proposed_action:
            chosen.append(step)
    return chosen


def check_step_reward_source(source: str, reward_model=None) -> None:
    if source not in STEP_REWARD_SOURCES:
        raise ValueError(f"unknown step reward source {source!r}: one of {', '.join(STEP_REWARD_SOURCES)}")
    if source == REWARD_MODEL and reward_model is None:
        raise ValueError("the step reward source reward_model needs the trained step reward model version "
                         "that rates the steps")


def _is_blocked(step) -> bool:
    return step.executed_action is None and bool((step.audit or {}).get("blocked"))


def _left_task(before: str, after: str, apps: list[str]) -> bool:
    if not apps or not after or after == before or after in apps:
        return False
    return not ("launcher" in after or after in NEUTRAL_PACKAGES)


def screen_keys(view, prefix: str) -> list[str]:
    """anchor_key of every screen of the view (screens() order); a screen without a hierarchy gets a
    key of its own, so it is never the same state as another."""
    return [anchor_key(xml, f"{prefix}:screen:{i}") for i, xml in enumerate(view.screens())]


def step_facts(view, steps: list, samples: list, reached: list, success: bool, apps: list[str],
               keys: list[str]) -> list[StepFacts]:
    """The frame-bound facts of each sample (rewards.StepFacts), from the view (all steps in order),
    the milestones' first-held screens, whether the trajectory succeeded and the screens' keys
    (an unchanged screen is one with the same key: the status bar's clock does not count)."""
    screens = view.screens()
    position = {step.pk: i for i, step in enumerate(steps)}
    executed_before = []  # for each screen index, the last executed view position before it
    last = None
    for i in range(len(screens)):
        executed_before.append(last)
        if i < len(steps) and steps[i].executed_action is not None:
            last = i
    advanced_at = {executed_before[hit[0]] for hit in reached if hit is not None and hit[0] < len(screens)}
    ending = view.ending()
    facts, previous_action = [], None
    for number, step in enumerate(samples):
        p = position[step.pk]
        action = step.executed_action if step.executed_action is not None else step.proposed_action
        is_last = number == len(samples) - 1
        after = keys[p + 1] if p + 1 < len(screens) else None
        next_package = steps[p + 1].foreground_package if p + 1 < len(steps) else ""
        name = (action or {}).get("action")
        declared = name == "terminate" and (action or {}).get("status") == "success"
        facts.append(StepFacts(
            advanced=p in advanced_at,
            completes=is_last and success and ending == "success",
            blocked=_is_blocked(step),
            left_task=step.executed_action is not None and _left_task(step.foreground_package, next_package, apps),
            stalled=(step.executed_action is not None and name not in AGENT_STOPS and previous_action is not None
                     and same_action(previous_action, action) and after is not None and after == keys[p]),
            false_success=declared and not success,
        ))
        if step.executed_action is not None:
            previous_action = action
    return facts


RATED_FRAMES = 8            # the frames after the latest rated steps a pass sees
DID_NOT_LOOK = "the judge gave the same ratings for blank frames"


def rating_frame_loaders(view, samples) -> list[tuple[int, int, object]]:
    """(rated Step.index, frame Step.index, loader) of the frame after each of the latest
    RATED_FRAMES samples: the next step's screen, or the step's own for the last one (nothing
    after it was recorded)."""
    position = {step.index: i for i, step in enumerate(view.steps)}
    chosen = []
    for sample in samples[-RATED_FRAMES:]:
        after = min(position[sample.index] + 1, len(view.steps) - 1)
        chosen.append((sample.index, view.steps[after].index, view.steps[after].screenshot))
    return chosen


def rating_frames(view, samples) -> list[tuple[int, Frame]]:
    """(rated Step.index, Frame) pairs; FrameMissing when one cannot be read."""
    loaded = {}
    for rated, frame_step, loader in rating_frame_loaders(view, samples):
        for frame in load_frames([(frame_step, loader)]):
            loaded[rated] = frame
    return list(loaded.items())


def _ask_ratings(version, view, samples, conditions, seed: int, frames=()) -> dict[int, int]:
    """One judge pass: {step index: rating}. JudgeUnavailable when it does not answer usably.
    `frames`: (rated step index, PNG) pairs, sent after the text as image parts."""
    reached = "\n".join(f"- {c['name']}: " + (f"first held after step {c['at_step']}" if c["held"] else "never held")
                        for c in conditions) or "(none)"
    system = ("You rate every action of a phone agent's trajectory for its task: 1 when the step was "
              "necessary for the task, 0 when it was harmless but useless, -1 when it pushed the task "
              "off course (a wrong app or page, undoing progress, a repeated action that changed "
              "nothing, declaring success that is not there). Answer JSON: "
              '{"ratings": [{"step": step number, "rating": 1|0|-1}]}')
    if frames:
        system += (" The screenshots show what each step led to; the screen text read from the UI dump "
                   "may be incomplete or wrong, so rate from what the screenshots show.")
    user = (f"Task: {view.goal}\nVerification conditions:\n{reached}\n\n{history_text(view)}\n\n"
            f"Rate steps {', '.join(str(s.index) for s in samples)}.")
    if frames:
        user += (f"\n\n{len(frames)} screenshot(s) follow, oldest first: "
                 + "; ".join(f"{n}. the screen after step {rated}" for n, (rated, _) in enumerate(frames, 1)) + ".")
    sampling = version.sampling or {}
    answer = ask_json(version, system, user, frames=[png for _, png in frames], max_tokens=1200, seed=seed,
                      temperature=float(sampling.get("temperature", JUDGE_TEMPERATURE)))
    try:
        ratings = {int(item["step"]): int(item["rating"]) for item in answer["ratings"]}
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as error:
        raise JudgeUnavailable(f"judge output is not the ratings JSON: {error}") from error
    return {index: rating for index, rating in ratings.items() if rating in (-1, 0, 1)}


def judged_pass(version, view, samples, conditions, seed: int, frames) -> tuple[dict[int, int], str]:
    """One pass's ratings and a note: ({}, why) when they cannot be used (no answer; the same
    ratings for blank frames of the same sizes, same prompt and seed: the judge did not look)."""
    try:
        ratings = _ask_ratings(version, view, samples, conditions, seed, frames)
        pngs = [png for _, png in frames]
        if pngs and answers_without_looking(
                lambda blank: _ask_ratings(version, view, samples, conditions, seed,
                                           [(rated, png) for (rated, _), png in zip(frames, blank)]),
                pngs, ratings):
            return {}, f"{DID_NOT_LOOK}; the pass is discarded and the rules rated it"
    except JudgeUnavailable as error:
        return {}, f"the judge did not answer ({error}); the rules rated it"
    return ratings, ""


@dataclass
class Conditions:
    """A query's atomic conditions: its milestones (or the judge's derivation), the same for every
    rollout of the query, so N_nec is one number across the group."""

    milestones: list
    source: str                      # milestones | derived milestones | verdict
    notes: list = field(default_factory=list)


def query_conditions(query, version) -> Conditions:
    milestones = (query.verification or {}).get("milestones") or []
    if milestones:
        return Conditions(milestones, "milestones")
    if version is not None:
        try:
            return Conditions(derive_milestones(version, query.text), "derived milestones")
        except JudgeUnavailable as error:
            return Conditions([], "verdict", [f"milestones not derived: {error}"])
    return Conditions([], "verdict")


def resolve_judge(judge=USE_CONFIGURED):
    return judge_model_version() if judge is USE_CONFIGURED else judge


def judge_trajectory(trajectory, passes: int = DEFAULT_PASSES, judge=USE_CONFIGURED,
                     alpha: float = ALPHA, conditions: Conditions | None = None,
                     step_reward_source: str = MAJORITY, reward_model=None) -> Judgement:
    """Eq. 3's reward and the step rewards (eq. 4's majority, or the cascade) of one finished rollout
    (its verdict decided). `conditions`: the query's, when the caller judges a whole group
    (query_conditions). `reward_model`: the step reward model version that rates the steps when the
    source is "reward_model" (ClawGUI §3.2; eq. 3 still comes from the milestones and the verdict)."""
    if passes < 1:
        raise ValueError(f"passes must be at least 1, not {passes}")
    check_step_reward_source(step_reward_source, reward_model)
    version = resolve_judge(judge)
    view = trajectory_view(trajectory)
    steps = list(trajectory.steps.order_by("index"))
    actions = policy_steps(trajectory, steps)
    ended = ended_on_output(trajectory, steps) if step_reward_source == CASCADE else None
    samples = actions + ([ended] if ended is not None else [])
    success = trajectory.verdict == "true"
    conditions = conditions if conditions is not None else query_conditions(trajectory.query, version)
    notes, source, milestones = list(conditions.notes), conditions.source, conditions.milestones
    if milestones:
        reached = milestone_progress(view, milestones, skip_missing=True, pixels=True)
        reached += [None] * (len(milestones) - len(reached))
        n_nec, n_done = len(milestones), sum(1 for hit in reached if hit is not None)
        if success and not atomic_conditions_hold([hit is not None for hit in reached]):
            notes.append("HTSC True: every necessary sub-goal counts as reached")
        n_done = n_nec if success else min(n_done, n_nec - 1)
    else:
        reached = []
        n_nec, n_done = 1, int(success)
    keys = screen_keys(view, f"trajectory:{trajectory.pk}")
    facts = step_facts(view, steps, samples, reached, success, trajectory.query.app_packages, keys)
    held = [{"name": m.get("name") or m.get("text") or m.get("text_contains") or str(m),
             "at_step": _responsible_index(steps, hit), "held": hit is not None}
            for m, hit in zip(milestones, reached)]
    position = {step.pk: i for i, step in enumerate(steps)}
    failed_levels = []
    if step_reward_source == CASCADE:
        rewards, failed_levels, judge_name = cascade_step_rewards(version, view, samples, facts, ended, held,
                                                                  passes, notes)
    elif step_reward_source == REWARD_MODEL:   # the model rates each step; no judge pass is made
        rewards, judge_name = (reward_model_step_rewards(reward_model, samples) if samples else []), reward_model.name
    else:   # MAJORITY
        ratings, judge_name = judge_passes(version, view, samples, held, passes, notes)
        rewards = majority_step_rewards([[step_reward(f, rated.get(s.index)) for f, s in zip(facts, samples)]
                                         for rated in ratings]) if samples else []
    return Judgement(
        trajectory=trajectory.pk, success=success, n_nec=n_nec, n_done=n_done,
        reward=trajectory_reward(n_done, n_nec, len(actions), alpha), samples=samples,
        step_rewards=rewards, anchors=[keys[position[s.pk]] for s in samples],
        conditions=held, source=source, passes=passes, judge=judge_name, notes=notes,
        step_reward_source=step_reward_source, failed_levels=failed_levels)


def cascade_step_rewards(version, view, samples: list, facts: list, ended, held: list, passes: int,
                         notes: list) -> tuple[list[float], list[str], str]:
    """Xiaomi-GUI-0 §4.3 over the samples: (the majority cascade reward of each, the level each failed
    first, the judge's name). `ended`: the sample the policy answered but nothing ran (ended_on_output);
    the judge rates only the samples whose earlier levels passed and that no measured progress decides."""
    parsed = [not (s is ended and ended.proposed_action is None) for s in samples]
    failed = [s is ended and ended.proposed_action is not None for s in samples]
    levels = [(f, ok, bad) for f, ok, bad in zip(facts, parsed, failed)]   # the level inputs of each sample
    asked = [s for s, level in zip(samples, levels) if judge_asked(*level)]
    ratings, judge_name = judge_passes(version, view, asked, held, passes, notes)
    if not samples:
        return [], [], judge_name
    rewards = majority_cascade_rewards([[cascade_reward(cascade_levels(*level, judge_rating=rated.get(s.index)))
                                         for s, level in zip(samples, levels)] for rated in ratings])
    return rewards, [failed_level(cascade_levels(*level), reward) for level, reward in zip(levels, rewards)], judge_name


def judge_passes(version, view, samples: list, held: list, passes: int, notes: list) -> tuple[list[dict], str]:
    """Each pass's ratings of `samples` ({step index: rating}; {} where the rules decide: no judge,
    nothing to ask, a pass that failed) and the judge's name ("" when it was not asked)."""
    if version is None or not samples:
        return [{} for _ in range(passes)], ""
    try:
        frames = [(rated_index, frame.png) for rated_index, frame in rating_frames(view, samples)]
    except FrameMissing as missing:   # the judge is not asked without the frames it rates
        notes.append(f"the judge was not asked: {missing}; the rules rated every pass")
        return [{} for _ in range(passes)], ""
    ratings = []
    for number in range(passes):
        rated, note = judged_pass(version, view, samples, held, number, frames)
        if note:
            notes.append(f"pass {number + 1}: {note}")
        ratings.append(rated)
    return ratings, version.name


def failed_level(levels: dict, reward: float) -> str:
    """The level a sample failed first given its majority cascade reward: the levels before the judge
    are the same in every pass, so a −0.5 that they do not explain is the judge's ("" passed)."""
    before_judge = cascade_failure(levels)
    if before_judge is not None:
        return before_judge
    return JUDGE if reward == CASCADE_FAILURE[JUDGE] else ""


def _responsible_index(steps, hit):
    """The Step.index of the last executed step before the frame where a condition first held."""
    if hit is None:
        return None
    before = [s for s in steps[:hit[0]] if s.executed_action is not None]
    return before[-1].index if before else None
