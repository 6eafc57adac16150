"""The demo's report: success rate per round on the held-out version, salvage yield, pool sizes, the
ablation, and the figures of the one last line. Every run's report is kept as a JSON file in
settings.FLYWHEEL_DEMO_REPORTS (the page lists them all, those of `make flywheel-demo` too).

A round's success rate is its successes over the held-out tasks evaluated (a task the judges could
not score counts as not solved, so rounds are compared over the same tasks); the benchmark's own SR
(over scored tasks only) is kept beside it.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from benchmark.models import EvalRun
from flywheel.models import EvolutionLoop, ModelVersion
from flywheel.repair.loop import round_stats
from flywheel.rules.salvage import salvage_yield
from training.compact import training_report

TARGETS = {"gain_round0_to_round3_pts": 20, "gain_round1_to_round3_pts": 5, "minutes": 20}


def reports_directory() -> Path:
    return Path(settings.FLYWHEEL_DEMO_REPORTS)


def _evaluation(label, demo) -> dict:
    evaluation = EvalRun.objects.filter(pk=(demo.state.get("evals") or {}).get(label)).first()
    if evaluation is None:
        return {}
    scores = evaluation.scores or {}
    successes = scores.get("successes", 0)
    return {"eval_run": evaluation.pk, "status": evaluation.status, "tasks": evaluation.total,
            "successes": successes, "scored": scores.get("scored", 0),
            "sr": round(successes / evaluation.total, 4) if evaluation.total else None,
            "benchmark_sr": scores.get("sr"), "waiting_for_expert": scores.get("waiting_for_expert", 0),
            "not_scored": scores.get("not_scored", {})}


def _training(label, demo) -> dict:
    model = ModelVersion.objects.filter(pk=(demo.state.get("models") or {}).get(label)).first()
    if model is None:
        return {}
    report = training_report(model)
    trainer = report.get("trainer") or {}
    return {"model": model.name, "model_id": model.pk, "snapshot": report.get("snapshot"),
            "samples": report.get("samples"), "steps_used": report.get("used"), "skipped": report.get("skipped"),
            "by_source": report.get("by_source"), "train_accuracy": trainer.get("train_accuracy"),
            "train_seconds": trainer.get("seconds")}


def build_report(demo) -> dict:
    loop = EvolutionLoop.objects.filter(pk=demo.state.get("loop")).first()
    loop_rounds = {r.number: r for r in loop.rounds.all()} if loop else {}
    rounds, failed_total, salvaged = [], 0, Counter()
    for number in range(0, 2 + demo.config.get("loop_rounds", 2)):
        label = f"r{number}"
        row = {"round": number, **_evaluation(label, demo), "training": _training(label, demo),
               "pools": (demo.state.get("pools") or {}).get(label, {})}
        source = loop_rounds.get(number - 1)  # round n's data: the loop round that rolled out M(n-1)
        if source is not None:
            stats = round_stats(source)
            row.update(rollouts=stats["rollouts"], failed=stats["failed"], salvaged=stats["salvaged_total"],
                       salvage_yield=stats["salvage_yield"], yield_by_path=stats["yield_by_path"],
                       verdicts=stats["verdicts"])
            failed_total += stats["failed"]
            salvaged.update(stats["salvaged"])
        rounds.append(row)
    ablation = {**_evaluation("ablation", demo), "training": _training("ablation", demo),
                "without": "ecdm_repaired samples"}
    by_round = {row["round"]: row for row in rounds}
    last = max(by_round)
    started = demo.started_at or demo.created_at
    minutes = round((timezone.now() - started).total_seconds() / 60, 2)
    sr = {n: by_round[n].get("sr") for n in by_round}
    # The last round is named by its number (sr_round3 after the default two loop rounds), so a
    # shorter or longer demo never reports a round it did not run.
    figures = {"sr_round0": sr.get(0), "sr_round1": sr.get(1), f"sr_round{last}": sr.get(last), "last_round": last,
               "salvage_yield": salvage_yield(failed_total, dict(salvaged)),
               "minutes": minutes, "held_out_tasks": by_round[0].get("tasks")}

    def points(a, b):
        return None if a is None or b is None else round(100 * (b - a), 1)

    gains = {"round0_to_round3_pts": points(sr.get(0), sr.get(last)),
             "round1_to_round3_pts": points(sr.get(1), sr.get(last)),
             "ecdm_contribution_pts": points(ablation.get("sr"), sr.get(last))}
    met = {"gain_round0_to_round3": gains["round0_to_round3_pts"] is not None
           and gains["round0_to_round3_pts"] >= TARGETS["gain_round0_to_round3_pts"],
           "gain_round1_to_round3": gains["round1_to_round3_pts"] is not None
           and gains["round1_to_round3_pts"] >= TARGETS["gain_round1_to_round3_pts"],
           "minutes": minutes <= TARGETS["minutes"]}
    return {"demo": demo.pk, "finished_at": timezone.now().isoformat(), "config": demo.config,
            "benchmark": demo.state.get("benchmark"), "open_queries": demo.state.get("open_queries"),
            "held_out_queries": demo.state.get("held_out_queries"), "rl_banked": demo.state.get("banked"),
            "rounds": rounds, "ablation": ablation, "gains": gains, "figures": figures,
            "targets": TARGETS, "met": met, "line": last_line(figures),
            "summary": summary({"rounds": rounds, "figures": figures})}


def last_line(figures: dict) -> str:
    """The machine-read last line of `make flywheel-demo`; its SR keys are the rounds that ran."""
    def show(value):
        return "n/a" if value is None else f"{value:g}" if isinstance(value, float) else str(value)

    rounds = sorted({0, 1, figures.get("last_round", 1)})
    srs = " ".join(f"sr_round{n}={show(figures.get(f'sr_round{n}'))}" for n in rounds)
    return (f"flywheel: {srs} salvage_yield={show(figures.get('salvage_yield'))} "
            f"minutes={show(figures.get('minutes'))}")


def summary(report: dict) -> str:
    """The report in words for the page, from the rounds that actually ran (a kept report of any
    age reads right): "Held-out SR: round 0 0% → round 1 25% → round 2 50% · salvage yield 80% · 9.5 min"."""
    def percent(value):
        return "not evaluated" if value is None else f"{100 * value:.0f}%"

    rounds = [row for row in report.get("rounds") or [] if isinstance(row, dict) and "round" in row]
    if not rounds:
        return ""
    parts = ["Held-out SR: " + " → ".join(f"round {row['round']} {percent(row.get('sr'))}" for row in rounds)]
    figures = report.get("figures") or {}
    if isinstance(figures.get("salvage_yield"), (int, float)):
        parts.append(f"salvage yield {percent(figures['salvage_yield'])}")
    if isinstance(figures.get("minutes"), (int, float)):
        parts.append(f"{figures['minutes']:g} min")
    return " · ".join(parts)


def write_report(demo) -> Path:
    """The report as JSON and its chart as SVG beside it (same name), for reading without the console."""
    directory = reports_directory()
    directory.mkdir(parents=True, exist_ok=True)
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    path = directory / f"flywheel-demo-{stamp}-{demo.pk}.json"
    path.write_text(json.dumps(demo.report, indent=2, default=str))
    path.with_suffix(".svg").write_text(chart_svg(demo.report))
    return path


def chart_svg(report: dict) -> str:
    """Held-out SR per round (and the ablation) as bars, each labelled with solved/tasks."""
    bars = [(f"round {row['round']}", row) for row in report.get("rounds") or []]
    if (report.get("ablation") or {}).get("tasks"):
        bars.append(("no ECDM data", report["ablation"]))
    width, height, top, bottom, left = 90 * max(1, len(bars)) + 60, 260, 30, 40, 40
    plot = height - top - bottom
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12"><text x="{left}" y="18">Held-out success rate per round (tasks solved / tasks)</text>',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#333"/>']
    for i, (label, row) in enumerate(bars):
        sr = row.get("sr") or 0.0
        x, h = left + 20 + 90 * i, round(plot * sr)
        colour = "#999" if label == "no ECDM data" else "#3b6ea8"
        parts += [f'<rect x="{x}" y="{height - bottom - h}" width="50" height="{h}" fill="{colour}"/>',
                  f'<text x="{x}" y="{height - bottom - h - 4}">{100 * sr:.0f}% ({row.get("successes", 0)}/'
                  f'{row.get("tasks", 0)})</text>',
                  f'<text x="{x}" y="{height - bottom + 16}">{label}</text>']
    return "\n".join([*parts, "</svg>"]) + "\n"


def stored_reports(limit: int = 50) -> list[dict]:
    """Every kept report, newest first (a file that cannot be read is listed with its problem)."""
    directory = reports_directory()
    found = []
    for path in sorted(directory.glob("flywheel-demo-*.json"), key=lambda p: p.name, reverse=True)[:limit]:
        try:
            report = json.loads(path.read_text())
            found.append({"name": path.name, **report, "summary": summary(report)})
        except (OSError, ValueError) as error:
            found.append({"name": path.name, "problem": str(error)})
    return found
