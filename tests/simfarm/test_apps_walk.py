"""Every shipped app's function tree is walkable: following a leaf's known path on a fresh phone
reaches the leaf's page (its activity gets focus and one of its markers is in the dump).

In-process: simfarm.farm.Farm, driven only through `phone.run(shell command)`.
Every shipped app is walked along its longest path; the six apps of the task set
(shop, chat, food, notes, gallery, video) are walked along every leaf.
"""
import pytest

from simfarm.appspec import load_apps
from simfarm.farm import Farm
from tests.simfarm import taskrunner as tr

APPS = load_apps()
TASK_SET_APPS = ("com.sim.shop", "com.sim.chat", "com.sim.food", "com.sim.notes", "com.sim.gallery",
                 "com.sim.video")


def longest_leaf(spec):
    leaves = [leaf for leaf in spec.function_leaves() if leaf.get("path")]
    return max(leaves, key=lambda leaf: (len(leaf["path"]), leaf["id"]))


def element_ids(spec_part, package):
    """Resource ids declared anywhere in a page spec (elements, list items, chips, bars, FAB)."""
    ids = set()
    if isinstance(spec_part, dict):
        if isinstance(spec_part.get("id"), str):
            short = spec_part["id"]
            ids.add(short if ":id/" in short else f"{package}:id/{short}")
        for key in ("elements", "item", "items", "actions", "bottom_nav", "fab"):
            if key in spec_part:
                ids |= element_ids(spec_part[key], package)
    elif isinstance(spec_part, list):
        for part in spec_part:
            ids |= element_ids(part, package)
    return ids


def page_markers(spec, page_id):
    page = spec.pages[page_id]
    markers = [{"resource_id": rid} for rid in sorted(element_ids(page, spec.package))]
    title = page.get("title")
    if isinstance(title, str) and "{" not in title:
        markers.append({"text": title})
    return markers


@pytest.fixture(scope="module")
def farm():
    return Farm(devices=1)


def walk(farm, spec, leaf):
    """Follow the leaf's path on a fresh phone; True when its page was reached with a marker shown."""
    phone = tr.fresh_phone(farm)
    tr.reset_phone(phone, {"force_stop": [spec.package], "clear": [spec.package], "home": True})
    want = f"{spec.package}/{spec.activity_of(leaf['page'])}".replace(f"/{spec.package}.", "/.")
    markers = page_markers(spec, leaf["page"])
    reached = []

    def after_step(step_no, _step):
        focus = tr.focused_window(phone).replace(f"/{spec.package}.", "/.")
        if focus == want:
            root = tr.dump(phone)
            shown = [m for m in markers if tr.find(root, m) is not None]
            if shown:
                reached.append((step_no, shown[0]))

    steps = [{"action": "open", "app": spec.package}] + leaf["path"]
    tr.follow(phone, steps, after_step=after_step)
    return reached, want, markers


@pytest.mark.parametrize("package", sorted(APPS))
def test_longest_path_reaches_its_leaf(farm, package):
    spec = APPS[package]
    leaf = longest_leaf(spec)
    assert leaf.get("page") in spec.pages, f"{package}:{leaf['id']} names no page of the app"
    reached, want, markers = walk(farm, spec, leaf)
    assert reached, f"{package}:{leaf['id']} never showed {want} with one of {markers[:6]}"


@pytest.mark.parametrize("package,leaf_id", [
    (package, leaf["id"]) for package in TASK_SET_APPS if package in APPS
    for leaf in APPS[package].function_leaves()])
def test_every_leaf_of_the_task_set_apps_is_reachable(farm, package, leaf_id):
    spec = APPS[package]
    leaf = next(leaf for leaf in spec.function_leaves() if leaf["id"] == leaf_id)
    assert leaf.get("path"), f"{package}:{leaf_id} has no known path"
    reached, want, markers = walk(farm, spec, leaf)
    assert reached, f"{package}:{leaf_id} never showed {want} with one of {markers[:6]}"


def test_function_trees_are_big_enough():
    leaves = {package: len(spec.function_leaves()) for package, spec in APPS.items()}
    for package in TASK_SET_APPS:
        assert leaves.get(package, 0) >= 9, f"{package} has {leaves.get(package, 0)} leaves"
    assert sum(leaves.values()) >= 80, leaves
