"""Every role walks every page its menu offers (and one detail page behind each list) in a real
browser at 1280×800 and 1440×900, on a database with content of every kind. A page fails on:
horizontal overflow, a blank or unreadable key hint, a console error or uncaught exception, an
answer of 400 or more that the user did not cause, or text meant for programs (a Python dict, a
traceback, an ISO timestamp). Each page's screenshot is kept under TEST_ARTIFACTS (default
var/test-artifacts) in pages/<role>-<width>/, for a person to look at after a run."""
import os
import re
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from tests.conftest import log_in_browser

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"),
                                 reason="the content comes from perf's seed, which writes with PostgreSQL's COPY")]

ROOT = Path(__file__).resolve().parent.parent
FARM_TASKS = ROOT / "simfarm" / "tasks" / "tasks.jsonl"
VIEWPORTS = ((1280, 800), (1440, 900))
ROLES = ("annotator", "adjudicator", "manager", "admin")
# Pages a role reaches from a page rather than from the menu.
LINKED = {"admin": ["/console-admin/people/"]}
# A detail page is a list's row: /<words>/<id>/ (one per list page is walked).
DETAIL = re.compile(r"^/[a-z][a-z-]*(/[a-z][a-z-]*)*/\d+/$")
# Pages that are not the console's own (Django admin, the API's browsable views and docs, logout).
NOT_WALKED = re.compile(r"^/(admin/|api/|logout|metrics)")
# Text that is for programs, not people.
DICT = re.compile(r"\{'[a-z_]+': ")
ISO_TIME = re.compile(r"\b20\d\d-\d\d-\d\dT\d\d:\d\d")
TRACEBACK = "Traceback (most recent call last)"

# In-page checks, run in the browser: overflow, and every visible <kbd> readable.
CHECKS = """() => {
  const problems = [];
  const width = document.documentElement.scrollWidth;
  if (width > window.innerWidth + 1) problems.push(`the page is ${width} px wide in a ${window.innerWidth} px window`);
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const background = (node) => {
    for (let n = node; n; n = n.parentElement) {
      const c = rgb(getComputedStyle(n).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const luminance = ([r, g, b]) => 0.2126 * r + 0.7152 * g + 0.0722 * b;
  document.querySelectorAll("kbd").forEach((kbd) => {
    const box = kbd.getBoundingClientRect();
    if (!box.width || !box.height || getComputedStyle(kbd).visibility === "hidden") return;
    const text = kbd.textContent.trim();
    const contrast = Math.abs(luminance(rgb(getComputedStyle(kbd).color).slice(0, 3)) - luminance(background(kbd)));
    if (!text || contrast < 60) problems.push(`key hint "${text}" unreadable (contrast ${Math.round(contrast)})`);
  });
  return problems;
}"""


def artefacts_folder(role, width):
    folder = Path(os.environ.get("TEST_ARTIFACTS", ROOT / "var" / "test-artifacts")) / "pages" / f"{role}-{width}"
    shutil.rmtree(folder, ignore_errors=True)  # this run's pages only
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def content(role_users):
    """Content of every kind: perf's seed (trajectories, verdicts, pools, repairs, runs), the farm's
    tasks as a benchmark with its quota, and the built-in policy, as `make up` seeds it."""
    from perf.scale_seed.cli import run as seed_scale

    seed_scale(["--steps", "600", "--trajectories", "60", "--queries", "30", "--batch", "600", "--force"])
    call_command("seed_console")
    call_command("import_benchmark", "--seed", "--farm", str(FARM_TASKS))
    frames_and_dumps_of_the_seed()


def frames_and_dumps_of_the_seed():
    """perf's seed names content-addressed frames without writing them; pages show them, so each
    gets a picture (a grey phone screen) and each dump an empty hierarchy."""
    import io

    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage
    from PIL import Image

    from flywheel.models import Step

    picture = io.BytesIO()
    Image.new("RGB", (108, 240), (200, 204, 210)).save(picture, format="PNG")
    for field in ("screenshot", "hierarchy"):
        for name in Step.objects.exclude(**{field: ""}).values_list(field, flat=True).distinct():
            if not default_storage.exists(name):
                body = picture.getvalue() if name.endswith(".png") else b"<hierarchy rotation='0'/>"
                default_storage.save(name, ContentFile(body))


def menu_links(page):
    return page.evaluate("""() => Array.from(document.querySelectorAll("header a[href], nav a[href]"))
        .map((a) => a.getAttribute("href")).filter((h) => h && h.startsWith("/"))""")


def first_detail_link(page, seen):
    for href in page.evaluate("() => Array.from(document.querySelectorAll('main a[href]')).map((a) => a.getAttribute('href'))"):
        path = (href or "").split("?")[0].split("#")[0]
        if DETAIL.match(path) and path not in seen:
            return path
    return None


def walk(browser, base, role, user, width, height):
    page = browser.new_page(viewport={"width": width, "height": height})
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(f"console: {message.text}"))
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    # A request the walk's own next navigation cancels (a live panel's poll of the page just left)
    # fails as ERR_ABORTED: that is the walker leaving, not the page failing (4xx/5xx are caught below).
    page.on("requestfailed", lambda request: request.failure != "net::ERR_ABORTED" and errors.append(
        f"{request.failure} for {request.url.replace(base, '')}"))
    page.on("response", lambda response: response.status >= 400 and errors.append(
        f"{response.status} from {response.url.replace(base, '')}"))
    log_in_browser(page, base, user)
    folder = artefacts_folder(role, width)
    queue = [p for p in dict.fromkeys(menu_links(page) + LINKED.get(role, [])) if not NOT_WALKED.match(p)]
    seen, problems, details = set(), {}, 0
    while queue:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        errors.clear()
        page.goto(base + path, wait_until="load")  # not networkidle: live panels poll
        page.wait_for_timeout(200)  # what a page's scripts do at once after load counts too
        found = list(errors) + page.evaluate(CHECKS)
        text = page.inner_text("body")
        found += [f"program text on the page: …{text[max(0, m.start() - 50):m.end() + 30]}…"
                  for m in (DICT.search(text), ISO_TIME.search(text)) if m]
        if TRACEBACK in text:
            found.append("a traceback on the page")
        if found:
            problems[path] = found
        page.screenshot(path=str(folder / (path.strip("/").replace("/", "_") or "home")) + ".png", full_page=True)
        detail = None if DETAIL.match(path) else first_detail_link(page, seen)
        if detail:
            queue.append(detail)
            details += 1
    page.close()
    return seen, problems, details


def test_each_role_walks_its_pages_without_overflow_errors_or_program_text(content, role_users, asgi_server,
                                                                          browser):
    # One test for the four roles: they share the seeded database (seeding is most of a role's time).
    failures = []
    for role in ROLES:
        for width, height in VIEWPORTS:
            seen, problems, details = walk(browser, asgi_server, role, role_users[role], width, height)
            # The queues' rows open work (a session, a repair) rather than a detail page: only the
            # manager's and admin's lists must lead somewhere.
            assert len(seen) >= 3 and (details or role in ("annotator", "adjudicator")), (role, width, sorted(seen))
            failures += [f"{role} at {width}px, {path}: {'; '.join(found)}" for path, found in problems.items()]
    assert not failures, "\n".join(failures)
