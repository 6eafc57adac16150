"""The LLM path of generation against a quota: flywheel's writer with the cells in its prompt.

A reply that drops the draft's decision-point control is refused and the offline text kept.
"""
from collections import Counter

from benchmark.rules import metric_system as table4
from flywheel.queries.generation import runs as generation_runs
from flywheel.queries.generation.llm import LlmWriter, ReplyRejected, build_prompt

HINTS = {("explicitness", "explicit"): "name every step of the path", ("intent_dependency", "single"): "one intent",
         ("explicitness", "implicit"): "name the function, never the path",
         ("explicitness", "underspecified"): "only hint at the goal",
         ("intent_dependency", "dependent"): "the second sub-task uses the result of the first",
         ("intent_dependency", "independent"): "two sub-tasks that can be done in any order"}


class ConstrainedWriter(LlmWriter):
    """flywheel's LLM writer, with the quota's constraints in its prompt and checked in its reply."""

    def messages(self, draft, page_ids: list[int]) -> list[dict]:
        messages = build_prompt(draft, page_ids)
        messages[-1]["content"] += "\n" + constraints_text(draft)
        return messages

    def accept(self, draft, text: str) -> str:
        control = draft.labels.get("decision_point")
        if control and control.lower() not in text.lower():
            raise ReplyRejected(f"drops the decision point {control!r}")
        return text


def constraints_text(draft) -> str:
    lines = ["Benchmark constraints (the query is labelled with these; keep every one true):"]
    for key in ("explicitness", "intent_dependency", "path_complexity", "app_scope", "operation",
                "instruction_type", "refusal_safety"):
        value = draft.labels.get(key)
        if value:
            hint = HINTS.get((key, value), table4.BY_KEY[key].tests)
            lines.append(f"- {table4.BY_KEY[key].label}: {table4.VALUE_LABELS.get(value, value)} ({hint})")
    control = draft.labels.get("decision_point")
    if control:
        lines.append(f'- The request goes through "{control}" (keep it verbatim); the assistant is expected '
                     "to stop there and hand over to the user.")
    return "\n".join(lines)


def write_with_llm(drafts, version) -> Counter:
    writer, outcome = ConstrainedWriter(version), Counter()
    for draft in drafts:
        if writer.given_up:
            outcome["offline: the endpoint kept failing"] += 1
            continue
        try:
            text = writer.write(draft, generation_runs.page_ids_of(draft))
        except ReplyRejected as error:
            outcome[f"offline: {str(error).split(':')[0][:80]}"] += 1
            continue
        draft.labels["offline_text"], draft.text, draft.origin = draft.text, text, "llm"
        outcome["llm"] += 1
    return outcome
