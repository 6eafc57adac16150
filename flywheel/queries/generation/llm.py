"""Query text from an LLM endpoint, with the same structure as the offline grammar.

The prompt carries what the offline grammar uses: the tier subclass's definition, the persona and
its style filter, the capability dimensions, the leaf, and the real contexts of the pages on its
GEM path (titles and visible texts), and asks for JSON {"text": ...}. A reply is used only when it
is exactly that; anything else (a failed call, non-JSON, an empty or over-long text, other fields)
raises `ReplyRejected`, and the caller keeps the offline text and records the problem.
"""
from __future__ import annotations

import json
import re

from flywheel.endpoints.safe_http import EndpointCallFailed, request_json
from flywheel.models import GemPage
from flywheel.queries.vocabulary import CAPABILITIES, PERSONAS, SUBCLASS_TIER, TIER_SUBCLASSES

MAX_TEXT = 400
TIER_MEANING = {"L1": "step-by-step: the user knows the exact path and names it",
                "L2": "explicit goal: the goal is clear but no path is given",
                "L3": "ambiguous / colloquial: the goal is hinted, no function words"}
SYSTEM = ("You write one instruction that a real phone user would say to an assistant that operates "
          "their phone. Use only what the page contexts show; never invent screens or data. "
          'Answer with JSON only: {"text": "<the instruction>"}')


class ReplyRejected(Exception):
    """The endpoint gave no usable text (the reason says why)."""


def page_contexts(page_ids: list[int]) -> list[dict]:
    pages = GemPage.objects.filter(pk__in=page_ids).select_related("app").in_bulk()
    return [{"app": pages[i].app.display_label, "title": pages[i].title,
             "texts": [str(t) for t in (pages[i].texts or [])[:12]],
             "inputs": pages[i].inputs, "outputs": pages[i].outputs}
            for i in page_ids if i in pages]


def build_prompt(draft, page_ids: list[int]) -> list[dict]:
    label, style = PERSONAS[draft.persona]
    lines = [
        f"Tier {draft.tier} — {TIER_MEANING[draft.tier]}.",
        f"Subclass: {TIER_SUBCLASSES[SUBCLASS_TIER[draft.subclass]][draft.subclass]}.",
        f"Persona: {label}; style: {style}.",
        "Capabilities to exercise: " + (", ".join(CAPABILITIES[c] for c in draft.capabilities) or "none") + ".",
        f"Apps: {', '.join(draft.apps)}.",
        f"Target function: {draft.labels.get('leaf', '')} (page {draft.labels.get('target_page', '')}).",
    ]
    if draft.labels.get("relation"):
        lines.append(f"Cross-app relation: {draft.labels['relation']} ({draft.labels.get('io', '')}).")
    if draft.known_path and draft.tier == "L1":
        lines.append(f"Known path (name every step): {draft.known_path.get('summary', '')}.")
    elif draft.tier != "L1":
        lines.append("Do not describe the navigation path.")
    lines.append("Page contexts along the path: " + json.dumps(page_contexts(page_ids), ensure_ascii=False))
    lines.append(f"A template version, for reference only: {draft.text}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def parse_reply(response) -> str:
    try:
        content = response["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ReplyRejected("the reply has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise ReplyRejected("the reply's content is not text")
    match = re.search(r"\{.*\}", content, re.DOTALL)
    try:
        data = json.loads(match.group(0) if match else content)
    except ValueError:
        raise ReplyRejected(f"not JSON: {content[:80]!r}") from None
    if not isinstance(data, dict) or set(data) != {"text"}:
        raise ReplyRejected(f"expected exactly {{'text'}}, got {sorted(data) if isinstance(data, dict) else type(data).__name__}")
    text = data["text"]
    if not isinstance(text, str) or not text.strip():
        raise ReplyRejected("the text is empty")
    if len(text) > MAX_TEXT:
        raise ReplyRejected(f"the text is longer than {MAX_TEXT} characters")
    return " ".join(text.split())


class LlmWriter:
    """Asks one endpoint ModelVersion for query texts; stops asking after repeated call failures."""

    MAX_CONSECUTIVE_FAILURES = 5

    def __init__(self, version, timeout: float = 30.0):
        self.version = version
        self.url = version.endpoint_url.rstrip("/") + "/chat/completions"
        self.model = version.served_model_name or version.name
        self.timeout = float((version.sampling or {}).get("timeout_s", timeout))
        self.failures_in_a_row = 0

    @property
    def given_up(self) -> bool:
        return self.failures_in_a_row >= self.MAX_CONSECUTIVE_FAILURES

    def messages(self, draft, page_ids: list[int]) -> list[dict]:
        """The chat messages for one draft (a subclass may add constraints to them)."""
        return build_prompt(draft, page_ids)

    def accept(self, draft, text: str) -> str:
        """The reply's text, or ReplyRejected (a subclass may check more than parsing does)."""
        return text

    def write(self, draft, page_ids: list[int]) -> str:
        body = {"model": self.model, "temperature": 0.7, "max_tokens": 200, "seed": 0,
                "messages": self.messages(draft, page_ids)}
        try:
            reply = request_json("POST", self.url, body, timeout=self.timeout)
        except EndpointCallFailed as error:
            self.failures_in_a_row += 1
            raise ReplyRejected(f"call failed: {error}") from None
        if reply.status != 200:
            self.failures_in_a_row += 1
            raise ReplyRejected(f"HTTP {reply.status}")
        self.failures_in_a_row = 0
        return self.accept(draft, parse_reply(reply.data))


def rewrite_with_llm(drafts, version, page_ids_of, problems: list) -> int:
    """Replace each draft's offline text by the endpoint's; returns how many were replaced.
    `page_ids_of(draft)` gives the pages of its path. A garbage reply keeps the offline text and
    adds a problem naming the draft; after repeated call failures the rest stay offline."""
    writer, used = LlmWriter(version), 0
    for index, draft in enumerate(drafts):
        if writer.given_up:
            problems.append({"kind": "llm", "detail": f"endpoint {version.name} failed "
                             f"{writer.failures_in_a_row} times in a row; {len(drafts) - index} drafts stay offline"})
            break
        try:
            text = writer.write(draft, page_ids_of(draft))
        except ReplyRejected as error:
            problems.append({"kind": "llm", "draft": index, "detail": f"{error}; the offline text is kept"})
            continue
        draft.labels["offline_text"] = draft.text
        draft.text, draft.origin, draft.styled = text, "llm", False  # the rules polish the model's text
        used += 1
    return used
