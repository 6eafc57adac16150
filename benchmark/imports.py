"""Benchmark versions from files: MobileGUI-VBench's published JSONL and the farm's own task set (§4.2).

MobileGUI-VBench (150 Chinese tasks over 40 apps; /work/shared/data/mobilegui-vbench/README.md)
carries six fields per task, and each one lands somewhere:

    task_id                    the query key `vbench-<id>` and the item's external id
    query                      the query text
    scenario                   the Table 4 category (the eight scenario names below; another is an error)
    involved_apps              the app names ('、'-joined) in `requirements.app_names`, the app scope,
                               the ownership (system apps such as 相册 → system), catalog App links
                               where an App's label is that name, and whether any phone here can run it
    precondition               the item's preconditions (';'-separated), reset per run
    clarification_requirement  the expected interaction (接管 → call_user; 澄清/询问/确认 → clarify;
                               else execute) and the item's interaction point

The rule tagger adds what the file does not say: the ambiguity tier (→ explicitness), the step
depth (→ path complexity) and the risk grade. Benchmark queries are evaluation-only: no collection
run draws them, so nothing of a benchmark feeds training.

Import is all or nothing: the whole file is validated first and any bad line imports nothing.
"""
import hashlib
import json
import re
from copy import deepcopy
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from benchmark import versions
from benchmark.models import Benchmark, BenchmarkItem, FrozenBenchmark, Split
from benchmark.presets import VBENCH
from benchmark.rules.metric_system import path_complexity
from devices.models import Device
from flywheel.models import App, Query
from flywheel.queries.external_tags import tag_external
from flywheel.queries.jsonl import QueryImportError, import_queries, parse_queries_jsonl

VBENCH_FIELDS = {"task_id": int, "query": str, "scenario": str, "involved_apps": str, "precondition": str,
                 "clarification_requirement": str}
SCENARIO_CATEGORIES = {"视频播放": "video", "购物优惠": "shopping", "便捷生活": "life", "社交通讯": "social",
                       "旅游出行": "travel", "音乐电台": "music", "交通导航": "navigation", "资讯阅读": "news"}
# Apps every phone ships with (the system side of Table 4's ownership split).
SYSTEM_APP_NAMES = {"相册", "图库", "短信", "信息", "日历", "时钟", "闹钟", "计算器", "设置", "相机", "通讯录",
                    "电话", "联系人", "备忘录", "文件管理", "录音机", "应用商店", "天气", "Settings", "Gallery",
                    "Photos", "Messages", "Calendar", "Clock", "Calculator", "Camera", "Contacts"}
HANDOVER_MARKERS = ("接管", "hand over", "hand-over", "handover", "hand control", "call_user")
CLARIFY_MARKERS = ("澄清", "询问", "确认", "clarify", "ask", "confirm")
TIER_EXPLICITNESS = {"L1": "explicit", "L2": "implicit", "L3": "underspecified"}
FARM_REVIEW_NOTE = ("the farm's tasks carry their own checks (terminal checks, milestones, known path), "
                    "written with the virtual apps; approved as written")


class BenchmarkImportError(Exception):
    """A file that cannot be imported as a benchmark version; `problems` names each, by line."""

    def __init__(self, problems):
        self.problems = list(problems)
        shown = "; ".join(self.problems[:20])
        more = f" (and {len(self.problems) - 20} more)" if len(self.problems) > 20 else ""
        super().__init__(shown + more)


# ---- reading the file ------------------------------------------------------------------------------

def app_names(involved_apps: str) -> list[str]:
    return list(dict.fromkeys(name.strip() for name in involved_apps.split("、") if name.strip()))


def split_preconditions(text: str) -> list[str]:
    """The conditions of a precondition field (';' or '；' between them), each once, in order."""
    return list(dict.fromkeys(part.strip() for part in re.split(r"[;；]", text or "") if part.strip()))


def vbench_interaction(requirement: str) -> str:
    """What a clarification requirement expects of the model: call_user, clarify or execute."""
    text = (requirement or "").lower()
    if any(marker in text for marker in HANDOVER_MARKERS):
        return "call_user"
    if any(marker in text for marker in CLARIFY_MARKERS):
        return "clarify"
    return "execute"


def clarify_answer(requirement: str) -> str | None:
    """The answer a requirement gives for its question, e.g. 澄清哪一个（第一个） → 第一个."""
    match = re.search(r"[（(]([^）)]+)[）)]", requirement or "")
    return match.group(1).strip() if match else None


def _record_problems(record, line_no) -> list[str]:
    if not isinstance(record, dict):
        return [f"line {line_no}: a task is a JSON object, not {type(record).__name__}"]
    problems = [f"line {line_no}: missing field {name!r}" for name in VBENCH_FIELDS if name not in record]
    problems += [f"line {line_no}: unknown field {name!r} (the fields are {', '.join(VBENCH_FIELDS)})"
                 for name in record if name not in VBENCH_FIELDS]
    for name, kind in VBENCH_FIELDS.items():
        value = record.get(name)
        if name in record and (not isinstance(value, kind) or isinstance(value, bool)):
            problems.append(f"line {line_no}: {name} must be {'an integer' if kind is int else 'a string'}, "
                            f"not {type(value).__name__}")
    if problems:
        return problems
    if record["task_id"] < 1:
        problems.append(f"line {line_no}: task_id must be a positive integer")
    if not record["query"].strip():
        problems.append(f"line {line_no}: query is empty")
    if record["scenario"] not in SCENARIO_CATEGORIES:
        problems.append(f"line {line_no}: unknown scenario {record['scenario']!r} "
                        f"(known: {', '.join(SCENARIO_CATEGORIES)})")
    if not app_names(record["involved_apps"]):
        problems.append(f"line {line_no}: involved_apps names no app")
    return problems


def parse_vbench_jsonl(text: str) -> list[dict]:
    """Every task of the file, validated as a whole; BenchmarkImportError lists each bad line."""
    records, problems, seen = [], [], {}
    for line_no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as error:
            problems.append(f"line {line_no}: not valid JSON ({error.msg} at column {error.colno})")
            continue
        line_problems = _record_problems(record, line_no)
        if not line_problems and record["task_id"] in seen:
            line_problems = [f"line {line_no}: task_id {record['task_id']} repeats line {seen[record['task_id']]}"]
        problems += line_problems
        if not line_problems:
            seen[record["task_id"]] = line_no
            records.append({**record, "_line": line_no})
    if not records and not problems:
        problems.append("the file contains no task")
    if problems:
        raise BenchmarkImportError(problems)
    return records


# ---- what phones here can run -------------------------------------------------------------------

def app_packages_by_name(names) -> dict:
    """Catalog apps whose label (or package) is one of the names: {name: App}."""
    names = set(names)
    found = {}
    for app in App.objects.filter(label__in=names) | App.objects.filter(package__in=names):
        found.setdefault(app.label if app.label in names else app.package, app)
    return found


def phone_app_sets() -> list[set]:
    return [set(apps or []) for apps in Device.objects.values_list("installed_apps", flat=True)]


def executability(names: list[str], catalog: dict, phones: list[set]) -> tuple[bool, str]:
    """(True, "") when one registered phone has every app the task needs, else why not."""
    packages = {name: catalog[name].package if name in catalog else None for name in names}
    if any(all(p is not None and p in phone for p in packages.values()) for phone in phones):
        return True, ""
    missing = [n for n, p in packages.items() if p is None or not any(p in phone for phone in phones)]
    if missing:
        return False, f"no phone here has {'、'.join(missing)}"[:300]
    return False, f"no single phone here has all of {'、'.join(names)}"[:300]


def refresh_executability(benchmark: Benchmark) -> int:
    """Recompute each item's executability from the phones registered now (before freezing)."""
    if Benchmark.objects.filter(pk=benchmark.pk, frozen=True).exists():
        raise FrozenBenchmark(f"{benchmark} is frozen; its items' executability was pinned when it froze")
    phones, changed = phone_app_sets(), 0
    items = list(benchmark.items.select_related("query"))
    catalog = app_packages_by_name({n for i in items for n in (i.query.requirements or {}).get("app_names", [])})
    for item in items:
        names = (item.query.requirements or {}).get("app_names") or item.query.app_packages
        ok, reason = executability(names, catalog, phones) if names else (True, "")
        if (ok, reason) != (item.executable, item.not_executable_reason):
            BenchmarkItem.objects.filter(pk=item.pk).update(executable=ok, not_executable_reason=reason)
            changed += 1
    return changed


# ---- MobileGUI-VBench -------------------------------------------------------------------------

def vbench_query_fields(record: dict, catalog: dict) -> dict:
    """The Query columns of one task (labels nested by axis as in the query format)."""
    names = app_names(record["involved_apps"])
    tags = tag_external(record["query"], apps=names)
    expected = vbench_interaction(record["clarification_requirement"])
    requirement = record["clarification_requirement"].strip()
    verification = ({"handoff": "call_user"} if expected == "call_user" else
                    {"clarify": {"answer": clarify_answer(requirement)}} if expected == "clarify" else {})
    linked = [catalog[n] for n in names if n in catalog]
    labels = {
        "scenario": {"ownership": "system" if all(n in SYSTEM_APP_NAMES for n in names) else "third-party",
                     "categories": [SCENARIO_CATEGORIES[record["scenario"]]]},
        "complexity": {"path": path_complexity(tags["step_depth"]), "steps": tags["step_depth"],
                       "app_scope": "cross-app" if len(names) > 1 else "single-app"},
        "interaction": {"explicitness": TIER_EXPLICITNESS[tags["ambiguity"]],
                        "instruction_type": "agent-executable" if expected == "execute" else "agent-user-interactive"},
        "risk": {"refusal_safety": "none"},
        "external": {"dataset": "MobileGUI-VBench", "task_id": record["task_id"], "scenario": record["scenario"],
                     "clarification_requirement": requirement,
                     "tagged": {k: tags[k] for k in ("step_depth", "ambiguity", "risk", "risk_reasons",
                                                     "prerequisites", "tagged_by")}},
    }
    return {"text": record["query"].strip(), "tier": tags["ambiguity"], "labels": labels, "risk": tags["risk"],
            "prerequisites": split_preconditions(record["precondition"]), "source": "external",
            "requirements": {"app_names": names, "apps": [a.package for a in linked]},
            "tags": ["MobileGUI-VBench", f"scenario:{record['scenario']}"], "verification": verification,
            "reset": {"force_stop": [a.package for a in linked], "home": True} if linked else {},
            "evaluation_only": True, "_apps": linked, "_expected": expected, "_requirement": requirement}


def import_vbench_jsonl(text: str, name: str = "MobileGUI-VBench", version: str = "v1", user=None,
                        freeze_as_reviewed: bool = False) -> Benchmark:
    """A benchmark version of every task in a MobileGUI-VBench JSONL text, left in expert review
    (or approved and frozen at once with `freeze_as_reviewed`). Nothing is written on any problem."""
    records = parse_vbench_jsonl(text)
    existing_version = Benchmark.objects.filter(name=name, version=version).first()
    if existing_version is not None:
        raise BenchmarkImportError([
            f"{name} {version} is imported already ({existing_version.get_status_display().lower()}, "
            f"{existing_version.items.count()} queries): import under another version, or derive one from it"])
    catalog = app_packages_by_name({n for r in records for n in app_names(r["involved_apps"])})
    phones = phone_app_sets()
    rows = [(r, f"vbench-{r['task_id']}", vbench_query_fields(r, catalog)) for r in records]
    stored = {q.key: q for q in Query.objects.filter(key__in=[key for _, key, _ in rows])}
    problems = []
    for record, key, fields in rows:
        query = stored.get(key)
        if query is not None and query.locked and any(getattr(query, f) != fields[f] for f in Query.LOCKED_FIELDS
                                                      if f in fields):
            problems.append(f"line {record['_line']}: query {key} is frozen into another benchmark version "
                            "with different text, labels or checks; it cannot change")
    if problems:
        raise BenchmarkImportError(problems)
    with transaction.atomic():
        benchmark = versions.create_version(
            name, version, deepcopy(VBENCH), purpose="MobileGUI-VBench as published (report §4.2): "
            "150 real-world tasks over 40 apps, imported for expert review", origin=Benchmark.Origin.IMPORTED,
            user=user)
        queries, facts = [], {}
        for record, key, fields in rows:
            columns = {k: v for k, v in fields.items() if not k.startswith("_")}
            query = stored.get(key)
            if query is None:
                query = Query.objects.create(key=key, **columns)
            else:
                for column, value in columns.items():
                    setattr(query, column, value)
                query.save()
            query.set_apps(fields["_apps"])
            queries.append(query)
            facts[query.pk] = (record, fields)

        def environment(query):
            record, _ = facts[query.pk]
            return {"preconditions": [{"text": text, "holds": "per_run"}
                                      for text in split_preconditions(record["precondition"])],
                    "reset": query.reset or {}}

        items = versions.add_queries(benchmark, queries, split=Split.HELD_OUT, environment=environment)
        for item in items:
            record, fields = facts[item.query_id]
            ok, reason = executability(fields["requirements"]["app_names"], catalog, phones)
            item.external_id = str(record["task_id"])
            item.executable, item.not_executable_reason = ok, reason
            item.expected_interaction = fields["_expected"]
            item.interaction_points = [fields["_requirement"]] if fields["_requirement"] else []
            item.labels = versions.labels_for(item.query, fields["_expected"])
            if freeze_as_reviewed:
                item.review, item.reviewed_by, item.reviewed_at = BenchmarkItem.Review.APPROVED, user, timezone.now()
                item.review_note = "imported as reviewed: the published file's own labels"
            item.save()
        Benchmark.objects.filter(pk=benchmark.pk).update(status=Benchmark.Status.REVIEW)
    if freeze_as_reviewed:
        return versions.freeze(benchmark, user)
    return Benchmark.objects.get(pk=benchmark.pk)


def import_vbench_file(path, **options) -> Benchmark:
    return import_vbench_jsonl(Path(path).read_text(encoding="utf-8"), **options)


# ---- the farm's own task set ---------------------------------------------------------------------

def _stable_rank(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def stratified_held_out(apps_by_key: dict[str, list[str]], share: float) -> set[str]:
    """The held-out keys: within each starting app, the keys first by a stable hash, about `share`
    of them, never all; afterwards every app of the set still has at least one open query."""
    strata = {}
    for key, apps in apps_by_key.items():
        strata.setdefault(apps[0] if apps else "", []).append(key)
    held = set()
    for keys in strata.values():
        ranked = sorted(keys, key=_stable_rank)
        held.update(ranked[:min(len(ranked) - 1, round(len(ranked) * share))])
    for app in sorted({a for apps in apps_by_key.values() for a in apps}):
        users = [k for k, apps in apps_by_key.items() if app in apps]
        if all(k in held for k in users):
            held.discard(max(users, key=_stable_rank))
    return held


def _lines_by_key(text: str) -> dict[str, str]:
    return {json.loads(raw)["key"]: raw for raw in text.splitlines() if raw.strip()}


def import_farm_tasks(path, name: str = "farm-tasks", version: str = "v1", held_out_share: float = 0.34,
                      user=None, freeze: bool = True) -> Benchmark:
    """A frozen benchmark version of the farm's task set with a stratified held-out third.

    The query rows are imported (or updated where not locked) first. Run again, it finds the
    version and changes nothing; `benchmark.import_report` says what happened."""
    if not 0 <= held_out_share <= 1:
        raise BenchmarkImportError(["held_out_share is a fraction in [0, 1]"])
    text = Path(path).read_text(encoding="utf-8")
    try:
        records = parse_queries_jsonl(text)
    except QueryImportError as error:
        raise BenchmarkImportError([str(p) for p in error.problems])
    keys = [r["key"] for r in records]
    benchmark = Benchmark.objects.filter(name=name, version=version).first()
    if benchmark is not None and benchmark.frozen:
        missing = sorted(set(keys) - set(benchmark.items.values_list("query__key", flat=True)))
        benchmark.import_report = {"created": False, "queries": {"created": 0, "updated": 0}, "missing": missing}
        return benchmark
    locked = set(Query.objects.filter(key__in=keys, locked=True).values_list("key", flat=True))
    lines = _lines_by_key(text)
    changed = [lines[k] for k in keys if k not in locked]
    counts = import_queries("\n".join(changed)) if changed else {"created": 0, "updated": 0}
    queries = {q.key: q for q in Query.objects.filter(key__in=keys)}
    apps_by_key = {r["key"]: list(dict.fromkeys(r["apps"])) for r in records}
    # A share of 1 makes the whole set evaluation material (the generalisation demo trains on generated queries).
    held = set(keys) if held_out_share == 1 else stratified_held_out(apps_by_key, held_out_share)
    with transaction.atomic():
        created = benchmark is None
        if created:
            benchmark = versions.create_version(
                name, version, {"size": len(keys)}, origin=Benchmark.Origin.FARM, user=user,
                purpose=f"The virtual farm's own task set ({len(keys)} queries, each with its own checks); " + (
                    "all held out for evaluation only" if held_out_share == 1 else
                    f"about {held_out_share:.0%} held out for evaluation only, stratified by app"))
        review = {"reviewed_by": user, "review_note": FARM_REVIEW_NOTE} if user is not None else {}
        versions.add_queries(benchmark, [queries[k] for k in keys if k not in held], split=Split.OPEN, **review)
        versions.add_queries(benchmark, [queries[k] for k in keys if k in held], split=Split.HELD_OUT, **review)
        BenchmarkItem.objects.filter(benchmark=benchmark, review=BenchmarkItem.Review.PENDING).update(
            review=BenchmarkItem.Review.APPROVED, review_note=FARM_REVIEW_NOTE, reviewed_by=user,
            reviewed_at=timezone.now())
        Benchmark.objects.filter(pk=benchmark.pk, status=Benchmark.Status.DRAFT).update(status=Benchmark.Status.REVIEW)
    benchmark = versions.freeze(benchmark, user) if freeze else Benchmark.objects.get(pk=benchmark.pk)
    benchmark.import_report = {"created": created, "queries": {"created": counts["created"],
                                                               "updated": counts["updated"]},
                               "held_out": len(held), "open": len(keys) - len(held), "missing": []}
    return benchmark
