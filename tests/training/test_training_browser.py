"""A real browser draws a training run's loss curve with the vendored Chart.js, and the live run
page keeps polling while the run trains."""
import pytest

from tests.benchmark.test_charts_browser import INKED
from tests.conftest import PASSWORD
from training.models import TrainingRun

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_run_page_draws_the_loss_curve(role_users, asgi_server, browser):
    manager = role_users["manager"]
    run = TrainingRun.objects.create(
        stage="sft", status="running", config={"model": {"tiny": {}}}, progress={"step": 3, "total_steps": 10},
        metrics=[{"step": step, "loss": 3.0 / step, "lr": 1e-5} for step in (1, 2, 3)])
    page = browser.new_page()
    page.goto(asgi_server + "/login/")
    page.fill("input[name=username]", manager.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(asgi_server + "/dashboard/")
    page.goto(asgi_server + f"/training/runs/{run.pk}/")
    canvas = page.locator('canvas[data-chart="loss-chart"]')
    canvas.wait_for()
    assert canvas.evaluate(INKED) > 100
    assert page.locator(".chart-fallback:visible").count() == 0
    # the trainer reports a step: the next poll shows it and draws the longer curve
    TrainingRun.objects.filter(pk=run.pk).update(progress={"step": 4, "total_steps": 10},
                                                 metrics=[{"step": s, "loss": 3.0 / s} for s in (1, 2, 3, 4)])
    page.wait_for_function("() => document.querySelector('[data-testid=run-progress]').innerText.includes('step 4 of 10')",
                           timeout=10_000)
    page.wait_for_function("() => { const c = document.querySelector('canvas[data-chart=\"loss-chart\"]');"
                           " const chart = c && window.Chart.getChart(c); return chart && chart.data.labels.length === 4; }",
                           timeout=10_000)
