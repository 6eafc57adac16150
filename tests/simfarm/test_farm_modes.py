"""The farm's two switches (issue #33): `blind_share` turns a seeded share of ordinary app pages into
web views / canvases; `real_phone` makes a phone answer only what a real Android phone answers.
In-process (Farm + phone.run()) plus the CLI's argument parsing; no database.
"""
import pytest

from flywheel.screens.blindness import hierarchy_is_blind
from simfarm import __main__ as cli
from simfarm import blind
from simfarm.farm import Farm
from simfarm.serve import build_farm


def dump(phone) -> str:
    return phone.run("uiautomator dump /dev/tty").stdout.decode().split("UI hierchary dumped")[0]


def ordinary_pages(farm):
    return [(package, page_id) for package, app in sorted(farm.apps.items()) for page_id in app.pages
            if blind.page_render(app, page_id) == blind.NATIVE and not app.pages[page_id].get("trap")]


def switched(farm, seed, share):
    return {(p, page) for p, page in ordinary_pages(farm) if blind.switched_render(seed, share, p, page) != blind.NATIVE}


# -- blind share ---------------------------------------------------------------------------------

def test_the_share_is_seeded_deterministic_and_about_right():
    farm = Farm(devices=1)
    pages = ordinary_pages(farm)
    chosen = switched(farm, 0, 0.3)
    assert chosen == switched(farm, 0, 0.3)
    assert chosen != switched(farm, 1, 0.3)
    assert 0.18 <= len(chosen) / len(pages) <= 0.42, (len(chosen), len(pages))
    assert switched(farm, 0, 0.1) <= chosen <= switched(farm, 0, 0.6)   # a larger share keeps the smaller one's pages
    kinds = {blind.switched_render(0, 0.3, p, page) for p, page in chosen}
    assert kinds == {blind.WEBVIEW, blind.CANVAS}
    assert switched(farm, 0, 0.0) == set()


def test_no_share_keeps_every_undeclared_page_readable():
    phone = Farm(devices=1).phones["sim-0001"]
    phone.run("am start -a android.settings.WIFI_SETTINGS")
    assert phone.screen_kind() == "ordinary" and not hierarchy_is_blind(dump(phone))


def test_a_full_share_blinds_app_pages_but_never_the_system_surfaces():
    phone = Farm(devices=1, blind_share=1.0).phones["sim-0001"]
    phone.run("am start -a android.settings.WIFI_SETTINGS")
    xml = dump(phone)
    assert phone.screen_kind() == "blind" and hierarchy_is_blind(xml)
    assert ('class="android.webkit.WebView"' in xml) != ('class="android.view.SurfaceView"' in xml)
    phone.run("input keyevent KEYCODE_HOME")              # the launcher
    assert phone.screen_kind() == "ordinary" and not hierarchy_is_blind(dump(phone))
    phone.run("cmd statusbar expand-notifications")      # the shade
    shade = dump(phone)
    assert phone.screen_kind() == "ordinary" and 'package="com.android.systemui"' in shade
    assert "android.webkit.WebView" not in shade and "android.view.SurfaceView" not in shade
    phone.run("cmd statusbar collapse")
    phone.run("am broadcast -a android.intent.action.BATTERY_LOW")   # a system dialog
    assert phone.screen_kind() == "ordinary" and "Battery" in dump(phone)


def test_a_switched_page_still_works_by_its_pixels():
    farm = Farm(devices=1, blind_share=1.0)
    phone = farm.phones["sim-0001"]
    phone.run("monkey -p com.sim.notes -c android.intent.category.LAUNCHER 1")
    assert "Shopping list" not in dump(phone) and "Shopping list" in phone.drawn_texts()
    row = next(n for n in phone.engine.screen().walk() if n.text == "Shopping list")
    x, y = (row.bounds[0] + row.bounds[2]) // 2, (row.bounds[1] + row.bounds[3]) // 2
    phone.run(f"input tap {x} {y}")
    assert "Milk, eggs, bread" in phone.drawn_texts()


def test_trap_pages_are_never_switched():
    phone = Farm(devices=1, blind_share=1.0).phones["sim-0001"]
    phone.run("am start -n com.sim.tickets/.SyncActivity")
    assert phone.screen_kind() == "trap" and "Syncing tickets…" in dump(phone)


def test_the_farm_refuses_a_share_outside_zero_to_one():
    with pytest.raises(ValueError):
        Farm(devices=1, blind_share=1.5)


# -- the CLI -------------------------------------------------------------------------------------

def test_cli_flags_and_environment(monkeypatch):
    monkeypatch.delenv("SIMFARM_BLIND_SHARE", raising=False)
    monkeypatch.delenv("SIMFARM_REAL_PHONE", raising=False)
    args = cli.parse_args([])
    assert args.blind_share == 0.0 and args.real_phone is False
    args = cli.parse_args(["--blind-share", "0.25", "--real-phone"])
    assert args.blind_share == 0.25 and args.real_phone is True
    monkeypatch.setenv("SIMFARM_BLIND_SHARE", "0.4")
    monkeypatch.setenv("SIMFARM_REAL_PHONE", "1")
    args = cli.parse_args([])
    assert args.blind_share == 0.4 and args.real_phone is True
    assert cli.parse_args(["--blind-share", "0.1"]).blind_share == 0.1   # the flag wins over the environment
    assert cli.main(["--blind-share", "2", "--port", "0"]) == 2


def test_build_farm_passes_both_switches():
    farm = build_farm(2, 0, blind_share=0.5, real_phone=True)
    assert farm.blind_share == 0.5 and farm.real_phone
    assert all(phone.blind_share == 0.5 and phone.real_phone for phone in farm)


# -- real-phone mode -----------------------------------------------------------------------------

@pytest.fixture
def real():
    return Farm(devices=1, real_phone=True).phones["sim-0001"]


@pytest.mark.parametrize("uri", ["content://com.sim.notes/notes", "content://sim/clipboard", "content://sim/foreground",
                                 "content://com.sim.tickets/bookings", "content://com.android.settings/saved_networks"])
def test_the_farms_own_providers_are_unknown_authorities(real, uri):
    result = real.run(f"content query --uri {uri}")
    authority = uri.split("/")[2]
    assert result.exit_code != 0 and result.stdout == b""
    assert result.stderr.decode().startswith(f"Error while accessing provider:{authority}\n"
                                             f"java.lang.IllegalStateException: Could not find provider: {authority}")
    insert = real.run(f"content insert --uri {uri} --bind title:s:x")
    assert insert.exit_code != 0 and b"Could not find provider" in insert.stderr


def test_what_a_real_phone_answers_still_works(real):
    assert real.run("settings get global wifi_on").stdout.strip() == b"1"
    assert b"name=wifi_on" in real.run("content query --uri content://settings/global").stdout
    assert real.run("getprop ro.product.model").stdout.strip() == b"Pixel 7"
    assert b"package:com.sim.notes" in real.run("pm list packages").stdout
    real.run("am start -n com.sim.notes/.NotesListActivity")
    assert b"com.sim.notes" in real.run("dumpsys window").stdout
    assert real.run("uiautomator dump /sdcard/d.xml").exit_code == 0 and b"Shopping list" in real.run("cat /sdcard/d.xml").stdout
    assert real.run("screencap -p").stdout.startswith(b"\x89PNG")
    real.run("am force-stop com.sim.notes")
    assert b"com.sim.notes" not in real.run("dumpsys activity activities").stdout


def test_farm_broadcasts_reach_nobody(real):
    real.run("am start -n com.sim.notes/.NotesListActivity")
    for action in ("com.sim.RESET", "com.sim.ANOMALY --es kind app_crash", "com.sim.FACTORY_RESET"):
        result = real.run(f"am broadcast -a {action}")
        assert result.exit_code == 0 and result.stdout.decode().endswith("Broadcast completed: result=0\n")
    assert real.engine.foreground is not None and real.engine.foreground.package == "com.sim.notes"
    assert real.engine.anomalies.focus() is None
    # The system's own broadcasts are delivered as before.
    real.run("am broadcast -a android.intent.action.BATTERY_LOW")
    assert b"Battery" in real.run("uiautomator dump /dev/tty").stdout


def test_dumpsys_input_drops_the_farm_only_sections(real):
    real.run("input tap 540 1200")
    out = real.run("dumpsys input").stdout.decode()
    assert "INPUT MANAGER" in out and "RecentMotionEvents" not in out and "LastGesture" not in out
    normal = Farm(devices=1).phones["sim-0001"]
    normal.run("input tap 540 1200")
    out = normal.run("dumpsys input").stdout.decode()
    assert "RecentMotionEvents:" in out and "LastGesture: tap" in out


def test_the_truth_is_still_readable_in_normal_mode(real):
    assert real.run("content query --uri content://com.sim.notes/notes").exit_code != 0
    truth = real.run_in_normal_mode("content query --uri content://com.sim.notes/notes")
    assert truth.exit_code == 0 and b"title=Shopping list" in truth.stdout
    assert real.real_phone and real.run("content query --uri content://com.sim.notes/notes").exit_code != 0


# -- farms numbered on from each other -------------------------------------------------------------

def test_farms_numbered_on_from_each_other_hold_the_phones_one_farm_would():
    """Two hosts of two phones (the flywheel demo's) are the phones of one farm of four, serials and screens."""
    whole = Farm(devices=4, seed=7)
    halves = [Farm(devices=2, seed=7, first_device=0), Farm(devices=2, seed=7, first_device=2)]
    split = [phone for farm in halves for phone in farm]
    assert [p.serial for p in split] == [p.serial for p in whole] == ["sim-0001", "sim-0002", "sim-0003", "sim-0004"]
    for alone, together in zip(split, whole):
        assert (alone.width, alone.height, alone.model) == (together.width, together.height, together.model)
        assert dump(alone) == dump(together)
    assert cli.parse_args(["--first-device", "2"]).first_device == 2
    assert cli.main(["--devices", "1", "--first-device", "-1"]) == 2
