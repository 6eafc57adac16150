"""The AndroidWorld summary CSV is safe to open in a spreadsheet (issue #35, OWASP CSV injection): a cell
beginning with = + - @ tab or CR gets a leading quote; numbers and ordinary keys are written unchanged."""
import csv
import io

import pytest

from benchmark import versions
from benchmark.exports import AVERAGE_ROW, androidworld_summary
from benchmark.infer import launch_evaluation
from flywheel.policies import default_policy_version
from flywheel.rules.spreadsheet import spreadsheet_safe, spreadsheet_safe_row
from tests.benchmark.conftest import make_benchmark_query
from tests.benchmark.test_exports import rollout


@pytest.mark.parametrize("cell", ["=1+1", "+1", "-2", "@SUM(A1)", "\tx", "\rx"])
def test_formula_starts_get_a_quote(cell):
    assert spreadsheet_safe(cell) == "'" + cell


@pytest.mark.parametrize("cell", ["q-a", "", "1.0", -0.5, 3, None, "a=b"])
def test_other_cells_are_unchanged(cell):
    assert spreadsheet_safe(cell) == cell


def test_a_row_writes_none_as_empty():
    assert spreadsheet_safe_row({"a": None, "b": "=x", "c": 2}) == {"a": "", "b": "'=x", "c": 2}


def test_the_summary_quotes_a_formula_key_and_the_average_row(db, role_users):
    manager = role_users["manager"]
    benchmark = versions.create_version("csv-bench", "v1", {"size": 2})
    # Keys stored before keys were checked (or written by hand in the database) can start with "=".
    queries = [make_benchmark_query('=HYPERLINK("http://evil","x")'), make_benchmark_query("plain-key")]
    items = versions.add_queries(benchmark, queries)
    for item in items:
        versions.review_item(item, manager, note="checked", decision="approve")
    run = launch_evaluation(versions.freeze(benchmark, manager), default_policy_version(), config={}, dispatch=False)
    for item in run.benchmark.items.all():
        rollout(run, item, 2, 10, "terminate: success", state="scored", outcome="success", partial_credit=1.0)
    rows = list(csv.DictReader(io.StringIO(androidworld_summary(run))))
    assert sorted(row["task_template"] for row in rows) == sorted(
        ["'=HYPERLINK(\"http://evil\",\"x\")", "plain-key", "'" + AVERAGE_ROW])
    assert not [cell for row in rows for cell in row.values() if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
