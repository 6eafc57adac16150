"""App files: Settings and Translator leaves are walkable; every page of every app renders."""
import logging

import pytest

from simfarm import walker
from simfarm.appspec import CATEGORIES, lint_app
from tests.simfarm.phone_fixtures import APPS, new_phone, sh

MINE = ("com.android.settings", "com.sim.translator")
LEAVES = [(package, leaf) for package in MINE for leaf in APPS[package].function_leaves()]


def walk_leaf(package, leaf):
    phone = new_phone()
    walker.walk(phone, [{"action": "open", "app": package}] + leaf["path"])
    return phone


@pytest.mark.parametrize("package,leaf", LEAVES, ids=[f"{p.rsplit('.', 1)[-1]}:{leaf['id']}" for p, leaf in LEAVES])
def test_every_leaf_path_reaches_its_page(package, leaf):
    assert leaf.get("path"), "every leaf declares its known path"
    phone = walk_leaf(package, leaf)
    assert phone.engine.foreground is not None and phone.engine.foreground.package == package
    assert phone.engine.foreground.top.page_id == leaf["page"]


def test_leaf_counts_and_long_paths():
    settings, translator = APPS["com.android.settings"], APPS["com.sim.translator"]
    assert len(settings.function_leaves()) >= 20 and len(translator.function_leaves()) >= 10
    for spec in (settings, translator):
        assert sum(1 for leaf in spec.function_leaves() if len(leaf["path"]) + 1 >= 10) >= 1


@pytest.mark.parametrize("package", MINE)
def test_longest_path_changes_the_leaf_state(package):
    leaves = APPS[package].function_leaves()
    longest = max(leaves, key=lambda leaf: len(leaf["path"]))
    phone = walk_leaf(package, longest)
    if package == "com.android.settings":  # developer options unlocked, then USB debugging off
        assert sh(phone, "settings get global development_settings_enabled") == "1\n"
        assert sh(phone, "settings get global adb_enabled") == "0\n"
    else:  # two translations, then one deleted from history
        assert sh(phone, "content query --uri content://com.sim.translator/history --projection text") == \
            "Row: 0 text=see you\n"


def test_reuse_relation_of_figure_3():
    nodes = {node["id"]: node for node in APPS["com.sim.translator"].function_nodes()}
    reused = nodes["me/settings/offline_packs/download"]
    assert reused["reuse_of"] == "home/offline_packs/download"
    assert reused["page"] == nodes[reused["reuse_of"]]["page"] == "offline_packs"
    assert nodes["me/settings"]["leaf"] is False and nodes["me"]["parent"] is None


def test_search_second_result_and_set_time_effects():
    phone = walk_leaf("com.android.settings", next(leaf for _app, leaf in LEAVES if leaf["id"] == "search/bluetooth_second_result"))
    assert phone.engine.foreground.top.page_id == "location_services"
    phone = walk_leaf("com.android.settings", next(leaf for _app, leaf in LEAVES if leaf["id"] == "system/date_time/set_time"))
    assert sh(phone, "date +%H:%M") == "11:03\n"


@pytest.mark.parametrize("package", sorted(APPS))
def test_every_page_and_dialog_of_every_app_renders(package, caplog):
    phone = new_phone()
    spec = APPS[package]
    assert spec.category in CATEGORIES
    assert lint_app(spec) == []
    for leaf in spec.function_leaves():
        if leaf.get("reuse_of"):
            assert leaf["reuse_of"] in {n["id"] for n in spec.function_nodes()}
    with caplog.at_level(logging.ERROR):
        for page_id in spec.pages:
            sh(phone, f"am force-stop {package}")
            phone.engine.launch(package)
            phone.engine.push_page(phone.engine.foreground, page_id)
            assert phone.run("screencap -p").stdout.startswith(b"\x89PNG")
            assert phone.dump_hierarchy().startswith("<?xml")
        for dialog_id in spec.dialogs:  # over the last page
            phone.engine.foreground.top.dialog = (dialog_id, {})
            phone.engine.changed()
            assert phone.run("screencap -p").stdout.startswith(b"\x89PNG")
            assert phone.dump_hierarchy().count("<node ") > 2
            phone.engine.foreground.top.dialog = None
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_apps_dir_adds_json_apps_and_bad_files_fail_clearly(tmp_path):
    import json
    import re
    from pathlib import Path

    from simfarm.appspec import AppFormatError, load_app
    from simfarm.farm import Farm

    # The small complete example of FORMAT.md is itself a working app.
    format_doc = (Path(__file__).resolve().parents[2] / "simfarm/apps/FORMAT.md").read_text()
    example = re.search(r"## A complete small example\n\n```yaml\n(.*?)```", format_doc, re.S).group(1)
    (tmp_path / "counter.yaml").write_text(example)
    (tmp_path / "tiny.json").write_text(json.dumps({
        "package": "com.sim.tiny", "label": "Tiny", "category": "tools", "core": True,
        "pages": {"main": {"elements": [{"type": "button", "id": "go", "text": "Go", "tap": [{"toast": "hi"}]}]}}}))
    phone = Farm(devices=1, seed=0, apps_dir=tmp_path).phones["sim-0001"]
    sh(phone, "monkey -p com.sim.example.counter 1")
    for leaf in phone.engine.apps["com.sim.example.counter"].function_leaves():
        walker.walk(phone, [{"action": "open", "app": "com.sim.example.counter"}] + leaf["path"])
    sh(phone, "am force-stop com.sim.example.counter")
    walker.walk(phone, [{"action": "open", "app": "com.sim.example.counter"}, {"action": "click", "target": {"text": "Add one"}}])
    assert "count=2" in sh(phone, "content query --uri content://com.sim.example.counter/state")  # the leaf added one too
    assert "package:com.sim.tiny" in sh(phone, "pm list packages")

    bad = tmp_path / "bad.yaml"
    bad.write_text("package: x\nlabel: X\ncategory: toys\npages: {a: {}}\n")
    with pytest.raises(AppFormatError, match="unknown category"):
        load_app(bad)
    bad.write_text("package: x\nlabel: X\ncategory: tools\npages: {a: {elements: [{text: no type}]}}\n")
    with pytest.raises(AppFormatError, match="needs a 'type'"):
        load_app(bad)


def test_function_trees_export_as_plain_data():
    import json

    from simfarm.appspec import export_function_trees

    trees = {tree["package"]: tree for tree in json.loads(json.dumps(export_function_trees()))}
    settings = {node["id"]: node for node in trees["com.android.settings"]["functions"]}
    assert settings["wlan/advanced/mac_address"]["leaf"] is True
    assert settings["wlan/advanced"]["leaf"] is False and settings["wlan/advanced"]["parent"] == "wlan"
    assert trees["com.sim.translator"]["category"] == "tools"
