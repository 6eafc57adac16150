"""Query generation over function-tree leaves (§2.2.2–§2.2.5): the planner.

For every leaf with a page, one `LeafContext` is computed once per run from GEM: the known path
from the app's start page (gem.path_to_page), its replayable steps, the labels of the elements
tapped along it, and the target page's list items, numbers, filter-like and toggle elements. The
grammar (grammar.py) turns a context into text; this module decides which tier
subclass, persona and capabilities each draft gets (a seeded round-robin, so the distribution is
balanced), and grounds cross-app drafts in GEM (start leaf → compatible endpoint → path check).
Nothing here knows an app: every word of a query comes from explored pages and the tree.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

from django.utils import timezone

from flywheel.models import DevicePrior, Edge, FailureClass, FunctionNode, GemPage
from flywheel.queries.drafts import QueryDraft
from flywheel.queries.function_tree.builder import leaves as function_leaves
from flywheel.queries.gem import graph as gem
from flywheel.queries.generation.grammar import compose, compose_cross, has_material
from flywheel.queries.generation.operations import (
    Operation,
    action_element,
    form_operation,
    is_action_leaf,
    leaf_operation,
)
from flywheel.queries.verification_drafts import draft_verification
from flywheel.queries.vocabulary import CAPABILITIES, CROSS_APP_RELATIONS, PERSONAS, SUBCLASS_TIER, TIER_SUBCLASSES

NUMBER = re.compile(r"[$€£¥]?\d+(?:[.,]\d+)?%?")
FILTER_CLASS = re.compile(r"CheckBox|Switch|Radio|Chip|Spinner|Toggle|Tab", re.I)
TOGGLE_CLASS = re.compile(r"Switch|Toggle|CheckBox", re.I)
SYSTEM_KINDS = {GemPage.Kind.LAUNCHER, GemPage.Kind.RECENTS, GemPage.Kind.SHARE_SHEET}
VIA_PHRASES = {"home": ("press", "Home"), "back": ("go", "back"), "recents": ("open", "Recents"),
               "clipboard": ("copy", "it")}


@dataclass
class LeafContext:
    """Everything a query about one leaf may mention, taken from GEM and the tree."""

    leaf_id: int | None
    package: str
    app_label: str
    label: str
    page_id: int
    title: str
    activity: str
    edge_ids: list[int] | None = None
    steps: list[dict] = field(default_factory=list)
    narration: list[tuple[str, str]] = field(default_factory=list)
    milestone_titles: list[str] = field(default_factory=list)
    items: list[str] = field(default_factory=list)
    numbers: list[str] = field(default_factory=list)
    filters: list[str] = field(default_factory=list)
    toggles: list[str] = field(default_factory=list)
    path_texts: list[str] = field(default_factory=list)
    other_labels: list[str] = field(default_factory=list)
    operation: Operation | None = None   # an action leaf's operation (its steps are in `steps`)

    @property
    def has_path(self) -> bool:
        return self.edge_ids is not None


def usable(edge: Edge, now=None) -> bool:
    """An edge counts when reachable, or its unreachable period has passed (due for re-check)."""
    if edge.reachable:
        return True
    return edge.unreachable_until is not None and edge.unreachable_until <= (now or timezone.now())


def edge_label(edge: Edge) -> str:
    """What the user taps for this edge: the selector's text, the element's text, or the page title."""
    target = (edge.action or {}).get("target") or {}
    for key in ("text", "content_desc", "text_contains"):
        if target.get(key):
            return str(target[key])
    for element in edge.source.elements or []:
        selector = element.get("selector") or {}
        if target and all(selector.get(k) == v for k, v in target.items()) and element.get("text"):
            return element["text"]
    return edge.target.title or edge.target.name


def edge_phrase(edge: Edge) -> tuple[str, str]:
    if edge.via == "launch":
        return "open", edge.target.app.display_label
    if edge.via == "share":
        return "share it to", edge.target.app.display_label
    if edge.via in VIA_PHRASES:
        return VIA_PHRASES[edge.via]
    action = edge.action or {}
    if action.get("action") == "type" and action.get("text"):
        return "type", str(action["text"])
    return "tap", edge_label(edge)


def _page_title(page: GemPage) -> str:
    return page.title or (page.texts[0] if page.texts else page.name)


# Window chrome and control verbs are not content a user would name as "an entry" (§2.2.3 realism).
CHROME = {"navigate up", "more options", "back", "cancel", "ok", "done", "close", "menu", "search", "share",
          "copy", "send", "delete", "save", "edit", "next", "skip", "allow", "deny", "more"}


def _items(page: GemPage, exclude: set[str]) -> list[str]:
    """Content texts of the page: not input hints, not buttons or icons (those are controls), not chrome."""
    controls = {e.get("text") for e in page.elements or []
                if e.get("editable") or re.search(r"Button|ImageView|EditText", str(e.get("class", "")))}
    items = []
    for text in (page.texts or [])[1:]:
        text = str(text).strip()
        if 2 < len(text) <= 60 and text not in exclude and text not in controls and not NUMBER.fullmatch(text) \
                and text.lower() not in CHROME and text not in items:
            items.append(text)
    return items[:8]


def _numbers(pages) -> list[str]:
    found = []
    for page in pages:
        for text in page.texts or []:
            for number in NUMBER.findall(str(text)):
                if number not in found:
                    found.append(number)
    return found[:6]


def _elements_of_class(page: GemPage, pattern) -> list[str]:
    return [e["text"] for e in page.elements or [] if e.get("text") and pattern.search(str(e.get("class", "")))][:6]


EVERY_PHONE = SimpleNamespace(model="", os_version="")  # only priors for every model and version apply


def skipped_by_priors(leaves) -> set[int]:
    """Leaves that a device prior for every phone model and OS version says do not exist
    (gem.function_exists, by path or last part); a model-specific prior does not skip a leaf."""
    if not DevicePrior.objects.filter(exists=False, device_model="", os_version="").exists():
        return set()
    exists = gem.function_exists
    return {leaf.id for leaf in leaves
            if exists(EVERY_PHONE, leaf.app.package, leaf.path) is False
            or (leaf.label and exists(EVERY_PHONE, leaf.app.package, leaf.label) is False)}


def paths_from_start(page_ids) -> dict[int, list[int] | None]:
    """gem.path_to_page for many pages over one graph snapshot (one start page lookup per app)."""
    graph_api = gem
    graph = graph_api.gem_graph()
    starts, paths = {}, {}
    for page_id in dict.fromkeys(page_ids):
        if page_id not in graph:
            paths[page_id] = None
            continue
        package = graph.nodes[page_id]["app"]
        if package not in starts:
            starts[package] = graph_api.start_page(package)
        start = starts[package]
        paths[page_id] = None if start is None else graph_api.shortest_path(start, page_id, graph)
    return paths


def load_contexts(packages: list[str] | None = None, problems: list | None = None) -> list[LeafContext]:
    """One context per usable leaf of the apps (all non-system apps when none are named)."""
    graph_api = gem
    leaves = function_leaves().filter(page__isnull=False).select_related("app", "page", "parent")
    if packages:
        leaves = leaves.filter(app__package__in=packages)
    else:
        leaves = leaves.filter(app__is_system=False)
    leaves = list(leaves.order_by("app__package", "path"))
    skipped = skipped_by_priors(leaves)
    if skipped and problems is not None:
        problems.append({"kind": "prior", "detail": f"{len(skipped)} leaves skipped: a device prior says "
                                                    "they do not exist"})
    leaves = [leaf for leaf in leaves if leaf.id not in skipped]
    paths = paths_from_start([leaf.page_id for leaf in leaves])
    edge_ids = {e for path in paths.values() if path for e in path}
    edges = Edge.objects.filter(id__in=edge_ids).select_related("source__app", "target__app").in_bulk()
    labels_by_app = {}
    for leaf in leaves:
        labels_by_app.setdefault(leaf.app_id, []).append((leaf.parent_id, leaf.label or leaf.path))
    contexts = []
    for leaf in leaves:
        page, path = leaf.page, paths[leaf.page_id]
        app_label = leaf.app.display_label  # a query names the app as people do, never by its package
        ctx = LeafContext(leaf_id=leaf.id, package=leaf.app.package, app_label=app_label,
                          label=leaf.label or _page_title(page), page_id=page.id, title=_page_title(page),
                          activity=page.activity)
        path_pages = []
        if path is not None and all(e in edges for e in path):
            ctx.edge_ids = list(path)
            ctx.steps = steps_with_open(leaf.app.package, graph_api.known_path_steps(path))
            ctx.narration = [("open", app_label)] + [edge_phrase(edges[e]) for e in path]
            path_pages = [edges[e].target for e in path]
        ctx.milestone_titles = [_page_title(p) for p in path_pages if p.kind not in SYSTEM_KINDS] or [ctx.title]
        # An action leaf is asked as its operation on its page, a form page as filling it in.
        rng = random.Random(f"operation:{leaf.id}")
        action = is_action_leaf(leaf) and action_element(page, leaf.label) is not None
        operation = leaf_operation(page, leaf.label, rng) if action else form_operation(page, rng)
        if operation is not None:
            if action:  # the page is where the action is done
                ctx.label = (leaf.parent.label if leaf.parent else "") or ctx.title
            ctx.operation = operation
            ctx.steps = ctx.steps + operation.steps if ctx.has_path else ctx.steps
        # The way there is not content of the target, but the last tap often names it (a product
        # title tapped in a list), so only the earlier taps are kept out of its items.
        tapped = {obj for _verb, obj in ctx.narration[:-1]}
        exclude = tapped | {ctx.title, ctx.label, app_label}
        ctx.items = _items(page, exclude)
        ctx.numbers = _numbers([page, *path_pages])
        ctx.filters = list(dict.fromkeys(_elements_of_class(page, FILTER_CLASS)))
        ctx.toggles = _elements_of_class(page, TOGGLE_CLASS)
        ctx.path_texts = [t for p in path_pages[:-1] for t in _items(p, exclude)][:5]
        siblings = sorted(labels_by_app[leaf.app_id], key=lambda pl: pl[0] != leaf.parent_id)
        ctx.other_labels = [lab for _parent, lab in siblings if lab != ctx.label][:5]
        contexts.append(ctx)
    return contexts


def steps_with_open(package: str, steps: list[dict]) -> list[dict]:
    """A known path starts from Home: open the app first (unless GEM's steps already do)."""
    steps = [dict(s) for s in steps or []]
    if not steps or steps[0].get("action") != "open":
        steps.insert(0, {"action": "open", "app": package})
    return steps


def known_path(ctx: LeafContext) -> dict | None:
    if not ctx.has_path:
        return None
    summary = " → ".join([obj for _verb, obj in ctx.narration] + ([ctx.operation.label] if ctx.operation else []))
    return {"mode": "tap", "summary": summary, "steps": ctx.steps}


def verification(ctx: LeafContext) -> dict:
    spec = draft_verification(ctx.package, ctx.activity, ctx.title, ctx.milestone_titles)
    if ctx.operation and ctx.operation.check:  # the operation's outcome, not only the page, is checked
        if ctx.operation.kind == "type_submit":  # a form's button may leave the page: its app is enough
            spec["terminal"] = [{"check": "foreground", "package": c["package"]} for c in spec["terminal"]
                                if c.get("check") == "foreground"]
        spec["terminal"].append(dict(ctx.operation.check))
    return spec


DEFAULT_CONFIG = {"apps": [], "tiers": ["L1", "L2", "L3"], "subclasses": [], "personas": list(PERSONAS),
                  "capabilities": list(CAPABILITIES), "per_leaf": 3, "cross_app": 0, "seed": 0}


def normalized_config(raw: dict | None) -> dict:
    """The run's configuration with defaults; raises ValueError naming a bad field."""
    config = {**DEFAULT_CONFIG, **{k: v for k, v in (raw or {}).items() if v not in (None, "")}}
    for name, vocabulary in (("tiers", TIER_SUBCLASSES), ("subclasses", SUBCLASS_TIER),
                             ("personas", PERSONAS), ("capabilities", CAPABILITIES)):
        values = list(config[name] or [])
        unknown = [v for v in values if v not in vocabulary]
        if unknown:
            raise ValueError(f"{name}: unknown {unknown[0]!r}")
        config[name] = values
    if not config["tiers"]:
        config["tiers"] = list(TIER_SUBCLASSES)
    if not config["personas"]:
        config["personas"] = list(PERSONAS)
    for name, low, high in (("per_leaf", 0, 100), ("cross_app", 0, 10000), ("seed", 0, 2**31)):
        try:
            config[name] = int(config[name])
        except (TypeError, ValueError):
            raise ValueError(f"{name}: must be a whole number") from None
        if not low <= config[name] <= high:
            raise ValueError(f"{name}: must be between {low} and {high}")
    config["apps"] = [str(a) for a in config["apps"] or []]
    return config


def _subclasses(config) -> list[str]:
    chosen = config["subclasses"] or [s for t in config["tiers"] for s in TIER_SUBCLASSES[t]]
    return [s for s in chosen if SUBCLASS_TIER[s] in config["tiers"]] or chosen


def _labels(tier, persona, steps, **extra) -> dict:
    return {"ambiguity": tier, "step_depth": max(0, len(steps) - 1), "persona_style": PERSONAS[persona][1],
            **extra}


def capability_cycle(config: dict) -> list[list[str]]:
    """The capability choices drafts cycle through: none, each configured dimension once, and once
    more each dimension an open failure class points to (§2.5.2: counterfactual derivation feeds
    query generation, so the model's weak dimensions are asked for more often)."""
    cycle = [[]] + [[c] for c in config["capabilities"]]
    weak = set(FailureClass.objects.filter(status__in=["recurring", "derived"]).exclude(capability="")
               .values_list("capability", flat=True))
    return cycle + [[c] for c in config["capabilities"] if c in weak]


def plan_single_app(contexts: list[LeafContext], config: dict) -> list[QueryDraft]:
    """per_leaf drafts per leaf, cycling through subclass × persona (shuffled once by the seed)
    and, independently, through the capability choices (none, or one dimension)."""
    combos = [(s, p) for s in _subclasses(config) for p in config["personas"]]
    random.Random(config["seed"]).shuffle(combos)
    choices = capability_cycle(config)
    drafts, n = [], 0
    for ctx in contexts:
        for k in range(config["per_leaf"]):
            for _attempt in range(len(combos)):  # a leaf without a path cannot be narrated (L1)
                subclass, persona = combos[n % len(combos)]
                n += 1
                if SUBCLASS_TIER[subclass] != "L1" or ctx.has_path:
                    break
            else:
                continue
            # A capability is only claimed when the page gives the clause real material.
            capabilities = [c for c in choices[(n + k) % len(choices)] if has_material(ctx, c)
                            and not ctx.operation]  # an operation is the clause; none is stacked on it
            rng = random.Random(f"{config['seed']}:{ctx.leaf_id}:{k}")
            drafts.append(leaf_draft(ctx, subclass, persona, capabilities, rng))
    return drafts


def leaf_draft(ctx: LeafContext, subclass: str, persona: str, capabilities: list[str], rng) -> QueryDraft:
    if ctx.operation is not None and ctx.has_path:  # each phrasing types its own text
        operation = ctx.operation.retyped(rng)
        ctx = replace(ctx, operation=operation,
                      steps=ctx.steps[:len(ctx.steps) - len(operation.steps)] + operation.steps)
    tier = SUBCLASS_TIER[subclass]
    operation = {"operation": ctx.operation.kind} if ctx.operation else {}
    return QueryDraft(
        text=compose(ctx, subclass, persona, capabilities, rng), apps=[ctx.package], tier=tier, subclass=subclass,
        persona=persona, styled=True, capabilities=list(capabilities), functions=[ctx.leaf_id] if ctx.leaf_id else [],
        gem_path=list(ctx.edge_ids or []), known_path=known_path(ctx), verification=verification(ctx),
        labels=_labels(tier, persona, ctx.steps, leaf=ctx.operation.label if ctx.operation else ctx.label,
                       target_page=ctx.title, **operation))


def _end_context(page: GemPage) -> LeafContext:
    node = FunctionNode.objects.filter(page=page, is_leaf=True, merged_into__isnull=True).first()
    title = _page_title(page)
    return LeafContext(leaf_id=node.id if node else None, package=page.app.package,
                       app_label=page.app.display_label, label=(node.label if node else "") or title,
                       page_id=page.id, title=title, activity=page.activity, items=_items(page, {title}))


def cross_app_candidates(contexts: list[LeafContext], config: dict, rng: random.Random, limit: int):
    """(start context, end page, matched I/O, cross path edges) grounded in GEM: a compatible
    endpoint in another app and a usable path from the start page to it."""
    graph_api, apps = gem, set(config["apps"])
    starts = [c for c in contexts if c.has_path]
    rng.shuffle(starts)
    now, found = timezone.now(), []
    every_page, usable_only = graph_api.gem_graph(include_unreachable=True), graph_api.gem_graph()
    for start in starts[: max(limit * 4, 20)]:
        for end_id, matched in graph_api.compatible_endpoints(start.page_id, every_page) or []:
            end = GemPage.objects.select_related("app").filter(pk=end_id).first()
            if end is None or end.app.package == start.package or (apps and end.app.package not in apps):
                continue
            path = graph_api.cross_app_path(start.page_id, end_id, usable_only)
            if not path:
                continue
            edges = Edge.objects.in_bulk(path)
            if len(edges) != len(set(path)) or not all(usable(edges[e], now) for e in path):
                continue  # the path-existence check: every edge there and traversable
            found.append((start, end, matched, list(path)))
            break
        if len(found) >= limit:
            break
    return found


RELATION_SUBCLASS = {"relay": "dependent_operation", "contrast": "conditional_operation",
                     "parallel": "parallel_operation"}
RELATION_CAPABILITIES = {"relay": ["cross_page_state_tracking"], "contrast": ["information_synthesis"],
                         "parallel": []}


def plan_cross_app(contexts: list[LeafContext], config: dict) -> list[QueryDraft]:
    count = config["cross_app"]
    if not count:
        return []
    rng = random.Random(f"{config['seed']}:cross")
    candidates = cross_app_candidates(contexts, config, rng, count)
    if not candidates:
        return []
    graph_api = gem
    personas = config["personas"]
    drafts = []
    for n in range(count):
        start, end_page, matched, cross_path = candidates[n % len(candidates)]
        relation = CROSS_APP_RELATIONS[n % len(CROSS_APP_RELATIONS)]
        if n >= len(candidates) * len(CROSS_APP_RELATIONS):
            break  # every (pair, relation) used once: more would only repeat
        end = _end_context(end_page)
        persona = personas[n % len(personas)]
        subclass = RELATION_SUBCLASS[relation]
        capabilities = [c for c in RELATION_CAPABILITIES[relation] if c in config["capabilities"]]
        draft_rng = random.Random(f"{config['seed']}:cross:{n}")
        text = compose_cross(start, end, relation, matched, persona, capabilities, draft_rng)
        steps = start.steps + [dict(s) for s in graph_api.known_path_steps(cross_path)]
        milestones = [*start.milestone_titles, end.title]
        drafts.append(QueryDraft(
            text=text, apps=[start.package, end.package], tier=SUBCLASS_TIER[subclass], subclass=subclass,
            persona=persona, capabilities=capabilities, styled=True,
            functions=[f for f in (start.leaf_id, end.leaf_id) if f],
            gem_path=list(start.edge_ids or []) + cross_path,
            known_path={"mode": "tap", "summary": f"{start.app_label} {start.title} → {end.app_label} {end.title}",
                        "steps": steps},
            verification=draft_verification(end.package, end.activity, end.title, milestones),
            labels=_labels(SUBCLASS_TIER[subclass], persona, steps, relation=relation, io=matched,
                           leaf=start.label, target_page=end.title)))
    return drafts


def plan_drafts(config: dict, problems: list | None = None) -> list[QueryDraft]:
    """Every draft of a run: single-app drafts over the leaves, then grounded cross-app drafts."""
    config = normalized_config(config)
    contexts = load_contexts(config["apps"], problems)
    drafts = plan_single_app(contexts, config)
    cross = plan_cross_app(contexts, config)
    if problems is not None and len(cross) < config["cross_app"]:
        problems.append({"kind": "cross_app", "detail": f"{len(cross)} of {config['cross_app']} cross-app "
                                                        "queries: no more compatible endpoints with a usable path"})
    return drafts + cross
