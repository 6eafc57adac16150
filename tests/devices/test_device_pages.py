"""The Devices pages: who sees what, lease taking, reset, quarantine, unknown phones, and a real
browser that watches a phone's live screen and taps an app icon on it."""
import re
import time

import pytest

from devices import leases
from devices.models import Device, Lease
from tests.conftest import PASSWORD
from tests.devices.screen_client import element_center
from tests.devices.streaming_fixtures import connection, farm_control

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_list_shows_each_phone_with_a_live_thumbnail(screen_phones, client_as):
    device = screen_phones[0]
    leases.acquire(device, "job:collect-7")
    page = client_as("manager").get("/devices/").content.decode()
    assert f'data-ws-path="/ws/devices/{device.pk}/screen/"' in page and 'data-max-fps="2"' in page
    assert "job:collect-7" in page and "Leased" in page and "fhd" in page
    assert client_as("annotator").get("/devices/").status_code == 403


def test_managers_watch_and_admins_may_take_the_lease(screen_phones, client_as, role_users):
    device = screen_phones[0]
    page = client_as("manager").get(f"/devices/{device.pk}/").content.decode()
    assert 'data-testid="screen"' in page and "You are watching" in page and 'data-testid="take"' not in page
    assert client_as("manager").post(f"/devices/{device.pk}/take/").status_code == 403

    admin = client_as("admin")
    assert 'data-testid="take"' in admin.get(f"/devices/{device.pk}/").content.decode()
    response = admin.post(f"/devices/{device.pk}/take/", follow=True)
    assert "You hold the lease" in response.content.decode()
    lease = Lease.objects.get(device=device, released_at__isnull=True)
    assert lease.holder == "console:admin-user" and lease.user == role_users["admin"]
    assert Device.objects.get(pk=device.pk).status == "leased"
    response = admin.post(f"/devices/{device.pk}/release/", follow=True)
    assert "released" in response.content.decode()
    assert not Lease.objects.filter(device=device, released_at__isnull=True).exists()
    assert Device.objects.get(pk=device.pk).status == "idle"


def test_a_held_phone_is_taken_over_only_on_purpose(screen_phones, client_as):
    device = screen_phones[0]
    job_lease = leases.acquire(device, "job:collect-9")
    admin = client_as("admin")
    page = admin.get(f"/devices/{device.pk}/").content.decode()
    assert "Take over from job:collect-9" in page
    response = admin.post(f"/devices/{device.pk}/take/", follow=True)
    assert "held by job:collect-9" in response.content.decode()
    assert Lease.objects.get(device=device, released_at__isnull=True).pk == job_lease.pk
    response = admin.post(f"/devices/{device.pk}/reset/", follow=True)
    assert "take the lease first" in response.content.decode()
    admin.post(f"/devices/{device.pk}/take/", {"force": "1"})
    open_leases = Lease.objects.filter(device=device, released_at__isnull=True)
    assert [lease.holder for lease in open_leases] == ["console:admin-user"]


def test_reset_stops_the_app_and_goes_home(screen_phones, client_as):
    device = screen_phones[1]
    phone = connection(device)
    x, y = element_center(phone, "Chatter")
    phone.shell(f"input tap {x} {y}")
    assert not phone.foreground()["package"].endswith("launcher")
    response = client_as("admin").post(f"/devices/{device.pk}/reset/", follow=True)
    assert "reset" in response.content.decode()
    assert phone.foreground()["package"].endswith("launcher")


def test_a_vanished_phone_gives_a_clear_error_on_reset(screen_phones, client_as):
    device = screen_phones[2]
    farm_control(device, "host:sim-disconnect")
    try:
        response = client_as("admin").post(f"/devices/{device.pk}/reset/", follow=True)
    finally:
        farm_control(device, "host:sim-connect")
    assert "Reset failed, the phone does not answer" in response.content.decode()


def test_quarantine_ends_the_lease_and_readmit_returns_the_phone(screen_phones, client_as):
    device = screen_phones[0]
    admin = client_as("admin")
    admin.post(f"/devices/{device.pk}/take/")
    response = admin.post(f"/devices/{device.pk}/quarantine/", {"reason": "cracked screen"}, follow=True)
    assert "quarantined" in response.content.decode()
    device.refresh_from_db()
    assert device.status == "quarantined" and device.health["quarantine_reason"] == "cracked screen"
    assert not Lease.objects.filter(device=device, released_at__isnull=True).exists()
    assert 'data-testid="readmit"' in admin.get(f"/devices/{device.pk}/").content.decode()
    admin.post(f"/devices/{device.pk}/readmit/")
    device.refresh_from_db()
    assert device.status == "idle"


def test_unknown_phones_get_a_clear_404(screen_phones, client_as):
    manager = client_as("manager")
    response = manager.get("/devices/987654/")
    assert response.status_code == 404 and "There is no phone with id 987654" in response.content.decode()
    response = manager.get("/devices/serial/no-such-phone/")
    assert response.status_code == 404 and "serial no-such-phone" in response.content.decode()
    assert manager.get(f"/devices/serial/{screen_phones[0].serial}/").url == f"/devices/{screen_phones[0].pk}/"
    assert client_as("admin").post("/devices/987654/take/").status_code == 404


def test_a_browser_watches_a_phone_and_taps_an_app_icon(screen_phones, role_users, asgi_server, browser):
    device = screen_phones[1]
    phone = connection(device)
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    page.goto(asgi_server + "/login/")
    page.fill("input[name=username]", role_users["admin"].username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/console-admin/"))
    page.goto(f"{asgi_server}/devices/")  # every phone's live thumbnail draws
    page.wait_for_function(f"[...document.querySelectorAll('canvas.phone-thumb')].filter("
                           f"c => c.dataset.frames >= 1).length === {len(screen_phones)}", timeout=15000)
    page.goto(f"{asgi_server}/devices/{device.pk}/")

    screen = page.get_by_test_id("screen")
    page.wait_for_function("document.querySelector('[data-testid=screen]').dataset.frames >= 1", timeout=15000)
    page.wait_for_function("/^\\d+ ms$/.test(document.querySelector('[data-testid=frame-age]').textContent)")
    # The canvas was drawn: its pixels are not the blank background.
    drawn = page.evaluate("""() => { const c = document.querySelector('[data-testid=screen]');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let lit = 0; for (let i = 0; i < d.length; i += 4) if (d[i] + d[i+1] + d[i+2] > 60) lit++;
        return lit; }""")
    assert drawn > 1000

    # Watching only: a tap is refused with a clear message, the phone does not move.
    x, y = element_center(phone, "Chatter")
    width, height = phone.window_size()
    box = screen.bounding_box()

    def tap_icon():
        page.mouse.click(box["x"] + x * box["width"] / width, box["y"] + y * box["height"] / height)

    tap_icon()
    page.wait_for_function("document.querySelector('[data-testid=screen-message]').textContent.includes('no_lease')")
    assert phone.foreground()["package"].endswith("launcher")

    page.get_by_test_id("take").click()
    page.wait_for_selector("[data-testid=release]")
    page.wait_for_function("document.querySelector('[data-testid=screen]').dataset.frames >= 1", timeout=15000)
    # Chromium decodes the phone's own H.264 (WebCodecs): nothing was re-encoded for it.
    assert screen.get_attribute("data-codec") == "h264" and screen.get_attribute("data-source") == "scrcpy"
    frames_before = int(screen.get_attribute("data-frames"))
    box = screen.bounding_box()
    tap_icon()
    page.wait_for_selector("[data-testid=tap-echo]", state="attached", timeout=2000)  # echoed at once
    page.wait_for_function("document.querySelector('[data-testid=screen-message]').textContent.startsWith('Done: click')")
    deadline = time.monotonic() + 10
    while phone.foreground()["package"].endswith("launcher") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not phone.foreground()["package"].endswith("launcher"), "the tap opened the app"
    page.wait_for_function(f"document.querySelector('[data-testid=screen]').dataset.frames > {frames_before}")
    # The frame that first showed the tap's effect is marked and timed.
    page.wait_for_function("document.querySelector('[data-testid=input-effect]').textContent.includes('new frame')")
    assert int(screen.get_attribute("data-marked-frame")) > 0

    # A hidden page pauses its stream (no more frames, the age grows); visible again, it resumes.
    page.evaluate("""() => { Object.defineProperty(document, 'hidden', {value: true, configurable: true});
                             document.dispatchEvent(new Event('visibilitychange')); }""")
    page.wait_for_function("parseInt(document.querySelector('[data-testid=frame-age]').textContent) > 1500",
                           timeout=10000)
    page.evaluate("""() => { Object.defineProperty(document, 'hidden', {value: false, configurable: true});
                             document.dispatchEvent(new Event('visibilitychange')); }""")
    page.wait_for_function("parseInt(document.querySelector('[data-testid=frame-age]').textContent) < 1000",
                           timeout=10000)

    page.get_by_test_id("key-home").click()
    page.wait_for_function("document.querySelector('[data-testid=screen-message]').textContent.startsWith('Done: system_button')")
    assert phone.foreground()["package"].endswith("launcher")
    page.close()


def test_a_browser_without_webcodecs_gets_jpeg_frames(screen_phones, role_users, asgi_server, browser):
    device = screen_phones[0]
    # A laptop-height window: the screen's lower part is below the fold.
    page = browser.new_page(viewport={"width": 1280, "height": 600})
    page.add_init_script("delete window.VideoDecoder;")  # an older browser
    page.goto(asgi_server + "/login/")
    page.fill("input[name=username]", role_users["manager"].username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/dashboard/"))
    page.goto(f"{asgi_server}/devices/{device.pk}/")
    page.wait_for_function("document.querySelector('[data-testid=screen]').dataset.frames >= 1", timeout=15000)
    screen = page.get_by_test_id("screen")
    assert screen.get_attribute("data-codec") == "jpeg" and screen.get_attribute("data-source") == "minicap"

    # The first click on a partly hidden screen neither scrolls the page nor turns into a swipe: the
    # tap is echoed where the pointer was (a watcher's tap is then refused for want of the lease).
    box = screen.bounding_box()
    assert box["y"] + box["height"] > 600 and page.evaluate("window.scrollY") == 0
    x, y = box["x"] + box["width"] / 2, 560
    page.mouse.click(x, y)
    echo = page.wait_for_selector("[data-testid=tap-echo]", state="attached", timeout=2000)
    assert page.evaluate("window.scrollY") == 0
    assert page.evaluate("document.activeElement.dataset.testid") == "screen"
    left, top = echo.evaluate("e => [parseFloat(e.style.left), parseFloat(e.style.top)]")
    assert abs(left - x) <= 2 and abs(top - y) <= 2
    page.wait_for_function("document.querySelector('[data-testid=screen-message]').textContent.includes('no_lease')")
    page.close()


def test_a_phone_that_does_not_answer_has_a_picture_that_says_so(client_as):
    # Nothing listens on this ADB port: the run page's thumbnail is a picture saying so, not an error.
    from io import BytesIO

    from PIL import Image

    from tests.conftest import free_port

    device = Device.objects.create(serial="gone-0001", adb_server=f"127.0.0.1:{free_port()}")
    response = client_as("manager").get(f"/devices/{device.pk}/thumbnail.jpg")
    assert response.status_code == 200 and response["Content-Type"] == "image/jpeg"
    assert response["X-Phone-Unavailable"]
    assert Image.open(BytesIO(response.content)).size == (180, 360)
    assert client_as("annotator").get(f"/devices/{device.pk}/thumbnail.jpg").status_code == 403
