"""The demo page without the training extras, and a failed demo as a person reads it."""
import pytest
from django.urls import reverse

from flywheel_demo import orchestrator
from flywheel_demo.models import DemoRun
from training import runs
from training.compact import CompactTrainingError, run_trainer, train_compact

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_extras(monkeypatch):
    monkeypatch.setattr(runs, "training_extras_installed", lambda: False)


def test_without_the_extras_the_page_says_what_to_run_and_launches_nothing(client_as, no_extras):
    manager = client_as("manager")
    page = manager.get(reverse("flywheel-demo")).content.decode()
    assert 'data-testid="install-hint"' in page and "make install-training" in page
    assert 'data-testid="demo-start" disabled' in page
    answer = manager.post(reverse("flywheel-demo-start"), {"phones": "2"}, follow=True).content.decode()
    assert "make install-training" in answer and not DemoRun.objects.exists()


def test_with_the_extras_the_launch_button_is_live(client_as):
    page = client_as("manager").get(reverse("flywheel-demo")).content.decode()
    assert 'data-testid="install-hint"' not in page and 'data-testid="demo-start" disabled' not in page


def test_a_failed_demo_reads_in_plain_words_without_a_cancel_button(client_as, settings, tmp_path, monkeypatch):
    settings.TRAINING_ROOT = tmp_path
    demo = orchestrator.start_demo(None, {})
    live = client_as("manager").get(reverse("flywheel-demo-detail", args=[demo.pk])).content.decode()
    assert 'data-testid="demo-cancel"' in live  # queued: it can be cancelled
    # The extras go missing on the worker: its first stage trains the untrained head and fails.
    monkeypatch.setattr(runs, "training_extras_installed", lambda: False)
    monkeypatch.setitem(orchestrator.STAGES, "setup", lambda d: bool(train_compact("demo-m0", epochs=0)))
    orchestrator.advance_demo(demo.pk)
    demo.refresh_from_db()
    assert demo.status == DemoRun.Status.FAILED and "make install-training" in demo.error
    manager = client_as("manager")
    for url in (reverse("flywheel-demo-detail", args=[demo.pk]), reverse("flywheel-demo-live", args=[demo.pk]),
                reverse("flywheel-demo")):
        page = manager.get(url).content.decode()
        assert "Why it stopped" in page and "make install-training" in page, url
        assert "Traceback" not in page and "Error" not in page and 'data-testid="demo-cancel"' not in page, url
    assert manager.post(reverse("flywheel-demo-cancel", args=[demo.pk])).status_code == 302
    demo.refresh_from_db()
    assert demo.status == DemoRun.Status.FAILED  # a cancel of a finished demo changes nothing


def test_a_crashing_trainer_leaves_its_traceback_in_the_log_not_the_message(tmp_path, caplog, own_processes):
    with pytest.raises(CompactTrainingError) as failure:
        run_trainer(tmp_path / "no-such-features.npz", tmp_path / "out", None, epochs=1, seed=0)
    message = str(failure.value)
    assert "stopped with an error" in message and "Traceback" not in message and "Error:" not in message
    assert "Traceback" in caplog.text


# --- The report's figures from real evaluations, worked by hand ----------------------------------------------

SETTINGS_TASKS, NOTES_TASKS = ("a", "b", "c", "d"), ("e", "f")
NOTES = "com.example.notes"


def _evaluation(benchmark, version, items, outcomes):
    """An evaluation of the six held-out tasks; outcomes: {key: (state, outcome, stop_kind)}, a key left out
    has no result at all. A stop kind "evidence:..." is recorded without a trajectory, as an unjudged rollout is."""
    from benchmark.metric import score_evaluation
    from benchmark.models import EvalResult, EvalRun
    from flywheel.models import Trajectory

    evaluation = EvalRun.objects.create(benchmark=benchmark, model_version=version, split="held_out",
                                        total=len(items), status="done")
    for key, (state, outcome, stop) in outcomes.items():
        item = items[key]
        fields = {"state": state, "outcome": outcome}
        if state == "expert":
            fields = {"state": state, "outcome": "failure", "expert_outcome": outcome}
        if stop.startswith("evidence:"):
            fields["evidence"] = {"stop_kind": stop.removeprefix("evidence:")}
        else:
            fields["trajectory"] = Trajectory.objects.create(query=item.query, line="benchmark", status="completed",
                                                             stop_kind=stop)
        EvalResult.objects.create(eval_run=evaluation, item=item, **fields)
    score_evaluation(evaluation.pk)
    return evaluation


@pytest.fixture
def evaluated_demo(db):
    """Rounds 0, 1, 2 and the no-ECDM arm on six held-out tasks, a–d of Settings, e–f of an app kept out of
    training. Solved: round 0 none; round 1 a, b and e (an expert's success); round 2 a–e; the arm a, b."""
    from datetime import timedelta

    from django.utils import timezone

    from benchmark.models import Benchmark, BenchmarkItem, EvalResult
    from flywheel.models import ModelVersion
    from tests.benchmark.conftest import make_benchmark_query

    benchmark = Benchmark.objects.create(name="demo", version="v1")
    items = {}
    for i, key in enumerate(SETTINGS_TASKS + NOTES_TASKS):
        query = make_benchmark_query(f"task-{key}", package=NOTES if key in NOTES_TASKS else "com.android.settings")
        items[key] = BenchmarkItem.objects.create(benchmark=benchmark, query=query, split="held_out", position=i)
    models = {label: ModelVersion.objects.create(name=f"demo-{label}", kind="compact")
              for label in ("r0", "r1", "r2", "arm:no_ecdm")}
    fail, win, claim, gave_up = "failure", "success", "terminate_success", "terminate_failure"
    r0 = _evaluation(benchmark, models["r0"], items, {
        "a": ("scored", fail, claim), "b": ("scored", fail, f"evidence:{claim}"),
        **dict.fromkeys("cdef", ("scored", fail, gave_up))})
    r1 = _evaluation(benchmark, models["r1"], items, {
        "a": ("scored", win, claim), "b": ("scored", win, claim), "c": ("scored", fail, claim),
        "d": ("scored", fail, gave_up), "e": ("expert", win, claim), "f": ("not_scored", "", "max_steps")})
    # d's first rollout was a success, superseded by a re-collection that failed: only the current one counts.
    EvalResult.objects.filter(eval_run=r1, item=items["d"]).update(superseded=True)
    EvalResult.objects.create(eval_run=r1, item=items["d"], state="scored", outcome=fail, attempt=2)
    r2 = _evaluation(benchmark, models["r2"], items, {
        **dict.fromkeys("abcde", ("scored", win, claim)), "f": ("scored", fail, claim)})
    arm = _evaluation(benchmark, models["arm:no_ecdm"], items, {
        "a": ("scored", win, claim), "b": ("scored", win, claim)})  # c–f: never scored, so not solved
    evals = {"r0": r0.pk, "r1": r1.pk, "r2": r2.pk, "arm:no_ecdm": arm.pk}
    state = {"evals": evals, "models": {label: m.pk for label, m in models.items()}, "unseen_apps": [NOTES],
             "arms": {"no_ecdm": {"label": "arm:no_ecdm", "what": "the last round without the ECDM's samples",
                                  "compare_to": "r2"}}}
    return DemoRun.objects.create(config={"loop_rounds": 1}, state=state, status=DemoRun.Status.DONE,
                                  started_at=timezone.now() - timedelta(minutes=12))


def test_the_report_reads_each_task_of_each_evaluation(evaluated_demo):
    from benchmark.stats import bootstrap_ci, paired_difference
    from flywheel_demo.report import build_report

    report = build_report(evaluated_demo)
    r0, r1, r2 = report["rounds"]
    assert [(row["successes"], row["tasks"], row["sr"]) for row in (r0, r1, r2)] == [
        (0, 6, 0.0), (3, 6, 0.5), (5, 6, 0.8333)]
    # The interval is the bootstrap over the six tasks: none solved has no spread; round 1 is a, b, e of six.
    assert r0["ci95"] == [0.0, 0.0]
    assert r1["ci95"] == [round(b, 4) for b in bootstrap_ci([True, True, False, False, True, False])]
    assert r1["ci95"][0] < 0.5 < r1["ci95"][1]
    # Claimed success: a by its trajectory, b by the rollout's evidence; both failed, of six failures.
    assert (r0["claimed_success"], r0["false_successes"], r0["false_success"]) == (2, 2, 0.3333)
    # Round 1 failed c (claimed), d (its current result) and f (not scored): one false success of three.
    assert (r1["claimed_success"], r1["false_success"]) == (4, 0.3333)
    assert (r2["claimed_success"], r2["false_success"]) == (6, 1.0)
    # By kind: e and f need the notes app, which no training saw.
    assert {kind: (k["successes"], k["tasks"]) for kind, k in r1["by_kind"].items()} == {
        "unseen_phrasing": (2, 4), "unseen_function": (1, 2)}
    assert r2["by_kind"]["unseen_phrasing"]["ci95"] == [1.0, 1.0] and r2["by_kind"]["unseen_function"]["sr"] == 0.5

    compared = {(c["before"], c["after"]): c for c in report["comparisons"]}
    assert [c["name"] for c in compared.values()] == ["round 0 → round 1", "round 1 → round 2", "round 0 → round 2"]
    # Discordant tasks all one way: p = 2 · 0.5^n (n = 3, 2, 5).
    assert [(c["gained"], c["lost"], c["delta_pts"], c["p_value"]) for c in compared.values()] == [
        (3, 0, 50.0, 0.25), (2, 0, 33.3, 0.5), (5, 0, 83.3, 0.0625)]
    r1_r2 = paired_difference([True, True, False, False, True, False], [True] * 5 + [False])
    assert compared[("r1", "r2")]["ci95_pts"] == [round(100 * b, 1) for b in r1_r2["ci95"]]
    # Only c and d of six change: all six draws miss them with probability (2/3)^6 = 9% > 2.5%, so the
    # interval starts at 0 and the round 1 → 2 target is not met, though the gain is 33 points.
    assert compared[("r1", "r2")]["ci95_pts"][0] == 0.0 and compared[("r0", "r2")]["ci95_pts"][0] > 0
    assert compared[("r1", "r2")]["words"].startswith("round 1 → round 2: +33.3 points (95% CI +0.0 to ")
    assert report["met"] == {"gain_round0_to_last": True, "gain_round1_to_last": False, "false_success_last": False,
                             "minutes": True}

    (arm,) = report["arms"]
    assert (arm["arm"], arm["successes"], arm["compare_to"], arm["training"]["model"]) == (
        "no_ecdm", 2, "r2", "demo-arm:no_ecdm")
    assert (arm["effect"]["delta_pts"], arm["effect"]["gained"], arm["effect"]["p_value"]) == (50.0, 3, 0.25)
    assert report["ablation"]["sr"] == arm["sr"]  # older tools read the no-ECDM arm there
    figures = report["figures"]
    assert (figures["ecdm_delta"], figures["unseen_function_sr_round2"], figures["false_success_round2"],
            figures["heldout_tasks"]) == (50.0, 0.5, 1.0, 6)
    assert report["line"].startswith(
        f"flywheel: sr_round0=0 sr_round1=0.5 sr_round2=0.8333 ci95_r1_r2=[0,{compared[('r1', 'r2')]['ci95_pts'][1]:g}] "
        "unseen_function_sr_round2=0.5 false_success_round2=1 ecdm_delta=50 heldout_tasks=6 minutes=12")


def test_an_older_run_state_reads_its_ablation_as_the_no_ecdm_arm(evaluated_demo):
    from flywheel_demo.report import build_report

    evals = evaluated_demo.state["evals"]
    evaluated_demo.state = {"evals": {**{k: evals[k] for k in ("r0", "r1", "r2")}, "ablation": evals["arm:no_ecdm"]}}
    report = build_report(evaluated_demo)
    assert [(a["arm"], a["compare_to"], a["effect"]["delta_pts"]) for a in report["arms"]] == [("no_ecdm", "r2", 50.0)]
    # No app was said to be kept out: every task is a new phrasing.
    assert report["rounds"][1]["by_kind"] == {"unseen_phrasing": {"tasks": 6, "successes": 3, "sr": 0.5,
                                                                  "ci95": report["rounds"][1]["ci95"]}}
    assert report["figures"]["unseen_function_sr_round2"] is None and "unseen_function_sr_round2=n/a" in report["line"]


def test_the_page_shows_intervals_comparisons_and_arms(client_as, evaluated_demo, settings, tmp_path):
    from flywheel_demo.report import build_report, write_report

    settings.FLYWHEEL_DEMO_REPORTS = tmp_path
    evaluated_demo.report = build_report(evaluated_demo)
    evaluated_demo.save()
    svg = write_report(evaluated_demo).with_suffix(".svg").read_text()
    # Bars for three rounds and the arm, a whisker pair of caps for each interval that has a spread.
    assert svg.startswith("<svg") and "no ECDM data" in svg and "83% (5/6)" in svg and ">100%</text>" in svg
    assert "95% intervals" in svg and "held-out SR" in svg
    manager = client_as("manager")
    for url in (reverse("flywheel-demo-detail", args=[evaluated_demo.pk]), reverse("flywheel-demo")):
        page = manager.get(url).content.decode()
        r1_ci = evaluated_demo.report["rounds"][1]["ci95"]
        assert f"50.0% ({100 * r1_ci[0]:.1f}–{100 * r1_ci[1]:.1f}%)" in page, url
        assert "0.0% (0.0–0.0%)" in page and "4/4 · 100.0% (100.0–100.0%)" in page  # round 2's new phrasings
        assert 'data-testid="demo-comparisons"' in page and "round 0 → round 2: +83.3 points" in page
        assert "p = 0.062" in page and 'data-arm="no_ecdm"' in page and "arm no_ecdm → round 2: +50.0 points" in page
        assert "6 · 100.0% (1)" in page and "2 · 33.3% (2)" in page  # claimed · false successes, rounds 2 and 0
        assert 'data-testid="demo-sr-chart"' in page and "<svg" in page
        assert "{'" not in page and "Traceback" not in page
    assert "flywheel: sr_round0" not in page  # the machine line stays off the page


def test_an_old_kept_report_reads_without_intervals(client_as, settings, tmp_path):
    import json

    settings.FLYWHEEL_DEMO_REPORTS = tmp_path
    old = {"demo": 3, "rounds": [{"round": 0, "sr": 0.1, "tasks": 10, "successes": 1, "status": "done"},
                                 {"round": 1, "sr": 0.2, "tasks": 10, "successes": 2, "status": "done"},
                                 {"round": 2, "sr": 0.4, "tasks": 10, "successes": 4, "status": "done"}],
           "ablation": {"sr": 0.3, "tasks": 10, "successes": 3, "without": "ecdm_repaired samples"},
           "gains": {"round0_to_round3_pts": 30.0, "round1_to_round3_pts": 20.0, "ecdm_contribution_pts": 10.0},
           "targets": {"gain_round0_to_round3_pts": 20, "gain_round1_to_round3_pts": 5, "minutes": 20},
           "met": {"gain_round0_to_round3": True, "gain_round1_to_round3": True, "minutes": True},
           "figures": {"sr_round0": 0.1, "sr_round1": 0.2, "sr_round2": 0.4, "last_round": 2, "minutes": 9.0},
           "line": "flywheel: sr_round0=0.1 sr_round1=0.2 sr_round2=0.4 salvage_yield=n/a minutes=9"}
    (tmp_path / "flywheel-demo-20261201-120000-3.json").write_text(json.dumps(old))
    manager = client_as("manager")
    assert "Held-out SR: round 0 10% → round 1 20% → round 2 40% · 9 min" in manager.get(
        reverse("flywheel-demo")).content.decode()
    page = manager.get(reverse("flywheel-demo-report", args=["flywheel-demo-20261201-120000-3.json"])).content.decode()
    assert "40.0%" in page and 'data-arm="no_ecdm"' in page and "30.0%" in page
    assert "predates the paired comparisons" in page and 'data-testid="demo-gains"' in page
    assert 'data-testid="demo-sr-chart"' in page and "no ECDM data" in page
