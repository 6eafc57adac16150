"""Query import/export as JSON Lines (docs/query-format.md, docs/query-format.schema.json).

Import is all or nothing: every line is validated against the published schema first, outside any
transaction, and a file with any bad line imports nothing; each problem is reported with its line
number and field. The writes then happen in one short transaction of bulk statements, so a large
import holds SQLite's write lock for a moment only (lease heartbeats must not wait behind it).
"""
import json
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from flywheel.models import App, FunctionNode, Query, QueryApp, QueryFunction
from flywheel.queries.query_format import record_problems
from flywheel.queries.vocabulary import vocabulary_errors
from flywheel.rules.query_keys import query_key_problem


@dataclass(frozen=True)
class ImportProblem:
    line: int
    field: str
    message: str

    def __str__(self):
        return f"line {self.line}: {self.field}: {self.message}"


class QueryImportError(Exception):
    def __init__(self, problems):
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems[:20]))


# Optional fields and their defaults; the schema says which fields exist and what they hold.
DEFAULTS = {
    "functions": list, "subclass": str, "persona": str, "capabilities": list, "labels": dict,
    "risk": lambda: "low", "prerequisites": list, "requirements": dict, "source": lambda: "synthesized",
    "tags": list, "known_path": lambda: None, "reset": dict,
}
FIELDS = ("key", "text", "apps", "functions", "tier", "subclass", "persona", "capabilities", "labels", "risk",
          "prerequisites", "requirements", "source", "tags", "known_path", "reset", "verification")
QUERY_COLUMNS = [name for name in FIELDS if name not in ("key", "apps", "functions")]
CHUNK = 500  # rows per IN (...) lookup, well under every database's parameter limit


def _validate_record(record, line_no):
    problems = [ImportProblem(line_no, field, message) for field, message in record_problems(record)]
    if not problems and query_key_problem(record["key"]):
        # The schema asks for a non-empty key; the characters a key may hold are the console's rule.
        problems = [ImportProblem(line_no, "key", query_key_problem(record["key"]))]
    if not problems:
        # The schema lists the vocabularies; that a subclass belongs to its tier it cannot say.
        problems = [ImportProblem(line_no, "subclass", message) for message in
                    vocabulary_errors(record["tier"], record.get("subclass", ""), "", [])]
    if problems:
        return None, problems
    clean = {name: record[name] if name in record else DEFAULTS[name]() for name in FIELDS}
    return clean, []


def parse_queries_jsonl(text):
    """Validate a whole JSONL text; return clean records or raise QueryImportError."""
    records, problems, seen = [], [], {}
    for line_no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as error:
            problems.append(ImportProblem(line_no, "(json)", f"not valid JSON: {error.msg} at column {error.colno}"))
            continue
        clean, line_problems = _validate_record(record, line_no)
        problems.extend(line_problems)
        if clean and not line_problems:
            if clean["key"] in seen:
                problems.append(ImportProblem(line_no, "key",
                                              f"duplicate of line {seen[clean['key']]}"))
            seen[clean["key"]] = line_no
            records.append(clean)
    if problems:
        raise QueryImportError(problems)
    if not records:
        raise QueryImportError([ImportProblem(0, "(file)", "contains no queries")])
    return records


def _chunks(items):
    items = list(items)
    for start in range(0, len(items), CHUNK):
        yield items[start:start + CHUNK]


def _existing(model, field, values, **filters):
    found = {}
    for chunk in _chunks(values):
        found.update((getattr(row, field), row) for row in model.objects.filter(**{f"{field}__in": chunk}, **filters))
    return found


def _ensure_apps(packages):
    App.objects.bulk_create([App(package=package) for package in packages], ignore_conflicts=True)
    return _existing(App, "package", packages)


def _ensure_function_nodes(apps, functions):
    """Every leaf and its ancestors (the tree stays connected), created depth by depth in bulk."""
    wanted = {}  # (package, path) -> is a leaf
    for function in functions:
        package, _, path = function.partition(":")
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            key = (package, "/".join(parts[:depth]))
            wanted[key] = wanted.get(key, False) or depth == len(parts)
    nodes = {}
    for depth in sorted({path.count("/") + 1 for _, path in wanted}):
        level = [key for key in wanted if key[1].count("/") + 1 == depth]
        FunctionNode.objects.bulk_create([
            FunctionNode(app=apps[package], path=path, label=path.rsplit("/", 1)[-1].replace("_", " "),
                         parent=nodes.get((package, path.rpartition("/")[0])), is_leaf=wanted[(package, path)])
            for package, path in level], ignore_conflicts=True)
        for package in {package for package, _ in level}:
            paths = [path for p, path in level if p == package]
            for path, node in _existing(FunctionNode, "path", paths, app=apps[package]).items():
                nodes[(package, path)] = node
    newly_leaves = [node.pk for key, node in nodes.items() if wanted[key] and not node.is_leaf]
    for chunk in _chunks(newly_leaves):
        FunctionNode.objects.filter(pk__in=chunk).update(is_leaf=True)
    return nodes


def import_queries(text):
    """Import (create or update by key) every query of a JSONL text: validate, then write in bulk."""
    records = parse_queries_jsonl(text)  # outside any transaction: nothing is locked while parsing
    packages = list(dict.fromkeys(p for r in records for p in [*r["apps"], *(f.partition(":")[0] for f in r["functions"])]))
    now = timezone.now()
    with transaction.atomic():
        apps = _ensure_apps(packages)
        nodes = _ensure_function_nodes(apps, [f for r in records for f in r["functions"]])
        existing = _existing(Query, "key", [r["key"] for r in records])
        new, changed = [], []
        for record in records:
            columns = {name: record[name] for name in QUERY_COLUMNS}
            query = existing.get(record["key"])
            if query is None:
                new.append(Query(key=record["key"], **columns))
            else:
                for name, value in columns.items():
                    setattr(query, name, value)
                query.updated_at = now
                changed.append(query)
        Query.objects.bulk_create(new, batch_size=CHUNK)
        Query.objects.bulk_update(changed, [*QUERY_COLUMNS, "updated_at"], batch_size=CHUNK)
        queries = _existing(Query, "key", [r["key"] for r in records])
        ids = [query.pk for query in queries.values()]
        for chunk in _chunks(ids):
            QueryApp.objects.filter(query_id__in=chunk).delete()
            QueryFunction.objects.filter(query_id__in=chunk).delete()
        app_links, function_links = [], []
        for record in records:
            query = queries[record["key"]]
            app_links += [QueryApp(query=query, app=apps[p], position=i)
                          for i, p in enumerate(dict.fromkeys(record["apps"]))]
            leaves = dict.fromkeys(nodes[(f.partition(":")[0], f.partition(":")[2].strip("/"))]
                                   for f in record["functions"])
            function_links += [QueryFunction(query=query, function=node, position=i) for i, node in enumerate(leaves)]
        QueryApp.objects.bulk_create(app_links, batch_size=CHUNK)
        QueryFunction.objects.bulk_create(function_links, batch_size=CHUNK)
    return {"created": len(new), "updated": len(changed), "total": len(records)}


def query_to_record(query):
    record = {"key": query.key, "text": query.text,
              "apps": [link.app.package for link in query.app_links.all()],
              "functions": [f"{link.function.app.package}:{link.function.path}"
                            for link in query.function_links.all()]}
    for name in FIELDS:
        if name not in record:
            record[name] = getattr(query, name)
    return record


def export_queries(queryset):
    """Yield one JSONL line per query, in the import format."""
    queryset = queryset.prefetch_related("app_links__app", "function_links__function__app").order_by("key")
    for query in queryset:
        yield json.dumps(query_to_record(query), ensure_ascii=False) + "\n"
