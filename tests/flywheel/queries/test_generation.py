"""Query generation over function-tree leaves: the offline grammar, single-app and cross-app drafts,
draft verification specs, and the LLM writer behind a stub endpoint.

The GEM world is built directly in the DB (pages, edges, function nodes), the way exploration and
the tree builder would leave it; generation reads it through gem/graph.py and function_tree.builder.leaves.
"""
import sys
import types
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from flywheel.models import App, DevicePrior, Edge, FunctionNode, GemPage, ModelVersion
from flywheel.queries.drafts import QueryDraft
from flywheel.queries.generation import planner as generation
from flywheel.queries.generation.llm import ReplyRejected, parse_reply, rewrite_with_llm
from flywheel.queries.verification_drafts import draft_verification, verification_problems
from flywheel.queries.vocabulary import CROSS_APP_RELATIONS, PERSONAS, SUBCLASS_TIER, vocabulary_errors
from tests.flywheel.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db
SHOP, NOTES, LAUNCHER = "com.example.shopmart", "com.example.notes", "com.example.launcher"


def _edge(source, target, action, via="tap", kind="intra", **extra):
    return Edge.objects.create(source=source, target=target, action=action, via=via, kind=kind,
                               action_key=f"{source.pk}-{target.pk}-{via}", **extra)


def _click(**target):
    return {"action": "click", "target": target}


def build_world():
    """Two apps and a launcher: ShopMart (home → Settings → Offline packs; home → Search → product)
    and Notes (a search box), joined by Home and the launcher."""
    shop = App.objects.create(package=SHOP, label="ShopMart")
    notes = App.objects.create(package=NOTES, label="Notes")
    launcher_app = App.objects.create(package=LAUNCHER, label="Launcher", is_system=True)
    page = GemPage.objects.create
    home = page(app=shop, name="home", title="ShopMart Home", is_start=True, activity="com.example.shopmart/.Main",
                texts=["ShopMart Home", "Deals of the day", "Settings", "Search"],
                elements=[{"selector": {"resource_id": f"{SHOP}:id/settings"}, "text": "Settings",
                           "class": "android.widget.TextView", "clickable": True},
                          {"selector": {"content_desc": "Search"}, "text": "", "class": "android.widget.ImageButton",
                           "clickable": True}])
    settings = page(app=shop, name="settings", title="Settings", depth=1, activity=".SettingsActivity",
                    texts=["Settings", "Offline packs", "Notifications", "Dark theme"],
                    elements=[{"selector": {"text": "Offline packs"}, "text": "Offline packs", "clickable": True},
                              {"selector": {"resource_id": f"{SHOP}:id/notify"}, "text": "Notifications",
                               "class": "android.widget.Switch", "clickable": True}])
    offline = page(app=shop, name="offline", title="Offline packs", depth=2,
                   activity="com.example.shopmart/.OfflineActivity",
                   texts=["Offline packs", "English pack 45 MB", "Japanese pack 60 MB", "Download all"],
                   elements=[{"selector": {"text": "Wi-Fi only"}, "text": "Wi-Fi only",
                              "class": "android.widget.CheckBox", "clickable": True},
                             {"selector": {"text": "Auto-update"}, "text": "Auto-update",
                              "class": "android.widget.CheckBox", "clickable": True}])
    search = page(app=shop, name="search", title="Search", depth=1, inputs=["text: search keyword"],
                  texts=["Search", "Search products", "Blue kettle 1.5L", "Red toaster"],
                  elements=[{"selector": {"resource_id": f"{SHOP}:id/query"}, "text": "Search products",
                             "class": "android.widget.EditText", "editable": True}])
    product = page(app=shop, name="product", title="Product details", depth=2, outputs=["text: product title"],
                   texts=["Product details", "Blue kettle 1.5L", "$24.99", "Add to cart"],
                   activity=".ProductActivity")
    orphan = page(app=shop, name="orphan", title="Gift cards", depth=3, texts=["Gift cards", "Redeem a code"])
    notes_home = page(app=notes, name="home", title="All notes", is_start=True, activity=".NotesActivity",
                      inputs=["text: search keyword"], texts=["All notes", "Search notes", "Groceries"],
                      elements=[{"selector": {"resource_id": f"{NOTES}:id/search"}, "text": "Search notes",
                                 "editable": True}])
    launcher = page(app=launcher_app, name="home", kind="launcher", title="", texts=["ShopMart", "Notes"])
    edges = {
        "settings": _edge(home, settings, _click(resource_id=f"{SHOP}:id/settings")),
        "offline": _edge(settings, offline, _click(text="Offline packs")),
        "search": _edge(home, search, _click(content_desc="Search")),
        "product": _edge(search, product, _click(text="Blue kettle 1.5L")),
        "home_key": _edge(product, launcher, {"action": "system_button", "button": "home"}, via="home", kind="cross"),
        "launch_notes": _edge(launcher, notes_home, {"action": "open", "app": NOTES}, via="launch", kind="cross"),
        "launch_shop": _edge(launcher, home, {"action": "open", "app": SHOP}, via="launch", kind="cross"),
    }
    node = FunctionNode.objects.create
    root = node(app=shop, path="shop", label="ShopMart", is_leaf=False)
    leaves = {
        "offline": node(app=shop, path="shop/settings/offline_packs", label="Offline packs", parent=root,
                        is_leaf=True, page=offline),
        "product": node(app=shop, path="shop/search/product", label="Product details", parent=root,
                        is_leaf=True, page=product),
        "search": node(app=shop, path="shop/search", label="Search", parent=root, is_leaf=True, page=search),
        "orphan": node(app=shop, path="shop/gift_cards", label="Gift cards", parent=root, is_leaf=True, page=orphan),
        "notes": node(app=notes, path="notes/all", label="All notes", is_leaf=True, page=notes_home),
    }
    pages = {"home": home, "settings": settings, "offline": offline, "search": search, "product": product,
             "orphan": orphan, "notes_home": notes_home, "launcher": launcher}
    return types.SimpleNamespace(apps={"shop": shop, "notes": notes}, pages=pages, edges=edges, leaves=leaves)


@pytest.fixture
def world():
    from flywheel.queries.gem import graph as gem

    gem.invalidate()
    yield build_world()
    gem.invalidate()


def fake_run_gates(drafts, model_version=None):
    """Stands in for gates.run_gates until that module exists: gate 1's completability only."""
    for draft in drafts:
        ok = draft.known_path is not None
        draft.gate_results = {"gate1": {"passed": ok, "realism": 1.0, "completability": ok, "complexity": "low",
                                        "path_steps": len(draft.gem_path),
                                        "reason": "" if ok else "no GEM path reaches the function"}}
        if not ok:
            draft.rejected_by, draft.rejection_reason = "gate1", "no GEM path reaches the function"
    return drafts


@pytest.fixture
def gates(monkeypatch):
    """The real intake gates when they exist, else the stand-in above."""
    try:
        from flywheel.queries import gates as module  # noqa: F401
    except ImportError:
        fake = types.ModuleType("flywheel.queries.gates")
        fake.run_gates = fake_run_gates
        monkeypatch.setitem(sys.modules, "flywheel.queries.gates", fake)
        return "fake"
    return "real"


def plan(**config):
    problems = []
    return generation.plan_drafts(config, problems), problems


def test_every_subclass_and_persona_is_produced_and_labelled(world):
    drafts, _ = plan(apps=[SHOP, NOTES], per_leaf=40, seed=3)
    assert len(drafts) == 5 * 40
    assert set(Counter(d.subclass for d in drafts)) == set(SUBCLASS_TIER)
    assert set(Counter(d.persona for d in drafts)) == set(PERSONAS)
    for draft in drafts:
        assert not vocabulary_errors(draft.tier, draft.subclass, draft.persona, draft.capabilities)
        assert draft.tier == SUBCLASS_TIER[draft.subclass] == draft.labels["ambiguity"]
        assert draft.labels["persona_style"] == PERSONAS[draft.persona][1]
        assert draft.text.strip() and draft.origin == "offline"
    # Balanced: a seeded round-robin over subclass × persona (one 88-combination cycle at a time).
    with_path = [d for d in drafts if d.known_path]
    per_subclass = Counter(d.subclass for d in with_path).values()
    assert max(per_subclass) - min(per_subclass) <= 8 + 2
    # A capability is claimed only where the page gives its clause material (not every leaf does).
    assert Counter(len(d.capabilities) for d in drafts)[1] > len(drafts) // 3
    # The same config and seed give the same drafts; another seed others.
    again, _ = plan(apps=[SHOP, NOTES], per_leaf=40, seed=3)
    assert [d.text for d in again] == [d.text for d in drafts]
    other, _ = plan(apps=[SHOP, NOTES], per_leaf=40, seed=4)
    assert [d.text for d in other] != [d.text for d in drafts]


def test_persona_filters_differ_in_style(world):
    drafts, _ = plan(apps=[SHOP], per_leaf=60, capabilities=[], seed=1)
    by_persona = {}
    for draft in drafts:
        by_persona.setdefault(draft.persona, []).append(draft.text)
    assert all("Thank you" in t or "appreciated" in t for t in by_persona["business_professional"])
    assert all(t.endswith(("Quick.", "Now.", "Hurry.", "Fast pls.")) for t in by_persona["delivery_rider"])
    assert all(t.rstrip().endswith("!") for t in by_persona["travel_blogger"])
    assert all("please" not in t.lower().split() for t in by_persona["programmer"])


def test_single_app_draft_carries_its_leaf_path_and_known_steps(world):
    drafts, _ = plan(apps=[SHOP], per_leaf=3)
    leaf = world.leaves["offline"]
    offline = [d for d in drafts if d.functions == [leaf.id]]
    assert len(offline) == 3
    path = [world.edges["settings"].id, world.edges["offline"].id]
    for draft in offline:
        assert draft.apps == [SHOP] and draft.gem_path == path
        assert draft.known_path["steps"] == [{"action": "open", "app": SHOP},
                                             world.edges["settings"].action, world.edges["offline"].action]
        assert draft.known_path["summary"] == "ShopMart → Settings → Offline packs"
        assert draft.labels["step_depth"] == 2
    orphan = [d for d in drafts if d.functions == [world.leaves["orphan"].id]]
    assert orphan and all(d.known_path is None and d.gem_path == [] and d.tier != "L1" for d in orphan)


def test_l1_names_the_tapped_labels_and_l2_never_the_path(world):
    drafts, _ = plan(apps=[SHOP], per_leaf=80, seed=5)
    offline = [d for d in drafts if d.functions == [world.leaves["offline"].id]]
    product = [d for d in drafts if d.functions == [world.leaves["product"].id]]
    l1 = [d for d in offline + product if d.tier == "L1"]
    assert {d.subclass for d in l1} == {"plain_narration", "colloquial_steps"}
    for draft in l1:
        # "Settings" comes from the element the selector names (the edge has only a resource id),
        # "Search" from the content description, the others from selector texts.
        tapped = ["ShopMart", "Settings", "Offline packs"] if draft in offline else ["ShopMart", "Search", "Blue kettle 1.5L"]
        positions = [draft.text.find(label) for label in tapped]
        assert all(p >= 0 for p in positions), (draft.persona, draft.text)
        assert positions == sorted(positions), draft.text  # in path order
    for draft in [d for d in offline if d.tier == "L2"]:
        assert "Settings" not in draft.text and "then tap" not in draft.text, draft.text
        assert "Offline packs" in draft.text  # names the function, not the way there


def test_capability_constructions_use_page_contents(world):
    drafts, _ = plan(apps=[SHOP], per_leaf=70, seed=2)
    offline = [d for d in drafts if d.functions == [world.leaves["offline"].id]]
    by_capability = {}
    for draft in offline:
        for capability in draft.capabilities:
            by_capability.setdefault(capability, []).append(draft.text)
    assert all("Wi-Fi only" in t and "Auto-update" in t for t in by_capability["multi_constraint_filtering"])
    assert any("45" in t and "60" in t for t in by_capability["numerical_reasoning"])
    assert all(("Wi-Fi only" in t or "Auto-update" in t) and "if " in t.lower()
               for t in by_capability["conditional_logic"])
    assert any("Notifications" in t or "Dark theme" in t for t in by_capability["cross_page_state_tracking"])
    assert all("first" in t for t in by_capability["looping"])
    assert any("pack" in t for t in by_capability["information_synthesis"])


def test_verification_draft_is_schema_valid_and_from_the_target_page(world):
    drafts, _ = plan(apps=[SHOP, NOTES], per_leaf=4, cross_app=3)
    for draft in drafts:
        assert verification_problems(draft.verification, draft.apps) == [], draft.verification
        assert draft.verification["draft"] is True
    offline = next(d for d in drafts if d.functions == [world.leaves["offline"].id])
    assert offline.verification["terminal"] == [
        {"check": "foreground", "package": SHOP, "activity": ".OfflineActivity"},
        {"check": "screen", "contains": "Offline packs"}]
    assert [m["text"] for m in offline.verification["milestones"]] == ["Settings", "Offline packs"]
    # Unusable parts are left out rather than written wrong.
    spec = draft_verification(SHOP, "not an activity!", "Fish & chips", ["A", "A", "B"])
    assert spec["terminal"] == [{"check": "foreground", "package": SHOP}]
    assert [m["text"] for m in spec["milestones"]] == ["A", "B"]
    assert verification_problems({"terminal": [{"check": "shell", "command": "rm"}], "draft": True})


def test_cross_app_drafts_are_grounded_in_a_usable_path(world):
    drafts, problems = plan(apps=[SHOP, NOTES], per_leaf=0, cross_app=3)
    assert [d.labels["relation"] for d in drafts] == list(CROSS_APP_RELATIONS)
    cross_path = [world.edges["search"].id, world.edges["product"].id,
                  world.edges["home_key"].id, world.edges["launch_notes"].id]
    for draft in drafts:
        assert draft.apps == [SHOP, NOTES]
        assert draft.gem_path == cross_path
        assert draft.functions == [world.leaves["product"].id, world.leaves["notes"].id]
        assert draft.known_path["steps"][-2:] == [{"action": "system_button", "button": "home"},
                                                  {"action": "open", "app": NOTES}]
        assert draft.verification["terminal"][0] == {"check": "foreground", "package": NOTES,
                                                     "activity": ".NotesActivity"}
        assert "ShopMart" in draft.text and "Notes" in draft.text
    relay = drafts[0]
    assert "Blue kettle 1.5L" in relay.text and "cross_page_state_tracking" in relay.capabilities
    assert relay.labels["io"] == "text: search keyword"
    assert "information_synthesis" in drafts[1].capabilities
    assert not problems


def test_no_cross_app_draft_when_the_cross_edge_is_unreachable(world):
    Edge.objects.filter(pk=world.edges["home_key"].pk).update(
        reachable=False, unreachable_until=timezone.now() + timedelta(hours=1), unreachable_reason="Env_ERROR")
    drafts, problems = plan(apps=[SHOP, NOTES], per_leaf=0, cross_app=3)
    assert drafts == []
    assert problems and problems[-1]["kind"] == "cross_app"
    # The re-check time has passed: the edge counts again.
    Edge.objects.filter(pk=world.edges["home_key"].pk).update(unreachable_until=timezone.now() - timedelta(seconds=1))
    drafts, _ = plan(apps=[SHOP, NOTES], per_leaf=0, cross_app=1)
    assert len(drafts) == 1


def test_no_cross_app_draft_without_a_path_between_the_apps(world):
    world.edges["launch_notes"].delete()
    drafts, _ = plan(apps=[SHOP, NOTES], per_leaf=0, cross_app=2)
    assert drafts == []


def test_device_prior_for_every_phone_skips_a_function(world):
    DevicePrior.objects.create(app=world.apps["shop"], function="shop/settings/offline_packs", exists=False)
    DevicePrior.objects.create(app=world.apps["shop"], device_model="Pixel 9", function="Search", exists=False)
    drafts, problems = plan(apps=[SHOP], per_leaf=2)
    functions = {f for d in drafts for f in d.functions}
    assert world.leaves["offline"].id not in functions
    assert world.leaves["search"].id in functions  # only one model lacks it
    assert any(p["kind"] == "prior" for p in problems)


def test_config_is_validated():
    with pytest.raises(ValueError, match="personas"):
        generation.normalized_config({"personas": ["pirate"]})
    with pytest.raises(ValueError, match="per_leaf"):
        generation.normalized_config({"per_leaf": "many"})
    config = generation.normalized_config({"tiers": [], "per_leaf": "2"})
    assert config["tiers"] == ["L1", "L2", "L3"] and config["per_leaf"] == 2


# --- the LLM writer ------------------------------------------------------------------------------


def _draft():
    return QueryDraft(text="Open Offline packs in ShopMart.", apps=[SHOP], tier="L2", subclass="function_statement",
                      persona="novice", labels={"leaf": "Offline packs", "target_page": "Offline packs"})


@pytest.mark.parametrize("content, reason", [
    ("no json here", "not JSON"),
    ('{"text": ""}', "empty"),
    ('{"query": "Open it"}', "expected exactly"),
    ('{"text": "Open it", "persona": "novice"}', "expected exactly"),
    ('["text"]', "expected exactly"),
])
def test_garbage_replies_are_rejected(content, reason):
    with pytest.raises(ReplyRejected, match=reason):
        parse_reply({"choices": [{"message": {"content": content}}]})
    with pytest.raises(ReplyRejected):
        parse_reply({"error": "x"})


def test_llm_texts_are_used_and_garbage_falls_back(world):
    drafts, _ = plan(apps=[SHOP], per_leaf=1, tiers=["L2"])
    drafts = drafts[:4]
    offline_texts = [d.text for d in drafts]
    with StubOpenAI(model="writer-7b") as stub:
        version = ModelVersion.objects.create(name="writer", kind="endpoint", endpoint_url=stub.url,
                                              served_model_name="writer-7b", sampling={"retries": 0})
        stub.replies += [(200, stub.chat_reply('{"text": "Hey, get me to the offline packs please"}'), 0),
                         (200, stub.chat_reply("Sure! Here is your query."), 0),
                         (500, {"error": "overloaded"}, 0),
                         (200, stub.chat_reply('```json\n{"text": "Show me the search page"}\n```'), 0)]
        problems = []
        used = rewrite_with_llm(drafts, version, lambda d: [world.pages["home"].id, world.pages["offline"].id],
                                problems)
    assert used == 2
    assert drafts[0].text == "Hey, get me to the offline packs please" and drafts[0].origin == "llm"
    assert drafts[0].labels["offline_text"] == offline_texts[0]
    assert drafts[1].text == offline_texts[1] and drafts[1].origin == "offline"
    assert drafts[2].text == offline_texts[2] and drafts[3].text == "Show me the search page"
    assert [p["draft"] for p in problems] == [1, 2]
    assert "not JSON" in problems[0]["detail"] and "HTTP 500" in problems[1]["detail"]
    prompt = stub.requests[0]["messages"][1]["content"]
    label, style = PERSONAS[drafts[0].persona]
    assert f"Persona: {label}; style: {style}" in prompt
    assert "Subclass: Function statement" in prompt and "Do not describe the navigation path" in prompt
    assert "English pack 45 MB" in prompt  # the real page context of the path
    assert stub.requests[0]["model"] == "writer-7b"


def test_llm_writer_stops_after_repeated_call_failures(world):
    drafts, _ = plan(apps=[SHOP], per_leaf=2)
    with StubOpenAI() as stub:
        version = ModelVersion.objects.create(name="down", kind="endpoint", endpoint_url=stub.url)
        problems = []  # no replies queued: every call answers HTTP 500
        used = rewrite_with_llm(drafts, version, lambda d: [], problems)
        calls = len(stub.requests)
    assert used == 0 and calls == 5
    assert "failed 5 times in a row" in problems[-1]["detail"]
    assert all(d.origin == "offline" for d in drafts)


def test_a_capability_is_not_claimed_without_material_on_the_page(world):
    drafts, _ = plan(apps=[NOTES], per_leaf=40, seed=5)
    claimed = {c for d in drafts for c in d.capabilities}
    # Notes' pages have no filter controls and fewer than two numbers: those clauses would be invented.
    assert "multi_constraint_filtering" not in claimed and "numerical_reasoning" not in claimed
    assert all("only with" not in d.text for d in drafts)


HESITATIONS = ("um,", "oh,", "now where was I,")
PERSONA_OPENERS = ("Hmm...", "Oh dear,", "Sorry to bother you,", "I am not good with these phones,", "Excuse me,",
                   "While I'm at it,", "Oh and", "Real quick,")


def test_generated_queries_name_apps_by_label_and_speak_once_as_their_persona(world, gates):
    """The reported "Hmm... sorry to bother you, go to Swap in com.sim.translator, and while oh, you're
    at it…": the app is named by its label, the persona's opener is said once (the gates do not add a
    second), and a hesitation falls at a pause, never inside a phrase."""
    import re

    from flywheel.queries.gates import run_gates

    App.objects.filter(package=SHOP).update(label="")          # known only by its package (com.example.shopmart)
    App.objects.filter(package=NOTES).update(label="notes")    # the package's last part, as exploration writes it
    drafts, _ = plan(apps=[SHOP, NOTES], per_leaf=40, seed=5)
    assert len(drafts) > 100
    before = {id(d): d.text for d in drafts}
    if gates == "real":
        run_gates(drafts)
    seen_hesitation = False
    for draft in drafts:
        text = draft.text
        assert "com." not in text and ".example" not in text, text
        assert "Shopmart" in text or "Notes" in text or draft.tier == "L3", text
        openers = [o for o in PERSONA_OPENERS if o.lower() in text.lower()]
        assert len(openers) <= 1, text
        if draft.passed and gates == "real":
            assert text == before[id(draft)], "the grammar styled it: Gate 2 adds no second opener or ending"
            assert draft.gate_results["gate2"]["rules"] == []
        for hesitation in HESITATIONS:
            for match in re.finditer(re.escape(" " + hesitation), text):
                seen_hesitation = True
                assert text[:match.start()].endswith(","), text   # after a pause, not mid-phrase
        assert "while oh" not in text and "while um" not in text, text
        assert not re.search(r"\b(\w+),? \1\b", text, re.I), text   # no word said twice in a row
    assert seen_hesitation


def test_a_senior_citizens_query_hesitates_between_clauses():
    import random

    from flywheel.queries.generation.grammar import rambling

    texts = {rambling("Go to Swap in Translator, and while you're at it have a look at History", random.Random(seed))
             for seed in range(30)}
    with_pause = [t for t in texts if any(h in t for h in HESITATIONS)]
    assert with_pause and all("Translator, " + h in t for t in with_pause for h in HESITATIONS if h in t), with_pause
    assert not any("while oh" in t or "while um" in t for t in texts)
    # No comma to pause at: no hesitation is forced into the phrase.
    plain = rambling("Go to the Swap screen in Translator and have a look at History", random.Random(1))
    assert not any(h in plain for h in HESITATIONS)


def test_an_llm_written_query_is_still_polished_towards_its_persona(world):
    from flywheel.queries.gates import gate2

    draft = QueryDraft(text="I would like you to open Offline packs in ShopMart.", apps=[SHOP], tier="L2",
                       subclass="function_statement", persona="senior_citizen", origin="llm")
    gate2(draft)
    assert "I would like you to" not in draft.text and draft.gate_results["gate2"]["rules"]
