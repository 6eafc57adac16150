"""Exports of an evaluation run, parsed back: JSON Lines with the pinned config, AndroidWorld's CSV."""
import csv
import io
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from benchmark import versions
from benchmark.exports import AVERAGE_ROW, SUMMARY_COLUMNS, androidworld_summary, results_jsonl, write_run_export
from benchmark.infer import launch_evaluation
from benchmark.metric import score_evaluation
from benchmark.models import BenchmarkItem, EvalResult
from flywheel.models import Step, Trajectory
from flywheel.policies import default_policy_version
from tests.benchmark.conftest import make_benchmark_query

VOTES = [{"judge": "terminal-state", "version": "1", "vote": "success", "rationale": "all hold"},
         {"judge": "milestones", "version": "1", "vote": "success", "rationale": "reached"},
         {"judge": "path", "version": "1", "vote": "failure", "rationale": "detour"}]


def rollout(evaluation, item, steps, seconds, stop_reason, attempt=1, **fields):
    trajectory = Trajectory.objects.create(query=item.query, run=evaluation.collection_run, line="benchmark",
                                           status="done", stop_reason=stop_reason)
    start = timezone.now() - timedelta(minutes=5)
    Trajectory.objects.filter(pk=trajectory.pk).update(started_at=start, finished_at=start + timedelta(seconds=seconds))
    for index in range(steps):
        Step.objects.create(trajectory=trajectory, index=index, executed_action={"action": "click"})
    return EvalResult.objects.create(eval_run=evaluation, item=item, trajectory=trajectory, attempt=attempt,
                                     evidence={"stop_reason": stop_reason}, **fields)


@pytest.fixture
def evaluation(db, role_users):
    manager = role_users["manager"]
    benchmark = versions.create_version("export-bench", "v1", {"size": 4})
    queries = [make_benchmark_query(f"q-{name}", text=f"Open the Bluetooth settings ({name})") for name in "abcd"]
    items = versions.add_queries(benchmark, queries[:3], split="held_out") + versions.add_queries(benchmark, queries[3:])
    for item in items:
        versions.review_item(item, manager, note="checked", decision="approve")
    BenchmarkItem.objects.filter(pk=items[3].pk).update(executable=False, not_executable_reason="no phone here has QQ")
    benchmark = versions.freeze(benchmark, manager)
    run = launch_evaluation(benchmark, default_policy_version(), config={"max_steps": 6}, dispatch=False)
    a, b, c = (BenchmarkItem.objects.get(benchmark=benchmark, query__key=f"q-{n}") for n in "abc")
    rollout(run, a, 2, 10, "reset failed: phone busy", state="not_scored", superseded=True,
            not_scored_reason="the environment broke it: re-collected")
    rollout(run, a, 3, 20, "terminate: success", attempt=2, state="scored", outcome="success", votes=VOTES[:2],
            judge_verdict="success", partial_credit=1.0)
    rollout(run, b, 4, 30, "terminate: success", state="expert", outcome="", expert_outcome="success",
            judge_verdict="split", votes=VOTES, partial_credit=0.5)
    rollout(run, c, 1, 5, "phone lost: adb went away", state="not_scored",
            not_scored_reason="phone lost: re-collected when a phone takes its work again")
    score_evaluation(run.pk)
    run.refresh_from_db()
    return run


def test_results_jsonl_holds_the_pinned_config_then_each_current_result(evaluation):
    records = [json.loads(line) for line in results_jsonl(evaluation).splitlines()]
    config, results, not_run = records[0], records[1:4], records[4:]
    assert config["type"] == "config" and config["config"] == evaluation.config
    assert config["config"]["benchmark"]["content_hash"] == evaluation.benchmark.content_hash
    assert config["config"]["infer"]["max_steps"] == 6 and config["benchmark"] == "export-bench v1"
    assert config["scores"]["sr"] == 1.0 and config["scores"]["scored"] == 2
    assert [r["type"] for r in results] == ["result"] * 3
    a, b, c = results
    assert [a["key"], b["key"], c["key"]] == ["q-a", "q-b", "q-c"]
    assert a["attempt"] == 2 and a["state"] == "scored" and a["outcome"] == "success" and a["episode_length"] == 3
    assert a["goal"] == "Open the Bluetooth settings (a)" and a["split"] == "held_out"
    assert a["labels"]["category"] == "system" and a["expected_interaction"] == "execute"
    assert a["votes"] == VOTES[:2] and a["runtime_s"] == 20.0 and a["stop_reason"] == "terminate: success"
    assert b["state"] == "expert" and b["expert_outcome"] == "success" and b["final_outcome"] == "success"
    assert b["partial_credit"] == 0.5 and [v["vote"] for v in b["votes"]] == ["success", "success", "failure"]
    assert c["state"] == "not_scored" and c["not_scored_reason"].startswith("phone lost")
    assert c["trajectory_id"] and c["stop_reason"] == "phone lost: adb went away"
    assert not_run == [{"type": "not_run", "key": "q-d", "reason": "no phone here has QQ"}]


def test_the_summary_is_androidworlds_table_with_an_average_row(evaluation):
    rows = list(csv.DictReader(io.StringIO(androidworld_summary(evaluation))))
    assert tuple(rows[0]) == SUMMARY_COLUMNS
    by_task = {row["task_template"]: row for row in rows}
    assert list(by_task) == ["q-a", "q-b", "q-c", "'" + AVERAGE_ROW]  # quoted: "=" would start a formula
    a, b, c, average = by_task.values()
    # q-a: the re-collected attempt counts as a failed trial, its steps and time count too
    assert (a["task_num"], a["num_complete_trials"], a["mean_success_rate"], a["mean_episode_length"],
            a["total_runtime_s"], a["num_fail_trials"]) == ("0", "1", "1.0", "2.5", "30.0", "1")
    assert (b["num_complete_trials"], b["mean_success_rate"], b["num_fail_trials"]) == ("1", "1.0", "0")
    assert (c["num_complete_trials"], c["mean_success_rate"], c["num_fail_trials"]) == ("0", "", "1")
    assert average["task_num"] == "0" and float(average["num_complete_trials"]) == pytest.approx(2 / 3, abs=1e-3)
    assert float(average["mean_success_rate"]) == 1.0                      # a task with no complete trial is skipped
    assert float(average["mean_episode_length"]) == pytest.approx((2.5 + 4 + 1) / 3, abs=1e-3)
    as_dict = androidworld_summary(evaluation, fmt="dict")
    assert as_dict["config"] == evaluation.config and len(as_dict["rows"]) == 3
    assert as_dict["average"]["task_template"] == AVERAGE_ROW
    with pytest.raises(ValueError):
        androidworld_summary(evaluation, fmt="xml")


def test_a_run_export_writes_three_files_that_read_back(evaluation, tmp_path):
    paths = write_run_export(evaluation, tmp_path / "out" / "run")
    assert set(paths) == {"results", "summary", "config"}
    config = json.loads((tmp_path / "out" / "run" / "config.json").read_text(encoding="utf-8"))
    assert config["config"] == evaluation.config and config["scores"]["sr"] == 1.0
    lines = (tmp_path / "out" / "run" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["config", "result", "result", "result", "not_run"]
    summary = list(csv.DictReader((tmp_path / "out" / "run" / "summary.csv").open(encoding="utf-8")))
    assert summary[-1]["task_template"] == "'" + AVERAGE_ROW and len(summary) == 4


def test_an_empty_run_exports_its_config_and_no_rows(db, role_users):
    manager = role_users["manager"]
    benchmark = versions.create_version("empty-bench", "v1", {})
    for item in versions.add_queries(benchmark, [make_benchmark_query("only")]):
        versions.review_item(item, manager, decision="approve")
    run = launch_evaluation(versions.freeze(benchmark, manager), default_policy_version(), dispatch=False)
    assert [json.loads(line)["type"] for line in results_jsonl(run).splitlines()] == ["config"]
    assert androidworld_summary(run).splitlines() == [",".join(SUMMARY_COLUMNS)]
