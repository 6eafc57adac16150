"""Malformed numbers in query strings and forms are refused (4xx or the page's own message), never a 500.

'²' and '٣' pass str.isdigit() yet int() refuses them; '1e3', '-1', '' and a 40-digit number are the
other usual suspects. Every page that reads a number from a request is probed with each, as the role
allowed to use it, and nothing may be written.
"""
import pytest
from django.urls import reverse

from benchmark.models import Benchmark, BenchmarkItem, EvalRun
from flywheel.models import EvolutionLoop, ExplorationRun, Query, Trajectory
from flywheel.rules.numbers import ROW_ID_MAX, row_id, whole_number
from flywheel_demo.models import DemoRun

pytestmark = pytest.mark.django_db

MALFORMED = ["²", "٣", "1e3", "-1", "", "9" * 40]

# (role, method, url name, needs an object id, the fields to post or query, with {v} the probe)
PAGES = [
    ("manager", "get", "query-review", None, {"run": "{v}"}),
    ("manager", "post", "query-review-act", None, {"action": "approve", "ids": "{v}"}),
    ("annotator", "post", "repair-next", None, {"skip": "{v}"}),
    ("annotator", "post", "session-fix", "trajectory", {"step": "{v}", "reasoning": "fixed"}),
    ("adjudicator", "get", "benchmark-expert-queue", None, {"result": "{v}"}),
    ("manager", "get", "benchmark-dashboards", None, {"run": "{v}", "a": "{v}", "b": "{v}"}),
    ("manager", "post", "benchmark-derive", None, {"parent": "{v}", "version": "v2", "shifts": "{}"}),
    ("manager", "post", "benchmark-evaluate", "benchmark", {"model_version": "{v}"}),
    ("manager", "get", "benchmark-review", "benchmark", {"item": "{v}"}),
    ("manager", "post", "benchmark-review-item", "item", {"pre_text_{v}": "a precondition"}),
    # loop_rounds out of range keeps the demo from starting when phones is left empty (= default)
    ("manager", "post", "flywheel-demo-start", None, {"phones": "{v}", "loop_rounds": "99"}),
    ("manager", "get", "judge-evaluations", None, {"evaluation": "{v}"}),
    ("manager", "post", "exploration-list", None, {"max_depth": "{v}"}),
    ("manager", "post", "loop-list", None, {"rounds": "{v}"}),
]


@pytest.fixture
def targets(role_users):
    query = Query.objects.create(key="probe", text="open settings", tier="L1", status=Query.Status.REVIEW)
    trajectory = Trajectory.objects.create(query=query, line="semi_auto", annotator=role_users["annotator"],
                                           status="completed")
    benchmark = Benchmark.objects.create(name="probe", version="v1")
    item = BenchmarkItem.objects.create(benchmark=benchmark, query=query, position=0)
    return {"trajectory": [trajectory.pk], "benchmark": [benchmark.pk], "item": [benchmark.pk, item.pk]}


def _written() -> tuple:
    """What a refused request must leave as it was."""
    return (Benchmark.objects.count(), EvalRun.objects.count(), DemoRun.objects.count(),
            EvolutionLoop.objects.count(), ExplorationRun.objects.count(),
            tuple(Query.objects.values_list("status", flat=True)), Trajectory.objects.count(),
            tuple(BenchmarkItem.objects.values_list("review", "environment")))


@pytest.mark.parametrize("value", MALFORMED, ids=["superscript", "arabic-indic", "exponent", "negative", "empty",
                                                  "huge"])
@pytest.mark.parametrize("role,method,name,target,fields", PAGES, ids=[page[2] for page in PAGES])
def test_a_malformed_number_is_refused_not_a_server_error(client_as, targets, value, role, method, name, target,
                                                          fields):
    try:
        url = reverse(name, args=targets[target] if target else [])
    except Exception:  # a page this checkout does not have
        pytest.skip(f"no {name} page")
    data = {key.replace("{v}", value): field.replace("{v}", value) for key, field in fields.items()}
    before = _written()
    response = getattr(client_as(role), method)(url, data)
    assert response.status_code in (200, 302, 400, 404), (name, value, response.status_code)
    assert _written() == before


@pytest.mark.parametrize("value", ["²", "٣", "1e3", "", " ", "1.0", "0x10", "+1", "9" * 40, "-", True, 2.0, None])
def test_whole_number_refuses_what_int_would_choke_on_or_misread(value):
    assert whole_number(value) is None


def test_whole_number_reads_ascii_digits_within_bounds():
    assert whole_number(" 42 ") == 42 and whole_number(7) == 7 and whole_number("0") == 0
    assert whole_number("-3") is None and whole_number("-3", minimum=-5) == -3
    assert whole_number("11", maximum=10) is None and whole_number(str(ROW_ID_MAX)) == ROW_ID_MAX
    assert row_id("0") is None and row_id("12") == 12 and row_id(str(ROW_ID_MAX + 1)) is None
