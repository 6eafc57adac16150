"""A real browser: ending a session with terminate:failure asks the annotator to confirm and state
the outcome (issue #31). Esc goes back with nothing executed; Enter confirms; I marks the task
infeasible and takes a reason; the page then says who stated what."""
import pytest

from tests.annotation.test_session_browser import wait_for_step
from tests.conftest import log_in_browser

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_failure_ending_is_confirmed_and_stated_by_keys(role_users, farm_devices, import_task, asgi_server,
                                                          browser):
    from flywheel.models import SftEntry, Trajectory

    farm_devices()
    import_task("settings-dark-theme-l1")
    annotator = role_users["annotator"]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    log_in_browser(page, asgi_server, annotator, "/queue/")
    assert page.url == asgi_server + "/queue/"
    page.keyboard.press("n")
    page.wait_for_url("**/session/*/", timeout=30000)
    wait_for_step(page, 0)

    page.keyboard.press("e")                                     # the proposal becomes terminate...
    page.select_option("#f-status", "failure")                   # ...with status failure
    page.evaluate("document.activeElement.blur()")
    dialog = page.get_by_test_id("ending-confirm")
    assert not dialog.is_visible()
    page.keyboard.press("Enter")                                 # one Enter no longer ends it: it asks
    dialog.wait_for(state="visible")
    assert "terminate with status failure" in page.get_by_test_id("ending-what").text_content()
    assert page.get_by_test_id("ending-failure").is_checked()
    page.keyboard.press("Escape")                                # Esc: back to the action, nothing sent
    dialog.wait_for(state="hidden")
    assert "Not executed" in page.get_by_test_id("status-line").text_content()
    assert page.get_by_test_id("action-type").input_value() == "terminate"  # the editor kept the action
    trajectory = Trajectory.objects.get(line="semi_auto")
    assert trajectory.status == "running" and not trajectory.steps.filter(executed_action__isnull=False).exists()

    page.keyboard.press("Enter")
    dialog.wait_for(state="visible")
    page.keyboard.press("i")                                     # infeasible, and its reason takes the keys
    assert page.get_by_test_id("ending-infeasible").is_checked()
    assert page.evaluate("document.activeElement.id") == "ending-reason"
    page.keyboard.type("this phone has no dark theme")
    page.keyboard.press("Enter")                                 # Enter confirms
    stated = page.get_by_test_id("stated-outcome")
    stated.wait_for(timeout=30000)
    assert f"Stated by {annotator.username}: infeasible" in " ".join(stated.text_content().split())
    page.close()

    trajectory.refresh_from_db()
    assert trajectory.status == "completed" and trajectory.verdict == "infeasible"
    assert (trajectory.stated_outcome, trajectory.stated_reason, trajectory.stated_by) == (
        "infeasible", "this phone has no dark theme", annotator)
    assert not SftEntry.objects.filter(trajectory=trajectory, intake="semi_auto_verified").exists()
