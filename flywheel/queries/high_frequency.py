"""High-frequency task data (Xiaomi-GUI-0 §3.1): for the most-used functions, several functionally
equivalent queries, one per GEM path through a different entry point.

"Most-used" is read from what real users asked: the number of real-user queries (source external
or badcase, i.e. imported user requests and failed user cases) linked to a function-tree leaf, a
reuse node counting for its canonical leaf. The report pairs "real-user query variants" with the
trajectories, so a function no user asked for is not high-frequency; collected trajectories only
break ties. For each of the top K leaves, flywheel.rules.high_frequency picks up to N paths from
the app's start page to the leaf's page, one per entry point; each becomes a draft in the same
goal wording (an L2 function statement, planner.leaf_draft) with that path as its known path and
gem_path, and every draft passes the intake gates (gates.run_gates) like a generated one. Written
queries wait in review, tagged "high-frequency" and their group ("hf-<leaf id>"); the facts are
in labels["high_frequency"]. A query's key is "hf-<leaf>-<edge ids>", so a second launch writes
no duplicate, and a function's existing paths count toward its N.
"""
from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

from django.db import transaction
from django.db.models import Count
from django.db.models.functions import Coalesce
from django.utils import timezone

from flywheel.models import (
    App,
    Edge,
    FunctionNode,
    GenerationRun,
    Outcome,
    Query,
    QueryApp,
    QueryFunction,
    Source,
    Trajectory,
)
from flywheel.queries.function_tree.edit import leaves as counted_leaves
from flywheel.queries.gates import run_gates
from flywheel.queries.gem import graph as gem
from flywheel.queries.generation.planner import (
    SYSTEM_KINDS,
    edge_phrase,
    leaf_draft,
    load_contexts,
    steps_with_open,
)
from flywheel.queries.generation.runs import refresh_counts, rejection_report
from flywheel.queries.vocabulary import PERSONAS
from flywheel.rules.high_frequency import equivalent_entry_paths, path_group_id, path_signature

TAG = "high-frequency"
REAL_USER_SOURCES = (Source.EXTERNAL, Source.BADCASE)
SUBCLASS = "function_statement"  # one goal wording family for every path of a function
LIMITS = {"top_k": (1, 200), "per_function": (2, 10), "seed": (0, 2**31)}
KEY_PREFIX = "hf"


@dataclass
class FunctionPlan:
    leaf: FunctionNode
    usage: int                 # real-user queries
    trajectories: int
    paths: list = field(default_factory=list)     # EntryPath, chosen for this launch
    existing: int = 0          # its high-frequency queries written before


@dataclass
class HighFrequencyResult:
    run: GenerationRun | None
    functions: list[FunctionPlan]
    created: int = 0
    passed: int = 0
    problems: list[str] = field(default_factory=list)


def _bounded(name: str, value) -> int:
    low, high = LIMITS[name]
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name.replace('_', ' ')}: must be a whole number") from None
    if not low <= number <= high:
        raise ValueError(f"{name.replace('_', ' ')}: must be between {low} and {high}")
    return number


# -- the usage signal -------------------------------------------------------------------------------

def function_usage(apps=None) -> list[tuple[FunctionNode, int, int]]:
    """(leaf, real-user queries, trajectories) for the counted leaves that have a page (of the
    named apps, else of every non-system app), most used first; only leaves some user asked for."""
    canonical = Coalesce("function__reuse_of_id", "function_id")  # a reuse node counts for its canonical leaf
    asked = (QueryFunction.objects.filter(query__source__in=REAL_USER_SOURCES).annotate(node=canonical)
             .values_list("node", "query_id").distinct())
    usage = Counter(node for node, _query in asked)
    if not usage:
        return []
    tried = Counter(dict(QueryFunction.objects.annotate(node=canonical).filter(node__in=list(usage)).order_by()
                         .values("node").annotate(n=Count("query__trajectories")).values_list("node", "n")))
    leaves = counted_leaves().filter(pk__in=list(usage), page__isnull=False).select_related("app", "page")
    leaves = leaves.filter(app__package__in=apps) if apps else leaves.filter(app__is_system=False)
    rows = [(leaf, usage[leaf.pk], tried[leaf.pk]) for leaf in leaves]
    return sorted(rows, key=lambda row: (-row[1], -row[2], row[0].app.package, row[0].path))


def top_functions(top_k: int, apps=None) -> list[tuple[FunctionNode, int, int]]:
    return function_usage(apps)[:top_k]


# -- paths ------------------------------------------------------------------------------------------

def target_pages(leaf: FunctionNode) -> set[int]:
    """Where the function is done: its page and the pages of its reuse nodes (§2.2.1)."""
    reuse = FunctionNode.objects.filter(reuse_of=leaf, merged_into__isnull=True, page__isnull=False).exclude(
        status=FunctionNode.Status.PRUNED).values_list("page_id", flat=True)
    return {leaf.page_id, *reuse}


def function_paths(leaf: FunctionNode, limit: int) -> list:
    """Up to `limit` EntryPaths from the app's start page (after a launch from Home, where every
    task starts) to the function, over the app's usable GEM edges."""
    package = leaf.app.package
    start = gem.start_page(package)
    if start is None:
        return []
    graph = gem.gem_graph(app_packages=[package])
    links = [(key, u, v, gem.STEP_COST.get(data.get("via"), 1))
             for u, v, key, data in graph.edges(keys=True, data=True)]
    return equivalent_entry_paths(links, [start], target_pages(leaf), limit)


def _title(page) -> str:
    return page.title or (page.texts[0] if page.texts else page.name)


def context_along(ctx, path, edges: dict):
    """The leaf's generation context with `path` as its way there: steps, narration and the
    milestones follow this path; a path ending on a reuse node's page asks for that page only."""
    end = edges[path.edges[-1]].target if path.edges else None
    if end is not None and end.pk != ctx.page_id:
        ctx = replace(ctx, page_id=end.pk, title=_title(end), activity=end.activity, operation=None, items=[])
    steps = steps_with_open(ctx.package, gem.known_path_steps(path.edges))
    if ctx.operation is not None:
        steps += ctx.operation.steps
    pages = [edges[e].target for e in path.edges]
    return replace(ctx, edge_ids=list(path.edges), steps=steps,
                   narration=[("open", ctx.app_label)] + [edge_phrase(edges[e]) for e in path.edges],
                   milestone_titles=[_title(p) for p in pages if p.kind not in SYSTEM_KINDS] or [ctx.title])


def query_key(leaf_id, path) -> str:
    return f"{KEY_PREFIX}-{leaf_id}-{path_signature(path.edges)}"


def plan(top_k: int, per_function: int, apps=None, seed: int = 0) -> tuple[list[FunctionPlan], list, list[str]]:
    """(the functions and their new paths, [(key, draft)], problems); reads only."""
    problems, plans, drafts = [], [], []
    chosen = top_functions(top_k, apps)
    if not chosen:
        problems.append("no function has real-user queries (external or badcase) linked to it yet")
        return plans, drafts, problems
    existing, kept = defaultdict(set), Counter()  # every key written, and the ones not rejected
    for key, labels, status in Query.objects.filter(labels__has_key="high_frequency").values_list(
            "key", "labels", "status"):
        function = (labels.get("high_frequency") or {}).get("function")
        existing[function].add(key)
        kept[function] += status != Query.Status.REJECTED
    contexts = {}
    for package in dict.fromkeys(leaf.app.package for leaf, _u, _t in chosen):
        contexts.update({ctx.leaf_id: ctx for ctx in load_contexts([package])})
    personas = list(PERSONAS)
    for leaf, usage, tried in chosen:
        found = function_paths(leaf, per_function)
        plan_row = FunctionPlan(leaf, usage, tried, existing=kept[leaf.pk])
        plans.append(plan_row)
        if len(found) < 2:
            problems.append(f"{leaf.app.display_label} · {leaf.label or leaf.path}: {len(found)} path(s) in the GEM, "
                            "no second entry point")
            continue
        ctx = contexts.get(leaf.pk)
        if ctx is None:
            problems.append(f"{leaf.app.display_label} · {leaf.label or leaf.path}: skipped by a device prior")
            continue
        room = per_function - kept[leaf.pk]
        fresh = [p for p in found if query_key(leaf.pk, p) not in existing[leaf.pk]][:max(0, room)]
        plan_row.paths = fresh
        edges = Edge.objects.filter(id__in={e for p in fresh for e in p.edges}).select_related(
            "source__app", "target__app").in_bulk()
        for path in fresh:
            variant = found.index(path) + 1
            rng = random.Random(f"{seed}:hf:{leaf.pk}:{path_signature(path.edges)}")
            draft = leaf_draft(context_along(ctx, path, edges), SUBCLASS, rng.choice(personas), [], rng)
            draft.labels["high_frequency"] = {
                "function": leaf.pk, "group": path_group_id(leaf.pk), "path": path_signature(path.edges),
                "entry": list(path.entry), "variant": variant, "paths_found": len(found), "usage": usage}
            drafts.append((query_key(leaf.pk, path), draft))
    return plans, drafts, problems


# -- writing ----------------------------------------------------------------------------------------

def _row(run, key, draft) -> Query:
    """A high-frequency query as generation writes one (runs.write_batch), with its own key and tags."""
    labels = {**draft.labels, "origin": draft.origin}
    gate1 = draft.gate_results.get("gate1") or {}
    if gate1.get("complexity") and "complexity" not in labels:
        labels["complexity"] = gate1["complexity"]
    rejected = bool(draft.rejected_by)
    return Query(key=key, text=draft.text, tier=draft.tier, subclass=draft.subclass, persona=draft.persona,
                 capabilities=list(draft.capabilities), labels=labels, risk=draft.risk or "low",
                 prerequisites=list(draft.prerequisites), source=Source.SYNTHESIZED,
                 tags=["generated", TAG, labels["high_frequency"]["group"]], known_path=draft.known_path,
                 verification=draft.verification, gate_results=draft.gate_results, generation_run=run,
                 gem_path=list(draft.gem_path), status=Query.Status.REJECTED if rejected else Query.Status.REVIEW,
                 status_reason=f"{draft.rejected_by}: {draft.rejection_reason}" if rejected else "")


def write_queries(run, keyed_drafts) -> int:
    """One transaction, under the apps' row locks (two launches at once write each key once):
    the queries not written yet, with their app and function links. Returns how many."""
    packages = sorted({p for _k, d in keyed_drafts for p in d.apps})
    with transaction.atomic():
        apps = {app.package: app for app in App.objects.select_for_update().filter(package__in=packages)}
        taken = set(Query.objects.filter(key__in=[k for k, _d in keyed_drafts]).values_list("key", flat=True))
        todo = [(k, d) for k, d in keyed_drafts if k not in taken]
        nodes = set(FunctionNode.objects.filter(id__in={f for _k, d in todo for f in d.functions})
                    .values_list("id", flat=True))
        rows = Query.objects.bulk_create([_row(run, k, d) for k, d in todo])
        QueryApp.objects.bulk_create([QueryApp(query_id=row.pk, app_id=apps[p].pk, position=i)
                                      for row, (_k, d) in zip(rows, todo) for i, p in enumerate(dict.fromkeys(d.apps))
                                      if p in apps])
        QueryFunction.objects.bulk_create([QueryFunction(query_id=row.pk, function_id=f, position=i)
                                           for row, (_k, d) in zip(rows, todo)
                                           for i, f in enumerate(f for f in dict.fromkeys(d.functions) if f in nodes)])
    return len(todo)


def create_high_frequency_queries(top_k: int = 10, per_function: int = 3, apps=None, seed: int = 0,
                                  user=None) -> HighFrequencyResult:
    """Plan, gate and write the high-frequency queries of the top `top_k` functions, up to
    `per_function` paths each (synchronously: K·N drafts, a few seconds). A launch that has
    nothing new to write makes no run."""
    top_k, per_function, seed = (_bounded(name, value) for name, value in
                                 (("top_k", top_k), ("per_function", per_function), ("seed", seed)))
    apps = [str(a) for a in apps or []]
    started = time.monotonic()
    plans, keyed, problems = plan(top_k, per_function, apps, seed)
    result = HighFrequencyResult(run=None, functions=plans, problems=problems)
    if not keyed:
        return result
    # What the run page shows; supplied_drafts keeps a worker from ever re-planning it as a generation run.
    config = {"apps": apps, "tiers": ["L2"], "subclasses": [SUBCLASS], "personas": list(PERSONAS), "seed": seed,
              "high_frequency": {"top_k": top_k, "per_function": per_function}, "supplied_drafts": len(keyed)}
    run = GenerationRun.objects.create(config=config, status="running", total=len(keyed), created_by=user,
                                       problems=[{"kind": "high_frequency", "detail": p} for p in problems])
    try:
        run_gates([d for _k, d in keyed])
        result.created = write_queries(run, keyed)
    except Exception as error:  # the run records why it stopped, as a generation run does, then the caller sees it
        GenerationRun.objects.filter(pk=run.pk).update(
            status="failed", finished_at=timezone.now(),
            problems=run.problems + [{"kind": "failed", "detail": f"{type(error).__name__}: {error}"[:500]}])
        raise
    counts = refresh_counts(run.pk)
    GenerationRun.objects.filter(pk=run.pk).update(
        status="done", finished_at=timezone.now(),
        report={"rejections": rejection_report(run.pk), "drafts": len(keyed),
                "timings": {"total_s": round(time.monotonic() - started, 3)},
                "functions": [{"function": p.leaf.pk, "usage": p.usage, "new_paths": len(p.paths)} for p in plans]})
    run.refresh_from_db()
    result.run, result.passed = run, counts["passed"]
    return result


def group_of(labels) -> str | None:
    """A query's high-frequency group from its labels (None for any other query): what the
    mixture's cap_per_group (training/rules/mixture.py) groups a query's rows by."""
    facts = labels.get("high_frequency") if isinstance(labels, dict) else None
    return facts.get("group") if isinstance(facts, dict) else None


# -- the figure ------------------------------------------------------------------------------------

def functions_with_collected_paths(min_paths: int = 2, successful_only: bool = True) -> int:
    """How many functions have at least `min_paths` distinct high-frequency paths collected: a
    trajectory judged True on the path's query (any trajectory when not `successful_only`)."""
    trajectories = Trajectory.objects.filter(query__labels__has_key="high_frequency")
    if successful_only:
        trajectories = trajectories.filter(verdict=Outcome.TRUE)
    paths = defaultdict(set)
    for labels in dict(trajectories.values_list("query_id", "query__labels")).values():
        facts = labels.get("high_frequency") or {}
        paths[facts.get("function")].add(facts.get("path"))
    return sum(len(found) >= min_paths for function, found in paths.items() if function is not None)
