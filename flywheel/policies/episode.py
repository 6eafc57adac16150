"""Run a policy alone on one phone for one task (no person, nothing persisted).

Used to measure a policy (perf/offline_policy.py, tests) with the very executor and safety audit
that the collection lines use.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from devices.executor import ActionExecutor
from devices.observation import observe
from devices.reset import reset_phone
from flywheel.policies.base import PolicyError, PolicyState
from flywheel.policies.protocol import AGENT_STOPS, HistoryEntry
from flywheel.rules.app_names import agent_may_open


@dataclass
class Episode:
    steps: list = field(default_factory=list)   # (cot, action, ActionResult)
    outcome: str = ""                           # terminate:success, terminate:failure, error: ..., max_steps
    answer: str = ""


def phone_apps(phone) -> list[str]:
    """The phone's packages an agent may open (its launchers and system UI left out)."""
    packages = (line.removeprefix("package:").strip() for line in phone.shell("pm list packages").splitlines())
    return sorted(p for p in packages if agent_may_open(p))


def run_episode(phone, task: dict, policy, max_steps: int = 20, k: int = 5,
                schema_guided: bool = False, baseline: dict | None = None, prepare=None) -> Episode:
    """`task` is a query in the JSONL format of docs/query-format.md.

    The policy sees the task's known path and apps only when `schema_guided` (§2.3.4); otherwise the
    goal alone and the phone's apps, as on the automatic, RL and benchmark lines. `baseline` (devices.baseline.read_baseline)
    is restored by the reset, so one episode's global settings never leak into the next. `prepare(phone)`
    meets the task's prerequisites after the reset (a harness's setup recipes) and says why it could
    not ('' when it did); the episode then ends "not executable" without a step.
    """
    known_path = task.get("known_path") if schema_guided else None
    apps = list(task.get("apps") or [])
    reset_phone(phone, task.get("reset") or None, apps=apps, baseline=baseline)
    unmet = prepare(phone) if prepare is not None else ""
    if unmet:
        return Episode(outcome=f"not executable: {unmet}")
    offered = apps if schema_guided else phone_apps(phone)
    executor = ActionExecutor(phone, holder="policy-episode")
    episode, history, screenshots = Episode(), [], []
    for _ in range(max_steps):
        observation = observe(phone)
        screenshots = (screenshots + [observation.png])[-k:]
        state = PolicyState(goal=task["text"], history=history, screenshots=screenshots,
                            hierarchy_xml=observation.hierarchy_xml,
                            screen_size=(observation.width, observation.height),
                            foreground=observation.foreground, known_path=known_path, apps=offered)
        try:
            proposal = policy.propose(state)
        except PolicyError as error:
            episode.outcome = f"error: {error}"
            return episode
        result = executor.execute(proposal.action, hierarchy_xml=observation.hierarchy_xml)
        episode.steps.append((proposal.cot, proposal.action, result))
        if not result.ok:
            episode.outcome = f"error: {result.reason or result.error}"
            return episode
        history.append(HistoryEntry(cot=proposal.cot, action=result.action))
        if result.action["action"] in AGENT_STOPS:  # alone, nobody answers a clarify
            status = result.action.get("status", "")
            episode.outcome = f"{result.action['action']}:{status}" if status else result.action["action"]
            episode.answer = result.action.get("answer", "")
            return episode
    episode.outcome = "max_steps"
    return episode
