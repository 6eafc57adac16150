"""The built-in offline Teacher: the known path first, then the GEM, then the goal's words.

1. Known path (teacher_path.py): which known-path step this screen is at, given the prefix → that
   step's target resolved here (flywheel.screens.selectors.find_target).
2. GEM (teacher_gem.py): the screen's GemPage → the cheapest path to a target page → its first
   edge resolved here.
3. Otherwise the offline policy's goal matching, with LOW confidence: the Teacher is guessing.

A pop-up on the screen (teacher.dismissal_action) is closed first when the path's target is not
visible under it. `correct` never answers the action that went wrong: when its best answer is that
action, the next one is given with low confidence (and if there is none, Back, lower still). Its
[Reflection] then says why the wrong action is not the answer (rules/error_explanation.py), unless
it was its own first choice: then it cannot say, and the attribution's evidence explains it.
"""
from __future__ import annotations

from devices.uitree import all_nodes, node_at, parse_hierarchy
from flywheel.policies.base import PolicyState, Proposal
from flywheel.policies.offline import OfflinePolicy
from flywheel.policies.protocol import AGENT_STOPS, describe_action
from flywheel.policies.teacher_context import (
    TeacherAnswer,
    TeacherContext,
    context_from_state,
    dismissal_action,
    query_facts,
    same_choice,
)
from flywheel.policies.teacher_gem import gem_candidates
from flywheel.policies.teacher_path import Candidate, path_candidates, visible_nodes
from flywheel.rules.error_explanation import teacher_error_explanation
from flywheel.screens.labels import label_of

GUESS_CONFIDENCE = 0.3        # the goal's words alone: a guess, not a correction to trust
SECOND_CHOICE_CONFIDENCE = 0.3  # the best answer was the wrong action itself
LAST_RESORT = Candidate({"action": "system_button", "button": "back"}, None, 0.1, "fallback",
                        "nothing better than going back: the Teacher does not know this screen")
DISMISS_CONFIDENCE = 0.8
OWN_DIALOG_CONFIDENCE = 0.35   # a dialog right after the agent's own tap is most likely the task's
INTERRUPTION_MARKS = ("permission", "aerr_", "ad_close", "advertisement", "btn_later", "btn_relogin", "captcha")
SYSTEM_WINDOWS = ("android", "com.android.systemui", "com.android.permissioncontroller",
                  "com.google.android.permissioncontroller")


class OfflineTeacher:
    name = "offline-teacher-v1"

    def __init__(self, facts: dict | None = None):
        self.facts = dict(facts or {})

    def for_query(self, query) -> OfflineTeacher:
        return OfflineTeacher(query_facts(query))

    # -- the contract ----------------------------------------------------------------------------

    def correct(self, ctx: TeacherContext) -> TeacherAnswer:
        """Step N rewritten: the best action on this screen that is not the wrong one."""
        return self._answer(ctx, avoid=ctx.wrong_action)

    def suggest(self, ctx: TeacherContext) -> TeacherAnswer:
        """What the Teacher itself would do on this screen."""
        return self._answer(ctx, avoid=None)

    def propose(self, state: PolicyState) -> Proposal:
        answer = self.suggest(context_from_state(state, self.facts))
        return Proposal(cot=answer.cot, action=answer.action, confidence=answer.confidence, policy=self.name,
                        model_io={"teacher": {"name": self.name, "source": answer.source,
                                              "confidence": answer.confidence, "rationale": answer.rationale}})

    # -- choosing ------------------------------------------------------------------------------

    def candidates(self, ctx: TeacherContext) -> list[Candidate]:
        """Every answer the Teacher has for this screen, best first."""
        out = path_candidates(ctx.known_path, ctx.apps, ctx.history, ctx.hierarchy_xml, ctx.screen_size,
                              ctx.foreground, ctx.history_hierarchies) if ctx.known_path else []
        best_path = out[0] if out else None
        if not best_path or best_path.confidence < DISMISS_CONFIDENCE:
            found = dismissal_action(ctx.hierarchy_xml)
            if found is not None:
                own = _opened_by_the_agent(ctx)
                out.insert(0, Candidate(found, None, OWN_DIALOG_CONFIDENCE if own else DISMISS_CONFIDENCE, "dismissal",
                                        "a dialog the last tap opened; closing it may undo that step" if own
                                        else "a pop-up covers the page: close it and resume"))
        if not out or out[0].confidence < 0.75:
            out += gem_candidates(ctx)
        out.append(self._guess(ctx))
        out.sort(key=lambda c: -c.confidence)  # stable: the known path before the GEM at equal confidence
        return out

    def _guess(self, ctx: TeacherContext) -> Candidate:
        state = PolicyState(goal=ctx.goal, history=list(ctx.history),
                            screenshots=[ctx.screenshot] if ctx.screenshot else [],
                            hierarchy_xml=ctx.hierarchy_xml, screen_size=tuple(ctx.screen_size),
                            foreground=dict(ctx.foreground or {}), apps=list(ctx.apps))
        proposal = OfflinePolicy().propose(state)
        confidence = min(GUESS_CONFIDENCE, proposal.confidence or GUESS_CONFIDENCE)
        return Candidate(proposal.action, _label(proposal.action, ctx.hierarchy_xml), confidence, "goal",
                         f"no known path or GEM route fits this screen; the goal's words suggest it "
                         f"({proposal.cot.get('Plan', '')})")

    def _answer(self, ctx: TeacherContext, avoid: dict | None) -> TeacherAnswer:
        chosen, demoted = None, False
        for candidate in self.candidates(ctx):
            if avoid and same_choice(candidate.action, avoid, ctx.hierarchy_xml):
                demoted = True
                continue
            chosen = candidate
            break
        if chosen is None:
            chosen, demoted = LAST_RESORT, True
        confidence = chosen.confidence
        rationale = chosen.rationale
        if demoted:
            confidence = min(confidence, SECOND_CHOICE_CONFIDENCE)
            rationale = f"its first choice was the action that went wrong; next best: {rationale}"
        cot = self._cot(ctx, chosen)
        if avoid:  # correcting: its [Reflection] says why the wrong action is not the answer (§3.4)
            cot["Reflection"] = teacher_error_explanation(
                chosen.source, avoid, _label(avoid, ctx.hierarchy_xml) or "", chosen.action,
                chosen.label or _label(chosen.action, ctx.hierarchy_xml) or "", demoted) or cot["Reflection"]
        return TeacherAnswer(action=chosen.action, cot=cot, confidence=round(confidence, 3),
                             source=chosen.source, rationale=rationale)

    def _cot(self, ctx: TeacherContext, chosen: Candidate) -> dict:
        nodes = visible_nodes(ctx.hierarchy_xml)
        texts = list(dict.fromkeys(n.text or n.desc for n in nodes if (n.text or n.desc) and '"' not in (n.text or n.desc)))
        package = (ctx.foreground or {}).get("package") or (nodes[0].package if nodes else "")
        shown = ", ".join(f"\"{text[:40]}\"" for text in texts[:6])
        observation = (f"On {package or 'the screen'}; it shows {shown}." if shown
                       else f"On {package or 'the screen'}; the screen shows no text.")
        reflection = ""
        if chosen.source == "dismissal":
            reflection = "A pop-up interrupts the task; it is not part of it."
        plan = {"known_path": "Follow the task's path: ", "gem": "Head for the target page: ",
                "dismissal": "Close the pop-up, then resume: ", "goal": "Work toward the goal: ",
                "fallback": "Go back to a page that leads on: "}.get(chosen.source, "") + chosen.rationale
        if chosen.action.get("action") in AGENT_STOPS and chosen.action.get("status") == "success":
            plan = "Everything the task asks is done; finish."
        return {"Observation": observation, "Reflection": reflection, "Plan": plan[:400],
                "Decision": describe_action(chosen.action, chosen.label or _label(chosen.action, ctx.hierarchy_xml)),
                "Memory": ""}


def _opened_by_the_agent(ctx: TeacherContext) -> bool:
    """A dialog of the app itself that came right after a tap: the agent opened it (a folder-name
    dialog, a context menu), it is no interruption. System windows and known interruptions are."""
    nodes = list(all_nodes(parse_hierarchy(ctx.hierarchy_xml or "")))
    if any(n.package in SYSTEM_WINDOWS for n in nodes[:2]) or any(
            mark in (n.resource_id + " " + n.desc).lower() for n in nodes for mark in INTERRUPTION_MARKS):
        return False
    last = (ctx.history[-1].action or {}) if ctx.history else {}
    return last.get("action") in ("click", "long_press", "double_click")


def _label(action: dict, hierarchy_xml: str) -> str | None:
    point = action.get("point")
    if not isinstance(point, list) or len(point) != 2:
        return None
    node = node_at(parse_hierarchy(hierarchy_xml or ""), int(point[0]), int(point[1]))
    return label_of(node) if node is not None else None
