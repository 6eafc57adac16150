"""The flywheel demo (issue #16) end to end through a real Celery worker and the virtual farm, on a
small slice of the farm's task set (the full run is `make flywheel-demo`, whose figures are measured
there, not here); and its page: roles, launching, following, every kept report."""
import json
import time
from pathlib import Path

import pytest
from django.urls import reverse

from benchmark.models import EvalRun
from flywheel.models import EvolutionLoop, ModelVersion, SftEntry, Trajectory
from flywheel_demo.models import DemoRun
from flywheel_demo.orchestrator import advance_demo, clean_demo_config, start_demo
from flywheel_demo.report import last_line, stored_reports, summary
from tests.conftest import ROOT
from training.compact import training_report
from training.models import DataSnapshot

WORKER_ENV = {"ECDM_AUTOMATIC": "1", "ECDM_REPLAY": "0"}
SLICE = ("notes-create-groceries-l1", "notes-delete-gift-ideas", "notes-pin-meeting", "notes-default-work-l1",
         "gallery-fav-temple-l1", "gallery-backup-on", "gallery-delete-receipt", "settings-dark-theme-l1",
         "settings-airplane-boarding", "settings-dnd-on")


@pytest.fixture
def demo_settings(settings, tmp_path):
    lines = [line for line in (ROOT / "simfarm/tasks/tasks.jsonl").read_text().splitlines()
             if json.loads(line)["key"] in SLICE]
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    settings.FLYWHEEL_DEMO_TASKS = str(tmp_path / "tasks.jsonl")
    settings.FLYWHEEL_DEMO_REPORTS = tmp_path / "reports"
    settings.TRAINING_ROOT = tmp_path / "training"
    settings.EVOLUTION_TRAINER = ""
    return settings


@pytest.mark.django_db(transaction=True)
def test_the_demo_runs_every_round_through_the_services(demo_settings, farm_settings, celery_worker_process):
    from devices.registry import discover_devices

    discover_devices([farm_settings.address])
    demo = DemoRun.objects.create(config=clean_demo_config({
        "phones": 3, "max_steps": 6, "loop_rounds": 1, "epochs": 10, "unseen_apps": 1, "explore_seconds": 60,
        "phrasings": 1, "cross_app": 0, "training_queries": 12, "max_queries": 8, "group_size": 2}))
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:  # a guard against hanging, not a speed check
        demo = advance_demo(demo.pk)
        if demo.status not in DemoRun.LIVE:
            break
        time.sleep(1)
    assert demo.status == DemoRun.Status.DONE, (demo.stage, demo.detail, demo.error)
    report = demo.report
    # Every farm task is held out; the rounds trained on generated queries of the apps not held out whole.
    assert report["held_out_queries"] == len(SLICE) and 0 < report["open_queries"] <= 12
    unseen, trained = demo.state["unseen_apps"], demo.state["trained_apps"]
    assert len(unseen) == 1 and len(trained) == 2 and not set(unseen) & set(trained)
    assert [row["round"] for row in report["rounds"]] == [0, 1, 2]
    for row in report["rounds"]:
        assert row["tasks"] == len(SLICE) and 0 <= row["sr"] <= 1 and row["status"] == "done"
    # Every evaluation ran on the held-out split only, each round on its own model, M0 → M1 → M2, and each
    # arm retrained from M1; the arm without RL rounds is M1 itself.
    evaluations = EvalRun.objects.filter(pk__in=demo.state["evals"].values())
    assert {e.split for e in evaluations} == {"held_out"} and evaluations.count() == 7
    models = {label: ModelVersion.objects.get(pk=pk) for label, pk in demo.state["models"].items()}
    assert models["r1"].parent == models["r0"] and models["r2"].parent == models["r1"]
    assert {models[f"arm:{arm}"].parent for arm in ("no_ecdm", "no_counterfactual", "single_judge",
                                                       "no_false_claims")} == {models["r1"]}
    assert {m.kind for m in models.values()} == {"compact"}
    assert {name: arm["label"] for name, arm in demo.state["arms"].items()} == {
        "no_ecdm": "arm:no_ecdm", "no_counterfactual": "arm:no_counterfactual", "no_rl_rounds": "r1",
        "single_judge": "arm:single_judge", "no_false_claims": "arm:no_false_claims"}
    # Every trained round read the rejected success claims (none may exist in a small run); that arm did not.
    assert all("false_claims" in training_report(models[label]) for label in ("r1", "r2"))
    assert "false_claims" not in training_report(models["arm:no_false_claims"])
    # The single-judge arm trained on the same judged trajectories routed by judge A's vote alone.
    single = DataSnapshot.objects.get(pk=training_report(models["arm:single_judge"])["snapshot"])
    assert single.config["success_judge"] == "A" and set(single.stats["single_judge"]) == {
        "system", "judged_rows_dropped", "added"}
    assert {row["arm"] for row in report["arms"]} == set(demo.state["arms"])
    # Round 1 trained on the schema-guided line's verified trajectories of generated queries. No line but
    # the benchmark's drew a farm task, and none touched the app held out whole.
    assert report["rounds"][1]["training"]["steps_used"] > 0 and report["rounds"][1]["pools"]["sft"] > 0
    drawn = Trajectory.objects.exclude(line="benchmark")
    assert drawn.exists() and not drawn.filter(query__evaluation_only=True).exists()
    assert not drawn.filter(query__generation_run=None, query__failure_class=None, query__derived_from=None).exists()
    assert not drawn.filter(query__apps__package__in=unseen).exists()
    assert not SftEntry.objects.filter(trajectory__query__evaluation_only=True).exists()
    loop = EvolutionLoop.objects.get(pk=demo.state["loop"])
    assert loop.status == "done" and report["rounds"][2]["rollouts"] > 0
    assert report["line"] == last_line(report["figures"]) and report["line"].startswith("flywheel: sr_round0=")
    assert stored_reports()[0]["demo"] == demo.pk
    chart = Path(demo.report_path).with_suffix(".svg").read_text()
    assert chart.startswith("<svg") and f"/{len(SLICE)})" in chart


def test_the_last_line_names_the_rounds_that_ran():
    two_loop_rounds = {"sr_round0": 0.0, "sr_round1": 0.1, "sr_round3": 0.3, "last_round": 3, "ci95_r1_r3": [1.1, 35.2],
                       "unseen_function_sr_round3": 0.25, "false_success_round3": 0.125, "ecdm_delta": 7.5,
                       "heldout_tasks": 40, "salvage_yield": 0.5, "minutes": 7.0}
    assert last_line(two_loop_rounds) == (
        "flywheel: sr_round0=0 sr_round1=0.1 sr_round3=0.3 ci95_r1_r3=[1.1,35.2] unseen_function_sr_round3=0.25 "
        "false_success_round3=0.125 ecdm_delta=7.5 heldout_tasks=40 minutes=7")
    one_loop_round = {"sr_round0": 0.0, "sr_round1": 0.1, "sr_round2": 0.2, "last_round": 2, "salvage_yield": None,
                      "minutes": 3.5}
    line = last_line(one_loop_round)
    assert line == ("flywheel: sr_round0=0 sr_round1=0.1 sr_round2=0.2 ci95_r1_r2=n/a unseen_function_sr_round2=n/a "
                    "false_success_round2=n/a ecdm_delta=n/a heldout_tasks=n/a minutes=3.5")
    assert summary({"rounds": [{"round": 0, "sr": 0.0}, {"round": 1, "sr": 0.1}, {"round": 2, "sr": None}],
                    "figures": one_loop_round}) == "Held-out SR: round 0 0% → round 1 10% → round 2 not evaluated · 3.5 min"
    # With intervals and false successes (a report of today) the summary says both.
    rounds = [{"round": 0, "sr": 0.1, "ci95": [0.0, 0.2]}, {"round": 1, "sr": 0.45, "ci95": [0.3, 0.6],
                                                           "false_success": 0.125}]
    assert summary({"rounds": rounds, "figures": {"minutes": 12}}) == (
        "Held-out SR: round 0 10% (0–20%) → round 1 45% (30–60%) · false successes 12% of round 1's failures · 12 min")


def test_a_bad_setting_or_a_second_live_demo_is_refused(db):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="unknown demo setting"):
        clean_demo_config({"turbo": 1})
    with pytest.raises(ValidationError, match="whole number"):
        clean_demo_config({"phones": "four"})
    with pytest.raises(ValidationError, match="phones must be"):
        clean_demo_config({"phones": 0})
    DemoRun.objects.create(config=clean_demo_config({}))
    with pytest.raises(ValidationError, match="already running"):
        start_demo(None, {})


def test_the_page_is_for_managers_and_shows_runs_and_kept_reports(client_as, db, settings, tmp_path):
    settings.FLYWHEEL_DEMO_REPORTS = tmp_path
    url = reverse("flywheel-demo")
    assert client_as("annotator").get(url).status_code == 403
    assert client_as("adjudicator").post(reverse("flywheel-demo-start")).status_code == 403
    manager = client_as("manager")
    page = manager.get(url).content.decode()
    assert "No demo has run on this console yet" in page and "No report is kept yet" in page
    figures = {"sr_round0": 0.0, "sr_round1": 0.25, "last_round": 1, "salvage_yield": 0.8, "minutes": 9.5}
    kept = {"demo": 7, "rounds": [{"round": 0, "sr": 0.0, "tasks": 4, "successes": 0},
                                  {"round": 1, "sr": 0.25, "tasks": 4, "successes": 1}],
            "ablation": {}, "figures": figures, "line": last_line(figures)}
    (tmp_path / "flywheel-demo-20261203-120000-7.json").write_text(json.dumps(kept))
    (tmp_path / "flywheel-demo-20261203-130000-8.json").write_text("{not json")
    page = manager.get(url).content.decode()
    # The kept report ran rounds 0 and 1: the page names those, never a round 3 it did not run.
    assert "Held-out SR: round 0 0% → round 1 25% · salvage yield 80% · 9.5 min" in page
    assert "round 3" not in page and "sr_round" not in page
    assert "cannot be read" in page
    detail = manager.get(reverse("flywheel-demo-report", args=["flywheel-demo-20261203-120000-7.json"]))
    assert detail.status_code == 200 and "demo-sr-chart" in detail.content.decode()
    assert manager.get(reverse("flywheel-demo-report", args=["nope.json"])).status_code == 404

    response = manager.post(reverse("flywheel-demo-start"), {"phones": "2", "loop_rounds": "9"})
    assert response.status_code == 302 and not DemoRun.objects.exists()  # refused with the reason
    response = manager.post(reverse("flywheel-demo-start"), {"phones": "2"}, follow=True)
    demo = DemoRun.objects.get()
    assert demo.config["phones"] == 2 and demo.created_by.username == "manager-user"
    assert b"demo-live" in response.content and b"every 5s" in response.content
    live = manager.get(reverse("flywheel-demo-live", args=[demo.pk]))
    assert live.status_code == 200 and b"Queued" in live.content
    manager.post(reverse("flywheel-demo-cancel", args=[demo.pk]))
    demo.refresh_from_db()
    assert demo.status == DemoRun.Status.CANCELLED and "cancelled by manager-user" in demo.detail
