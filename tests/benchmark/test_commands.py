"""The benchmark's commands: import_benchmark (VBench, the farm's tasks, seeding) and evaluate."""
import csv
import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmark import versions
from benchmark.models import Benchmark, EvalResult, EvalRun
from devices.models import Device
from devices.registry import discover_devices
from flywheel.models import Query, Trajectory
from flywheel.policies import default_policy_version
from tests.benchmark.conftest import make_benchmark_query
from tests.benchmark.test_imports import FARM_TASKS, VBENCH, needs_vbench
from tests.conftest import ROOT, process_env


def run(*args, **options):
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO(), **options)
    return out.getvalue()


@pytest.fixture
def no_phones(settings):
    settings.ADB_SERVERS = ["127.0.0.1:9"]   # nothing listens: discovery finds no phone


def frozen_bench(manager, keys=("bt-0", "bt-1"), name="bt-bench"):
    benchmark = versions.create_version(name, "v1", {"size": len(keys)})
    for item in versions.add_queries(benchmark, [make_benchmark_query(k) for k in keys], split="held_out"):
        versions.review_item(item, manager, note="checked", decision="approve")
    return versions.freeze(benchmark, manager)


# ---- import_benchmark ----

@needs_vbench
def test_import_benchmark_seeds_both_versions_and_a_rerun_changes_nothing(db):
    out = run("import_benchmark", "--farm", str(FARM_TASKS), "--vbench", str(VBENCH), "--seed")
    assert "farm-tasks v1 frozen from tasks.jsonl" in out and "held out (evaluation only)" in out
    assert "MobileGUI-VBench v1 imported from MobileGUI-VBench.jsonl: 150 queries, in expert review" in out
    assert "150 of them cannot run on any phone here: no phone here has" in out
    assert Benchmark.objects.get(name="farm-tasks").frozen
    assert Benchmark.objects.get(name="MobileGUI-VBench").status == "review"
    counts = (Benchmark.objects.count(), Query.objects.count())
    again = run("import_benchmark", "--farm", str(FARM_TASKS), "--vbench", str(VBENCH), "--seed")
    assert "farm-tasks v1 is there already (frozen" in again and "MobileGUI-VBench v1 is there already" in again
    farm_tasks = sum(1 for row in FARM_TASKS.read_text().splitlines() if row.strip())
    assert (Benchmark.objects.count(), Query.objects.count()) == counts == (2, 150 + farm_tasks)
    with pytest.raises(CommandError, match="MobileGUI-VBench v1 is imported already"):
        run("import_benchmark", "--vbench", str(VBENCH))
    out = run("import_benchmark", "--vbench", str(VBENCH), "--name", "vb", "--version", "v2", "--freeze-as-reviewed")
    assert "vb v2 imported" in out and Benchmark.objects.get(name="vb", version="v2").frozen


def test_import_benchmark_skips_a_missing_vbench_file_when_seeding_and_reports_bad_lines(db, tmp_path):
    out = run("import_benchmark", "--vbench", str(tmp_path / "absent.jsonl"), "--seed")
    assert "absent.jsonl not found; MobileGUI-VBench not imported" in out and not Benchmark.objects.exists()
    with pytest.raises(CommandError, match="no such file"):
        run("import_benchmark", "--vbench", str(tmp_path / "absent.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": 1, "query": "x", "scenario": "游戏", "involved_apps": "QQ", "precondition": "", '
                   '"clarification_requirement": ""}\nnot json\n', encoding="utf-8")
    with pytest.raises(CommandError) as caught:
        run("import_benchmark", "--vbench", str(bad))
    message = str(caught.value)
    assert "nothing imported, 2 problems" in message and "line 1: unknown scenario '游戏'" in message
    assert "line 2: not valid JSON" in message and not Query.objects.exists()
    with pytest.raises(CommandError, match="name a file"):
        run("import_benchmark")


# ---- evaluate: refusals ----

def test_evaluate_refuses_what_it_cannot_run_with_one_line_each(db, role_users, no_phones):
    manager = role_users["manager"]
    frozen_bench(manager)
    draft = versions.create_version("draft", "v1", {})
    versions.add_queries(draft, [make_benchmark_query("d-1")])
    cases = [
        ({"benchmark": "nope"}, "no benchmark named 'nope' (known: bt-bench, draft)"),
        ({"benchmark": "bt-bench", "version": "v9"}, "bt-bench has no version 'v9' (versions: v1)"),
        ({"benchmark": "draft", "version": "v1"}, "draft v1 is not frozen (draft): review its queries"),
        ({"benchmark": "draft"}, "draft has no frozen version yet"),
        ({"benchmark": "bt-bench", "model": "gpt-9"}, "no model version named 'gpt-9'"),
        ({"benchmark": "bt-bench", "overrides": ["temperature=2"]}, "unknown evaluation setting(s): temperature"),
        ({"benchmark": "bt-bench", "overrides": ["max_steps"]}, "--set 'max_steps': expected key=value"),
        ({}, "--benchmark NAME is needed"),
        ({"export": 999, "out": "/tmp/x"}, "no evaluation run 999"),
        ({"export": 1}, "--export needs --out DIR"),
        ({"rejudge": 999}, "no evaluation run 999"),
    ]
    for options, message in cases:
        with pytest.raises(CommandError) as caught:
            run("evaluate", **options)
        assert message in str(caught.value) and "\n" not in str(caught.value), options
    assert not EvalRun.objects.exists()


def test_evaluate_without_wait_hands_the_run_to_the_workers(db, role_users, no_phones, monkeypatch,
                                                             django_capture_on_commit_callbacks):
    benchmark = frozen_bench(role_users["manager"])
    with django_capture_on_commit_callbacks() as dispatched:
        out = run("evaluate", "--benchmark", "bt-bench", "--model", default_policy_version().name,
                  "--set", "max_steps=6", "--set", "phones=2", "--split", "held_out")
    evaluation = EvalRun.objects.get()
    assert f"Evaluation run {evaluation.pk}:" in out and "2 rollouts" in out
    assert f"Page: /benchmarks/runs/{evaluation.pk}/" in out
    launches = [c for c in dispatched if c.__qualname__.startswith("launch_evaluation")]
    assert len(launches) == 1                             # dispatch_run once the launch commits
    handed = []
    monkeypatch.setattr("benchmark.infer.dispatch_run", handed.append)
    launches[0]()
    assert handed == [evaluation.collection_run]
    assert evaluation.benchmark == benchmark and evaluation.status == "queued" and evaluation.split == "held_out"
    assert evaluation.config["infer"]["max_steps"] == 6 and evaluation.config["infer"]["phones"] == 2
    assert not Trajectory.objects.exists()
    with pytest.raises(CommandError, match="still queued"):
        run("evaluate", "--rejudge", str(evaluation.pk))


@pytest.mark.django_db(transaction=True)
def test_evaluate_exits_non_zero_from_the_command_line(own_processes):
    versions.create_version("draft", "v1", {})
    env = process_env()
    for args, message in ((["--benchmark", "nope"], "no benchmark named 'nope'"),
                          (["--benchmark", "draft", "--version", "v1"], "draft v1 is not frozen")):
        done = subprocess.run([sys.executable, "manage.py", "evaluate", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("CommandError")]
        assert len(errors) == 1 and message in errors[0], done.stderr


# ---- evaluate --wait on the virtual farm, then re-judge and export ----

@pytest.mark.django_db(transaction=True)
def test_evaluate_wait_drives_the_farm_in_process_then_rejudges_and_exports(farm_settings, role_users, tmp_path):
    from devices.phone import PhoneConnection

    for serial in farm_settings.serials:
        PhoneConnection(farm_settings.address, serial).shell("settings put global bluetooth_on 0")
    discover_devices()
    assert Device.objects.filter(adb_server=farm_settings.address).exists()
    frozen_bench(role_users["manager"])
    out = run("evaluate", "--benchmark", "bt-bench", "--version", "v1", "--set", "max_steps=6", "--set", "phones=2",
              "--wait")
    evaluation = EvalRun.objects.get()
    assert evaluation.status == "done" and evaluation.completed == 2, out
    assert "  2/2 (Done)" in out and "SR 100.0% (2/2 scored)" in out and "judge agreement: 100.0%" in out
    assert {r.state for r in EvalResult.objects.filter(eval_run=evaluation)} == {"scored"}
    assert Trajectory.objects.filter(line="benchmark").count() == 2

    out = run("evaluate", "--rejudge", str(evaluation.pk))
    assert f"Re-judged 2 rollouts of run {evaluation.pk} (round 2)" in out and "SR 100.0%" in out
    assert Trajectory.objects.filter(line="benchmark").count() == 2   # re-judging runs no phone

    out = run("evaluate", "--export", str(evaluation.pk), "--out", str(tmp_path / "export"))
    assert "results.jsonl" in out
    records = [json.loads(line) for line in (tmp_path / "export" / "results.jsonl").read_text().splitlines()]
    assert records[0]["type"] == "config" and records[0]["config"]["judges"][0]["name"] == "terminal-state"
    assert records[0]["config"]["rejudged"][0]["round"] == 2
    assert [(r["key"], r["outcome"]) for r in records[1:]] == [("bt-0", "success"), ("bt-1", "success")]
    assert all(r["episode_length"] >= 1 and r["judge_round"] == 2 for r in records[1:])
    summary = list(csv.DictReader((tmp_path / "export" / "summary.csv").open()))
    assert [row["task_template"] for row in summary] == ["bt-0", "bt-1", "'========= Average ========="]
    assert summary[-1]["mean_success_rate"] == "1.0"
    assert json.loads((tmp_path / "export" / "config.json").read_text())["scores"]["sr"] == 1.0
    assert Path(tmp_path / "export" / "summary.csv").stat().st_size > 0
