"""Action leaves are asked as operations: the query asks to switch, type-and-send or tap, the known
path goes on past the page with the operation's steps, and the draft verification checks its outcome."""
import re

import pytest

from flywheel.models import FunctionNode
from flywheel.queries.generation import planner as generation
from flywheel.queries.generation.operations import leaf_operation
from flywheel.queries.vocabulary import PERSONAS
from tests.flywheel.queries.test_generation import NOTES, SHOP, build_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    from flywheel.queries.gem import graph as gem

    gem.invalidate()
    world = build_world()
    settings, notes_home = world.pages["settings"], world.pages["notes_home"]
    settings.elements = [
        {"selector": {"text": "Offline packs"}, "text": "Offline packs", "clickable": True},
        {"selector": {"resource_id": f"{SHOP}:id/notify"}, "text": "Notifications", "class": "android.widget.Switch",
         "clickable": True, "checkable": True, "checked": False}]
    settings.save()
    notes_home.elements = [
        {"selector": {"resource_id": f"{NOTES}:id/search"}, "text": "Search notes", "editable": True},
        {"selector": {"resource_id": f"{NOTES}:id/go"}, "text": "Search", "clickable": True}]
    notes_home.save()
    node = FunctionNode.objects.create
    root = FunctionNode.objects.get(app=world.apps["shop"], path="shop")
    settings_node = node(app=world.apps["shop"], path="shop/settings", label="Settings", parent=root, page=settings)
    world.leaves["notify"] = node(app=world.apps["shop"], path="shop/settings/notifications", label="Notifications",
                                  parent=settings_node, is_leaf=True, page=settings)
    world.leaves["search_notes"] = node(app=world.apps["notes"], path="notes/search", label="Search", is_leaf=True,
                                        page=notes_home)
    yield world
    gem.invalidate()


def drafts_for(leaf, **config):
    drafts = generation.plan_drafts({"apps": [SHOP, NOTES], "per_leaf": 3 * len(PERSONAS), "seed": 5, **config}, [])
    return [d for d in drafts if d.functions == [leaf.pk]]


def test_a_switch_leaf_asks_to_turn_it_on_and_checks_it_is_on(world):
    drafts = drafts_for(world.leaves["notify"])
    assert drafts
    for draft in drafts:
        assert "Notifications" in draft.text and re.search(r"\bon\b", draft.text), draft.text
        assert draft.known_path["steps"][-1] == {"action": "click", "target": {"resource_id": f"{SHOP}:id/notify"}}
        assert draft.labels["operation"] == "toggle" and draft.labels["leaf"] == "Notifications"
        pattern = next(c["matches"] for c in draft.verification["terminal"] if "matches" in c)
        # As uiautomator writes a settings row: the row, its title, then its switch; a neighbour after it.
        row = (f'<node index="2" text="" resource-id="{SHOP}:id/notify" class="android.widget.LinearLayout" '
               'checkable="false" checked="false" clickable="true" bounds="[0,600][1080,770]">'
               '<node index="0" text="Notifications" resource-id="android:id/title" checkable="false" '
               'checked="false" clickable="false" bounds="[48,650][868,720]" />'
               '<node index="1" text="ON" resource-id="android:id/switch_widget" class="android.widget.Switch" '
               'checkable="true" checked="{state}" clickable="false" bounds="[900,650][1032,720]" /></node>'
               '<node index="3" text="" resource-id="other" checkable="false" checked="false"><node index="0" '
               'text="Other" checkable="true" checked="{other}" /></node>')
        assert re.search(pattern, row.format(state="true", other="false"))
        assert not re.search(pattern, row.format(state="false", other="true"))  # a neighbour's switch is not it
    # The page is where; the page leaf itself (Offline packs) is still a plain destination.
    offline = drafts_for(world.leaves["offline"])
    assert offline and all("operation" not in d.labels for d in offline)


def test_a_field_and_its_submit_action_become_type_then_tap_with_the_text_kept_verbatim(world):
    drafts = drafts_for(world.leaves["search_notes"])
    assert len({d.persona for d in drafts}) >= len(PERSONAS) // 2
    for draft in drafts:
        typed, tapped = draft.known_path["steps"][-2:]
        assert typed["action"] == "type" and typed["target"] == {"resource_id": f"{NOTES}:id/search"}
        assert tapped == {"action": "click", "target": {"resource_id": f"{NOTES}:id/go"}}
        assert f'"{typed["text"]}"' in draft.text, draft.text  # every persona keeps the quoted text as it is
        assert {"check": "screen", "contains": typed["text"]} in draft.verification["terminal"]


def test_a_form_page_is_asked_as_filling_it_in_and_checked_by_its_app_and_the_text_shown(world):
    editor = world.pages["notes_home"]
    editor.title, editor.elements = "New note", [
        {"selector": {"resource_id": f"{NOTES}:id/title"}, "text": "", "hint": "Title", "editable": True},
        {"selector": {"resource_id": f"{NOTES}:id/save"}, "text": "Save", "clickable": True}]
    editor.save()
    FunctionNode.objects.filter(pk=world.leaves["search_notes"].pk).delete()
    drafts = drafts_for(world.leaves["notes"])
    assert drafts and all(d.labels["operation"] == "type_submit" for d in drafts)
    for draft in drafts:
        typed, saved = draft.known_path["steps"][-2:]
        assert typed["target"] == {"resource_id": f"{NOTES}:id/title"} and f'"{typed["text"]}"' in draft.text
        assert saved == {"action": "click", "target": {"resource_id": f"{NOTES}:id/save"}}
        # Save may leave the page: the app in front and the text shown, not the editor's own title.
        assert draft.verification["terminal"] == [{"check": "foreground", "package": NOTES},
                                                  {"check": "screen", "contains": typed["text"]}]


def test_a_radio_button_is_chosen_never_turned_off():
    import random

    page = type("Page", (), {"elements": [{"selector": {"resource_id": "net_3g"}, "text": "3G", "clickable": True,
                                           "checkable": True, "checked": True, "check_class": "RadioButton"}]})()
    chosen = leaf_operation(page, "3G", random.Random(0))
    assert chosen.kind == "choose" and chosen.turn_on is True and 'checked="true"' in chosen.check["matches"]


def test_an_action_the_page_no_longer_shows_is_asked_as_its_page():
    page = type("Page", (), {"elements": [{"selector": {"text": "Share"}, "text": "Share", "clickable": True}]})()
    import random

    assert leaf_operation(page, "Download", random.Random(0)) is None
    shared = leaf_operation(page, "Share", random.Random(0))
    assert shared.kind == "tap" and shared.steps == [{"action": "click", "target": {"text": "Share"}}]
