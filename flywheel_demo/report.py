"""The demo's report: success rate per round on the held-out version with its 95% interval (bootstrap
over tasks), the false-success rate, the SR by kind of held-out task, paired comparisons between rounds
and against each experiment arm (an ablation), salvage yield, pool sizes, and the figures of the one last
line. Every run's report is kept as a JSON file in settings.FLYWHEEL_DEMO_REPORTS (the page lists them
all, those of `make flywheel-demo` too, old ones without intervals included).

A round's success rate is its successes over the held-out tasks evaluated (a task the judges could
not score counts as not solved, so rounds are compared over the same tasks); the benchmark's own SR
(over scored tasks only) is kept beside it. flywheel_demo/evaluations.py reads each evaluation task by task.

What the report reads from demo.state (written by the orchestrator): "evals" and "models" ({label: id},
rounds "r0".."rN"), "loop", "pools", "unseen_apps" (the packages no training saw; absent: every held-out
task is a new phrasing), and "arms" ({name: {label, what, compare_to}}; an older run's "ablation" label is
read as the arm "no_ecdm").
"""
from __future__ import annotations

import json
from collections import Counter
from html import escape
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from benchmark.models import EvalRun
from flywheel.models import EvolutionLoop, ModelVersion
from flywheel.repair.loop import round_stats
from flywheel.rules.salvage import salvage_yield
from flywheel_demo.evaluations import FUNCTION, compare, comparison_words, evaluation_row, points
from training.compact import training_report

TARGETS = {"gain_round0_to_last_pts": 25, "gain_round1_to_last_pts": 10, "false_success_last": 0.20, "minutes": 30}
NO_ECDM = "no_ecdm"


def reports_directory() -> Path:
    return Path(settings.FLYWHEEL_DEMO_REPORTS)


def _evaluation(label, demo, unseen_apps) -> tuple[dict, dict]:
    evaluation = (EvalRun.objects.filter(pk=(demo.state.get("evals") or {}).get(label))
                  .select_related("benchmark").first())
    return evaluation_row(evaluation, unseen_apps)


def _training(label, demo) -> dict:
    model = ModelVersion.objects.filter(pk=(demo.state.get("models") or {}).get(label)).first()
    if model is None:
        return {}
    report = training_report(model)
    trainer = report.get("trainer") or {}
    return {"model": model.name, "model_id": model.pk, "snapshot": report.get("snapshot"),
            "samples": report.get("samples"), "steps_used": report.get("used"), "skipped": report.get("skipped"),
            "by_source": report.get("by_source"), "train_accuracy": trainer.get("train_accuracy"),
            "train_seconds": trainer.get("seconds"), "false_claims": trainer.get("false_claims"),
            "train_false_claim": trainer.get("train_false_claim")}


def round_name(label: str) -> str:
    return f"round {label[1:]}" if label[:1] == "r" and label[1:].isdigit() else label


def experiment_arms(demo, last: int) -> dict:
    """{name: {label, what, compare_to}}: the orchestrator's arms, or an older run's one ablation."""
    if demo.state.get("arms"):
        return demo.state["arms"]
    if "ablation" in (demo.state.get("evals") or {}):
        return {NO_ECDM: {"label": "ablation", "compare_to": f"r{last}",
                          "what": "the last round's training without the ECDM-produced samples"}}
    return {}


def _comparisons(outcomes: dict, last: int) -> list[dict]:
    """Each round against the next, and rounds 0 and 1 against the last, over the tasks both evaluated."""
    pairs = [(n, n + 1) for n in range(last)] + [(0, last), (1, last)]
    found = []
    for before, after in dict.fromkeys(pairs):
        if before < after and outcomes.get(f"r{before}") and outcomes.get(f"r{after}"):
            difference = compare(outcomes[f"r{before}"], outcomes[f"r{after}"])
            found.append({"before": f"r{before}", "after": f"r{after}", "name": f"round {before} → round {after}",
                          **difference, "words": comparison_words(f"round {before}", f"round {after}", difference)})
    return found


def _arm_rows(demo, arms: dict, outcomes: dict, unseen_apps) -> list[dict]:
    """Each arm's evaluation and training, and its effect: its compare_to minus the arm, paired."""
    rows = []
    for name, arm in arms.items():
        label, target = arm.get("label", name), arm.get("compare_to", "")
        fields, arm_outcomes = _evaluation(label, demo, unseen_apps)
        row = {"arm": name, "label": label, "what": arm.get("what", ""), "compare_to": target,
               "compare_to_name": round_name(target), **fields, "training": _training(label, demo)}
        if arm_outcomes and outcomes.get(target):
            effect = compare(arm_outcomes, outcomes[target])
            row["effect"] = {**effect, "words": comparison_words(f"arm {name}", round_name(target), effect)}
        rows.append(row)
    return rows


def _gain_met(comparison: dict | None, target: float) -> bool:
    """The gain reaches its target and its 95% interval lies above zero."""
    if not comparison or comparison.get("delta_pts") is None:
        return False
    return comparison["delta_pts"] >= target and comparison["ci95_pts"][0] > 0


def build_report(demo) -> dict:
    loop = EvolutionLoop.objects.filter(pk=demo.state.get("loop")).first()
    loop_rounds = {r.number: r for r in loop.rounds.all()} if loop else {}
    unseen_apps = set(demo.state["unseen_apps"]) if demo.state.get("unseen_apps") is not None else None
    rounds, outcomes, failed_total, salvaged = [], {}, 0, Counter()
    for number in range(0, 2 + demo.config.get("loop_rounds", 2)):
        label = f"r{number}"
        fields, outcomes[label] = _evaluation(label, demo, unseen_apps)
        row = {"round": number, **fields, "training": _training(label, demo),
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
    by_round = {row["round"]: row for row in rounds}
    last = max(by_round)
    comparisons = _comparisons(outcomes, last)
    between = {(c["before"], c["after"]): c for c in comparisons}
    arms = _arm_rows(demo, experiment_arms(demo, last), outcomes, unseen_apps)
    no_ecdm = next((row for row in arms if row["arm"] == NO_ECDM), {})
    started = demo.started_at or demo.created_at
    minutes = round((timezone.now() - started).total_seconds() / 60, 2)
    sr = {n: by_round[n].get("sr") for n in by_round}
    r0_last, r1_last = between.get(("r0", f"r{last}")), between.get(("r1", f"r{last}"))
    last_row = by_round[last]
    # The last round is named by its number (sr_round3 after the default two loop rounds), so a
    # shorter or longer demo never reports a round it did not run.
    figures = {"sr_round0": sr.get(0), "sr_round1": sr.get(1), f"sr_round{last}": sr.get(last), "last_round": last,
               f"ci95_r1_r{last}": (r1_last or {}).get("ci95_pts"),
               f"unseen_function_sr_round{last}": ((last_row.get("by_kind") or {}).get(FUNCTION) or {}).get("sr"),
               f"false_success_round{last}": last_row.get("false_success"),
               "ecdm_delta": None if no_ecdm.get("sr") is None or sr.get(last) is None
               else points(sr[last] - no_ecdm["sr"]),
               "salvage_yield": salvage_yield(failed_total, dict(salvaged)),
               "minutes": minutes, "heldout_tasks": by_round[0].get("tasks")}
    gains = {"round0_to_last_pts": (r0_last or {}).get("delta_pts"),
             "round1_to_last_pts": (r1_last or {}).get("delta_pts"), "ecdm_delta_pts": figures["ecdm_delta"]}
    false_success = last_row.get("false_success")
    met = {"gain_round0_to_last": _gain_met(r0_last, TARGETS["gain_round0_to_last_pts"]),
           "gain_round1_to_last": _gain_met(r1_last, TARGETS["gain_round1_to_last_pts"]),
           # No failed task at all is no false success: met, once the last round was evaluated.
           "false_success_last": bool(last_row.get("tasks")) and (
               false_success is None or false_success <= TARGETS["false_success_last"]),
           "minutes": minutes <= TARGETS["minutes"]}
    ablation = {**no_ecdm, "without": "ecdm_repaired samples"} if no_ecdm else {}  # read by older tools
    return {"demo": demo.pk, "finished_at": timezone.now().isoformat(), "config": demo.config,
            "benchmark": demo.state.get("benchmark"), "open_queries": demo.state.get("open_queries"),
            "held_out_queries": demo.state.get("held_out_queries"), "rl_banked": demo.state.get("banked"),
            "unseen_apps": sorted(unseen_apps) if unseen_apps is not None else None,
            "rounds": rounds, "comparisons": comparisons, "arms": arms, "ablation": ablation, "gains": gains,
            "figures": figures, "targets": TARGETS, "met": met, "line": last_line(figures),
            "summary": summary({"rounds": rounds, "figures": figures})}


def last_line(figures: dict) -> str:
    """The machine-read last line of `make flywheel-demo`; its round keys are the rounds that ran.
    ci95_r1_rN is the round 1 → N gain's interval in points, ecdm_delta the last round minus the
    no-ECDM arm in points."""
    def show(value):
        if value is None:
            return "n/a"
        if isinstance(value, (list, tuple)):
            return "[" + ",".join(show(v) for v in value) + "]"
        return f"{value:g}" if isinstance(value, float) else str(value)

    last = figures.get("last_round", 1)
    srs = " ".join(f"sr_round{n}={show(figures.get(f'sr_round{n}'))}" for n in sorted({0, 1, last}))
    keys = [f"ci95_r1_r{last}", f"unseen_function_sr_round{last}", f"false_success_round{last}", "ecdm_delta",
            "heldout_tasks", "minutes"]
    return f"flywheel: {srs} " + " ".join(f"{key}={show(figures.get(key))}" for key in keys)


def percent(value) -> str:
    return "not evaluated" if value is None else f"{100 * value:.0f}%"


def sr_with_interval(row: dict) -> str:
    """"45% (30–60%)", or the SR alone where the report has no interval (an older report)."""
    interval = row.get("ci95") or [None, None]
    if row.get("sr") is None or None in interval:
        return percent(row.get("sr"))
    return f"{percent(row['sr'])} ({100 * interval[0]:.0f}–{100 * interval[1]:.0f}%)"


def summary(report: dict) -> str:
    """The report in words for the page, from the rounds that actually ran (a kept report of any
    age reads right): "Held-out SR: round 0 0% (0–0%) → round 1 25% (5–45%) · salvage yield 80% · 9.5 min"."""
    rounds = [row for row in report.get("rounds") or [] if isinstance(row, dict) and "round" in row]
    if not rounds:
        return ""
    parts = ["Held-out SR: " + " → ".join(f"round {row['round']} {sr_with_interval(row)}" for row in rounds)]
    if rounds[-1].get("false_success") is not None:
        parts.append(f"false successes {percent(rounds[-1]['false_success'])} of round {rounds[-1]['round']}'s failures")
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


def chart_bars(report: dict) -> list[tuple[str, dict, bool]]:
    """(label, row, is an arm) per bar: the rounds, then the experiment arms (an older report's ablation)."""
    bars = [(f"round {row['round']}", row, False) for row in report.get("rounds") or [] if "round" in row]
    arms = report.get("arms")
    if arms is None and (report.get("ablation") or {}).get("tasks"):
        arms = [{**report["ablation"], "arm": NO_ECDM}]
    for row in arms or []:
        if row.get("tasks"):
            bars.append(("no ECDM data" if row.get("arm") == NO_ECDM else f"arm: {row.get('arm')}", row, True))
    return bars


def chart_svg(report: dict) -> str:
    """Held-out SR per round and per arm as bars on a 0–100% axis, each with its 95% interval as a
    whisker (where the report has one) and labelled with its SR and solved/tasks."""
    bars = chart_bars(report)
    step, height, top, bottom, left = 110, 300, 44, 58, 60
    width, plot = left + step * max(1, len(bars)) + 20, height - top - bottom

    def y(value):
        return round(height - bottom - plot * value, 1)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} '
             f'{height}" font-family="sans-serif" font-size="12" role="img" aria-label="Held-out success rate">',
             f'<text x="{left}" y="18" font-size="14">Held-out success rate per round, with 95% intervals '
             '(bootstrap over tasks)</text>',
             f'<text transform="translate(14 {top + plot / 2}) rotate(-90)" text-anchor="middle">'
             'held-out SR (tasks solved / tasks)</text>',
             f'<text x="{left + (width - left) / 2}" y="{height - 6}" text-anchor="middle">'
             'model evaluated (round, or experiment arm in grey)</text>']
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts += [f'<line x1="{left}" y1="{y(tick)}" x2="{width - 10}" y2="{y(tick)}" stroke="#ddd"/>',
                  f'<text x="{left - 6}" y="{y(tick) + 4}" text-anchor="end">{100 * tick:.0f}%</text>']
    parts += [f'<line x1="{left}" y1="{top}" x2="{left}" y2="{y(0)}" stroke="#333"/>',
              f'<line x1="{left}" y1="{y(0)}" x2="{width - 10}" y2="{y(0)}" stroke="#333"/>']
    for i, (label, row, arm) in enumerate(bars):
        sr = row.get("sr") or 0.0
        x = left + 30 + step * i
        centre, above = x + 25, y(sr)
        parts.append(f'<rect x="{x}" y="{y(sr)}" width="50" height="{round(plot * sr, 1)}" '
                     f'fill="{"#999" if arm else "#3b6ea8"}"><title>{escape(label)}</title></rect>')
        interval = row.get("ci95") or [None, None]
        if None not in interval:
            lo, hi = y(interval[0]), y(interval[1])
            above = min(above, hi)
            parts += [f'<line x1="{centre}" y1="{lo}" x2="{centre}" y2="{hi}" stroke="#222"/>',
                      f'<line x1="{centre - 8}" y1="{lo}" x2="{centre + 8}" y2="{lo}" stroke="#222"/>',
                      f'<line x1="{centre - 8}" y1="{hi}" x2="{centre + 8}" y2="{hi}" stroke="#222"/>']
        parts += [f'<text x="{centre}" y="{above - 5}" text-anchor="middle">{100 * sr:.0f}% '
                  f'({row.get("successes", 0)}/{row.get("tasks", 0)})</text>',
                  *(f'<text x="{centre}" y="{y(0) + 16 + 14 * line}" text-anchor="middle">{escape(words[:17])}</text>'
                    for line, words in enumerate(label.split(": ", 1)))]  # "arm: name" on two lines
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
