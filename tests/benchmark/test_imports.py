"""Benchmark versions from files: MobileGUI-VBench as published, and the farm's own task set."""
import json
from collections import Counter
from pathlib import Path

import pytest

from benchmark import versions
from benchmark.imports import (
    BenchmarkImportError,
    clarify_answer,
    import_farm_tasks,
    import_vbench_jsonl,
    refresh_executability,
    split_preconditions,
    stratified_held_out,
    vbench_interaction,
)
from benchmark.models import Benchmark, BenchmarkItem, FrozenBenchmark
from devices.models import Device
from flywheel.collection.launch import launch_run, select_queries
from flywheel.models import App, Query

ROOT = Path(__file__).resolve().parents[2]
VBENCH = ROOT.parent / "shared" / "data" / "mobilegui-vbench" / "MobileGUI-VBench.jsonl"
FARM_TASKS = ROOT / "simfarm" / "tasks" / "tasks.jsonl"
FARM_TASK_COUNT = sum(1 for line in FARM_TASKS.read_text(encoding="utf-8").splitlines() if line.strip())
needs_vbench = pytest.mark.skipif(not VBENCH.is_file(), reason="the MobileGUI-VBench file is not here")

GOOD = {"task_id": 1, "query": "去QQ里搜一个频道", "scenario": "社交通讯", "involved_apps": "QQ", "precondition": "",
        "clarification_requirement": ""}


def lines(*records):
    return "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records) + "\n"


# ---- the field mappings ----

def test_clarification_requirements_map_to_the_expected_interaction():
    assert vbench_interaction("下单前接管") == "call_user"
    assert vbench_interaction("到登陆页面请求接管") == "call_user"
    assert vbench_interaction("澄清几点（八点），下单前接管") == "call_user"   # a hand-over wins
    assert vbench_interaction("发送前澄清") == "clarify"
    assert vbench_interaction("询问哪个（任意一个）") == "clarify"
    assert vbench_interaction("hand over before paying") == "call_user"
    assert vbench_interaction("到登陆页面即可停止") == "execute"
    assert vbench_interaction("") == "execute"
    assert clarify_answer("澄清哪一个（第一个）") == "第一个" and clarify_answer("发送前澄清") is None
    assert split_preconditions("A；B; A;") == ["A", "B"] and split_preconditions("") == []


@needs_vbench
def test_the_published_vbench_file_imports_with_every_field_mapped(db, role_users):
    benchmark = import_vbench_jsonl(VBENCH.read_text(encoding="utf-8"), user=role_users["manager"])
    assert benchmark.status == "review" and not benchmark.frozen and benchmark.origin == "imported"
    items = list(benchmark.items.select_related("query").order_by("position"))
    assert len(items) == 150 and {i.external_id for i in items} == {str(n) for n in range(1, 151)}
    # scenario → category, all eight scenario names, in the README's counts
    assert Counter(i.labels["category"] for i in items) == {
        "video": 24, "shopping": 24, "life": 23, "social": 21, "travel": 18, "music": 17, "navigation": 17,
        "news": 6}
    # involved_apps → app names, app scope; 8 multi-app tasks
    multi = sorted(int(i.external_id) for i in items if i.labels["app_scope"] == "cross-app")
    assert multi == [4, 10, 35, 42, 77, 138, 147, 150]
    first = next(i for i in items if i.external_id == "4")
    assert first.query.requirements["app_names"] == ["QQ", "相册"] and first.query.app_packages == []
    # precondition → per-run preconditions (65 tasks), clarification → interaction (52 tasks)
    with_pre = [i for i in items if i.environment["preconditions"]]
    assert len(with_pre) == 65
    assert first.environment["preconditions"] == [{"text": "相册中至少有两张照片", "holds": "per_run"},
                                                  {"text": "QQ好友列表中存在好友", "holds": "per_run"}]
    assert first.query.prerequisites == ["相册中至少有两张照片", "QQ好友列表中存在好友"]
    assert len([i for i in items if i.interaction_points]) == 52
    kinds = Counter(i.expected_interaction for i in items)
    assert kinds["call_user"] == 15 and kinds["clarify"] == 35 and kinds["execute"] == 100
    assert first.expected_interaction == "clarify" and first.interaction_points == ["发送前澄清"]
    assert first.labels["instruction_type"] == "agent-user-interactive"
    order = next(i for i in items if i.interaction_points == ["下单前接管"])
    assert order.expected_interaction == "call_user" and order.query.verification == {"handoff": "call_user"}
    # the rule tagger's labels: every item has explicitness and path complexity in Table 4's words
    assert {i.labels["explicitness"] for i in items} <= {"explicit", "implicit", "underspecified"}
    assert {i.labels["path_complexity"] for i in items} <= {"simple", "moderate", "complex"}
    assert all(i.query.tier in ("L1", "L2", "L3") for i in items)
    assert {i.labels["ownership"] for i in items} == {"third-party"}   # 相册 only ever appears with QQ etc.
    # evaluation only, external, keyed by task id; no phone here offers these apps: shown, not hidden
    queries = Query.objects.filter(key__startswith="vbench-")
    assert queries.count() == 150 and set(queries.values_list("source", flat=True)) == {"external"}
    assert all(queries.values_list("evaluation_only", flat=True))
    assert not select_queries({}).filter(key__startswith="vbench-").exists()
    assert not any(i.executable for i in items)
    assert first.not_executable_reason == "no phone here has QQ、相册"
    assert next(i for i in items if i.external_id == "1").not_executable_reason == "no phone here has QQ"


@needs_vbench
def test_a_phone_with_the_app_makes_its_tasks_executable_and_system_apps_are_system(db):
    App.objects.create(package="com.tencent.mobileqq", label="QQ", category="social")
    Device.objects.create(serial="real-1", adb_server="10.0.0.5:5037", installed_apps=["com.tencent.mobileqq"])
    benchmark = import_vbench_jsonl(VBENCH.read_text(encoding="utf-8"))
    only_qq = benchmark.items.get(external_id="1")
    assert only_qq.executable and only_qq.not_executable_reason == ""
    assert only_qq.query.app_packages == ["com.tencent.mobileqq"]
    assert only_qq.query.reset == {"force_stop": ["com.tencent.mobileqq"], "home": True}
    with_album = benchmark.items.get(external_id="4")  # QQ + 相册: the album is on no phone
    assert not with_album.executable and with_album.not_executable_reason == "no phone here has 相册"
    assert sorted(benchmark.items.filter(executable=True).values_list("external_id", flat=True)) == ["1", "2", "3"]
    # a phone that joins later: recompute before freezing
    App.objects.create(package="com.android.gallery3d", label="相册", category="photo", is_system=True)
    Device.objects.create(serial="real-2", adb_server="10.0.0.5:5037", installed_apps=["com.android.gallery3d"])
    assert refresh_executability(benchmark) == 3  # tasks 4, 10 and 42 name 相册
    with_album.refresh_from_db()
    assert with_album.not_executable_reason == "no single phone here has all of QQ、相册"
    album = import_vbench_jsonl(lines({**GOOD, "task_id": 900, "query": "看看相册里的照片", "involved_apps": "相册"}),
                                name="tiny")
    assert album.items.get().labels["ownership"] == "system" and album.items.get().executable


@needs_vbench
def test_a_reimport_of_the_same_version_is_refused_and_another_version_reuses_the_queries(db, role_users):
    text = VBENCH.read_text(encoding="utf-8")
    import_vbench_jsonl(text, freeze_as_reviewed=True, user=role_users["manager"])
    with pytest.raises(BenchmarkImportError, match="MobileGUI-VBench v1 is imported already"):
        import_vbench_jsonl(text)
    assert Benchmark.objects.filter(name="MobileGUI-VBench").count() == 1
    frozen = Benchmark.objects.get(name="MobileGUI-VBench", version="v1")
    assert frozen.frozen and set(frozen.items.values_list("review", flat=True)) == {"approved"}
    assert all(Query.objects.filter(key__startswith="vbench-").values_list("locked", flat=True))
    with pytest.raises(FrozenBenchmark):
        refresh_executability(frozen)   # what a frozen version could run was pinned when it froze
    again = import_vbench_jsonl(text, version="v2")
    assert again.items.count() == 150 and Query.objects.filter(key__startswith="vbench-").count() == 150
    # a locked query the file now words differently cannot change: nothing is imported
    changed = lines({**GOOD, "task_id": 1, "query": "完全不同的任务"})
    with pytest.raises(BenchmarkImportError, match="line 1: query vbench-1 is frozen"):
        import_vbench_jsonl(changed, version="v3")
    assert not Benchmark.objects.filter(version="v3").exists()


def test_bad_input_names_every_problem_by_line_and_imports_nothing(db):
    text = lines(
        GOOD,
        "{not json",
        {k: v for k, v in GOOD.items() if k != "scenario"} | {"task_id": 3},
        {**GOOD, "task_id": 4, "difficulty": "hard"},
        {**GOOD, "task_id": "5"},
        {**GOOD, "task_id": 6, "precondition": None},
        {**GOOD, "task_id": 7, "scenario": "游戏娱乐"},
        {**GOOD, "task_id": 1},
        [1, 2],
        {**GOOD, "task_id": 10, "involved_apps": " 、 "},
    )
    with pytest.raises(BenchmarkImportError) as caught:
        import_vbench_jsonl(text)
    problems = caught.value.problems
    assert problems[0].startswith("line 2: not valid JSON")
    assert "line 3: missing field 'scenario'" in problems
    assert any(p.startswith("line 4: unknown field 'difficulty'") for p in problems)
    assert "line 5: task_id must be an integer, not str" in problems
    assert "line 6: precondition must be a string, not NoneType" in problems
    assert any(p.startswith("line 7: unknown scenario '游戏娱乐'") for p in problems)
    assert "line 8: task_id 1 repeats line 1" in problems
    assert "line 9: a task is a JSON object, not list" in problems
    assert "line 10: involved_apps names no app" in problems
    assert len(problems) == 9
    assert not Benchmark.objects.exists() and not Query.objects.exists()
    with pytest.raises(BenchmarkImportError, match="contains no task"):
        import_vbench_jsonl("\n\n")


# ---- the farm's task set ----

def test_the_held_out_split_is_stable_stratified_and_keeps_every_app_open():
    apps = {f"a-{i}": ["app.a"] for i in range(9)} | {f"b-{i}": ["app.b"] for i in range(3)}
    apps |= {"solo": ["app.c"], "pair": ["app.a", "app.d"]}
    held = stratified_held_out(apps, 0.34)
    assert held == stratified_held_out(dict(reversed(list(apps.items()))), 0.34)   # order does not matter
    assert len([k for k in held if k.startswith("a-") or k == "pair"]) == 3 and "solo" not in held
    assert len([k for k in held if k.startswith("b-")]) == 1
    assert "pair" not in held   # app.d appears only there: it stays open
    for app in ("app.a", "app.b", "app.c", "app.d"):
        assert any(app in a for k, a in apps.items() if k not in held)


def test_the_farm_version_is_frozen_with_a_held_out_third_that_no_collection_run_draws(db, role_users):
    benchmark = import_farm_tasks(FARM_TASKS, user=role_users["manager"])
    assert benchmark.frozen and benchmark.status == "frozen" and benchmark.origin == "farm"
    assert benchmark.import_report["created"] and benchmark.import_report["queries"]["created"] == FARM_TASK_COUNT
    items = list(benchmark.items.select_related("query"))
    assert len(items) == FARM_TASK_COUNT and {i.review for i in items} == {"approved"}
    assert all("carry their own checks" in i.review_note and i.snapshot["sha256"] for i in items)
    held = [i for i in items if i.split == "held_out"]
    assert 0.28 <= len(held) / FARM_TASK_COUNT <= 0.38
    assert all(i.query.evaluation_only and i.query.locked for i in held)
    assert not any(i.query.evaluation_only for i in items if i.split == "open")
    drawn = set(select_queries({}).values_list("key", flat=True))
    assert drawn.isdisjoint({i.query.key for i in held}) and {i.query.key for i in items if i.split == "open"} <= drawn
    assert launch_run("automatic", {"keys": [held[0].query.key]}, dispatch=False).total == 0
    open_apps = {p for i in items if i.split == "open" for p in i.query.app_packages}
    assert open_apps == {p for i in items for p in i.query.app_packages}   # every app keeps open queries
    assert {i.labels["category"] for i in items} >= {"shopping", "system", "social"}
    assert all(i.executable for i in items)

    again = import_farm_tasks(FARM_TASKS, user=role_users["manager"])
    assert again.pk == benchmark.pk and not again.import_report["created"]
    assert Benchmark.objects.count() == 1 and BenchmarkItem.objects.count() == FARM_TASK_COUNT and Query.objects.count() == FARM_TASK_COUNT
    assert again.content_hash == benchmark.content_hash
    assert set(again.items.filter(split="held_out").values_list("query__key", flat=True)) == {
        i.query.key for i in held}


def test_the_farm_version_can_stay_a_draft_and_an_unfinished_one_is_completed(db):
    draft = import_farm_tasks(FARM_TASKS, name="farm-draft", freeze=False)
    assert not draft.frozen and draft.status == "review" and draft.items.count() == FARM_TASK_COUNT
    assert not Query.objects.filter(locked=True).exists()
    versions.review_item(draft.items.first(), None, decision="save")
    finished = import_farm_tasks(FARM_TASKS, name="farm-draft")
    assert finished.pk == draft.pk and finished.frozen and finished.items.count() == FARM_TASK_COUNT
    with pytest.raises(BenchmarkImportError, match="held_out_share"):
        import_farm_tasks(FARM_TASKS, held_out_share=1.5)
