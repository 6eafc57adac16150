"""Query import/export as JSON Lines (docs/query-format.md).

Import is all or nothing: every line is validated first, and a file with any bad line imports
nothing; each problem is reported with its line number and field.
"""
import json
from dataclasses import dataclass

from django.db import transaction

from flywheel.models import App, FunctionNode, Query
from flywheel.models.queries import Risk, Source, Tier

TIER_VALUES = set(Tier.values)
RISK_VALUES = set(Risk.values)
SOURCE_VALUES = set(Source.values)


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


# field -> (python type(s), required, default)
FIELDS = {
    "key": (str, True, None),
    "text": (str, True, None),
    "apps": (list, True, None),
    "functions": (list, False, list),
    "tier": (str, True, None),
    "subclass": (str, False, str),
    "persona": (str, False, str),
    "capabilities": (list, False, list),
    "labels": (dict, False, dict),
    "risk": (str, False, lambda: "low"),
    "prerequisites": (list, False, list),
    "requirements": (dict, False, dict),
    "source": (str, False, lambda: "synthesized"),
    "tags": (list, False, list),
    "known_path": ((dict, type(None)), False, lambda: None),
    "reset": (dict, False, dict),
    "verification": (dict, True, None),
}
TYPE_NAMES = {str: "a string", list: "a list", dict: "an object"}


def _validate_record(record, line_no):
    problems = []
    if not isinstance(record, dict):
        return None, [ImportProblem(line_no, "(line)", "must be a JSON object")]
    unknown = sorted(set(record) - set(FIELDS))
    for name in unknown:
        problems.append(ImportProblem(line_no, name, "unknown field"))
    clean = {}
    for name, (types, required, default) in FIELDS.items():
        if name not in record:
            if required:
                problems.append(ImportProblem(line_no, name, "is required"))
            else:
                clean[name] = default()
            continue
        value = record[name]
        if not isinstance(value, types):
            expected = TYPE_NAMES.get(types, "an object or null")
            problems.append(ImportProblem(line_no, name, f"must be {expected}"))
            continue
        clean[name] = value
    if problems:
        return None, problems
    if not clean["key"].strip():
        problems.append(ImportProblem(line_no, "key", "must not be empty"))
    if not clean["text"].strip():
        problems.append(ImportProblem(line_no, "text", "must not be empty"))
    if not clean["apps"] or not all(isinstance(a, str) and a.strip() for a in clean["apps"]):
        problems.append(ImportProblem(line_no, "apps", "must list at least one package name"))
    if clean["tier"] not in TIER_VALUES:
        problems.append(ImportProblem(line_no, "tier", f"must be one of {sorted(TIER_VALUES)}"))
    if clean["risk"] not in RISK_VALUES:
        problems.append(ImportProblem(line_no, "risk", f"must be one of {sorted(RISK_VALUES)}"))
    if clean["source"] not in SOURCE_VALUES:
        problems.append(ImportProblem(line_no, "source", f"must be one of {sorted(SOURCE_VALUES)}"))
    for name in ("functions", "capabilities", "prerequisites", "tags"):
        if not all(isinstance(item, str) for item in clean[name]):
            problems.append(ImportProblem(line_no, name, "must be a list of strings"))
    for function in clean["functions"]:
        if isinstance(function, str) and ":" not in function:
            problems.append(ImportProblem(line_no, "functions",
                                          f"{function!r} must look like 'package:path/to/leaf'"))
    problems.extend(_validate_verification(clean["verification"], line_no))
    return clean, problems


def _validate_verification(spec, line_no):
    problems = []
    for name in ("terminal", "milestones", "veto"):
        if name in spec and not isinstance(spec[name], list):
            problems.append(ImportProblem(line_no, f"verification.{name}", "must be a list"))
    for i, check in enumerate(spec.get("terminal", []) if isinstance(spec.get("terminal"), list) else []):
        if not isinstance(check, dict) or "check" not in check:
            problems.append(ImportProblem(line_no, f"verification.terminal[{i}]",
                                          "must be an object with a 'check' kind"))
    return problems


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


def _function_node(app, path):
    """Get or create the leaf and its ancestors, so the tree stays connected."""
    parent = None
    parts = path.strip("/").split("/")
    for depth in range(1, len(parts) + 1):
        node_path = "/".join(parts[:depth])
        node, _ = FunctionNode.objects.get_or_create(
            app=app, path=node_path,
            defaults={"label": parts[depth - 1].replace("_", " "), "parent": parent,
                      "is_leaf": depth == len(parts)})
        if depth == len(parts) and not node.is_leaf:
            node.is_leaf = True
            node.save(update_fields=["is_leaf"])
        parent = node
    return parent


def import_queries(text):
    """Import (create or update by key) every query of a JSONL text in one transaction."""
    records = parse_queries_jsonl(text)
    created = updated = 0
    with transaction.atomic():
        apps = {}
        for record in records:
            for package in record["apps"]:
                if package not in apps:
                    apps[package], _ = App.objects.get_or_create(package=package)
        for record in records:
            fields = {k: v for k, v in record.items() if k not in ("key", "apps", "functions")}
            query, was_created = Query.objects.update_or_create(key=record["key"], defaults=fields)
            created += was_created
            updated += not was_created
            query.set_apps([apps[p] for p in dict.fromkeys(record["apps"])])
            nodes = []
            for function in record["functions"]:
                package, _, path = function.partition(":")
                app = apps.get(package) or App.objects.get_or_create(package=package)[0]
                nodes.append(_function_node(app, path))
            query.set_functions(list(dict.fromkeys(nodes)))
    return {"created": created, "updated": updated, "total": len(records)}


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
