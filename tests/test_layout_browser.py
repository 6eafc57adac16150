"""The console's frame at laptop widths, in a real browser: the top menu fits from 1,280 px for the
roles that see the most links and folds behind a Menu button below; every menu link is reachable
(its group opened); key hints inside buttons are readable and disabled buttons look disabled; the
API docs load nothing from outside; the icon answers at /favicon.ico."""
import re

import pytest

from tests.conftest import log_in_browser

pytestmark = pytest.mark.django_db(transaction=True)

VIEWPORTS = ((1280, 800), (1440, 900))
WORK = {"manager": ["Calibration", "Judges vs truth", "Function trees", "Query review"],
        "admin": ["My queue", "Repairs", "Adjudication", "Calibration", "Judges vs truth", "Function trees", "Query review"]}
GROUPS = {"Data": ["Queries", "Runs", "Exploration", "Generation", "GEM", "Ledger", "Pools", "Failure classes",
                   "Rule flags"],
          "Models": ["Training", "Loops", "Endpoints", "Demo", "Benchmarks"],
          "Farm": ["Devices", "Tasks"],
          "System": ["History", "Metrics", "API docs", "API explorer"]}
TOP = {"manager": ["Dashboard"], "admin": ["Dashboard", "Admin"]}

# Every key hint inside a button, on the colour it is drawn on (the first ancestor-or-self with a
# mostly opaque background): [text, its colour's luminance minus the background's].
KEY_HINTS = """() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const luminance = ([r, g, b]) => 0.2126 * r + 0.7152 * g + 0.0722 * b;
  const background = (node) => {
    for (let n = node; n; n = n.parentElement) {
      const c = rgb(getComputedStyle(n).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  return Array.from(document.querySelectorAll("button kbd, .button kbd")).map((kbd) => [
    kbd.textContent.trim(),
    Math.abs(luminance(rgb(getComputedStyle(kbd).color)) - luminance(background(kbd)))]);
}"""

# One button of each style, with a key hint, as the work queues draw them.
SAMPLES = """() => {
  const box = document.createElement("div");
  box.id = "button-samples";
  box.innerHTML = '<button>Correct <kbd>1</kbd></button> <button class="secondary">Release <kbd>Esc</kbd></button>'
    + ' <button class="danger">Cancel <kbd>X</kbd></button> <button disabled>Take next <kbd>N</kbd></button>'
    + ' <a class="button" href="#">Next <kbd>Enter</kbd></a>';
  document.querySelector("main").prepend(box);
}"""


def fits(page):
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def assert_key_hints_readable(page):
    hints = page.evaluate(KEY_HINTS)
    unreadable = [(text, round(contrast)) for text, contrast in hints if contrast < 60]
    assert not unreadable, f"{page.url}: key hints the colour of their button: {unreadable}"
    return len(hints)


@pytest.mark.parametrize("role", ["manager", "admin"])
def test_the_menu_fits_and_every_link_is_reachable(role, role_users, asgi_server, browser):
    home = {"manager": "/dashboard/", "admin": "/console-admin/"}[role]
    for width, height in VIEWPORTS:
        page = browser.new_page(viewport={"width": width, "height": height})
        log_in_browser(page, asgi_server, role_users[role])
        assert home in page.url
        page.goto(asgi_server + "/dashboard/")
        assert fits(page), f"{role} at {width}px: the page is wider than the window"
        nav = page.locator("header nav")
        header = page.locator("header.topbar").bounding_box()
        assert header["height"] < 60, f"{role} at {width}px: the top bar wraps onto a second line"
        for text in TOP[role]:
            assert nav.get_by_role("link", name=text, exact=True).is_visible()
        groups = {"Work": WORK[role], **GROUPS}
        assert nav.locator("details.navgroup > summary").all_inner_texts() == list(groups)
        for name, links in groups.items():
            group = nav.locator("details.navgroup", has=page.locator(f"summary:text-is('{name}')"))
            assert not group.locator("a").first.is_visible()  # closed until asked
            group.locator("summary").click()
            assert group.locator(".navmenu a").all_inner_texts() == links
            for text in links:
                link = group.get_by_role("link", name=text, exact=True)
                assert link.is_visible(), (role, width, name, text)
                box = link.bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= width, (role, width, text, box)
            assert fits(page), f"{role} at {width}px: the open {name} menu widens the page"
        # Opening a group closed the one before; Esc closes the last and leaves focus on its name.
        assert nav.locator("details.navgroup[open]").count() == 1
        page.keyboard.press("Escape")
        assert nav.locator("details.navgroup[open]").count() == 0
        assert page.evaluate("document.activeElement.textContent") == "System"

        # Key hints in buttons of every style are readable; disabled looks disabled.
        page.evaluate(SAMPLES)
        assert assert_key_hints_readable(page) >= 5
        disabled = page.locator("#button-samples button[disabled]")
        assert float(disabled.evaluate("b => getComputedStyle(b).opacity")) < 1
        assert disabled.evaluate("b => getComputedStyle(b).cursor") == "not-allowed"
        page.close()

    # Below 1,280 px the menu folds behind its button; a click elsewhere closes an open group.
    page = browser.new_page(viewport={"width": 1100, "height": 800})
    log_in_browser(page, asgi_server, role_users[role])
    assert home in page.url
    page.goto(asgi_server + "/dashboard/")
    assert fits(page)
    dashboard_link = page.locator("header nav").get_by_role("link", name="Dashboard", exact=True)
    assert not dashboard_link.is_visible()
    page.get_by_role("button", name="Menu").click()
    assert dashboard_link.is_visible() and fits(page)
    page.locator("header nav summary", has_text="Farm").click()
    page.locator("main h1").first.click()
    assert page.locator("header nav details[open]").count() == 0
    # A link in a group is one click away once the group is open.
    page.get_by_role("button", name="Menu").click()
    page.locator("header nav summary", has_text="Farm").click()
    page.locator("header nav").get_by_role("link", name="Devices", exact=True).click()
    page.wait_for_url(re.compile(".*/devices/$"))
    assert page.locator("header nav a[aria-current=page]").inner_text() == "Devices"
    page.close()


def test_work_pages_key_hints_are_readable(role_users, asgi_server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    log_in_browser(page, asgi_server, role_users["admin"])
    assert "/console-admin/" in page.url
    hints = 0
    for path in ("/queue/", "/adjudication/", "/repairs/"):  # empty queues: "Take next N" is disabled
        page.goto(asgi_server + path)
        assert fits(page), path
        hints += assert_key_hints_readable(page)
    assert hints >= 1
    page.close()


def test_api_docs_and_metrics_load_nothing_from_outside(role_users, asgi_server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    log_in_browser(page, asgi_server, role_users["manager"])
    assert "/dashboard/" in page.url
    # ReDoc's footer always asks Redocly's CDN for a logo: the page's policy refuses it before
    # any connection ("csp"); anything else from outside, or refused for another reason, fails.
    outside, refused = [], []
    page.on("request", lambda request: request.url.startswith(("http:", "https:"))
            and not request.url.startswith(asgi_server) and outside.append(request.url))
    page.on("requestfailed", lambda request: request.failure == "csp" and refused.append(request.url))
    page.locator("header nav summary", has_text="System").click()
    page.get_by_role("link", name="API docs", exact=True).click()
    page.wait_for_url(re.compile(".*/api/redoc/$"))
    page.wait_for_selector("text=Flywheel console API", timeout=15000)  # ReDoc drew the schema
    page.goto(asgi_server + "/api/docs/")
    page.wait_for_selector(".swagger-ui .info", timeout=15000)
    page.wait_for_load_state("networkidle")
    assert not set(outside) - set(refused), f"the docs loaded from outside the console: {outside}"
    assert page.request.get(asgi_server + "/metrics").status == 200  # the manager's Metrics link opens
    page.close()


def test_the_icon_answers_at_favicon_ico(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"].endswith(".svg")
    assert client.get(response["Location"]).status_code == 200
