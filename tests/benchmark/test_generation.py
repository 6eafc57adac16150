"""Generation against a version's quota (§4.2.4): constraints → flywheel's generator → labelled,
validated drafts → quota selection → intake gates → held-out items pending review → patch rounds.

The world is built the way exploration and the tree builder leave it (GEM pages and edges, function
trees): six third-party apps of six categories, each a chain of pages with leaves at 2–11 taps (so
simple, moderate and complex known paths), a swipe and a long press on two apps' paths, decision
controls (Pay now, Place order, Send, Delete forever) on four target pages, GEM-grounded cross-app
pairs through the launcher, an unreachable leaf and an app whose category is not Table 4's.
"""
import json
import re
import types
from collections import Counter

import pytest

from benchmark import versions
from benchmark.generation import generate_against_quota
from benchmark.models import Benchmark, BenchmarkItem, FrozenBenchmark
from benchmark.rules.metric_system import validate_labels
from benchmark.rules.quotas import deficits
from benchmark.tasks import generate
from flywheel.models import App, Edge, FunctionNode, GemPage, GenerationRun, ModelVersion, Query
from flywheel.queries.gates import JUDGE_PROMPT
from flywheel.queries.generation.llm import SYSTEM as WRITER_PROMPT
from flywheel.queries.generation.runs import execute_run
from flywheel.queries.verification_drafts import verification_problems
from tests.flywheel.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db(reset_sequences=True)  # seeds follow the primary keys: the same in any order
LAUNCHER = "com.example.launcher"
# package, label, category, pages 1..11 in path order, {depth: decision control}, gesture edge
APPS = [
    ("com.example.shop", "ShopMart", "shopping",
     ["Categories", "Kitchen", "Kettles", "Product details", "Reviews", "Cart", "Delivery options", "Coupons",
      "Order notes", "Gift wrap", "Receipt"], {6: "Pay now"}, None),
    ("com.example.food", "FoodNow", "food",
     ["Restaurants", "Pizza place", "Menu", "Margherita", "Toppings", "Drinks", "Desserts", "Tip", "Rider notes",
      "Schedule", "Tracking"], {4: "Place order"}, None),
    ("com.example.chat", "ChatApp", "social",
     ["Chats", "Family group", "Group info", "Members", "Media", "Photos", "Albums", "Starred messages",
      "Chat settings", "Privacy", "Blocked contacts"], {2: "Send"}, None),
    ("com.example.video", "ClipTube", "video",
     ["Library", "Playlists", "Favourites", "Watch later", "Episode list", "Episode four", "Comments", "Replies",
      "Subtitles", "Audio track", "Video quality"], {}, (4, {"action": "swipe", "direction": "up"})),
    ("com.example.maps", "MapGo", "navigation",
     ["Saved places", "Home address", "Nearby", "Cafes", "Cafe Luna", "Directions", "Route options",
      "Avoid tolls", "Transit", "Bus times", "Live arrivals"], {},
     (2, {"action": "long_press", "target": {"text": "Home address"}})),
    ("com.example.notes", "Notes", "productivity",
     ["All notes", "Folders", "Work folder", "Meeting notes", "Checklist", "Reminders", "Archive", "Trash",
      "Labels", "Export", "Backup"], {8: "Delete forever"}, None),
]
LEAF_DEPTHS = (2, 4, 6, 8, 10, 11)
OUTPUTS = {("com.example.shop", 4): ["text: product title"], ("com.example.maps", 5): ["text: place name"],
           ("com.example.video", 6): ["text: episode title"], ("com.example.food", 3): ["text: dish name"]}
INPUTS = {"com.example.notes": ["text: search keyword"], "com.example.chat": ["text: message"]}
TABLE = {
    "size": 24,
    "shares": {"path_complexity": {"simple": 0.25, "moderate": 0.5, "complex": 0.25},
               "intent_dependency": {"single": 0.5, "independent": 0.15, "dependent": 0.35},
               "app_scope": {"single-app": 0.85, "cross-app": 0.15},
               "operation": {"tap-level": 0.75, "gesture-level": 0.25},
               "explicitness": {"explicit": 0.25, "implicit": 0.5, "underspecified": 0.25},
               "instruction_type": {"agent-executable": 0.7, "agent-user-interactive": 0.3}},
    "must_include": [{"dimension": "refusal_safety", "value": "high-sensitivity", "min": 2},
                     {"dimension": "refusal_safety", "value": "unsupported", "min": 1}],
    "app_cap": 5, "tolerance": 0.05,
}
REQUIRED = ("ownership", "category", "path_complexity", "intent_dependency", "app_scope", "operation",
            "explicitness", "instruction_type", "refusal_safety")


def _edge(source, target, action, via="tap", kind="intra"):
    return Edge.objects.create(source=source, target=target, action=action, via=via, kind=kind,
                               action_key=f"{source.pk}-{target.pk}-{via}")


def build_world():
    launcher_app = App.objects.create(package=LAUNCHER, label="Launcher", is_system=True)
    launcher = GemPage.objects.create(app=launcher_app, name="home", kind="launcher", title="",
                                      texts=[label for _p, label, *_ in APPS])
    homes, outputs = {}, []
    for package, label, category, titles, controls, gesture in APPS:
        app = App.objects.create(package=package, label=label, category=category)
        pages = [GemPage.objects.create(app=app, name="home", title=f"{label} Home", is_start=True,
                                        activity=f"{package}/.Main", inputs=INPUTS.get(package, []),
                                        texts=[f"{label} Home", titles[0], "Recently used"])]
        for depth, title in enumerate(titles, start=1):
            nxt = titles[depth] if depth < len(titles) else ""
            elements = [{"selector": {"text": nxt}, "text": nxt, "clickable": True}] if nxt else []
            if depth in controls:
                elements.append({"selector": {"text": controls[depth]}, "text": controls[depth],
                                 "class": "android.widget.Button", "clickable": True})
            pages.append(GemPage.objects.create(
                app=app, name=f"p{depth}", title=title, depth=depth, activity=f".Page{depth}Activity",
                outputs=OUTPUTS.get((package, depth), []), elements=elements,
                texts=[title, f"{title} overview", f"Top pick in {title.lower()}", "$12.50", "$19.90"]))
        for depth in range(1, len(pages)):
            action = {"action": "click", "target": {"text": titles[depth - 1]}}
            if gesture and gesture[0] == depth:
                action = gesture[1]
            _edge(pages[depth - 1], pages[depth], action)
        _edge(launcher, pages[0], {"action": "open", "app": package}, via="launch", kind="cross")
        root = FunctionNode.objects.create(app=app, path=package.split(".")[-1], label=label, is_leaf=False)
        for depth in LEAF_DEPTHS:
            FunctionNode.objects.create(app=app, path=f"{root.path}/{titles[depth - 1].lower().replace(' ', '_')}",
                                        label=titles[depth - 1], parent=root, is_leaf=True, page=pages[depth])
        homes[package] = pages
        outputs += [pages[d] for (p, d) in OUTPUTS if p == package]
    for page in outputs:
        _edge(page, launcher, {"action": "system_button", "button": "home"}, via="home", kind="cross")
    shop = App.objects.get(package="com.example.shop")
    lost = GemPage.objects.create(app=shop, name="lost", title="Gift cards", depth=3, texts=["Gift cards", "Redeem"])
    FunctionNode.objects.create(app=shop, path="shop/gift_cards", label="Gift cards", is_leaf=True, page=lost)
    arcade = App.objects.create(package="com.example.arcade", label="Arcade", category="gaming")
    start = GemPage.objects.create(app=arcade, name="home", title="Arcade Home", is_start=True, texts=["Arcade Home"])
    scores = GemPage.objects.create(app=arcade, name="scores", title="High scores", depth=1, texts=["High scores"])
    _edge(start, scores, {"action": "click", "target": {"text": "High scores"}})
    FunctionNode.objects.create(app=arcade, path="arcade/high_scores", label="High scores", is_leaf=True, page=scores)
    return types.SimpleNamespace(homes=homes)


@pytest.fixture
def world():
    from flywheel.queries.gem import graph as gem

    gem.invalidate()
    yield build_world()
    gem.invalidate()


def _version(table, version="v1"):
    return versions.create_version("VBench-test", version, table, purpose="quota generation test")


def _items(benchmark):
    return list(BenchmarkItem.objects.filter(benchmark=benchmark).select_related("query").order_by("position"))


def _patch_rounds_ask_only_short_cells(rounds):
    for record in rounds[1:]:
        previous = {(row["dimension"], row["value"]) for row in rounds[record["round"] - 2]["deficits_after"]}
        assert {(a["dimension"], a["value"]) for a in record["asked"]} <= previous
        assert ("refusal_safety", "unsupported") not in {(a["dimension"], a["value"]) for a in record["asked"]}


def test_generated_queries_are_labelled_held_out_pending_and_near_the_quota(world, manager):
    benchmark = _version(TABLE)
    report = generate_against_quota(benchmark, user=manager)
    json.dumps(report)  # the Celery task's result
    first, rounds = report["rounds"][0], report["rounds"]
    assert first["kind"] == "initial" and first["pool"] >= 3 * TABLE["size"] and first["selected"] == TABLE["size"]
    # Drafts with an invalid or missing required value are dropped with the reason counted.
    assert first["dropped"]["category: 'gaming' is not a Table 4 category"] > 0
    assert first["dropped"]["path_complexity: missing"] > 0  # the leaf no GEM path reaches
    assert report["before"]["drift"] == 6.0 and first["drift_after"] < 0.5  # six dimensions, all empty at first
    assert report["after"]["drift"] <= first["drift_after"] and report["after"]["missing"] <= first["missing_after"]
    _patch_rounds_ask_only_short_cells(rounds)
    assert [(r["dimension"], r["value"]) for r in report["unsteerable"]] == [("refusal_safety", "unsupported")]
    items = _items(benchmark)
    assert len(items) == report["added"] == sum(r["added"] for r in rounds)
    assert TABLE["size"] - 2 <= len(items) <= TABLE["size"] + 1
    assert [r for r in deficits(TABLE, [i.labels for i in items]) if r["missing"]] == report["after"]["deficits"]
    for item in items:
        query = item.query
        assert item.split == "held_out" and query.evaluation_only and item.review == "pending"
        assert query.status == Query.Status.REVIEW and query.source == "synthesized"
        assert validate_labels(item.labels) == [] and all(item.labels[k] for k in REQUIRED)
        assert {k: query.labels[k] for k in REQUIRED} == {k: item.labels[k] for k in REQUIRED}  # labelled at birth
        assert query.labels["annotated_by"] == "quota" and query.gate_results["gate1"]["passed"]
        if item.labels["instruction_type"] == "agent-user-interactive":
            control = query.labels["decision_point"]
            assert item.expected_interaction == "call_user" and query.verification["handoff"] == "call_user"
            assert control in query.text and {"text": control, "reason": "decision point: the user confirms"} in \
                query.verification["veto"]
            assert verification_problems(query.verification, query.app_packages) == []
    per_app = Counter(p for i in items for p in set(i.query.app_packages))
    assert max(per_app.values()) <= TABLE["app_cap"] and report["after"]["app_overflow"] == {}
    values = Counter((k, i.labels[k]) for i in items for k in REQUIRED)
    assert values[("refusal_safety", "high-sensitivity")] >= 2 and values[("app_scope", "cross-app")] >= 2
    assert values[("intent_dependency", "dependent")] >= 6 and values[("operation", "gesture-level")] >= 4
    assert values[("path_complexity", "complex")] >= 4 and values[("explicitness", "underspecified")] >= 4
    # Every round went through flywheel's generation run, which keeps the round's record.
    runs = GenerationRun.objects.filter(pk__in=[r["run"] for r in rounds if r["run"]])
    assert runs.count() == sum(1 for r in rounds if r["run"])
    for run in runs:
        assert run.status == "done" and run.config["benchmark"]["id"] == benchmark.pk and run.created_by == manager
        assert run.report["quota_round"]["run"] == run.pk and run.passed == run.report["quota_round"]["added"]


def test_patch_rounds_fill_what_the_gates_rejected_and_shrink_the_drift(world, settings):
    settings.GATE3_MIN_SIMILARITY = 0.6  # a strict back-tagging gate rejects some picks: holes to patch
    benchmark = _version(TABLE)
    report = generate_against_quota(benchmark)
    first, rounds = report["rounds"][0], report["rounds"]
    assert first["gate_rejected"]["gate3"] and first["added"] < first["selected"] == TABLE["size"]
    assert rounds[1]["kind"] == "patch" and rounds[1]["added"] > 0
    _patch_rounds_ask_only_short_cells([r for r in rounds if r["kind"] != "fill"])
    assert report["after"]["missing"] < first["missing_after"] / 2
    # The patch rounds shrink the drift by well over a third (a half before #31's wording, whose
    # better first round leaves less to patch: 0.85 -> 0.49 where it was 1.03 -> 0.47).
    assert report["after"]["drift"] < first["drift_after"] * 0.6
    items = _items(benchmark)
    assert TABLE["size"] - 2 <= len(items) <= TABLE["size"] and len(items) == report["after"]["items"]
    assert all(i.query.gate_results["gate3"]["passed"] and i.split == "held_out" for i in items)
    per_app = Counter(p for i in items for p in set(i.query.app_packages))
    assert max(per_app.values()) <= TABLE["app_cap"]
    rejected = Query.objects.filter(status=Query.Status.REJECTED)
    assert rejected.exists() and not BenchmarkItem.objects.filter(query__in=rejected).exists()


def test_a_version_with_items_is_asked_only_for_what_its_quota_still_lacks(world):
    table = {"size": 6, "shares": {"intent_dependency": {"single": 0.5, "independent": 0, "dependent": 0.5}},
             "app_cap": 3, "tolerance": 0.05}
    benchmark = _version(table)
    report = generate_against_quota(benchmark, max_rounds=0)  # the first pick only
    items = _items(benchmark)
    assert [r["kind"] for r in report["rounds"]] == ["initial"] and len(items) == 6
    assert Counter(i.labels["intent_dependency"] for i in items) == {"single": 3, "dependent": 3}
    versions.retire_items(benchmark, [i.query.key for i in items if i.labels["intent_dependency"] == "dependent"],
                          user=None)
    report = generate.apply(args=(benchmark.pk,)).get()  # the Celery task of the version page
    assert report["before"]["items"] == 3 and report["before"]["deficits"][0]["value"] == "dependent"
    asked = {(a["dimension"], a["value"]) for a in report["rounds"][0]["asked"]}
    assert asked == {("intent_dependency", "dependent")}
    live = [i.labels for i in versions.live_items(benchmark)]
    assert len(live) == 6 and [r for r in deficits(table, live) if r["missing"]] == [] == report["after"]["deficits"]
    assert report["stopped"] == "no reachable cell is short"


def test_a_run_of_supplied_drafts_is_never_planned_again(world):
    benchmark = _version({"size": 3, "shares": {"explicitness": {"explicit": 1, "implicit": 0, "underspecified": 0}}})
    report = generate_against_quota(benchmark, max_rounds=0)
    run = GenerationRun.objects.get(pk=report["rounds"][0]["run"])
    assert run.config["supplied_drafts"] == run.total == 3 and run.report["quota_round"]["added"] == 3
    assert all(i.labels["explicitness"] == "explicit" and i.query.tier == "L1" for i in _items(benchmark))
    GenerationRun.objects.filter(pk=run.pk).update(status="running")  # as if a worker picked it up again
    assert execute_run(run.pk)["status"] == "failed"
    run.refresh_from_db()
    assert "supplied by the caller" in run.problems[-1]["detail"] and Query.objects.count() == 3


def test_a_frozen_version_refuses_and_nothing_is_generated(world):
    benchmark = _version({"size": 4})
    Benchmark.objects.filter(pk=benchmark.pk).update(frozen=True, status="frozen")
    with pytest.raises(FrozenBenchmark):
        generate_against_quota(benchmark)
    assert not GenerationRun.objects.exists() and not Query.objects.exists()


def test_a_bad_request_is_refused_in_words(world):
    with pytest.raises(versions.VersionError, match="size"):
        generate_against_quota(_version({"shares": {"app_scope": {"single-app": 1}}}))
    offline = ModelVersion.objects.create(name="builtin", kind="offline")
    with pytest.raises(versions.VersionError, match="not an endpoint"):
        generate_against_quota(_version({"size": 3}, "v2"), model_version=offline)
    assert not GenerationRun.objects.exists()


class Answers(list):
    """Stub replies computed from each request (the writer, the judge, the rewrite)."""

    def __init__(self, stub):
        super().__init__()
        self.stub, self.writes, self.asking = stub, 0, 0

    def __bool__(self):
        return True

    def pop(self, index=-1):
        system, prompt = (m["content"] for m in self.stub.requests[-1]["messages"])
        if system == JUDGE_PROMPT:
            return 200, self.stub.chat_reply('{"realism": 0.9, "completable": true, "reason": "fine"}'), 0
        if system != WRITER_PROMPT:
            return 500, {"error": "no rewrite here"}, 0
        self.writes += 1
        if self.writes == 2:
            return 200, self.stub.chat_reply("Sure! Here you go."), 0
        leaf = re.search(r"Target function: (.*?) \(page", prompt).group(1)
        app = re.search(r"Apps: ([\w.]+?)\.?\n", prompt).group(1).split(".")[-1]
        control = re.search(r'goes through "([^"]+)"', prompt)
        text = f"hey could you pull up {leaf} in my {app} app, number {self.writes}"
        self.asking += bool(control)
        if control and self.asking != 1:  # the first reply for an asking query drops its decision point
            text += f", and then {control.group(1)} for me"
        return 200, self.stub.chat_reply(json.dumps({"text": text})), 0


def test_the_llm_path_writes_to_the_constraints_and_falls_back_offline(world):
    table = {"size": 6, "shares": {"instruction_type": {"agent-executable": 0.5, "agent-user-interactive": 0.5},
                                   "explicitness": {"explicit": 0, "implicit": 1, "underspecified": 0}},
             "app_cap": 2, "tolerance": 0.05}
    benchmark = _version(table)
    with StubOpenAI(model="writer") as stub:
        version = ModelVersion.objects.create(name="writer", kind="endpoint", endpoint_url=stub.url)
        stub.replies = Answers(stub)
        report = generate_against_quota(benchmark, model_version=version, max_rounds=1)
    writes = [r for r in stub.requests if r["messages"][0]["content"] == WRITER_PROMPT]
    assert writes and all("Benchmark constraints" in r["messages"][1]["content"] for r in writes)
    assert all("- Explicitness: implicit (name the function, never the path)" in r["messages"][1]["content"]
               for r in writes)
    first = report["rounds"][0]
    assert first["llm"]["offline: not JSON"] == 1 and first["llm"]["llm"] >= 3
    items = _items(benchmark)
    assert items and all(i.split == "held_out" and i.review == "pending" for i in items)
    origins = Counter(i.query.labels["origin"] for i in items)
    assert origins["llm"] >= 3
    for item in items:
        if item.query.labels["origin"] == "llm":
            assert "pull up" in item.query.text.lower() and "app, number" in item.query.text
            assert item.query.labels["offline_text"] != item.query.text
        if item.labels["instruction_type"] == "agent-user-interactive":
            assert item.query.labels["decision_point"] in item.query.text  # a reply dropping it was refused
    assert sum(v for k, v in first["llm"].items() if k.startswith("offline: drops the decision point")) == 1
    assert any('goes through "' in r["messages"][1]["content"] for r in writes)
    # the writer never judges its own drafts (§2.2.6): with no independent judge given, the rules do
    assert not any(i.query.gate_results["gate1"].get("judged_by") == "llm" for i in items)
    assert GenerationRun.objects.filter(model_version=version).count() == len([r for r in report["rounds"]
                                                                                if r["run"]])
