"""The dashboard is pushed: product code emits events after commit; the open page updates at once."""
import pytest

from flywheel.judging.destinations import route_trajectory
from flywheel.models import App, Query, Trajectory
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_routed_trajectory_reaches_an_open_dashboard_without_polling(role_users, asgi_server, browser):
    query = Query.objects.create(key="push", text="Open Settings", tier="L1")
    query.set_apps([App.objects.create(package="com.android.settings")])
    trajectory = Trajectory.objects.create(query=query, line="automatic", status="completed")
    page = browser.new_page()
    page.goto(asgi_server + "/login/?next=/dashboard/")
    page.fill("input[name=username]", role_users["manager"].username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(asgi_server + "/dashboard/")
    page.get_by_test_id("live-state").filter(has_text="live").wait_for(timeout=10_000)
    sft_count = page.locator("[data-testid=pools-card] tr:nth-child(2) td:nth-child(2)")
    assert sft_count.inner_text() == "0"

    route_trajectory(trajectory, "true")  # → the SFT pool; its events are sent after commit

    # The fallback poll runs once a minute: well within 5 s, only the pushed event explains it.
    page.wait_for_function(
        "() => document.querySelector('[data-testid=pools-card] tr:nth-child(2) td:nth-child(2)')"
        ".textContent.trim() === '1'", timeout=5_000)
    assert page.locator("#counts").get_attribute("data-last-event") in ("pools", "routing")
    page.close()
