"""The benchmark pages: versions, composition and evolution, expert review, evaluation runs, the
experts' split queue and the score dashboards; role checks, empty states and refusals."""
import html
import json
import re

import pytest
from django.utils import timezone

from benchmark import versions
from benchmark.infer import launch_evaluation
from benchmark.metric import score_evaluation
from benchmark.models import Benchmark, EvalResult, EvalRun
from benchmark.presets import VBENCH
from flywheel.models import ModelVersion, Trajectory
from flywheel.policies import default_policy_version
from tests.benchmark.conftest import make_benchmark_query
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db

SUCCESS_VOTES = [{"judge": "terminal-state", "version": "1", "vote": "success", "rationale": "switch on"},
                 {"judge": "milestones", "version": "1", "vote": "success", "rationale": "page reached"},
                 {"judge": "path", "version": "1", "vote": "success", "rationale": "plausible"}]
SPLIT_VOTES = [{"judge": "terminal-state", "version": "1", "vote": "success", "rationale": "switch on"},
               {"judge": "milestones", "version": "1", "vote": "failure", "rationale": "milestone 2 never seen"},
               {"judge": "path", "version": "1", "vote": "abstain", "rationale": "no path rules apply"}]
LABELS = [{"path_complexity": "simple", "intent_dependency": "single"},
          {"path_complexity": "moderate", "intent_dependency": "dependent"},
          {"path_complexity": "complex", "intent_dependency": "single"}]


def draft_version(name="bench", version="v1", n=3, table=None, prefix=None):
    benchmark = versions.create_version(name, version, table if table is not None else {"size": n})
    prefix = prefix or f"{name}-{version}"
    queries = [make_benchmark_query(f"{prefix}-{i}", text=f"Open the Bluetooth settings ({i})",
                                    labels=LABELS[i % len(LABELS)]) for i in range(n)]
    versions.add_queries(benchmark, queries)
    return benchmark


def frozen_version(user, **kwargs):
    benchmark = draft_version(**kwargs)
    for item in benchmark.items.all():
        versions.review_item(item, user, note="checked", decision="approve")
    return versions.freeze(benchmark, user)


def evaluation_with(benchmark, kinds, model_version=None, done=True):
    """An evaluation run whose results are given: 'success', 'failure', 'split' or 'not_scored' per item."""
    run = launch_evaluation(benchmark, model_version or default_policy_version(), "all", {"max_steps": 6},
                            dispatch=False)
    for item, kind in zip(benchmark.items.order_by("position"), kinds):
        trajectory = Trajectory.objects.create(query=item.query, run=run.collection_run, line="benchmark",
                                               status="completed", stop_reason="the model terminated")
        fields = {"state": "scored", "votes": SUCCESS_VOTES, "judge_verdict": kind, "outcome": kind,
                  "outcome_reason": "the judges' verdict", "evidence": {"stop_kind": "finished", "actions": []}}
        if kind == "failure":
            fields["votes"] = [{**v, "vote": "failure"} for v in SUCCESS_VOTES]
        if kind == "split":
            fields.update(state="split", votes=SPLIT_VOTES, judge_verdict="split", outcome="",
                          outcome_reason="the judges split: an expert scores it")
        if kind == "not_scored":
            fields.update(state="not_scored", votes=[], judge_verdict="", outcome="",
                          not_scored_reason="the environment broke it (reset failed): re-collected",
                          evidence={"stop_kind": "environment"})
        EvalResult.objects.create(eval_run=run, item=item, trajectory=trajectory, **fields)
        run.trajectories.add(trajectory)
    score_evaluation(run.pk)
    if done:
        EvalRun.objects.filter(pk=run.pk).update(status="done", completed=len(kinds), finished_at=timezone.now())
    return EvalRun.objects.get(pk=run.pk)


def text_of(response):
    """The page's HTML with runs of white space as one space and entities read (&#x27; → ')."""
    return html.unescape(re.sub(r"\s+", " ", response.content.decode()))


def chart_data(response, element_id):
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', response.content.decode(),
                      re.S)
    assert match, f"no chart data {element_id}"
    return json.loads(match.group(1))


# ---- role checks ----

def test_every_page_checks_the_role(client, role_users):
    manager = role_users["manager"]
    benchmark = frozen_version(manager)
    run = evaluation_with(benchmark, ["success", "split", "failure"])
    item = benchmark.items.first()
    manager_pages = ["/benchmarks/", f"/benchmarks/{benchmark.pk}/", "/benchmarks/runs/", f"/benchmarks/runs/{run.pk}/",
                     "/benchmarks/dashboards/", f"/benchmarks/{benchmark.pk}/items.jsonl"]
    expert_pages = ["/benchmarks/expert/", f"/benchmarks/{benchmark.pk}/review/?item={item.pk}"]
    for path in manager_pages + expert_pages:
        response = client.get(path)
        assert response.status_code == 302 and "/login/" in response["Location"], path
    client.force_login(role_users["annotator"])
    for path in manager_pages + expert_pages:
        assert client.get(path).status_code == 403, path
    client.force_login(role_users["adjudicator"])
    for path in manager_pages:
        assert client.get(path).status_code == 403, path
    for path in expert_pages:
        assert client.get(path).status_code == 200, path
    for role in ("manager", "admin"):
        client.force_login(role_users[role])
        for path in manager_pages + expert_pages:
            assert client.get(path).status_code == 200, (role, path)


def test_changes_are_post_only_and_need_the_role(client_as, role_users):
    benchmark = draft_version()
    item = benchmark.items.first()
    run_benchmark = frozen_version(role_users["manager"], name="other")
    run = evaluation_with(run_benchmark, ["split"], done=False)
    result = run.results.get()
    posts = [f"/benchmarks/{benchmark.pk}/generate/", f"/benchmarks/{benchmark.pk}/freeze/",
             f"/benchmarks/{benchmark.pk}/evaluate/", "/benchmarks/derive/",
             f"/benchmarks/{benchmark.pk}/review/{item.pk}/", f"/benchmarks/runs/{run.pk}/cancel/",
             f"/benchmarks/runs/{run.pk}/resume/", f"/benchmarks/runs/{run.pk}/rejudge/",
             f"/benchmarks/expert/{result.pk}/"]
    client = client_as("manager")
    for path in posts:
        assert client.get(path).status_code == 405, path
    client = client_as("annotator")
    for path in posts:
        assert client.post(path, {"decision": "approve", "outcome": "success"}).status_code == 403, path
    client = client_as("adjudicator")
    for path in posts[:4] + posts[5:8]:  # versions and runs are the managers'
        assert client.post(path).status_code == 403, path
    item.refresh_from_db()
    result.refresh_from_db()
    assert item.review == "pending" and result.state == "split"
    assert EvalRun.objects.get(pk=run.pk).status == "queued"


def test_the_nav_link_follows_the_role(client_as):
    assert 'href="/benchmarks/"' in client_as("manager").get("/benchmarks/").content.decode()
    page = client_as("adjudicator").get("/benchmarks/expert/").content.decode()
    assert 'href="/benchmarks/expert/"' in page and 'href="/benchmarks/"' not in page


# ---- versions ----

def test_the_versions_page_says_what_to_do_when_empty(client_as):
    response = client_as("manager").get("/benchmarks/")
    assert response.status_code == 200
    page = text_of(response)
    assert "No frozen version yet" in page and 'action="/benchmarks/import-farm/"' in response.content.decode()
    assert "manage.py" not in page


def test_the_versions_page_lists_versions_with_counts_and_latest_sr(client_as, role_users):
    frozen = frozen_version(role_users["manager"], n=3)
    item = frozen.items.order_by("position").first()
    assert item.split == "open"
    evaluation_with(frozen, ["success", "failure", "success"])
    draft_version(name="draft", n=2)
    page = text_of(client_as("manager").get("/benchmarks/"))
    assert "No frozen version yet" not in page
    row = re.search(r"bench v1</a>.*?</tr>", page).group(0)
    assert "Frozen" in row and "<td>3</td>" in row and "67%" in row and "2/3" in row
    draft_row = re.search(r"draft v1</a>.*?</tr>", page).group(0)
    assert "Draft" in draft_row and "–" in draft_row


def test_a_version_is_created_from_a_preset(client_as, role_users):
    response = client_as("manager").post("/benchmarks/", {"name": "MobileGUI-VBench", "version": "v1",
                                                          "preset": "vbench", "quota_table": ""})
    benchmark = Benchmark.objects.get(name="MobileGUI-VBench")
    assert response.status_code == 302 and response["Location"] == f"/benchmarks/{benchmark.pk}/"
    assert benchmark.quota_table["shares"] == VBENCH["shares"] and benchmark.status == "draft"
    assert benchmark.created_by == role_users["manager"] and benchmark.purpose == VBENCH["purpose"]


def test_a_pasted_quota_table_is_checked_and_the_error_shown(client_as):
    client = client_as("manager")
    response = client.post("/benchmarks/", {"name": "b", "version": "v1", "quota_table": '{"size": 10,'})
    assert response.status_code == 400
    assert "Not created: the quota table is not valid JSON (line 1" in text_of(response)
    assert '{"size": 10,</textarea>' in text_of(response)  # what was pasted stays in the form
    bad = {"size": 10, "shares": {"path_complexity": {"simple": 0.5, "moderate": 0.2}}}
    response = client.post("/benchmarks/", {"name": "b", "version": "v1", "quota_table": json.dumps(bad)})
    assert response.status_code == 400 and "the shares sum to 0.700, not 1" in text_of(response)
    response = client.post("/benchmarks/", {"name": "b", "version": "v1", "quota_table": "[1, 2]"})
    assert response.status_code == 400 and "must be a JSON object" in text_of(response)
    response = client.post("/benchmarks/", {"name": "", "version": "v1", "preset": "basic"})
    assert response.status_code == 400 and "needs a name" in text_of(response)
    assert not Benchmark.objects.exists()
    good = {"size": 10, "shares": {"path_complexity": {"simple": 0.5, "moderate": 0.5}}}
    assert client.post("/benchmarks/", {"name": "b", "version": "v1", "quota_table": json.dumps(good),
                                        "preset": "vbench"}).status_code == 302
    assert Benchmark.objects.get().quota_table == good  # the pasted table wins over the preset
    response = client.post("/benchmarks/", {"name": "b", "version": "v1", "preset": "basic"})
    assert response.status_code == 400 and "exists already" in text_of(response)


def test_a_version_is_derived_by_stated_shifts(client_as, role_users):
    parent = frozen_version(role_users["manager"], table={"size": 3, "shares": {
        "intent_dependency": {"single": 0.7, "independent": 0.15, "dependent": 0.15}}})
    client = client_as("manager")
    response = client.post("/benchmarks/derive/", {"parent": parent.pk, "version": "v2", "shifts": "{oops"})
    assert response.status_code == 400 and "Not derived: the shifts is not valid JSON" in text_of(response)
    response = client.post("/benchmarks/derive/", {"parent": parent.pk, "version": "v2",
                                                   "shifts": '{"intent_dependency": 5}'})
    assert response.status_code == 400 and "shifts.intent_dependency: a mapping" in text_of(response)
    response = client.post("/benchmarks/derive/", {"parent": parent.pk, "version": "v2",
                                                   "shifts": '{"wat": {"x": 0.1}}'})
    assert response.status_code == 400 and "unknown dimension 'wat'" in text_of(response)
    response = client.post("/benchmarks/derive/", {"parent": "", "version": "v2", "shifts": "{}"})
    assert response.status_code == 400 and "choose the parent" in text_of(response)
    assert Benchmark.objects.count() == 1

    shifts = {"intent_dependency": {"dependent": 0.25, "single": -0.25}}
    response = client.post("/benchmarks/derive/", {"parent": parent.pk, "version": "v2", "shifts": json.dumps(shifts)})
    child = Benchmark.objects.get(version="v2")
    assert response.status_code == 302 and child.parent == parent and child.origin == "derived"
    assert child.quota_table["shares"]["intent_dependency"] == {"single": 0.45, "independent": 0.15, "dependent": 0.4}
    page = text_of(client.get(f"/benchmarks/{child.pk}/"))
    evolution = re.search(r'data-testid="evolution">(.*?)</section>', page).group(1)
    assert "dependent (A→B)</td><td>15%</td><td>40%</td><td>0.250" in evolution
    assert "single</td><td>70%</td><td>45%</td><td>-0.250" in evolution
    assert "3 queries kept from the parent" in evolution


# ---- one version ----

def test_the_detail_page_shows_table_4_quota_vs_realised_and_the_items(client_as):
    table = {**VBENCH, "size": 3, "app_cap": 2}
    benchmark = draft_version(table=table)
    response = client_as("manager").get(f"/benchmarks/{benchmark.pk}/")
    assert response.status_code == 200
    page = text_of(response)
    metric = re.search(r'data-testid="metric-system">(.*?)</section>', page).group(1)
    assert metric.count("<tr>") == 11 and "Capability-boundary awareness and risk avoidance" in metric
    assert "simple ≤5 steps / moderate 6–10 steps / complex >10 steps" in metric
    # Quota vs realised: a grouped bar chart per dimension with its numbers in a table.
    chart = chart_data(response, "quota-chart-path_complexity")
    assert chart["type"] == "bar" and [d["label"] for d in chart["datasets"]] == ["quota", "realised"]
    assert chart["datasets"][0]["data"] == [0.12, 0.6, 0.28]
    assert chart["datasets"][1]["data"] == [0.3333, 0.3333, 0.3333]
    group = re.search(r'data-testid="quota-path_complexity">(.*?)</table>', page).group(1).replace("> <", "><")
    assert "simple ≤5 steps</th><td>12%</td><td>0</td><td>33%</td><td>1</td>" in group
    must = re.search(r'data-testid="must-include">(.*?)</div>', page).group(1)
    assert "refusal_safety = high-sensitivity</th><td>2</td><td>0</td>" in must and "missing" in must
    deficits = re.search(r'data-testid="deficits">(.*?)</div>', page).group(1)
    assert "high-sensitivity" in deficits
    overflow = re.search(r'data-testid="app-overflow">(.*?)</div>', page).group(1)
    assert "com.android.settings</th><td class=\"error\">3</td>" in overflow  # 3 queries, cap 2
    items = re.search(r'data-testid="items">(.*?)</section>', page).group(1)
    assert items.count("Open the Bluetooth settings") == 3 and "Not reviewed" in items
    assert "Freeze this version to evaluate it" in page and 'src="/static/vendor/chart.umd.min.js"' in page


def test_the_detail_page_of_an_empty_version_says_what_to_do(client_as):
    benchmark = versions.create_version("empty", "v1", {})
    page = text_of(client_as("manager").get(f"/benchmarks/{benchmark.pk}/"))
    assert "No queries and no target shares yet" in page
    assert 'No queries yet: press "Generate against the quota"' in page
    assert "This version has no parent: derive one" in page and "No evaluation of this version yet" in page


def test_generation_is_dispatched_after_commit(client_as, monkeypatch, django_capture_on_commit_callbacks, role_users):
    from benchmark import tasks

    sent = []
    monkeypatch.setattr(tasks.generate, "delay", lambda *args: sent.append(args))
    benchmark = draft_version()
    client = client_as("manager")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/benchmarks/{benchmark.pk}/generate/", follow=True)
    assert sent == [(benchmark.pk, role_users["manager"].pk)]
    assert "Generation against the quota of bench v1 started" in text_of(response)
    frozen = frozen_version(role_users["manager"], name="frozen")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/benchmarks/{frozen.pk}/generate/", follow=True)
    assert len(sent) == 1 and "is frozen: derive a new version" in text_of(response)


def test_freeze_is_refused_before_review_and_allowed_after(client_as):
    benchmark = draft_version(n=2)
    client = client_as("manager")
    response = client.post(f"/benchmarks/{benchmark.pk}/freeze/", follow=True)
    assert "Not frozen: 2 queries are not reviewed yet" in text_of(response)
    assert not Benchmark.objects.get(pk=benchmark.pk).frozen
    first, second = benchmark.items.order_by("position")
    client.post(f"/benchmarks/{benchmark.pk}/review/{first.pk}/", {"text": first.query.text, "decision": "approve"})
    client.post(f"/benchmarks/{benchmark.pk}/review/{second.pk}/", {"text": second.query.text, "decision": "retire"})
    response = client.post(f"/benchmarks/{benchmark.pk}/freeze/", follow=True)
    benchmark.refresh_from_db()
    assert benchmark.frozen and benchmark.status == "frozen"
    assert f"frozen (content hash {benchmark.content_hash[:12]}" in text_of(response)
    response = client.post(f"/benchmarks/{benchmark.pk}/freeze/", follow=True)
    assert "Not frozen: bench v1 is frozen" in text_of(response)


def test_launching_an_evaluation_checks_the_version_and_the_settings(client_as, role_users):
    draft = draft_version(name="draft")
    client = client_as("manager")
    response = client.post(f"/benchmarks/{draft.pk}/evaluate/", {"split": "all"}, follow=True)
    assert "Not launched: draft v1 is not frozen" in text_of(response) and not EvalRun.objects.exists()
    frozen = frozen_version(role_users["manager"])
    for bad, message in (({"max_steps": "many"}, "max_steps: a whole number"),
                         ({"phones": "0"}, "phones: between 1 and 256"),
                         ({"split": "train"}, "split is one of all, open, held_out"),
                         ({"model_version": "999"}, "no model version '999'")):
        response = client.post(f"/benchmarks/{frozen.pk}/evaluate/", {"split": "all", **bad}, follow=True)
        assert f"Not launched: {message}" in text_of(response), bad
    assert not EvalRun.objects.exists()
    version = ModelVersion.objects.create(name="policy-v2")
    response = client.post(f"/benchmarks/{frozen.pk}/evaluate/", {"model_version": version.pk, "split": "open",
                                                                  "max_steps": "12", "phones": "2"})
    run = EvalRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/benchmarks/runs/{run.pk}/"
    assert (run.model_version, run.split, run.total, run.created_by) == (version, "open", 3, role_users["manager"])
    assert run.config["infer"]["max_steps"] == 12 and run.config["infer"]["phones"] == 2
    assert run.config["benchmark"]["content_hash"] == frozen.content_hash


def test_the_items_export_is_one_json_line_per_item(client_as, role_users):
    benchmark = frozen_version(role_users["manager"], n=2)
    response = client_as("manager").get(f"/benchmarks/{benchmark.pk}/items.jsonl")
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert [line["key"] for line in lines] == ["bench-v1-0", "bench-v1-1"]
    assert lines[0]["sha256"] == benchmark.items.order_by("position").first().snapshot["sha256"]


# ---- expert review ----

def test_an_expert_reviews_a_query_and_moves_on(client_as, role_users):
    benchmark = draft_version(n=2)
    first, second = benchmark.items.order_by("position")
    client = client_as("adjudicator")
    response = client.get(f"/benchmarks/{benchmark.pk}/review/")
    page = text_of(response)
    assert f'action="/benchmarks/{benchmark.pk}/review/{first.pk}/"' in page  # the first not reviewed
    assert 'data-shortcut="a"' in page and 'data-shortcut="r"' in page and 'data-shortcut="s"' in page
    assert f'href="?item={second.pk}" data-shortcut="j"' in page
    select = re.search(r'<select name="label_path_complexity">(.*?)</select>', page).group(1)
    assert '<option value="simple" selected>simple ≤5 steps</option>' in select  # the current label, chosen
    assert re.findall(r'<option value="(\w+)"', re.search(r'<select name="label_intent_dependency">(.*?)</select>',
                                                           page).group(1)) == ["single", "independent", "dependent"]
    response = client.post(f"/benchmarks/{benchmark.pk}/review/{first.pk}/", {
        "text": "  Turn on Bluetooth for me  ", "label_path_complexity": "moderate", "label_operation": "gesture-level",
        "label_explicitness": "", "pre_text_0": "Bluetooth is off", "pre_holds_0": "per_run",
        "pre_text_1": "signed in to the test account", "pre_holds_1": "once", "pre_text_2": "", "pre_holds_2": "once",
        "expected_interaction": "call_user", "interaction_points": "before pairing\n\n", "note": "reworded",
        "decision": "approve"})
    assert response.status_code == 302 and response["Location"].endswith(f"?item={second.pk}")
    first.refresh_from_db()
    first.query.refresh_from_db()
    assert first.query.text == "Turn on Bluetooth for me" and first.review == "approved"
    assert first.reviewed_by == role_users["adjudicator"] and first.review_note == "reworded"
    assert first.labels["path_complexity"] == "moderate" and first.labels["operation"] == "gesture-level"
    assert first.environment["preconditions"] == [{"text": "Bluetooth is off", "holds": "per_run"},
                                                  {"text": "signed in to the test account", "holds": "once"}]
    assert first.environment["reset"]  # what the reset notes said is kept
    assert first.expected_interaction == "call_user" and first.interaction_points == ["before pairing"]
    assert Benchmark.objects.get(pk=benchmark.pk).status == "review"
    # save keeps it undecided and stays on it
    response = client.post(f"/benchmarks/{benchmark.pk}/review/{second.pk}/", {
        "text": second.query.text, "note": "ask the app owner", "decision": "save"})
    assert response["Location"].endswith(f"?item={second.pk}")
    second.refresh_from_db()
    assert second.review == "pending" and second.review_note == "ask the app owner"


def test_bad_review_input_is_refused_and_kept_in_the_form(client_as):
    benchmark = draft_version(n=1)
    item = benchmark.items.get()
    client = client_as("manager")
    response = client.post(f"/benchmarks/{benchmark.pk}/review/{item.pk}/", {
        "text": "A better phrasing", "label_path_complexity": "endless", "expected_interaction": "dance",
        "decision": "approve"})
    assert response.status_code == 400
    page = text_of(response)
    assert "Not saved: path_complexity: 'endless' is not one of simple, moderate, complex" in page
    assert "expected interaction is one of execute, clarify, call_user, refuse" in page
    assert "A better phrasing</textarea>" in page
    response = client.post(f"/benchmarks/{benchmark.pk}/review/{item.pk}/", {"text": "   ", "decision": "approve"})
    assert response.status_code == 400 and "the query text cannot be empty" in text_of(response)
    item.refresh_from_db()
    assert item.review == "pending" and item.query.text == "Open the Bluetooth settings (0)"


def test_a_frozen_version_is_read_only_in_review(client_as, role_users):
    benchmark = frozen_version(role_users["manager"], n=1)
    item = benchmark.items.get()
    client = client_as("manager")
    page = text_of(client.get(f"/benchmarks/{benchmark.pk}/review/"))
    assert "is frozen: what you see is what was frozen" in page and "<fieldset disabled>" in page
    assert 'value="approve"' not in page
    response = client.post(f"/benchmarks/{benchmark.pk}/review/{item.pk}/", {"text": "changed", "decision": "retire"},
                           follow=True)
    assert "Not saved: bench v1 is frozen" in text_of(response)
    item.refresh_from_db()
    assert item.review == "approved" and item.query.text == "Open the Bluetooth settings (0)"


def test_a_query_frozen_into_a_parent_keeps_its_text_in_a_derived_version(client_as, role_users):
    parent = frozen_version(role_users["manager"], n=1)
    child = versions.derive_version(parent, "v2", {}, user=role_users["manager"])
    item = child.items.get()
    client = client_as("manager")
    response = client.post(f"/benchmarks/{child.pk}/review/{item.pk}/", {
        "text": "Another wording", "label_operation": "gesture-level", "decision": "approve"})
    assert response.status_code == 400
    assert "is frozen into an earlier version, so its text stays as it is; retire it here" in text_of(response)
    item.refresh_from_db()
    assert item.query.text == "Open the Bluetooth settings (0)" and item.labels.get("operation") != "gesture-level"
    response = client.post(f"/benchmarks/{child.pk}/review/{item.pk}/", {
        "text": item.query.text, "label_operation": "gesture-level", "decision": "approve"})
    item.refresh_from_db()
    assert response.status_code == 302 and item.labels["operation"] == "gesture-level"


def test_the_review_page_of_an_empty_version_says_what_to_do(client_as):
    benchmark = versions.create_version("empty", "v1", {})
    page = text_of(client_as("adjudicator").get(f"/benchmarks/{benchmark.pk}/review/"))
    assert "has no queries to review yet" in page and "a manager can import the farm's task set" in page


# ---- evaluation runs ----

def test_the_run_page_shows_progress_scores_and_results(client_as, role_users):
    benchmark = frozen_version(role_users["manager"])
    run = evaluation_with(benchmark, ["success", "split", "not_scored"], done=False)
    EvalRun.objects.filter(pk=run.pk).update(status="paused", status_reason="the model endpoint stopped answering",
                                             completed=3)
    client = client_as("manager")
    response = client.get(f"/benchmarks/runs/{run.pk}/")
    page = text_of(response)
    assert f'hx-get="/benchmarks/runs/{run.pk}/" hx-trigger="every 5s"' in page
    assert "Paused · 3 of 3 queries finished" in page and "Paused: the model endpoint stopped answering" in page
    assert '<progress max="3" value="3"' in page
    assert 'data-testid="cancel"' in page and 'data-testid="resume"' in page and 'data-testid="rejudge"' in page
    assert 'data-testid="sr">100%' in page and "1 of 1 scored queries completed" in page
    assert "Waiting for an expert (judges split)</th><td>1</td>" in page and "Not scored: environment</th><td>1</td>" in page
    results = re.search(r'data-testid="results">(.*?)</section>', page).group(1)
    assert "milestones=failure" in results and 'title="milestone 2 never seen"' in results
    assert "the environment broke it (reset failed): re-collected" in results
    trajectory = run.results.order_by("item__position").first().trajectory_id
    assert f'href="/trajectories/{trajectory}/"' in results
    assert f'href="/benchmarks/runs/{run.pk}/results.jsonl"' in page and f'/benchmarks/runs/{run.pk}/summary.csv' in page
    chart = chart_data(response, "run-dimension-chart")
    assert chart["horizontal"] and "Path complexity: simple ≤5 steps" in chart["labels"]
    # the polling fragment: 200 while live, 286 (stop polling) once over
    fragment = client.get(f"/benchmarks/runs/{run.pk}/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and "<html" not in fragment.content.decode()
    EvalRun.objects.filter(pk=run.pk).update(status="done", status_reason="")
    assert client.get(f"/benchmarks/runs/{run.pk}/", HTTP_HX_REQUEST="true").status_code == 286


def test_the_run_exports_download(client_as, role_users):
    benchmark = frozen_version(role_users["manager"])
    run = evaluation_with(benchmark, ["success", "split", "not_scored"])
    client = client_as("manager")
    response = client.get(f"/benchmarks/runs/{run.pk}/results.jsonl")
    assert response.status_code == 200 and response["Content-Disposition"] == (
        f'attachment; filename="eval-{run.pk}-results.jsonl"')
    records = [json.loads(line) for line in response.content.decode().splitlines()]
    assert records[0]["type"] == "config" and records[0]["config"]["benchmark"]["content_hash"] == benchmark.content_hash
    assert [(r["key"], r["state"]) for r in records[1:]] == [
        ("bench-v1-0", "scored"), ("bench-v1-1", "split"), ("bench-v1-2", "not_scored")]
    response = client.get(f"/benchmarks/runs/{run.pk}/summary.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    lines = response.content.decode().splitlines()
    assert lines[0].startswith("task_num,task_template,num_complete_trials,mean_success_rate")
    assert lines[1].startswith("0,bench-v1-0,1,1.0") and "========= Average =========" in lines[-1]
    assert client_as("adjudicator").get(f"/benchmarks/runs/{run.pk}/summary.csv").status_code == 403


def test_the_run_pages_say_what_to_do_when_empty(client_as, role_users):
    client = client_as("manager")
    page = text_of(client.get("/benchmarks/runs/"))
    assert "No frozen version yet" in page and 'data-testid="farm-import"' in page and "manage.py" not in page
    benchmark = frozen_version(role_users["manager"])
    assert "No evaluation run yet: open a frozen version" in text_of(client.get("/benchmarks/runs/"))
    run = launch_evaluation(benchmark, default_policy_version(), dispatch=False)
    page = text_of(client.get(f"/benchmarks/runs/{run.pk}/"))
    assert "No query scored yet: results come in" in page and "No result yet: phones are being leased" in page
    assert 'hx-trigger="every 2s"' in page and 'data-testid="rejudge"' not in page


def test_cancel_and_resume(client_as, role_users, monkeypatch):
    benchmark = frozen_version(role_users["manager"])
    run = launch_evaluation(benchmark, default_policy_version(), dispatch=False)
    client = client_as("manager")
    response = client.post(f"/benchmarks/runs/{run.pk}/resume/", follow=True)
    assert "Not resumed: the run is queued, not paused." in text_of(response)
    response = client.post(f"/benchmarks/runs/{run.pk}/cancel/", follow=True)
    run.refresh_from_db()
    assert run.status == "cancelled" and run.collection_run.status == "cancelled"
    assert "cancelled: phones finish their current step" in text_of(response)
    response = client.post(f"/benchmarks/runs/{run.pk}/cancel/", follow=True)
    assert "Not cancelled: the run is cancelled." in text_of(response)


def test_rejudge_runs_the_judges_again_after_commit(client_as, role_users, monkeypatch,
                                                    django_capture_on_commit_callbacks):
    from benchmark import tasks

    monkeypatch.setattr(tasks.rejudge, "delay", lambda run_id: tasks.rejudge(run_id))  # the worker, in-process
    benchmark = frozen_version(role_users["manager"])
    run = evaluation_with(benchmark, ["success", "split", "failure"], done=False)
    client = client_as("manager")
    response = client.post(f"/benchmarks/runs/{run.pk}/rejudge/", follow=True)
    assert "Not re-judged: the run is queued" in text_of(response)
    assert EvalRun.objects.get(pk=run.pk).judge_round == 1
    EvalRun.objects.filter(pk=run.pk).update(status="done", finished_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/benchmarks/runs/{run.pk}/rejudge/", follow=True)
    run.refresh_from_db()
    assert "Re-judging eval" in text_of(response) and "(round 2)" in text_of(response)
    assert run.judge_round == 2 and run.config["rejudged"][0]["round"] == 2
    assert {r.judge_round for r in run.results.all()} == {2}  # every finished rollout judged again


# ---- the experts' split queue ----

def test_an_expert_verdict_scores_a_split_and_moves_the_run_sr(client_as, role_users):
    benchmark = frozen_version(role_users["manager"])
    run = evaluation_with(benchmark, ["success", "split", "failure"])
    assert run.scores["sr"] == 0.5 and run.scores["waiting_for_expert"] == 1
    split = run.results.get(state="split")
    client = client_as("adjudicator")
    page = text_of(client.get("/benchmarks/expert/"))
    current = re.search(r'data-testid="current-result">(.*?)</section>', page).group(1)
    assert split.item.query.text in current and "milestone 2 never seen" in current
    assert f'href="/trajectories/{split.trajectory_id}/"' in current
    assert 'data-shortcut="1"' in current and 'data-shortcut="2"' in current
    assert f"/benchmarks/runs/{run.pk}/" not in current  # adjudicators do not see the run page
    response = client.post(f"/benchmarks/expert/{split.pk}/", {"outcome": "maybe"}, follow=True)
    assert "Not recorded: an expert verdict is success or failure." in text_of(response)
    response = client.post(f"/benchmarks/expert/{split.pk}/", {"outcome": "success", "note": "the switch is on"},
                           follow=True)
    split.refresh_from_db()
    assert (split.state, split.expert_outcome, split.expert_by, split.expert_note) == (
        "expert", "success", role_users["adjudicator"], "the switch is on")
    scores = EvalRun.objects.get(pk=run.pk).scores
    assert scores["sr"] == pytest.approx(2 / 3, abs=1e-4) and scores["waiting_for_expert"] == 0
    page = text_of(response)
    assert "now has SR 66.7%" in page and "No split verdict waits for an expert" in page
    response = client.post(f"/benchmarks/expert/{split.pk}/", {"outcome": "failure"}, follow=True)
    assert EvalRun.objects.get(pk=run.pk).scores["expert_override_rate"] == 0.0  # no unanimous verdict overridden
    assert EvalResult.objects.get(pk=split.pk).expert_outcome == "failure"


def test_the_expert_queue_walks_results_and_lists_versions_in_review(client_as, role_users):
    benchmark = frozen_version(role_users["manager"])
    run = evaluation_with(benchmark, ["split", "split", "success"])
    first, second = run.results.filter(state="split").order_by("item__position")
    draft_version(name="draft", n=2)
    client = client_as("manager")
    page = text_of(client.get("/benchmarks/expert/"))
    assert "1 of 2" in page and f'href="?result={second.pk}" data-shortcut="j"' in page
    assert f'href="/benchmarks/runs/{run.pk}/"' in page  # managers get the run link
    page = text_of(client.get(f"/benchmarks/expert/?result={second.pk}"))
    assert "2 of 2" in page and f'href="?result={first.pk}" data-shortcut="k"' in page
    in_review = re.search(r'data-testid="in-review">(.*?)</section>', page).group(1)
    assert "draft v1</a>: 2 queries not reviewed" in in_review and "bench v1" not in in_review


# ---- dashboards ----

def test_the_dashboards_say_what_to_do_when_empty(client_as, role_users):
    client = client_as("manager")
    page = text_of(client.get("/benchmarks/dashboards/"))
    assert "No frozen version yet" in page and "Import the farm's task set" in page and "manage.py" not in page
    frozen_version(role_users["manager"])
    page = text_of(client.get("/benchmarks/dashboards/"))
    assert "No finished evaluation run yet" in page


def test_the_dashboards_chart_sr_over_time_and_compare_two_versions(client_as, role_users):
    manager = role_users["manager"]
    parent = frozen_version(manager, table={"size": 3, "shares": {
        "intent_dependency": {"single": 0.7, "independent": 0.15, "dependent": 0.15}}})
    child = versions.derive_version(parent, "v2", {"intent_dependency": {"dependent": 0.25, "single": -0.25}},
                                    user=manager)
    child = versions.freeze(child, manager)
    model = ModelVersion.objects.create(name="policy-v3")
    old = evaluation_with(parent, ["success", "success", "failure"], model_version=model)
    new = evaluation_with(child, ["success", "failure", "failure"], model_version=model)
    evaluation_with(parent, ["failure", "failure", "split"])  # another model, one split left
    response = client_as("manager").get("/benchmarks/dashboards/")
    page = text_of(response)
    by_model = chart_data(response, "sr-by-model-chart")
    assert by_model["time"] and by_model["percent"]
    assert {d["label"] for d in by_model["datasets"]} == {"policy-v3", default_policy_version().name}
    policy = next(d for d in by_model["datasets"] if d["label"] == "policy-v3")
    assert [p["y"] for p in policy["data"]] == [0.6667, 0.3333]
    by_benchmark = chart_data(response, "sr-by-benchmark-chart")
    assert {d["label"] for d in by_benchmark["datasets"]} == {"bench v1", "bench v2"}
    # the default comparison: the newest version's latest run against its parent's latest run
    comparison = re.search(r'data-testid="comparison">(.*?)</section>', page).group(1)
    assert f"(#{new.pk}, bench v2)" in comparison
    assert "Intent dependency single 70%→45%" in comparison
    table = re.search(r'data-testid="comparison-table">(.*?)</table>', comparison).group(1).replace("> <", "><")
    assert "dependent (A→B)</td><td>100% (1)</td><td>0% (1)</td><td><span class=\"down\">-1.000</span></td>" \
           "<td>15% → 40%</td>" in table
    chart = chart_data(response, "comparison-chart")
    assert len(chart["datasets"]) == 2 and chart["datasets"][0]["label"].startswith(f"#{old.pk}")
    trust = chart_data(response, "trust-chart")
    assert [d["label"] for d in trust["datasets"]] == ["judge agreement", "expert override rate"]
    assert trust["datasets"][0]["data"][-1] == pytest.approx(2 / 3, abs=1e-4)
    # choose a run for the dimension bars, and any two runs to compare
    response = client_as("manager").get(f"/benchmarks/dashboards/?run={old.pk}&a={new.pk}&b={old.pk}")
    bars = chart_data(response, "dimension-chart")
    srs = dict(zip(bars["labels"], bars["datasets"][0]["data"]))
    assert srs["Path complexity: simple ≤5 steps"] == 1.0 and srs["Path complexity: complex >10 steps"] == 0.0
    assert srs["Intent dependency: single"] == 0.5
    assert f"(#{new.pk}, bench v2) → " in text_of(response)


def test_a_manager_imports_the_farms_task_set_with_a_button(client_as, tmp_path, monkeypatch):
    from benchmark import views

    lines = (ROOT / "simfarm/tasks/tasks.jsonl").read_text().splitlines()[:6]
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(views, "FARM_TASKS", tmp_path / "tasks.jsonl")
    assert client_as("adjudicator").post("/benchmarks/import-farm/").status_code == 403
    assert not Benchmark.objects.exists()
    answer = client_as("manager").post("/benchmarks/import-farm/", follow=True)
    benchmark = Benchmark.objects.get(name="farm-tasks")
    assert benchmark.frozen and benchmark.items.count() == 6
    assert answer.redirect_chain[-1][0] == f"/benchmarks/{benchmark.pk}/" and "open queries" in text_of(answer)
    again = client_as("manager").post("/benchmarks/import-farm/", follow=True)
    assert "is there already" in text_of(again) and Benchmark.objects.count() == 1
