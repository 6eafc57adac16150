"""Dump-blind pages, trap pages and the farm's ground truth about them (issue #33, farm side).

A page drawn by a web view or canvas looks and works as before (the same pixels; taps hit its real
controls), but `uiautomator dump` shows ONE opaque node; a Flutter-like page shows bare clickable
Views. The product's own blindness check (flywheel/screens/blindness.py) must call them blind.
In-process: Farm + phone.run(), no ADB server, no database.
"""
import io
import xml.etree.ElementTree as ET

import pytest
from PIL import Image

from flywheel.screens.blindness import hierarchy_is_blind, readability
from simfarm.farm import Farm
from tests.simfarm import taskrunner as tr

OPEN_TICKETS = {"action": "open", "app": "com.sim.tickets"}
CHOOSE_SEATS = {"action": "click", "point": [500, 468], "coords": "thousandths"}
SEAT_B2 = {"action": "click", "point": [256, 325], "coords": "thousandths"}
QUICK_BOOK = {"action": "click", "point": [500, 435], "coords": "thousandths"}


@pytest.fixture
def phone():
    farm = Farm(devices=1)
    phone = farm.phones["sim-0001"]
    phone.run("input keyevent KEYCODE_HOME")
    return phone


def dump(phone) -> str:
    return phone.run("uiautomator dump /dev/tty").stdout.decode().split("UI hierchary dumped")[0]


def below_status_bar(phone, png: bytes) -> bytes:
    image = Image.open(io.BytesIO(png))
    return image.crop((0, phone.engine.metrics.status_bar, image.width, image.height)).tobytes()


def app_nodes(xml: str):
    return [n for n in ET.fromstring(xml).iter("node") if n.get("package") != "com.android.systemui"]


def open_event(phone, title="Jazz Night"):
    tr.follow(phone, [OPEN_TICKETS, {"action": "click", "target": {"text": title}}])


def test_a_web_view_page_is_one_opaque_node_over_the_content_area(phone):
    open_event(phone)
    xml = dump(phone)
    webviews = [n for n in app_nodes(xml) if n.get("class") == "android.webkit.WebView"]
    assert len(webviews) == 1
    node = webviews[0]
    assert (node.get("text"), node.get("content-desc"), node.get("resource-id")) == ("", "", "")
    assert list(node) == []
    m = phone.engine.metrics
    assert node.get("bounds") == f"[0,{m.status_bar + m.app_bar}][{m.width},{m.height - m.nav_bar}]"
    assert "Choose seats" not in xml and "Tickets from $35" not in xml
    assert hierarchy_is_blind(xml) and readability(xml).opaque_regions
    # The words are in the pixels, and the page works: a tap where "Choose seats" is drawn opens the seat map.
    assert "Choose seats" in phone.drawn_texts() and "Tickets from $35" in phone.drawn_texts()
    assert phone.screen_kind() == "blind"
    tr.follow(phone, [CHOOSE_SEATS])
    assert tr.focused_window(phone) == "com.sim.tickets/com.sim.tickets.SeatMapActivity"


def test_a_canvas_page_is_one_surface_view(phone):
    tr.follow(phone, [{"action": "open", "app": "com.sim.notes"}, {"action": "click", "target": {"content_desc": "Sketch"}}])
    xml = dump(phone)
    surfaces = [n for n in app_nodes(xml) if n.get("class") == "android.view.SurfaceView"]
    assert len(surfaces) == 1 and list(surfaces[0]) == [] and surfaces[0].get("text") == ""
    assert "Save sketch" not in xml and "Save sketch" in phone.drawn_texts()
    assert hierarchy_is_blind(xml) and phone.screen_kind() == "blind"


def test_a_flutter_like_page_has_bare_clickable_views_only(phone):
    open_event(phone)
    tr.follow(phone, [CHOOSE_SEATS])
    xml = dump(phone)
    nodes = app_nodes(xml)
    assert all(n.get("text") == "" and n.get("content-desc") == "" and n.get("resource-id") == "" for n in nodes)
    views = [n for n in nodes if n.get("class") == "android.view.View"]
    assert len(views) >= 9 and all(n.get("clickable") == "true" for n in views)   # 8 seats + Navigate up
    assert hierarchy_is_blind(xml) and readability(xml).readable_nodes == 0
    # Tapping where B2 is drawn selects it: the engine behind the canvas is unchanged.
    tr.follow(phone, [SEAT_B2])
    assert "Selected seat: B2" in phone.drawn_texts()


def test_blind_pages_are_drawn_exactly_as_native_ones(phone):
    tr.follow(phone, [{"action": "open", "app": "com.sim.shop"},
                      {"action": "click", "target": {"resource_id": "com.sim.shop:id/flash_sale"}}])
    blind_png = phone.run("screencap -p").stdout
    page = phone.engine.apps["com.sim.shop"].pages["flash_sale"]
    page["render"] = "native"
    try:
        phone.engine.changed()
        native_png = phone.run("screencap -p").stdout
        native_xml = dump(phone)
    finally:
        page["render"] = "webview"
    assert native_png == blind_png
    assert "Grab deal" in native_xml and not hierarchy_is_blind(native_xml)


def test_ordinary_pages_stay_readable(phone):
    tr.follow(phone, [OPEN_TICKETS])
    xml = dump(phone)
    assert not hierarchy_is_blind(xml) and "Jazz Night" in xml
    assert phone.screen_kind() == "ordinary"
    phone.run("input keyevent KEYCODE_HOME")
    assert phone.screen_kind() == "ordinary" and not hierarchy_is_blind(dump(phone))


def test_a_spinner_trap_never_resolves(phone):
    tr.follow(phone, [OPEN_TICKETS, {"action": "click", "target": {"resource_id": "com.sim.tickets:id/tab_tickets"}},
                      {"action": "click", "target": {"content_desc": "Sync"}}])
    first = dump(phone)
    assert "Syncing tickets…" in first and 'class="android.widget.ProgressBar"' in first
    assert phone.screen_kind() == "trap"
    png = phone.run("screencap -p").stdout
    for _ in range(3):
        phone.run("sleep 30")
        phone.run("screencap -p")
    assert dump(phone) == first and phone.screen_kind() == "trap"
    assert below_status_bar(phone, phone.run("screencap -p").stdout) == below_status_bar(phone, png)  # the clock moved, nothing else
    phone.run("input keyevent KEYCODE_BACK")
    assert phone.screen_kind() == "ordinary"


def test_a_success_toast_that_changed_nothing_is_a_trap(phone):
    open_event(phone)
    tr.follow(phone, [CHOOSE_SEATS, SEAT_B2])
    assert phone.screen_kind() == "blind"
    tr.follow(phone, [QUICK_BOOK])
    assert "Booked!" in phone.drawn_texts() and phone.screen_kind() == "trap"
    assert tr.sh(phone, "content query --uri content://com.sim.tickets/bookings").strip() == "No result found."
    phone.run("sleep 1")
    assert phone.screen_kind() == "trap"          # the toast stays until the next input
    phone.run("input tap 5 1500")                 # an input: the toast goes, the page is what it was
    assert phone.screen_kind() == "blind" and "Booked!" not in phone.drawn_texts()


def test_a_trap_toast_in_an_existing_app(phone):
    tr.follow(phone, [{"action": "open", "app": "com.sim.shop"},
                      {"action": "click", "target": {"text": "Sony WH-1000XM5 Headphones"}},
                      {"action": "click", "target": {"resource_id": "com.sim.shop:id/add_to_cart"}},
                      {"action": "click", "target": {"resource_id": "com.sim.shop:id/go_to_cart"}}])
    before = tr.sh(phone, "content query --uri content://com.sim.shop/checkout")
    tr.follow(phone, [{"action": "click", "target": {"resource_id": "com.sim.shop:id/best_coupon"}}])
    assert "Coupon applied" in phone.drawn_texts() and phone.screen_kind() == "trap"
    assert tr.sh(phone, "content query --uri content://com.sim.shop/checkout") == before
    assert "coupon=," in before


def test_an_ordinary_toast_is_not_a_trap(phone):
    tr.follow(phone, [{"action": "open", "app": "com.sim.notes"}, {"action": "click", "target": {"content_desc": "Sketch"}},
                      {"action": "click", "point": [500, 623], "coords": "thousandths"}])   # Save sketch
    assert "Sketch saved" in phone.drawn_texts() and phone.screen_kind() == "ordinary"
    assert "title=Sketch (Black pen)" in tr.sh(phone, "content query --uri content://com.sim.notes/notes")


def test_screen_kind_is_what_the_phone_shows_in_front(phone):
    open_event(phone)
    assert phone.screen_kind() == "blind"
    phone.run("cmd statusbar expand-notifications")
    shade = dump(phone)
    assert phone.screen_kind() == "ordinary" and "android.webkit.WebView" not in shade
    assert all(n.get("package") == "com.android.systemui" for n in ET.fromstring(shade).iter("node"))
    phone.run("input keyevent KEYCODE_BACK")
    assert phone.screen_kind() == "blind"


def test_same_seed_same_blind_screens():
    def run():
        phone = Farm(devices=1, seed=3).phones["sim-0001"]
        tr.follow(phone, [OPEN_TICKETS, {"action": "click", "target": {"text": "Comedy Club"}}, CHOOSE_SEATS])
        return dump(phone), phone.run("screencap -p").stdout
    assert run() == run()
