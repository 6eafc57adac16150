"""The VLM Teacher: an OpenAI-compatible chat endpoint (a ModelVersion of kind "endpoint").

One call per answer through the endpoint policy's bounded, checked HTTP (safe_http via
EndpointPolicy._call: timeouts, retries, no redirects, capped replies). The prompt is the agent
protocol's (§3.1.2) plus the Teacher's task: the goal, the history, the current screenshot, the
action that went wrong (not to be repeated) and, when the query has one, its known path. The
reply is parsed with protocol.parse_output; the Teacher states its confidence in one line
("Confidence: 0.8"), else the tokens' log-probabilities give it, else it is unknown (None).
Timeouts, refusals, garbage and a repeated wrong action raise TeacherFailed with the exchange.
"""
from __future__ import annotations

import base64
import json
import re

from devices.actions import RESOLVED_FIELDS, ActionError, normalize_action
from flywheel.policies.base import PolicyError, PolicyState, Proposal
from flywheel.policies.endpoint import EndpointPolicy, _confidence, _redact_images
from flywheel.policies.protocol import ProtocolError, history_text, parse_output, system_prompt
from flywheel.policies.teacher_context import (
    TeacherAnswer,
    TeacherContext,
    TeacherFailed,
    context_from_state,
    query_facts,
    same_choice,
)

_CONFIDENCE = re.compile(r"\bconfidence\s*[:=]\s*([01](?:\.\d+)?|\.\d+)(?![\d.])", re.IGNORECASE)
TEACHER_ROLE = (
    "\n\nYou are the Teacher: a stronger model that supervises a GUI agent. You see the agent's goal, "
    "its earlier steps and the current screen. Give the one correct action for this screen, with the "
    "five tags written as the agent should have written them. After the [Memory] tag write one line "
    "\"Confidence: <a number from 0 to 1>\" saying how sure you are that the action is right, then the "
    "action.")


class EndpointTeacher:
    def __init__(self, url: str, model: str, sampling: dict | None = None, name: str = "",
                 facts: dict | None = None, timeout: float = 60.0, retries: int = 1):
        self.endpoint = EndpointPolicy(url, model, sampling=sampling, timeout=timeout, retries=retries,
                                       name=name)
        self.name = name or self.endpoint.name
        self.facts = dict(facts or {})
        self._args = (url, model, sampling, name)

    @classmethod
    def from_model_version(cls, version):
        return cls(version.endpoint_url, version.served_model_name or version.name, sampling=version.sampling,
                   name=version.name)

    def for_query(self, query) -> EndpointTeacher:
        url, model, sampling, name = self._args
        return EndpointTeacher(url, model, sampling, name, facts=query_facts(query),
                               timeout=self.endpoint.timeout, retries=self.endpoint.retries)

    # -- the contract ----------------------------------------------------------------------------

    def correct(self, ctx: TeacherContext) -> TeacherAnswer:
        return self._ask(ctx, avoid=ctx.wrong_action)

    def suggest(self, ctx: TeacherContext) -> TeacherAnswer:
        return self._ask(ctx, avoid=None)

    def propose(self, state: PolicyState) -> Proposal:
        answer = self.suggest(context_from_state(state, self.facts))
        return Proposal(cot=answer.cot, action=answer.action, confidence=answer.confidence, policy=self.name,
                        model_io={**(answer.model_io or {}), "teacher": {"name": self.name, "confidence": answer.confidence}})

    # -- the call --------------------------------------------------------------------------------

    def request_body(self, ctx: TeacherContext, avoid: dict | None) -> dict:
        coords = self.endpoint.coords
        text = f"Goal: {ctx.goal}\n\nHistory:\n{history_text(ctx.history)}"
        device = {key: (ctx.foreground or {}).get(key) for key in ("package", "activity")}
        if any(device.values()):
            text += "\n\nDevice: " + ", ".join(f"{key}={value}" for key, value in device.items() if value)
        if avoid:
            text += ("\n\nThe agent's action at this step was wrong: " + json.dumps(avoid, ensure_ascii=False)
                     + ". Do not repeat it; give the correct action for this screen. In [Reflection], say in one "
                     "sentence why that action was wrong here.")
        else:
            text += "\n\nGive the next action that leads toward the goal from this screen."
        content = [{"type": "text", "text": text + ("\n\nThe current screenshot follows." if ctx.screenshot else
                                                    "\n\nNo screenshot is available for this step.")}]
        if ctx.screenshot:
            content.append({"type": "image_url", "image_url": {
                "url": "data:image/png;base64," + base64.b64encode(ctx.screenshot).decode("ascii")}})
        messages = [{"role": "system", "content": system_prompt(coords, ctx.known_path) + TEACHER_ROLE},
                    {"role": "user", "content": content}]
        return {"model": self.endpoint.model, "messages": messages, **self.endpoint.sampling}

    def _ask(self, ctx: TeacherContext, avoid: dict | None) -> TeacherAnswer:
        body = self.request_body(ctx, avoid)
        model_io = {"url": self.endpoint.base_url + "/chat/completions",
                    "request": {**body, "messages": _redact_images(body["messages"])}, "attempts": []}
        try:
            response = self.endpoint._call(body, model_io)
        except PolicyError as error:
            raise TeacherFailed(f"the Teacher endpoint failed: {error}", model_io) from None
        try:
            text = response["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise TeacherFailed("the Teacher's answer has no choices[0].message.content", model_io) from None
        if isinstance(text, list):
            text = "".join(part.get("text", "") for part in text if isinstance(part, dict))
        if not isinstance(text, str):
            raise TeacherFailed("the Teacher's answer is not text", model_io)
        stated = _CONFIDENCE.search(text)
        try:
            parsed = parse_output(_CONFIDENCE.sub(" ", text), screen=ctx.screen_size,
                                  default_coords=self.endpoint.coords)
        except ProtocolError as error:
            model_io["parse_error"] = str(error)
            raise TeacherFailed(f"the Teacher's output does not follow the protocol: {error}", model_io) from None
        try:
            action = normalize_action(parsed.action, *ctx.screen_size)
        except ActionError as error:
            raise TeacherFailed(f"the Teacher's action cannot run: {error}", model_io) from None
        if avoid and same_choice(action, _pixels(avoid, ctx.screen_size), ctx.hierarchy_xml):
            raise TeacherFailed("the Teacher answered the very action that went wrong", model_io)
        confidence = float(stated.group(1)) if stated else _confidence(response)
        model_io["parse_notes"] = parsed.notes
        return TeacherAnswer(action=action, cot=parsed.cot, confidence=confidence, source=self.name,
                             rationale=parsed.cot.get("Plan", ""), model_io=model_io)


def _pixels(action: dict, screen) -> dict:
    try:
        return normalize_action({k: v for k, v in action.items() if k not in RESOLVED_FIELDS}, *screen)
    except (ActionError, TypeError, ValueError):
        return action
