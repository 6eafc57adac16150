"""The exploration engine (§2.2.5): a non-destructive walk of one app on one leased phone.

Breadth first from the app's start page. On each page every actionable element is tried once
(repeated list rows: the first few), through the ActionExecutor, so every input passes the
safety audit on the fresh screen (devices/gate.py). After each action the screen is read: a new
page becomes a GemPage, a known one is matched (page_identity.same_page); the action becomes an
Edge with a replayable query-format step. Then the explorer goes back (Back, checked; else a
fresh launch and the recorded path from the start page).

What it never taps: elements whose label reads as irreversible (DEFAULT_AVOID_WORDS, plus the
run's `avoid_words`); inside dialogs, any element with such a word (a confirmation's positive
button). Switches are flipped back. Fields get a neutral sample text and Enter. A page that
needs sign-in: the actions that led to the sign-in page are tried again once a sign-in page was
left by one of its own buttons.

State lives in `frontier` (dict, persisted by the caller after each action) so that a new task
continues where an interrupted one stopped.
"""
from __future__ import annotations

import json
import time

from django.conf import settings

from devices.executor import ActionExecutor
from devices.observation import observe
from devices.phone import PhoneUnavailable
from devices.uitree import all_nodes, node_at, parse_hierarchy
from flywheel.queries.exploration import store
from flywheel.queries.exploration.cross import CrossAppSteps
from flywheel.queries.exploration.rules import (
    CRASH_WORDS,
    SOFT_WORDS,
    STRICT_WORDS,
    element_actions,
    element_key,
    irreversible_hit,
    is_sign_in,
    path_key,
    switch_state,
    words_pattern,
)
from flywheel.queries.page_io import read_page
from flywheel.rules.step_words import step_words
from flywheel.screens.page_identity import fingerprint, layout_distance, match_page, same_page
from flywheel.screens.selectors import find_target


class ExplorationStopped(Exception):
    """Cancelled, the budget is spent or the lease is lost: the state is kept for a resume."""


class AppExplorer(CrossAppSteps):
    def __init__(self, run_id: int, package: str, phone, device, lease, config: dict, state: dict,
                 should_stop, lease_ttl=None, on_progress=None):
        self.run_id, self.package, self.phone, self.device = run_id, package, phone, device
        self.config, self.state, self.should_stop = config, state, should_stop
        self.on_progress = on_progress or (lambda: None)
        options = {"holder": f"exploration:run:{run_id}", "device": device, "lease": lease}
        if lease_ttl is not None:
            options["lease_ttl"] = lease_ttl
        self.executor = ActionExecutor(phone, **options)
        avoid = tuple(config.get("avoid_words") or ())
        self.strict = words_pattern(STRICT_WORDS + avoid)
        self.soft = words_pattern(SOFT_WORDS)
        self.app = store.app_row(package)
        self.thresholds = store.thresholds(self.app)
        self.deadline = config["_deadline"]
        self.settle_s = float(settings.EXPLORATION_SETTLE_S)  # after each action, before the next look
        self.typed = []
        # Scrolled views seen in this process: path (ending in swipes) -> fingerprint. The top of a
        # long list is out of view after a few scrolls, so "still page P?" is asked of the view.
        self.views = {}
        self.view_keys = set()   # candidate keys of the view being expanded (to see what a switch reveals)
        self.state.setdefault("queue", [])
        self.state.setdefault("tried", {})
        self.state.setdefault("expanded", [])
        self.state.setdefault("variants", {})
        self.state.setdefault("gated", [])
        self.state.setdefault("stats", {"actions": 0, "merged": 0, "skipped_avoid": 0, "blocked": 0,
                                        "backed_out": 0, "relaunches": 0})

    # -- budget and reporting -------------------------------------------------------------------

    def check(self):
        if self.should_stop():
            raise ExplorationStopped("cancelled")
        if time.monotonic() >= self.deadline:
            raise ExplorationStopped("time budget spent")
        if self.executor.lease is not None and getattr(self, "keeper", None) and self.keeper.lost:
            raise ExplorationStopped("lease lost")

    def problem(self, kind, detail):
        store.add_problem(self.run_id, self.package, kind, detail)

    def pages(self):
        return store.pages_of(self.app)

    # -- phone ----------------------------------------------------------------------------------

    def observe(self):
        """(observation, fingerprint, reading) of the screen now; PhoneUnavailable or a broken dump
        is recorded and raised as None."""
        for _attempt in range(2):  # a dump fails now and then: record it, look once more
            try:
                seen = observe(self.phone)
            except PhoneUnavailable as error:
                self.problem("dump_failed", str(error)[:300])
                continue
            reading = read_page(seen.hierarchy_xml, self.config.get("max_elements", 150))
            if reading.package:
                break
            self.problem("dump_failed", "the UI dump did not parse or was empty")
        else:
            return None
        print_ = fingerprint(seen.png, seen.hierarchy_xml, seen.foreground.get("activity", ""))
        if reading.package != seen.foreground.get("package"):
            print_.activity = ""  # a system surface over the app: its activity is not the app's
        return seen, print_, reading

    def act(self, step: dict, reading=None) -> bool:
        """Run one query-format step (target resolved on the screen now). False: not done."""
        self.check()
        action = {key: value for key, value in step.items() if key not in ("target", "checked")}
        if step.get("target"):
            xml = self.phone.recent_dump(1.0) or self.phone.dump_hierarchy()
            roots = parse_hierarchy(xml)
            node = find_target(list(all_nodes(roots)), step["target"])
            if node is None:
                return False
            if "checked" in step and switch_state(node) == step["checked"]:
                return True  # a switch the path turns on (off) is already on (off): nothing to do
            if irreversible_hit(node_at(roots, *node.center), roots, self.strict, self.soft):
                self.state["stats"]["skipped_avoid"] += 1
                self.problem("irreversible_hit", f"{step_words(step)}: the touch would hit an irreversible "
                                                 "element on the screen now; not sent")
                return False
            action.update(point=list(node.center), coords="pixel")
        result = self.executor.execute(action)
        self.state["stats"]["actions"] += 1
        if result.blocked:
            self.state["stats"]["blocked"] += 1
            self.problem("blocked_by_audit", f"{step_words(step)}: {result.reason}"[:300])
            return False
        if result.lease_lost:
            raise ExplorationStopped("lease lost")
        if result.phone_lost:
            raise PhoneUnavailable(result.error)
        if self.settle_s > 0:
            time.sleep(self.settle_s)
        return result.ok

    def launch(self):
        """A fresh start of the app (its data kept: a sign-in stays)."""
        self.phone.shell(f"am force-stop {self.package}")
        self.state["stats"]["relaunches"] += 1
        return self.act({"action": "open", "app": self.package})

    def where(self):
        """A cheap look at the screen (no screenshot) for 'am I back on page P?'."""
        try:
            xml = self.phone.dump_hierarchy()
            activity = self.phone.foreground().get("activity", "")
        except PhoneUnavailable:
            return None
        return fingerprint(b"", xml, activity)

    def is_on(self, page, path=None) -> bool:
        """On page `page`, or on the scrolled view of it that `path` (ending in swipes) shows."""
        here = self.where()
        if here is None:
            return False
        view = self.views.get(path_key(path)) if path else None
        return self.looks_like(here, page) or (view is not None and self.looks_like(here, view))

    def looks_like(self, here, page) -> bool:
        """Still page `page` (a scrolled view, a button that appeared): the same page, or the same
        activity with much of its layout (no screenshot is taken for this check)."""
        if same_page(here, page, self.thresholds):
            return True
        return bool(here.activity) and here.activity == page.activity and layout_distance(
            here.layout_shape, page.layout_shape) <= min(1.0, 2 * float(self.thresholds["layout_distance"]))

    def go_to(self, page_id: int, path: list, force: bool = False) -> bool:
        """On page `page_id`: already there, or a fresh launch and the recorded path."""
        page = store.page(page_id)
        if page is None:
            return False
        if not force and self.is_on(page, path):
            return True
        for _attempt in range(2):
            if not self.launch():
                continue
            if all(self.act(step) for step in path) and self.is_on(page, path):
                return True
        return False

    # -- the walk -------------------------------------------------------------------------------

    def start(self):
        """First call of a run for this app: launcher page, launch, start page, recents."""
        observed = self.observe()
        launcher = None
        if observed and "launcher" in observed[2].package:
            launcher = store.system_page(self.run_id, observed, "launcher", self.thresholds)
        if not self.launch():
            raise PhoneUnavailable(f"could not launch {self.package}")
        observed = self.observe()
        if observed is None or observed[2].package != self.package:
            raise PhoneUnavailable(f"{self.package} did not come to the front")
        start, _ = store.record_page(self.run_id, self.app, observed, depth=0, thresholds=self.thresholds,
                                     is_start=True)
        self.state["start"] = start.pk
        if launcher is not None:
            store.record_edge(self.run_id, launcher, start, "launch", {"action": "open", "app": self.package})
        self.state["queue"] = [{"page": start.pk, "path": [], "depth": 0}]
        self.recents(start)

    def recents(self, start):
        if not self.act({"action": "system_button", "button": "recents"}):
            return
        observed = self.observe()
        if observed and observed[2].package != self.package:
            panel = store.system_page(self.run_id, observed, "recents", self.thresholds)
            store.record_edge(self.run_id, start, panel, "recents", {"action": "system_button", "button": "recents"})
            label = next((e for e in observed[2].elements if e["clickable"] and e["text"]), None)
            if label is not None:
                store.record_edge(self.run_id, panel, start, "recents", {"action": "click", "target": label["selector"]})
        self.act({"action": "system_button", "button": "back"})

    def run(self):
        if not self.state.get("start"):
            self.start()
            self.on_progress()
        max_pages = int(self.config["max_pages"])
        while self.state["queue"]:
            self.check()
            if store.page_count(self.app) >= max_pages and not self.state.get("finishing"):
                self.problem("budget", f"max_pages={max_pages} reached; {len(self.state['queue'])} pages not expanded")
                self.state["queue"] = []
                break
            item = self.state["queue"][0]
            self.expand(item)
            self.state["queue"].pop(0)
            if item["page"] not in self.state["expanded"]:
                self.state["expanded"].append(item["page"])
            self.on_progress()
        store.add_clipboard_and_home_edges(self.run_id, self.app)
        self.state["done"] = True

    def expand(self, item):
        page_id, path = item["page"], item["path"]
        if not self.go_to(page_id, path):
            self.problem("unreachable", f"page #{page_id} could not be reached again by its path of {len(path)} "
                                        "steps; skipped")
            return
        observed = self.observe()
        if observed is None:
            return
        page = store.page(page_id)
        store.touch_page(page, observed)
        tried = self.state["tried"].setdefault(str(page_id), [])
        budget = int(self.config.get("max_actions_per_page", 60))
        scrollable = any(e.get("scrollable") for e in observed[2].elements) or observed[2].scrollable
        view, view_print = item, observed[1]
        self.remember_view(path, view_print)
        for _scroll in range(int(self.config.get("max_scrolls", 8)) + 1):
            candidates = self.candidates(observed[2], count=True)
            self.view_keys = {key for _, _, key in candidates}
            for element, action, key in [c for c in candidates if c[2] not in tried][:budget]:
                self.check()
                if key in tried:
                    continue
                tried.append(key)
                budget -= 1
                self.try_action(page, view, element, action, key)
                self.on_progress()
            if not scrollable or budget <= 0:
                return
            # Rows below the fold: scroll on (the path to them includes the scrolls).
            texts = observed[2].texts
            # Back from a child page may have put the list at its top: replay the scrolls so far.
            if not self.go_to(page_id, view["path"], force=view is not item and not self.is_on_view(view_print)):
                return
            swipe = {"action": "swipe", "direction": "up"}
            if not self.act(swipe):
                return
            view = {**item, "path": view["path"] + [swipe]}
            observed = self.observe()
            # Still this page: like the view before the swipe (the page's first view may have
            # scrolled out of sight entirely) and showing something new.
            if observed is None or observed[2].texts == texts or not (
                    self.looks_like(observed[1], view_print) or self.looks_like(observed[1], page)):
                return
            view_print = observed[1]
            self.remember_view(view["path"], view_print)

    def remember_view(self, path, view_print):
        """Kept for the rest of the run, without its screenshot (none is held per view): a kept view
        is only compared with where()'s looks, which take no screenshot, so its pHash never counts."""
        self.views[path_key(path)] = view_print.without_screenshot()

    def is_on_view(self, view_print) -> bool:
        here = self.where()
        return here is not None and same_page(here, view_print, self.thresholds)

    def actions_for(self, element, reading, per_id, count=False):
        actions, skipped = element_actions(element, reading, per_id, self.strict, self.soft,
                                           self.config.get("max_same_id", 2))
        self.state["stats"]["skipped_avoid"] += int(count and skipped)
        return actions

    def step_for(self, element, action):
        if action == "type":
            return {"action": "type", "target": element["selector"],
                    "text": f"{self.config.get('sample_text', 'test')}\n"}
        return {"action": action, "target": element["selector"]}

    def try_action(self, page, item, element, action, key):
        step = self.step_for(element, action)
        if not self.is_on(page, item["path"]) and not self.go_to(page.pk, item["path"]):
            self.problem("lost", f"could not get back to {page.name} before {key}")
            return
        if not self.act(step):
            # Its target is not on screen (a list scrolled back to the top): scroll down to it
            # again, else replay the path from a fresh launch.
            swipes = [s for s in item["path"] if s.get("action") == "swipe"]
            if not swipes or not (self.scroll_to(step, len(swipes)) or (
                    self.go_to(page.pk, item["path"], force=True) and self.act(step))):
                return
        observed = self.observe()
        if observed is None:
            self.back_to(page, item)
            return
        seen, print_, reading = observed
        if step["action"] == "type":
            self.typed.append((page, item, element))
        if CRASH_WORDS.search(" ".join(reading.texts)):
            self.problem("crash", f"after {step_words(step)} the screen said: {' · '.join(reading.texts[:3])}")
        elif reading.package == self.package:
            self.landed_in_app(page, item, element, step, key, observed)
        elif "launcher" in reading.package:
            pass  # the action left the app (a close button on the root page): nothing to record
        else:
            self.landed_elsewhere(page, item, step, observed)
        self.back_to(page, item)
        while self.typed:
            self.clear_field(*self.typed.pop())

    def scroll_to(self, step, swipes) -> bool:
        for _ in range(swipes):
            if not self.act({"action": "swipe", "direction": "up"}):
                return False
            if self.act(step):
                return True
        return False

    def clear_field(self, page, item, element):
        """Typing is undone: an app may keep a field's text (a remembered search) across launches."""
        sample = self.config.get("sample_text", "test")
        for _ in range(2):
            nodes = list(all_nodes(parse_hierarchy(self.phone.dump_hierarchy())))
            node = find_target(nodes, element["selector"])
            if node is None or sample not in (node.text or ""):
                return
            self.act({"action": "click", "target": element["selector"]})
            for _ in range(min(len(node.text) + 1, 60)):
                self.act({"action": "system_button", "button": "delete"})
            if not self.is_on(page, item["path"]):
                self.back_to(page, item)

    def landed_in_app(self, page, item, element, step, key, observed):
        seen, print_, reading = observed
        if same_page(print_, page, self.thresholds) or (
                element["checkable"] and self.looks_like(print_, page)):
            new = self.untried(page.pk, reading)
            if element["checkable"] and step["action"] == "click":
                revealed = [key for key in new if key not in self.view_keys]
                if revealed:
                    # A switch that shows or enables rows (Bluetooth on: "Pair new device"): the
                    # page is explored again with the switch in this state; the path sets it
                    # (idempotently), the final reset puts the phone back.
                    state = self.checked_state(element)
                    seen = self.state.setdefault("revealed", [])
                    mark = [page.pk, sorted(revealed)]
                    if state is not None and mark not in seen and item["depth"] < int(self.config["max_depth"]):
                        seen.append(mark)  # a row and its switch widget reveal the same: once
                        self.state["queue"].append({"page": page.pk, "depth": item["depth"],
                                                    "path": item["path"] + [{**step, "checked": state}]})
                self.act(step)  # flip it back: the phone is left as found
            elif new and step["action"] in ("type", "click"):
                self.push_variant(page.pk, item["path"] + [step], item["depth"])
            return
        known = match_page(print_, self.pages(), self.thresholds)
        depth = item["depth"] + 1
        if known is None:
            if store.page_count(self.app) >= int(self.config["max_pages"]):
                return
            target, created = store.record_page(self.run_id, self.app, observed, depth=depth,
                                                thresholds=self.thresholds)
            if depth < int(self.config["max_depth"]):
                self.state["queue"].append({"page": target.pk, "path": item["path"] + [step], "depth": depth})
        else:
            target = known
            self.state["stats"]["merged"] += 1
            store.touch_page(known, observed)
            if self.untried(known.pk, reading) and (known.pk in self.state["expanded"]
                                                   or self.shows_more_than(known, reading)):
                self.push_variant(known.pk, item["path"] + [step], depth)
        store.record_edge(self.run_id, page, target, "tap", step)
        self.sign_in_bookkeeping(page, target, item, key, reading)

    def checked_state(self, element):
        """Whether the switch `element` is on now (None: it is not on the screen)."""
        nodes = list(all_nodes(parse_hierarchy(self.phone.dump_hierarchy())))
        node = find_target(nodes, element["selector"])
        return None if node is None else switch_state(node)

    def candidates(self, reading, count=False):
        per_id, out = {}, []
        for element in reading.elements:
            for action in self.actions_for(element, reading, per_id, count=count):
                out.append((element, action, element_key(element, action)))
        return out

    def untried(self, page_id, reading):
        tried = set(self.state["tried"].get(str(page_id), []))
        return [key for _, _, key in self.candidates(reading) if key not in tried]

    def shows_more_than(self, known, reading) -> bool:
        """This view of a known page offers elements its first view did not (another order's
        detail page has a Track button)."""
        stored = {json.dumps(e.get("selector"), sort_keys=True) for e in known.elements or []}
        return any(json.dumps(element["selector"], sort_keys=True) not in stored
                   for element, _, _ in self.candidates(reading) if not element["repeated"])

    def push_variant(self, page_id, path, depth):
        count = self.state["variants"].get(str(page_id), 0)
        if count >= int(self.config.get("max_variants", 3)) or depth >= int(self.config["max_depth"]):
            return
        self.state["variants"][str(page_id)] = count + 1
        self.state["queue"].append({"page": page_id, "path": path, "depth": depth})

    def sign_in_bookkeeping(self, page, target, item, key, reading):
        """Actions that hit a sign-in wall are tried again once a sign-in page was left forward."""
        if is_sign_in(target) and not is_sign_in(page):
            self.state["gated"].append({"page": page.pk, "path": item["path"], "depth": item["depth"],
                                        "key": key, "retried": False})
        elif is_sign_in(page) and not is_sign_in(target):
            for gate in self.state["gated"]:
                if gate["retried"]:
                    continue
                gate["retried"] = True
                tried = self.state["tried"].get(str(gate["page"]), [])
                if gate["key"] in tried:
                    tried.remove(gate["key"])
                self.state["queue"].append({"page": gate["page"], "path": gate["path"], "depth": gate["depth"]})

    def back_to(self, page, item):
        """Back (checked), else a fresh launch and the path (done by go_to on the next action)."""
        self.act({"action": "system_button", "button": "back"})
        self.state["stats"]["backed_out"] += 1
        if not self.is_on(page, item["path"]):
            self.go_to(page.pk, item["path"])
