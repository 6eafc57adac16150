"""A real browser draws the benchmark charts with the vendored Chart.js, served from /static/, and scores a
split verdict from the keyboard."""
import re
from urllib.parse import urlparse

import pytest

from benchmark.models import EvalRun
from tests.benchmark.test_views import evaluation_with, frozen_version
from tests.conftest import log_in_browser

pytestmark = pytest.mark.django_db(transaction=True)

# Pixels of a canvas that are not transparent: > 0 once something is drawn on it.
INKED = """(canvas) => {
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let inked = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] > 0) inked++;
  return inked;
}"""


def test_the_dashboards_and_the_run_page_draw_their_charts_from_local_files(role_users, asgi_server, browser):
    manager = role_users["manager"]
    benchmark = frozen_version(manager)
    first = evaluation_with(benchmark, ["success", "failure", "success"])
    live = evaluation_with(benchmark, ["success", "split", "success"], done=False)
    EvalRun.objects.filter(pk=live.pk).update(status="running")

    page = browser.new_page()
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    log_in_browser(page, asgi_server, manager)
    assert page.url == asgi_server + "/dashboard/"

    page.goto(asgi_server + "/benchmarks/dashboards/")
    assert page.evaluate("typeof window.Chart") == "function"
    assert page.evaluate("window.Chart.version").startswith("4.")
    for chart_id in ("sr-by-model-chart", "sr-by-benchmark-chart", "trust-chart", "dimension-chart"):
        canvas = page.locator(f'canvas[data-chart="{chart_id}"]')
        canvas.wait_for()
        assert canvas.get_attribute("data-drawn") is not None, chart_id
        assert canvas.evaluate(INKED) > 100, chart_id
    assert page.locator(".chart-fallback:visible").count() == 0
    # The numbers are there as a table too.
    assert f"#{first.pk}" in page.get_by_test_id("finished-runs").inner_text()

    # The live run page polls its fragment and draws the chart inside it again after each swap.
    page.goto(asgi_server + f"/benchmarks/runs/{live.pk}/")
    canvas = page.locator('canvas[data-chart="run-dimension-chart"]')
    canvas.wait_for()
    assert canvas.evaluate(INKED) > 100
    canvas.evaluate("(c) => { window.firstCanvas = c; }")
    with page.expect_response(lambda response: f"/benchmarks/runs/{live.pk}/" in response.url
                              and response.request.headers.get("hx-request") == "true", timeout=10_000):
        pass
    # A swapped-in canvas is a new element: it is drawn again.
    page.wait_for_function("() => { const c = document.querySelector('canvas[data-chart=\"run-dimension-chart\"]');"
                           " return c && c !== window.firstCanvas && c.dataset.drawn && window.Chart.getChart(c); }",
                           timeout=10_000)
    assert canvas.evaluate(INKED) > 100
    assert "Running" in page.get_by_test_id("eval-progress").inner_text()

    # The expert queue from the keyboard: 2 scores the split result in front as a failure.
    split = live.results.get(state="split")
    page.goto(asgi_server + "/benchmarks/expert/")
    page.get_by_test_id("current-result").wait_for()
    with page.expect_navigation():
        page.keyboard.press("2")
    assert "No split verdict waits for an expert" in page.content()
    split.refresh_from_db()
    assert (split.state, split.expert_outcome, split.expert_by) == ("expert", "failure", manager)

    scripts = [url for url in requests if url.endswith(".js")]
    assert asgi_server + "/static/vendor/chart.umd.min.js" in scripts
    assert asgi_server + "/static/js/benchmark_charts.js" in scripts
    server = urlparse(asgi_server).netloc
    assert {urlparse(url).netloc for url in requests if url.startswith("http")} == {server}, "no external request"
    page.close()


def test_every_bar_keeps_its_label_and_axes_span_the_data(role_users, asgi_server, browser):
    """The SR-by-dimension bars each have their own label (none skipped), a lone run's SR-over-time
    axis spans a day or so around it with readable dates, and a loss curve's axis fits its losses."""
    manager = role_users["manager"]
    benchmark = frozen_version(manager)
    evaluation_with(benchmark, ["success", "failure", "success"])

    page = browser.new_page()
    log_in_browser(page, asgi_server, manager)
    assert page.url == asgi_server + "/dashboard/"
    page.goto(asgi_server + "/benchmarks/dashboards/")
    canvas = page.locator('canvas[data-chart="dimension-chart"]')
    canvas.wait_for()
    page.wait_for_function("() => document.querySelector('canvas[data-chart=\"dimension-chart\"]').dataset.drawn")
    drawn = canvas.evaluate("""(c) => { const chart = window.Chart.getChart(c);
        return {labels: chart.data.labels.length, ticks: chart.scales.y.ticks.length,
                tickLabels: chart.scales.y.ticks.map((t) => String(chart.scales.y.getLabelForValue(t.value)))}; }""")
    assert drawn["labels"] > 4, drawn
    assert drawn["ticks"] == drawn["labels"], "every bar has its label"

    timeline = page.locator('canvas[data-chart="sr-by-model-chart"]')
    axis = timeline.evaluate("""(c) => { const x = window.Chart.getChart(c).scales.x;
        return {span: x.max - x.min,
                label: x.options.ticks.callback.call(x, x.ticks[0].value)}; }""")
    assert axis["span"] <= 2 * 86_400_000, "one point: a window of about a day, not years"
    assert re.fullmatch(r"\d{1,2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}", axis["label"]), axis

    # The loss chart's axis is fitted to the losses with a little room, not drawn from zero.
    spec = {"type": "line", "labels": [1, 2, 3], "percent": False, "fit": True, "axes": {"x": "step", "y": "loss"},
            "datasets": [{"label": "loss", "data": [2.0, 1.9, 1.8]}]}
    scale = page.evaluate("(spec) => window.BenchmarkCharts.config(spec).options.scales", spec)
    assert 1.7 < scale["y"]["min"] < 1.8 and 2.0 < scale["y"]["max"] < 2.1
    assert scale["y"]["title"] == {"display": True, "text": "loss"}
    page.close()
