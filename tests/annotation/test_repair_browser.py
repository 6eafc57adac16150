"""A real browser: an annotator clears the human repair queue with the keyboard only: takes the
Teacher's attempt (T), sets an action by its number key and the arrows, types text and reasoning,
sees a bad correction refused with its reason, skips (S) and marks one as not repairable (X). The
corrected steps become "prefix + single-step correction" samples in the SFT pool (ecdm_repaired)."""
import pytest

from tests.annotation.test_repair_queue import TEACHER_COT, failed_with_repair
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


def status_line(page):
    return page.get_by_test_id("status-line").inner_text()


@pytest.fixture
def no_replay_left_queued():
    """The server queues each correction's replay on the broker; no worker runs here, and none of
    a later test may pick these up."""
    yield
    from config.celery import app

    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge("repair")


def at_repair(page, base, repair):
    page.wait_for_url(f"{base}/repairs/{repair.pk}/", timeout=15000)
    page.wait_for_selector("[data-testid=editor]")
    page.wait_for_function("document.querySelector('#edit-layer') !== null")


def test_an_annotator_clears_the_repair_queue_with_the_keyboard(role_users, no_replay_left_queued, asgi_server,
                                                                browser):
    from flywheel.models import Repair, SftEntry, Trajectory

    teacher_right = failed_with_repair("bt-teacher")                      # T, Ctrl+Enter
    by_hand = failed_with_repair("bt-hand", teacher=False)                # 1, arrows, reasoning
    typed = failed_with_repair("bt-typed", steps=4, wrong=2)              # skipped first, then 3 + text
    hopeless = failed_with_repair("bt-captcha", teacher=False)            # X + reason
    user = role_users["annotator"]

    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    page.goto(asgi_server + "/login/?next=/repairs/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(asgi_server + "/repairs/")
    assert page.get_by_test_id("waiting-count").inner_text() == "4"
    page.keyboard.press("Enter")                                           # take the next one

    at_repair(page, asgi_server, teacher_right)                            # 1: the Teacher was right
    assert page.locator("#screen").evaluate("img => img.naturalWidth") == 1080   # the frozen screen is served
    page.keyboard.press("?")
    assert page.get_by_test_id("shortcuts").get_attribute("open") is not None
    page.keyboard.press("t")
    assert page.get_by_test_id("action-type").input_value() == "click"
    assert page.get_by_test_id("point").input_value() == "540, 375"
    assert page.get_by_test_id("cot-plan").input_value() == TEACHER_COT["Plan"]
    page.keyboard.press("Control+Enter")

    at_repair(page, asgi_server, by_hand)                                  # 2: no Teacher: set it by hand
    assert page.get_by_test_id("point").input_value() == "540, 1200"       # the box starts in the middle
    assert page.get_by_test_id("cot-observation").input_value() == "screen 1"
    page.keyboard.press("Control+Enter")                                   # no plan, no decision yet:
    page.wait_for_function("document.querySelector('[data-testid=status-line]').classList.contains('error')")
    assert "the reasoning needs Plan, Decision" in status_line(page)       # ...refused, with the reason
    page.keyboard.press("2")                                               # 2 = double_click, then back
    assert page.get_by_test_id("action-type").input_value() == "double_click"
    page.keyboard.press("1")
    for _ in range(33):
        page.keyboard.press("Shift+ArrowUp")                               # 1200 - 33 × 25 = 375
    assert page.get_by_test_id("point").input_value() == "540, 375"
    page.keyboard.press("r")                                               # the first empty tag: Plan
    page.keyboard.type("Open Bluetooth, the first row")
    page.keyboard.press("Tab")
    page.keyboard.type("Tap Bluetooth at (540, 375)")
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Enter")

    at_repair(page, asgi_server, typed)                                    # 3: skip it for now
    page.keyboard.press("s")

    at_repair(page, asgi_server, hopeless)                                 # 4: cannot be repaired
    page.keyboard.press("x")
    page.keyboard.type("a captcha covers the screen")
    page.keyboard.press("Enter")

    at_repair(page, asgi_server, typed)                                    # 3 comes round again
    page.keyboard.press("3")                                               # 3 = type
    assert page.get_by_test_id("action-type").input_value() == "type"
    page.keyboard.press("f")
    page.keyboard.type("Bluetooth")
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Enter")
    page.wait_for_url(asgi_server + "/repairs/")
    assert page.get_by_test_id("repairs-empty").is_visible()
    page.close()

    for repair, action in ((teacher_right, {"action": "click", "point": [540, 375], "coords": "pixel"}),
                           (by_hand, {"action": "click", "point": [540, 375], "coords": "pixel"}),
                           (typed, {"action": "type", "text": "Bluetooth", "point": [540, 375], "coords": "pixel"})):
        repair.refresh_from_db()
        assert repair.status == "done" and repair.repaired_by == user, (repair.pk, repair.status, repair.reason)
        assert repair.correction["by"] == "human" and repair.correction["action"] == action
        assert repair.replay["status"] in ("queued", "skipped")                     # the phone replay follows
        sample = repair.sample
        assert sample.line == "ecdm" and sample.derived_from_id == repair.trajectory_id
        steps = list(sample.steps.order_by("index"))
        assert [s.index for s in steps] == list(range(repair.step_index + 1))   # prefix + the correction
        assert steps[-1].executed_action == action
        assert steps[-1].screenshot.name == repair.trajectory.steps.get(index=repair.step_index).screenshot.name
        assert SftEntry.objects.filter(trajectory=sample, intake="ecdm_repaired", repair=repair).exists()
    assert by_hand.correction["cot"]["Decision"] == "Tap Bluetooth at (540, 375)"
    hopeless.refresh_from_db()
    assert hopeless.status == "failed" and "a captcha covers the screen" in hopeless.reason
    assert hopeless.sample is None and Trajectory.objects.filter(pk=hopeless.trajectory_id).exists()
    assert not Repair.objects.filter(status="needs_human").exists()
