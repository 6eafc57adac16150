"""open's resolution of a need to an installed app, as a pure function (the live test is in
test_executor.py)."""
import pytest

from devices.composite import resolve_app

LABELS = {"Notes": "com.sim.notes", "Settings": "com.android.settings", "ShopMart": "com.sim.shop",
          "FoodDash": "com.sim.food", "Chatter": "com.sim.chat", "ClipTube": "com.sim.video",
          "Google Maps": "com.google.android.apps.maps", "WeChat": "com.tencent.mm"}
PACKAGES = sorted(LABELS.values()) + ["com.android.systemui"]


@pytest.mark.parametrize("need, package", [
    ("Notes", "com.sim.notes"),
    ("settings", "com.android.settings"),
    ("the ShopMart app", "com.sim.shop"),
    ("open google maps", "com.google.android.apps.maps"),
    ("com.tencent.mm", "com.tencent.mm"),
    ("a note-taking app", "com.sim.notes"),
    ("an app to buy headphones", "com.sim.shop"),
    ("order food for dinner", "com.sim.food"),
    ("send a message", "com.sim.chat"),
    ("watch a video", "com.sim.video"),
    ("turn on bluetooth", "com.android.settings"),
    ("Shopmrat", "com.sim.shop"),                # a typo still finds the closest label
])
def test_needs_and_names_resolve(need, package):
    resolved = resolve_app(need, LABELS, PACKAGES)
    assert resolved is not None and resolved[0] == package, resolved
    assert resolved[1]


def test_label_match_wins_over_function_words():
    # "Notes" is a label; the word "shopping" must not pull the shop app in.
    assert resolve_app("Notes for shopping", LABELS, PACKAGES)[0] == "com.sim.notes"


@pytest.mark.parametrize("need", ["a calculator", "play chess", "", "   "])
def test_unserved_needs_resolve_to_nothing(need):
    assert resolve_app(need, LABELS, PACKAGES) is None


def test_without_launcher_labels_package_names_are_used():
    assert resolve_app("a note-taking app", {}, ["com.android.settings", "com.sim.notes"])[0] == "com.sim.notes"
