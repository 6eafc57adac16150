"""Benchmark versions as a workflow: create, fill, review, freeze, derive (report §4.2, §4 "evolves").

Every write to a version, its items and the locks on their queries goes through these functions,
from the pages, the API and the commands alike.
"""
import hashlib
import json

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from accounts import history
from benchmark.models import Benchmark, BenchmarkItem, FrozenBenchmark, Interaction, Split
from benchmark.rules.metric_system import dimension_values, validate_labels
from benchmark.rules.quotas import app_overflow, deficits, drift, missing_must_include, quota_problems
from benchmark.rules.version_shifts import shift_quota, version_diff
from flywheel.models import Query

REFUSAL_VALUES = ("unsupported", "beyond-scope", "non-gui")


class VersionError(ValueError):
    """What is wrong with a request to change a version, in words a person can act on."""


def _editable(benchmark: Benchmark):
    if Benchmark.objects.filter(pk=benchmark.pk, frozen=True).exists():
        raise FrozenBenchmark(f"{benchmark} is frozen; derive a new version to change it")


def create_version(name: str, version: str, quota_table: dict | None = None, purpose: str = "",
                   origin: str = Benchmark.Origin.MANUAL, parent: Benchmark | None = None, user=None) -> Benchmark:
    problems = quota_problems(quota_table or {})
    if problems:
        raise VersionError("quota table: " + "; ".join(problems))
    if Benchmark.objects.filter(name=name, version=version).exists():
        raise VersionError(f"{name} {version} exists already; choose another version")
    return Benchmark.objects.create(name=name, version=version, quota_table=quota_table or {}, parent=parent,
                                    purpose=purpose or (quota_table or {}).get("purpose", ""), origin=origin,
                                    created_by=user)


def query_facts(query: Query) -> dict:
    """The inputs of `dimension_values` that live on a query and its apps."""
    apps = [{"package": link.app.package, "category": link.app.category, "is_system": link.app.is_system}
            for link in query.app_links.select_related("app")]
    return {"apps": apps, "functions": [link.function.path for link in query.function_links.select_related("function")],
            "subclass": query.subclass, "tier": query.tier, "known_path": query.known_path}


def expected_interaction_of(query: Query, values: dict | None = None) -> str:
    """What the query expects of the model, from its checks and labels (§4.3)."""
    verification = query.verification or {}
    if verification.get("handoff"):
        return Interaction.CLARIFY if verification["handoff"] == "clarify" else Interaction.CALL_USER
    if verification.get("clarify"):
        return Interaction.CLARIFY
    if (values or {}).get("refusal_safety") in REFUSAL_VALUES:
        return Interaction.REFUSE
    return Interaction.EXECUTE


def labels_for(query: Query, expected: str = "") -> dict:
    return dimension_values(query.labels, expected_interaction=expected, **query_facts(query))


def add_queries(benchmark: Benchmark, queries, split: str = Split.OPEN, environment=None, reviewed_by=None,
                review_note: str = "") -> list[BenchmarkItem]:
    """Add queries as items (labels derived, interaction expected); a held-out item's query is
    marked evaluation-only at once, so no collection run draws it from this moment on."""
    _editable(benchmark)
    if split not in Split.values:
        raise VersionError(f"split is one of {', '.join(Split.values)}")
    created = []
    with transaction.atomic():
        position = (benchmark.items.aggregate(n=Max("position"))["n"] or 0)
        present = set(benchmark.items.values_list("query_id", flat=True))
        for query in queries:
            if query.pk in present:
                continue
            position += 1
            facts = query_facts(query)  # read once: the labels are derived twice from them
            values = dimension_values(query.labels, expected_interaction="", **facts)
            expected = expected_interaction_of(query, values)
            values = dimension_values(query.labels, expected_interaction=expected, **facts)
            item = BenchmarkItem(benchmark=benchmark, query=query, position=position, split=split, labels=values,
                                 expected_interaction=expected,
                                 environment=environment(query) if callable(environment) else (environment or
                                                                                               default_environment(query)))
            if reviewed_by is not None:
                item.review, item.reviewed_by, item.reviewed_at = BenchmarkItem.Review.APPROVED, reviewed_by, timezone.now()
                item.review_note = review_note
            item.save()
            created.append(item)
        held_out = [i.query_id for i in created if i.split == Split.HELD_OUT]
        if held_out:
            Query.objects.filter(pk__in=held_out).update(evaluation_only=True)
        refresh_evolution(benchmark)
    return created


def default_environment(query: Query) -> dict:
    """The query's prerequisites as preconditions reset per run (an expert may say 'once')."""
    return {"preconditions": [{"text": str(p), "holds": "per_run"} for p in query.prerequisites or []],
            "reset": query.reset or {}}


def set_split(item: BenchmarkItem, split: str):
    _editable(item.benchmark)
    with transaction.atomic():
        item.split = split
        item.save(update_fields=["split"])
        if split == Split.HELD_OUT:
            Query.objects.filter(pk=item.query_id).update(evaluation_only=True)
        elif not BenchmarkItem.objects.filter(query_id=item.query_id, split=Split.HELD_OUT).exists():
            Query.objects.filter(pk=item.query_id).update(evaluation_only=False)


def review_item(item: BenchmarkItem, user, *, text: str | None = None, labels: dict | None = None,
                environment: dict | None = None, expected_interaction: str | None = None,
                interaction_points: list | None = None, note: str = "", decision: str = "approve") -> BenchmarkItem:
    """An expert's pass over one query: rewrite it, fix labels, attach the environment and the
    expected interaction, then approve it or retire it from this version (§4.2.4)."""
    _editable(item.benchmark)
    problems = validate_labels(labels or {})
    if expected_interaction is not None and expected_interaction not in Interaction.values:
        problems.append(f"expected interaction is one of {', '.join(Interaction.values)}")
    for i, condition in enumerate((environment or {}).get("preconditions") or []):
        if not isinstance(condition, dict) or not str(condition.get("text", "")).strip():
            problems.append(f"precondition {i + 1}: needs its text")
        elif condition.get("holds") not in ("once", "per_run"):
            problems.append(f"precondition {i + 1}: holds 'once' or 'per_run'")
    if decision not in ("approve", "retire", "save"):
        problems.append("decision is approve, retire or save")
    if text is not None and not text.strip():
        problems.append("the query text cannot be empty")
    if problems:
        raise VersionError("; ".join(problems))
    with transaction.atomic():
        query = Query.objects.select_for_update().get(pk=item.query_id)
        if text is not None and text.strip() != query.text:
            query.text = text.strip()
            query.save(update_fields=["text", "updated_at"])
        if labels:
            item.labels = {**item.labels, **{k: v for k, v in labels.items() if v}}
        if environment is not None:
            item.environment = environment
        if expected_interaction is not None:
            item.expected_interaction = expected_interaction
        if interaction_points is not None:
            item.interaction_points = [str(p) for p in interaction_points if str(p).strip()]
        item.review_note = note or item.review_note
        if decision != "save":
            item.review = BenchmarkItem.Review.APPROVED if decision == "approve" else BenchmarkItem.Review.RETIRED
            item.reviewed_by, item.reviewed_at = user, timezone.now()
        item.save()
        if item.benchmark.status == Benchmark.Status.DRAFT:
            Benchmark.objects.filter(pk=item.benchmark_id).update(status=Benchmark.Status.REVIEW)
        refresh_evolution(item.benchmark)
    return item


def freeze(benchmark: Benchmark, user) -> Benchmark:
    """Freeze after review: every item approved or retired, snapshots and a content hash stored,
    the queries locked. From here the version is immutable."""
    _editable(benchmark)
    with transaction.atomic():
        benchmark = Benchmark.objects.select_for_update().get(pk=benchmark.pk)
        items = list(benchmark.items.select_related("query").order_by("position", "pk"))
        pending = [i.query.key for i in items if i.review == BenchmarkItem.Review.PENDING]
        if pending:
            raise VersionError(f"{len(pending)} queries are not reviewed yet (first: {', '.join(pending[:3])}); "
                               "a version is frozen only after review")
        kept = [i for i in items if i.review == BenchmarkItem.Review.APPROVED]
        if not kept:
            raise VersionError("no approved query: nothing to freeze")
        digest = hashlib.sha256()
        for item in kept:
            item.snapshot = item.frozen_snapshot()
            item.save(update_fields=["snapshot"])
            digest.update(item.snapshot["sha256"].encode())
        Query.objects.filter(pk__in=[i.query_id for i in kept]).update(locked=True)
        refresh_evolution(benchmark)
        Benchmark.objects.filter(pk=benchmark.pk).update(
            frozen=True, status=Benchmark.Status.FROZEN, frozen_at=timezone.now(), frozen_by=user,
            content_hash=digest.hexdigest())
        history.record(benchmark, {"status": (benchmark.status, Benchmark.Status.FROZEN), "frozen": (False, True),
                                   "frozen_by": (None, getattr(user, "pk", None)),
                                   "content_hash": (benchmark.content_hash, digest.hexdigest())}, actor=user)
    return Benchmark.objects.get(pk=benchmark.pk)


def derive_version(parent: Benchmark, version: str, shifts: dict, user=None, name: str | None = None,
                   purpose: str = "") -> Benchmark:
    """A new draft from a parent by stated quota shifts; the parent's items carry over as reviewed."""
    try:
        table = shift_quota(parent.quota_table or {}, shifts or {})
    except ValueError as error:
        raise VersionError(str(error)) from error
    problems = quota_problems(table)
    if problems:
        raise VersionError("the shifted quota table: " + "; ".join(problems))
    with transaction.atomic():
        child = create_version(name or parent.name, version, table, purpose or parent.purpose,
                               origin=Benchmark.Origin.DERIVED, parent=parent, user=user)
        Benchmark.objects.filter(pk=child.pk).update(evolution={"shifts": shifts})
        child.refresh_from_db()
        for item in parent.items.exclude(review=BenchmarkItem.Review.RETIRED).order_by("position", "pk"):
            BenchmarkItem.objects.create(
                benchmark=child, query=item.query, position=item.position, split=item.split,
                external_id=item.external_id, executable=item.executable,
                not_executable_reason=item.not_executable_reason, labels=item.labels, environment=item.environment,
                expected_interaction=item.expected_interaction, interaction_points=item.interaction_points,
                review=BenchmarkItem.Review.APPROVED, reviewed_by=item.reviewed_by, reviewed_at=item.reviewed_at,
                review_note=f"carried over from {parent.version}")
        refresh_evolution(child)
    return Benchmark.objects.get(pk=child.pk)


def retire_items(benchmark: Benchmark, keys, user, note: str = "retired by the evolution") -> int:
    _editable(benchmark)
    items = list(benchmark.items.filter(query__key__in=list(keys)))
    for item in items:
        review_item(item, user, note=note, decision="retire")
    return len(items)


def refresh_evolution(benchmark: Benchmark):
    """Store the diff against the parent (moved shares, added and retired queries)."""
    if benchmark.parent_id is None or Benchmark.objects.filter(pk=benchmark.pk, frozen=True).exists():
        return
    parent = benchmark.parent
    live = benchmark.items.exclude(review=BenchmarkItem.Review.RETIRED)
    diff = version_diff(parent.quota_table or {}, benchmark.quota_table or {},
                        parent.items.exclude(review=BenchmarkItem.Review.RETIRED).values_list("query__key", flat=True),
                        live.values_list("query__key", flat=True))
    shifts = (Benchmark.objects.filter(pk=benchmark.pk).values_list("evolution", flat=True).first() or {}).get("shifts")
    Benchmark.objects.filter(pk=benchmark.pk).update(evolution={"shifts": shifts or {}, **diff})


def live_items(benchmark: Benchmark):
    return benchmark.items.exclude(review=BenchmarkItem.Review.RETIRED).select_related("query")


def composition(benchmark: Benchmark) -> dict:
    """Quota vs realised for the page and the API: drift rows, deficits, must-include, app caps."""
    items = list(live_items(benchmark))
    values = [i.labels for i in items]
    app_lists = [i.query.app_packages or (i.query.requirements or {}).get("app_names", []) for i in items]
    table = benchmark.quota_table or {}
    return {"size": len(items), "target_size": table.get("size"), "drift": drift(table, values),
            "deficits": deficits(table, values), "missing_must_include": missing_must_include(table, values),
            "app_overflow": app_overflow(app_lists, table.get("app_cap")),
            "unlabelled": [i.query.key for i in items if not any(i.labels.get(d) for d in ("path_complexity",
                                                                                         "category"))][:50]}


def items_digest(benchmark: Benchmark) -> str:
    return hashlib.sha256(json.dumps([i.snapshot.get("sha256") for i in live_items(benchmark)]).encode()).hexdigest()
