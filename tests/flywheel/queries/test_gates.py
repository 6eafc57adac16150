"""The intake gates on a GEM and function tree in the database.

The function tree is the virtual farm's shop app's declared tree (simfarm/apps/shop.yaml, read
here as ground truth only); pages and edges are shaped as exploration writes them.
"""
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from flywheel.models import FunctionNode
from flywheel.queries.drafts import QueryDraft
from flywheel.queries.gates import run_gates
from flywheel.rules.intake_gates import complexity_label, polish, realism
from flywheel.screens import embedding
from simfarm.appspec import load_app
from tests.flywheel.queries.test_gem import make_app, make_edge, make_page

pytestmark = pytest.mark.django_db
SHOP = "com.sim.shop"
SHOP_YAML = Path(__file__).resolve().parents[3] / "simfarm" / "apps" / "shop.yaml"


@pytest.fixture
def world():
    spec = load_app(SHOP_YAML)
    app = make_app(SHOP, label=spec.label)
    pages = {"home": make_page(app, "home", is_start=True, title="ShopMart"),
             "search": make_page(app, "search", depth=1, title="Search"),
             "results": make_page(app, "results", depth=2, title="Results"),
             "cart": make_page(app, "cart", depth=1, title="Cart")}
    edges = {"home>search": make_edge(pages["home"], pages["search"]),
             "search>results": make_edge(pages["search"], pages["results"]),
             "home>cart": make_edge(pages["home"], pages["cart"])}
    nodes = {}
    declared = [f["id"] for f in spec.functions]
    for function in spec.functions:
        path = function["id"]
        parent = nodes.get(path.rsplit("/", 1)[0]) if "/" in path else None
        nodes[path] = FunctionNode.objects.create(
            app=app, path=path, label=function["name"], parent=parent,
            is_leaf=not any(other.startswith(path + "/") for other in declared),
            page=pages.get(function.get("page") or ""))
    return {"app": app, "pages": pages, "edges": edges, "nodes": nodes}


def draft(text, world, path=("home>search", "search>results"), function="search/keyword", persona="novice",
          **fields):
    return QueryDraft(text=text, apps=[SHOP], tier="L2", subclass="function_statement", persona=persona,
                      gem_path=[world["edges"][e].pk for e in path],
                      functions=[world["nodes"][function].pk] if function else [], **fields)


def test_a_good_draft_passes_all_three_gates_and_is_back_tagged(world):
    good = draft("Search for noise cancelling headphones in ShopMart", world)
    [result] = run_gates([good])
    assert result.passed, result.gate_results
    g1, g2, g3 = (result.gate_results[k] for k in ("gate1", "gate2", "gate3"))
    assert g1["passed"] and g1["completability"] and g1["realism"] >= 0.5
    assert g1["complexity"] == "low" and g1["path_steps"] == 2 and result.labels["step_depth"] == 2
    assert g2["before"] == "Search for noise cancelling headphones in ShopMart"
    assert g3["passed"] and g3["nodes"][0].startswith("search") and g3["agrees"] is True
    assert world["nodes"]["search/keyword"].pk == result.functions[0]


def test_every_rejection_keeps_its_gate_and_reason(world):
    world["edges"]["search>results"].reachable = False
    world["edges"]["search>results"].unreachable_until = timezone.now() + timedelta(hours=1)
    world["edges"]["search>results"].unreachable_reason = "Env_ERROR: app crashed"
    world["edges"]["search>results"].save()
    drafts = run_gates([
        draft("Step 1: open {app}. Step 2: search for None", world),
        draft("Search for headphones in ShopMart", world),
        draft("Search for headphones in ShopMart", world, path=()),
        QueryDraft(text="Open Settings and turn on Bluetooth", apps=["com.nowhere.app"], tier="L2",
                   subclass="function_statement", persona="novice"),
        draft("Call my grandmother and wish her a happy birthday", world, path=("home>cart",), function=None),
    ])
    unrealistic, broken, no_path_but_page, unknown_app, unanchored = drafts
    assert unrealistic.rejected_by == "gate1" and "not realistic" in unrealistic.rejection_reason
    assert "template leftover" in unrealistic.rejection_reason
    assert broken.rejected_by == "gate1" and "temporarily unreachable" in broken.rejection_reason
    assert "Env_ERROR" in broken.gate_results["gate1"]["reason"]
    # No path given: its function's page is reachable from the start page through the GEM?
    # The only way to Results goes through the broken edge, so no.
    assert no_path_but_page.rejected_by == "gate1" and "not reachable" in no_path_but_page.rejection_reason
    assert unknown_app.rejected_by == "gate1" and "unknown app com.nowhere.app" in unknown_app.rejection_reason
    assert unanchored.rejected_by == "gate3"
    assert unanchored.rejection_reason.startswith("no function-tree node matches (best ")
    assert unanchored.gate_results["gate1"]["passed"] and not unanchored.gate_results["gate3"]["passed"]
    assert "gate2" not in broken.gate_results and "gate3" not in broken.gate_results


def test_an_edge_whose_unreachable_time_has_passed_is_usable_again(world):
    edge = world["edges"]["search>results"]
    edge.reachable, edge.unreachable_until = False, timezone.now() - timedelta(minutes=1)
    edge.save()
    [result] = run_gates([draft("Search for headphones in ShopMart", world)])
    assert result.gate_results["gate1"]["completability"] is True


def test_back_tagging_finds_the_node_without_being_told(world):
    cases = {"Remove the phone case from my shopping cart": "cart/remove_item",
             "Filter the search results by brand": "search/filter/brand",
             "Sort the results by price": "search/sort"}
    drafts = [draft(text, world, function=None) for text in cases]
    run_gates(drafts)
    for result, expected in zip(drafts, cases.values()):
        assert result.passed, result.gate_results
        assert any(node == expected or node.startswith(expected + "/") for node in result.gate_results["gate3"]["nodes"]), \
            (result.text, result.gate_results["gate3"])
        assert result.functions and result.gate_results["gate3"]["agrees"] is None


def test_disagreement_with_the_generated_leaf_is_recorded(world):
    [result] = run_gates([draft("Sort the results by price", world, function="cart/remove_item")])
    assert result.passed and result.gate_results["gate3"]["agrees"] is False
    assert result.functions == [world["nodes"]["cart/remove_item"].pk]   # the leaf it was made for stays


def test_pruned_and_merged_nodes_are_not_anchors(world):
    nodes = world["nodes"]
    FunctionNode.objects.filter(path__startswith="search/sort").update(status="pruned")
    [result] = run_gates([draft("Sort the results by price", world, function=None)])
    assert not any(n.startswith("search/sort") for n in result.gate_results["gate3"]["nodes"])
    assert nodes["search/sort"].pk not in result.functions


def test_polishing_removes_machine_accent_and_follows_the_persona():
    text, rules = polish("I would like you to search for “Sony WH-1000” in ShopMart right now, please.", "gen_z_student")
    assert "I would like you to" not in text and "“Sony WH-1000”" in text
    assert "rn" in text and "pls" in text and not text.endswith(".")
    assert rules and all(isinstance(rule, str) for rule in rules)
    stepwise, _ = polish("Step 1: open ShopMart. Step 2: tap Search.", "programmer")
    assert "Step" not in stepwise and "then" in stepwise
    assert polish("Open the cart", "business_professional")[0] == "Open the cart."
    # deterministic
    assert polish("Open the cart in ShopMart", "senior_citizen") == polish("Open the cart in ShopMart", "senior_citizen")


def test_realism_rules_and_complexity_bins():
    assert realism("Search for headphones in ShopMart")[0] == 1.0
    assert realism("open open the cart")[1] == ["doubled word"]
    for bad in ("As an AI, I will open the cart", "**Open** the cart now please", "Search for None in the shop",
                "Find {item} in the shop", "x1y2 4f3a9b2c 77 open"):
        score, reasons = realism(bad)
        assert score < 0.5 and reasons, bad
    assert realism("在QQ音乐里放周杰伦的晴天")[0] == 1.0
    assert [complexity_label(n) for n in (1, 5, 6, 10, 11)] == ["low", "low", "medium", "medium", "high"]
    assert complexity_label(3, ["looping", "conditional_logic"]) == "medium"


def test_500_drafts_are_gated_in_one_call(world):
    texts = ["Search for {} in ShopMart", "Sort the {} results by price", "Open the cart and look for {}",
             "Filter {} results by brand in ShopMart"]
    items = ["headphones", "a phone case", "running shoes", "a coffee grinder", "batteries"]
    drafts = [draft(f"{texts[i % 4].format(items[i % 5])} #{i // 20}".replace(" #0", ""), world, persona=p)
              for i, p in zip(range(500), ["novice", "programmer", "travel_blogger", "delivery_rider"] * 125)]
    embedding._vectors.clear()
    run_gates(drafts)
    # Speed is measured by perf/queries.py, not asserted here.
    assert sum(d.passed for d in drafts) > 400
