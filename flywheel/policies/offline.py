"""The built-in offline policy: rules over the UI hierarchy, no model needed.

It follows the query's known path when there is one (resolving each step's target in the current
hierarchy), otherwise matches the goal's words and quoted text to the elements on screen. Every
proposal carries a filled-in five-tag reasoning whose [Decision] is generated from the action, so
it passes the consistency gate. When nothing on screen fits, it says so (terminate failure) rather
than tapping at random.
"""
from __future__ import annotations

import re

from devices.uitree import UiNode, all_nodes, parse_hierarchy
from flywheel.policies.base import PolicyState, Proposal
from flywheel.policies.narration import NOISE, narrated_steps
from flywheel.policies.protocol import describe_action
from flywheel.rules.consistency import words
from flywheel.screens.labels import apps_for_goal, label_node, label_of, stems, toggle_state, wanted_toggle_state
from flywheel.screens.ocr_candidates import pixel_candidates
from flywheel.screens.selectors import find_target

MAX_STEPS = 20
MAX_SEARCH_SCROLLS = 3
SYSTEM_PACKAGES = ("com.android.systemui",)
SUBMIT_WORDS = ("save", "send", "add", "done", "ok", "confirm", "search", "submit", "apply", "create",
                "post", "translate", "rename", "connect")
GOAL_FILLER = frozenset("""open app tap click turn set go find show use want please make sure then
into using called named see check get let put change switch enable disable setting choose select
press long stay""".split())
_QUOTED = re.compile(r"(?<!\w)[\"“”']([^\"“”]{1,80}?)[\"“”'](?!\w)")
NARRATED_ACTIONS = ("click", "double_click", "long_press", "type")


class OfflinePolicy:
    name = "offline-rules-v1"

    def propose(self, state: PolicyState) -> Proposal:
        roots = parse_hierarchy(state.hierarchy_xml)
        nodes = [node for node in all_nodes(roots) if node.package not in SYSTEM_PACKAGES]
        # A web view or canvas dumps as one opaque node: its words and buttons are read from the
        # frame instead (synthetic nodes, tapped at their center like any other).
        pixels = pixel_candidates(state.hierarchy_xml, state.screenshots[-1] if state.screenshots else None,
                                  state.screen_size)
        nodes += pixels.nodes
        observation = self._observe(state, nodes)
        if pixels.nodes:
            observation += " (The UI dump is blind; these words were read from the screenshot.)"
        elif pixels.why_none():
            observation += f" ({pixels.why_none()[:1].upper()}{pixels.why_none()[1:]}.)"
        reflection = ""
        if len(state.screenshots) >= 2 and state.screenshots[-1] == state.screenshots[-2] and state.history:
            reflection = "The last action left the screen unchanged; the tap may have missed or the page is slow."
        if len(state.history) >= MAX_STEPS:
            action, plan, label, confidence = ({"action": "terminate", "status": "failure",
                                                "answer": f"no progress after {MAX_STEPS} steps"},
                                               "Stop: the step budget is spent.", None, 0.2)
        elif state.known_path and state.known_path.get("steps"):
            action, plan, label, confidence = self._follow_path(state, nodes)
        else:
            action, plan, label, confidence = self._match_goal(state, nodes)
        if pixels.why_none() and action.get("action") == "terminate" and action.get("status") == "failure":
            action = {**action, "answer": f"{action.get('answer', '')} ({pixels.why_none()})"}
        cot = {"Observation": observation, "Reflection": reflection, "Plan": plan,
               "Decision": describe_action(action, label), "Memory": ""}
        return Proposal(cot=cot, action=action, confidence=confidence, policy=self.name)

    # -- observation --------------------------------------------------------------------------

    def _observe(self, state, nodes) -> str:
        package = state.foreground.get("package") or (nodes[0].package if nodes else "")
        texts = list(dict.fromkeys(node.text or node.desc for node in nodes if (node.text or node.desc)))
        shown = ", ".join(f"\"{text[:40]}\"" for text in texts[:6] if '"' not in text)
        where = f"{package} ({state.foreground.get('activity') or 'unknown activity'})" if package else "the screen"
        return f"On {where}; it shows {shown}." if shown else f"On {where}; the screen shows no text."

    # -- known path ---------------------------------------------------------------------------

    def _effective_path(self, state) -> list[dict]:
        steps = list(state.known_path.get("steps") or [])
        if steps and steps[0].get("action") != "open" and state.apps:
            steps.insert(0, {"action": "open", "app": state.apps[0]})  # the reset left us at Home
        if not steps or steps[-1].get("action") != "terminate":
            steps.append({"action": "terminate", "status": "success"})
        return steps

    def _follow_path(self, state, nodes):
        steps = self._effective_path(state)
        position = 0  # replay history against the path: extra scrolls/waits do not advance it
        for entry in state.history:
            if position < len(steps) and entry.action.get("action") == steps[position].get("action"):
                position += 1
        summary = state.known_path.get("summary") or f"{len(steps)} steps"
        scrolls = _trailing_scrolls(state.history)
        for offset, step in enumerate(steps[position:position + 2]):
            if offset and not step.get("target"):
                break  # skip ahead only on evidence: the next step's target is on screen
            action, label = self._path_action(step, nodes, state.screen_size)
            if action is not None:
                plan = (f"Follow the known path ({summary}): step {position + offset + 1} of {len(steps)}"
                        + (" (the previous step seems already done)" if offset else "") + ".")
                return action, plan, label, 0.9 if offset == 0 else 0.6
        missing = steps[position] if position < len(steps) else {}
        if scrolls < MAX_SEARCH_SCROLLS and _scrollable(nodes):
            return ({"action": "swipe", "direction": "up", "distance": 0.4},
                    f"The next step's target {missing.get('target')} is not visible; scroll to look for it.",
                    None, 0.4)
        return ({"action": "terminate", "status": "failure",
                 "answer": f"the known path's target {missing.get('target')} is not on the screen"},
                "The known path does not match this screen; stop and report it.", None, 0.2)

    def _path_action(self, step, nodes, screen):
        """The concrete action for a path step, or (None, None) when its target is not on screen."""
        name = step.get("action")
        target = step.get("target")
        node = find_target(nodes, target) if target else None
        if target and node is None:
            return None, None
        point = list(node.center) if node else None
        label = label_of(node) if node else None
        pixel = {"coords": "pixel"}
        if not target and isinstance(step.get("point"), list):
            # a step on a page whose dump is blind names where to touch, not what (its own coords)
            point, pixel = list(step["point"]), {"coords": step.get("coords", "pixel")}
        if name in ("click", "double_click", "long_press"):
            if point is None:
                return None, None
            action = {"action": name, "point": point, **pixel}
            if name == "long_press" and step.get("duration_ms"):
                action["duration_ms"] = step["duration_ms"]
            return action, label
        if name == "type":
            action = {"action": "type", "text": str(step.get("text", ""))}
            if point:
                action.update(point=point, **pixel)
            return action, label
        if name == "swipe":
            action = {"action": "swipe", "direction": step.get("direction", "up")}
            if step.get("distance"):
                action["distance"] = step["distance"]
            if point:
                action.update(point=point, **pixel)
            return action, label
        if name == "set_scroll_widget":
            if point is None:
                return None, None
            return {"action": name, "point": point, "value": str(step.get("value", "")), **pixel}, label
        keep = {key: value for key, value in step.items() if key not in ("target",)}
        return keep, None  # open, system_button, wait, take_notes, terminate, clarify, call_user

    # -- goal matching ------------------------------------------------------------------------

    def _match_goal(self, state, nodes):
        goal = state.goal
        history = state.history
        package = state.foreground.get("package", "")
        needed = apps_for_goal(goal, list(state.apps or []), state.app_labels)  # the apps the goal names
        if needed and package not in needed:
            if history and history[-1].action.get("action") == "open":
                return self._fail(f"opening {needed[0]} did not bring it to the front")
            return ({"action": "open", "app": needed[0]},
                    f"Open the app the task needs ({needed[0]}) first.", None, 0.85)
        app_names = {w for app in needed for w in stems(app.replace(".", " "))} - {"com", "android", "sim"}
        narration = narrated_steps(goal, app_names)
        if narration:
            return self._follow_narration(state, nodes, narration)
        quoted = [text for text in _QUOTED.findall(goal) if text.strip()]
        typed = {entry.action.get("text") for entry in history if entry.action.get("action") == "type"}
        clicked = {_history_point(entry) for entry in history}
        fields = [node for node in nodes if "EditText" in node.cls and node.enabled]
        pending_text = [text for text in quoted if text not in typed]
        if pending_text and fields:
            field = next((f for f in fields if f.focused), fields[0])
            return ({"action": "type", "text": pending_text[0], "point": list(field.center), "coords": "pixel"},
                    f"Enter \"{pending_text[0]}\" as the goal asks.", label_of(field), 0.7)
        if typed and history and history[-1].action.get("action") == "type":
            submit = self._best(nodes, set(SUBMIT_WORDS), clicked)
            if submit:
                return ({"action": "click", "point": list(submit.center), "coords": "pixel"},
                        "Confirm what was typed.", label_of(submit), 0.7)
        if (quoted and not pending_text and len(history) >= 2 and history[-2].action.get("action") == "type"
                and words(history[-1].cot.get("Decision", "")) & set(SUBMIT_WORDS)):
            return ({"action": "terminate", "status": "success"},
                    "The text is entered and confirmed; the goal is met.", None, 0.6)
        goal_words = {w for w in stems(goal) - GOAL_FILLER
                      if not any(w.startswith(name) for name in app_names)}  # "FoodDash" is com.sim.food
        covered = set().union(*(stems(" ".join(str(v) for v in entry.action.values() if isinstance(v, str))
                                      + " " + (entry.cot.get("Decision") or "")) for entry in history)) \
            if history else set()
        remaining = goal_words - covered
        wanted_state = wanted_toggle_state(goal)
        node = self._best(nodes, remaining, clicked)
        while node is not None and wanted_state is not None and toggle_state(node) == wanted_state:
            # "switch on Dark theme" when it is on already: that part of the goal holds; don't undo it.
            # Every word that made this element the best counts as done, so the next pick differs
            # (with only its label's words a row matched by its summary was picked forever).
            covered |= stems(label_of(node)) | (stems(node.all_text()) & remaining)
            remaining = goal_words - covered
            node = self._best(nodes, remaining, clicked)
        if node is not None:
            target = label_node(node, remaining)  # tap the words a person would tap, not the row's middle
            name = "long_press" if re.search(r"long[- ]?press|press and hold", goal, re.I) and not any(
                entry.action.get("action") == "long_press" for entry in history) else "click"
            return ({"action": name, "point": list(target.center), "coords": "pixel"},
                    f"Act on the element that matches the goal's words ({', '.join(sorted(stems(node.all_text()) & remaining))}).",
                    label_of(node), 0.6)
        acted = covered & goal_words
        if history and acted and not remaining:
            return ({"action": "terminate", "status": "success"},
                    "Every part of the goal has been acted on; finish.", None, 0.5)
        if _trailing_scrolls(history) < MAX_SEARCH_SCROLLS - 1 and _scrollable(nodes):
            return ({"action": "swipe", "direction": "up", "distance": 0.4},
                    "Nothing visible matches the goal; scroll to see more.", None, 0.3)
        if history and acted:
            return self._fail(f"nothing on the screen matches the rest of the goal ({', '.join(sorted(remaining))})")
        return self._fail("nothing on the screen matches the goal")

    def _follow_narration(self, state, nodes, narration):
        """An L1 instruction read as steps: the n-th screen action does the n-th clause."""
        done = [entry for entry in state.history if entry.action.get("action") in NARRATED_ACTIONS]
        position, loose = _narration_progress(narration, done)
        while position < len(narration) and narration[position].toggle is not None:
            node = self._best(nodes, stems(narration[position].target) - NOISE, set())
            if node is None or toggle_state(node) != narration[position].toggle:
                break
            position += 1  # "switch on Dark theme" and it is on: that step holds; don't undo it
        if position >= len(narration):
            # Claim success only when every step hit an element named as the instruction says.
            if loose:
                return self._fail(f"done as far as the screen allowed, but no element matched exactly: "
                                  f"{', '.join(loose)}")
            return ({"action": "terminate", "status": "success"},
                    f"All {len(narration)} steps of the instruction are done; finish.", None, 0.6)
        step = narration[position]
        plan = f"Do step {position + 1} of {len(narration)} of the instruction: {step.action} {step.target or step.text}."
        if step.action == "type":
            fields = [node for node in nodes if "EditText" in node.cls and node.enabled]
            if fields:
                wanted = stems(step.target) - NOISE

                def fit(f):  # "note_body" is the body: its last word counts most; empty fields first
                    parts = f.resource_id.rsplit("/", 1)[-1].split("_")
                    return (2 * len(stems(parts[-1]) & wanted) + len(stems(" ".join(parts[:-1]) + " " + f.text) & wanted),
                            not f.text, f.focused)
                field = max(fields, key=fit)
                return ({"action": "type", "text": step.text, "point": list(field.center), "coords": "pixel"},
                        plan, label_of(field), 0.6)
        else:
            wanted = stems(step.target) - NOISE
            if step.action == "confirm":
                previous = narration[position - 1].target if position else ""
                wanted = {"confirm", "ok", "yes"} | stems(previous)
            last = {_history_point(done[-1])} if done and step.action == "confirm" else set()
            node = self._best(nodes, wanted, last)
            if node is not None:
                target = label_node(node, wanted)
                action = "long_press" if step.action == "long_press" else "click"
                return ({"action": action, "point": list(target.center), "coords": "pixel"}, plan, label_of(node), 0.6)
        if _trailing_scrolls(state.history) < MAX_SEARCH_SCROLLS and _scrollable(nodes):
            return ({"action": "swipe", "direction": "up", "distance": 0.4},
                    f"\"{step.target or step.text}\" is not visible; scroll to look for it.", None, 0.3)
        return self._fail(f"the instruction's target \"{step.target or step.text}\" is not on the screen")

    def _best(self, nodes, wanted: set, clicked: set) -> UiNode | None:
        """The clickable element sharing the most words with what is left of the goal."""
        best, best_key = None, (0, 0)
        for node in nodes:
            if not (node.clickable or node.long_clickable) or not node.enabled or node.area == 0:
                continue
            if tuple(node.center) in clicked or tuple(label_node(node, wanted).center) in clicked:
                continue
            own = len(stems(label_of(node)) & wanted)
            score = len(stems(node.all_text()) & wanted)
            key = (score + own, -node.area)  # a title match counts twice; then the smaller element
            if score and key > best_key:
                best, best_key = node, key
        return best

    def _fail(self, reason):
        return ({"action": "terminate", "status": "failure", "answer": reason},
                f"Stop honestly: {reason}.", None, 0.2)


def _narration_progress(narration, done) -> tuple[int, list]:
    """(the next clause, clauses acted on without an exact match): replay what was executed.

    An action whose [Decision] names a later clause's target moves there (the clauses between
    held already, e.g. a switch that was on); any other action counts for the current clause.
    """
    position, loose = 0, []
    for entry in done:
        decision = stems(entry.cot.get("Decision", ""))
        ahead = next((j for j in range(position, min(position + 3, len(narration)))
                      if narration[j].action in ("click", "long_press")
                      and (stems(narration[j].target) - NOISE)
                      and (stems(narration[j].target) - NOISE) <= decision), None)
        if ahead is not None:
            position = ahead + 1
            continue
        if position < len(narration) and narration[position].action in ("click", "long_press"):
            loose.append(narration[position].target)
        position += 1
    return position, loose


def _trailing_scrolls(history) -> int:
    count = 0
    for entry in reversed(history):
        if entry.action.get("action") != "swipe":
            break
        count += 1
    return count


def _scrollable(nodes) -> bool:
    return any(node.scrollable for node in nodes)


def _history_point(entry):
    point = entry.action.get("point")
    return tuple(point) if isinstance(point, list) else None
