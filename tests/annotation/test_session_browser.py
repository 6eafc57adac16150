"""A real browser: an annotator verifies a multi-step task on the virtual farm with confirms (Enter
and button), a drag of the tap box, an undone type change, a text edit, a tap by hand, and pause,
resume and other page keys (shortcuts.js); the policy's closing terminate:failure asks for confirmation
and the annotator states success instead; the trajectory lands in the SFT pool with its edits recorded."""
import pytest

from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for_step(page, index):
    page.wait_for_function(f"document.querySelector('.screen-col .hint') && "
                           f"document.querySelector('.screen-col .hint').textContent.includes('Step {index} ·')",
                           timeout=30000)
    page.wait_for_selector("[data-testid=tap-box], #overlay text", state="attached")


def test_annotator_confirms_drags_and_edits_text_into_the_sft_pool(role_users, farm_devices, import_task,
                                                                   asgi_server, browser):
    from flywheel.models import SftEntry, Trajectory

    farm_devices()
    import_task("notes-create-groceries-l1")
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    page.goto(asgi_server + "/login/?next=/queue/")
    page.fill("input[name=username]", role_users["annotator"].username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(asgi_server + "/queue/")
    page.keyboard.press("n")                                   # Take next, by its key
    page.wait_for_url("**/session/*/", timeout=30000)
    assert "Keyboard shortcuts" in page.content()
    # The phone's live screen streams beside the step being verified.
    page.wait_for_function("() => { const c = document.querySelector('[data-testid=live-screen]');"
                           " return c && c.phoneScreen && c.phoneScreen.frames > 0; }", timeout=20000)

    wait_for_step(page, 0)                                      # open Notes: confirm with Enter
    assert page.get_by_test_id("action-type").input_value() == "open"
    # The live screen is full size beside the step's frame: same width, same top, to its right.
    frame, live = page.get_by_test_id("screen").bounding_box(), page.get_by_test_id("live-screen").bounding_box()
    assert abs(live["width"] - frame["width"]) <= 2 and abs(live["y"] - frame["y"]) <= 2
    assert live["x"] >= frame["x"] + frame["width"] and abs(live["height"] - frame["height"]) <= 4
    page.keyboard.press("x")                                    # X focuses the not-executable reason...
    assert page.evaluate("document.activeElement.id") == "not-executable-reason"
    assert page.get_by_test_id("not-executable-reason").input_value() == ""
    page.keyboard.press("Escape")                               # ...Esc leaves it without acting
    assert page.evaluate("document.activeElement === document.body")
    page.keyboard.press("?")
    assert page.get_by_test_id("shortcuts").get_attribute("open") is not None
    page.keyboard.press("p")                                    # P pauses (the phone goes back)...
    page.wait_for_selector("[data-testid=resume]", timeout=30000)
    page.keyboard.press("p")                                    # ...and P resumes the same session
    wait_for_step(page, 0)
    assert page.get_by_test_id("action-type").input_value() == "open"
    page.keyboard.press("Enter")

    wait_for_step(page, 1)                                      # tap "New note": drag the box first
    assert page.get_by_test_id("action-type").input_value() == "click"
    before = page.get_by_test_id("point").input_value()
    box = page.get_by_test_id("tap-box").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx - 4, cy - 3, steps=4)               # 5 CSS px = 15 phone px (360 px shows 1080)
    page.mouse.up()
    x0, y0 = (int(v) for v in before.split(", "))
    x1, y1 = (int(v) for v in page.get_by_test_id("point").input_value().split(", "))
    assert 10 <= ((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5 <= 20
    page.get_by_test_id("confirm").click()

    wait_for_step(page, 2)                                      # type the title: confirm by button
    assert page.get_by_test_id("action-text").input_value() == "Groceries"
    page.keyboard.press("b")                                    # change the type by its key...
    assert page.get_by_test_id("action-type").input_value() == "system_button"
    page.keyboard.press("z")                                    # ...and undo it before it runs
    assert page.get_by_test_id("action-type").input_value() == "type"
    assert page.get_by_test_id("action-text").input_value() == "Groceries"
    page.get_by_test_id("confirm").click()

    wait_for_step(page, 3)                                      # type the body: edit the text
    text = page.get_by_test_id("action-text")
    assert text.input_value() == "milk and coffee"
    text.fill("milk, coffee and oats")
    text.press("Enter")

    wait_for_step(page, 4)                                      # Save: tapped by hand on the screen
    page.keyboard.press("h")
    assert page.get_by_test_id("hand-mode").is_visible()
    box = page.get_by_test_id("tap-box").bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)

    wait_for_step(page, 5)                                      # terminate: the policy proposes failure...
    assert page.get_by_test_id("action-type").input_value() == "terminate"
    assert page.eval_on_selector("#f-status", "el => el.value") == "failure"
    page.keyboard.press("Enter")                                # ...which one Enter no longer files (#31)
    page.get_by_test_id("ending-confirm").wait_for(state="visible")
    page.keyboard.press("Escape")                               # the note is saved: the annotator says success
    page.select_option("#f-status", "success")
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-testid=in-sft]", timeout=30000)
    assert "Stated by annotator-user: success" in " ".join(page.get_by_test_id("stated-outcome").text_content().split())
    page.close()

    trajectory = Trajectory.objects.get(line="semi_auto")
    assert trajectory.status == "completed" and trajectory.destination == "sft"
    assert SftEntry.objects.filter(trajectory=trajectory, intake="semi_auto_verified").exists()
    steps = {s.index: s for s in trajectory.steps.all()}
    assert [steps[i].executed_action["action"] for i in range(6)] == ["open", "click", "type", "type", "click", "terminate"]
    assert steps[0].edit["accepted_unchanged"] and steps[2].edit["accepted_unchanged"]
    assert 10 <= steps[1].edit["pixel_distance"] <= 20 and not steps[1].edit["type_changed"]
    assert not steps[1].edit["accepted_unchanged"] and steps[1].edit["decision_regenerated"]
    assert steps[3].edit["text_changed"] and steps[3].executed_action["text"] == "milk, coffee and oats"
    assert "milk, coffee and oats" in steps[3].cot["Decision"]
    assert steps[4].edit["by_hand"] and steps[4].edit["pixel_distance"] < 5
    assert steps[5].executed_action["status"] == "success" and not steps[5].edit["accepted_unchanged"]
    assert trajectory.stated_outcome == "success" and trajectory.stated_by == role_users["annotator"]
    assert all(s.timings.get("verify_ms") is not None for s in steps.values())
