"""Exports of an evaluation run: every result as JSON Lines, AndroidWorld's summary table, a folder.

`results_jsonl` starts with one `{"type": "config"}` object holding the run's full pinned config
(and its scores), then one `{"type": "result"}` object per current result (a re-collected
attempt is replaced by the one that superseded it), then one `{"type": "not_run"}` object per
item no phone here could run, so what was left out is shown, not hidden.

`androidworld_summary` is the table android_world's `suite_utils.process_episodes` prints: per
task template (here: the query key) the complete trials, mean success rate, mean episode length,
total runtime and failed trials, with an "========= Average =========" row of the column means.
A complete trial is a scored result; a failed trial is an attempt that ended without a score (the
environment broke, the phone went away, the endpoint stopped answering).
"""
import csv
import io
import json
from pathlib import Path

from benchmark.metric import policy_success
from benchmark.models import EvalResult, EvalRun
from flywheel.rules.spreadsheet import spreadsheet_safe_row

AVERAGE_ROW = "========= Average ========="
SUMMARY_COLUMNS = ("task_num", "task_template", "num_complete_trials", "mean_success_rate", "mean_episode_length",
                   "total_runtime_s", "num_fail_trials")
SCORED = (EvalResult.State.SCORED, EvalResult.State.EXPERT)


def _results(eval_run: EvalRun, current_only: bool = True):
    results = EvalResult.objects.filter(eval_run=eval_run)
    if current_only:
        results = results.filter(superseded=False)
    return (results.select_related("item__query", "trajectory")
            .order_by("item__position", "item_id", "attempt"))


def episode_length(result: EvalResult) -> int | None:
    """Steps the model took (AndroidWorld's episode length); None without a trajectory."""
    if result.trajectory_id is None:
        return None
    return result.trajectory.steps.count()


def runtime_s(result: EvalResult) -> float | None:
    trajectory = result.trajectory
    if trajectory is None or trajectory.finished_at is None:
        return None
    return round((trajectory.finished_at - trajectory.started_at).total_seconds(), 1)


def result_record(result: EvalResult) -> dict:
    item, trajectory = result.item, result.trajectory
    return {
        "type": "result", "result_id": result.pk, "key": item.query.key, "external_id": item.external_id,
        "goal": item.snapshot.get("text") or item.query.text, "split": item.split, "labels": item.labels,
        "expected_interaction": item.expected_interaction, "interaction_points": item.interaction_points,
        "attempt": result.attempt, "state": result.state, "outcome": result.outcome,
        "expert_outcome": result.expert_outcome, "final_outcome": result.final_outcome,
        "outcome_reason": result.outcome_reason, "judge_verdict": result.judge_verdict, "votes": result.votes,
        "judge_round": result.judge_round, "not_scored_reason": result.not_scored_reason,
        "partial_credit": result.partial_credit, "trajectory_id": result.trajectory_id,
        "episode_length": episode_length(result), "runtime_s": runtime_s(result),
        "stop_reason": trajectory.stop_reason if trajectory else (result.evidence or {}).get("stop_reason", ""),
        "stop_kind": (result.evidence or {}).get("stop_kind", ""),
    }


def config_record(eval_run: EvalRun) -> dict:
    return {"type": "config", "eval_run": eval_run.pk, "benchmark": f"{eval_run.benchmark.name} "
            f"{eval_run.benchmark.version}", "model": eval_run.model_version.name, "split": eval_run.split,
            "status": eval_run.status, "created_at": eval_run.created_at.isoformat(),
            "finished_at": eval_run.finished_at.isoformat() if eval_run.finished_at else None,
            "config": eval_run.config, "scores": eval_run.scores}


def results_records(eval_run: EvalRun):
    yield config_record(eval_run)
    for result in _results(eval_run):
        yield result_record(result)
    for entry in (eval_run.config or {}).get("not_executable") or []:
        yield {"type": "not_run", "key": entry.get("key"), "reason": entry.get("reason", "")}


def results_jsonl(eval_run: EvalRun) -> str:
    """The run as JSON Lines: its pinned config first, then each current result, then what did not run."""
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in results_records(eval_run))


def _mean(values):
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), 4) if values else None


def androidworld_rows(eval_run: EvalRun) -> list[dict]:
    """One row per task template (query key), sorted by it as process_episodes does, then the average."""
    by_key = {}
    for result in _results(eval_run, current_only=False):
        by_key.setdefault(result.item.query.key, []).append(result)
    rows = []
    for key in sorted(by_key):
        attempts = by_key[key]
        current = [r for r in attempts if not r.superseded]
        complete = [r for r in current if r.state in SCORED and r.final_outcome in ("success", "failure")]
        rows.append({
            "task_template": key, "num_complete_trials": len(complete),
            "mean_success_rate": _mean([1.0 if policy_success(r) else 0.0 for r in complete]),
            "mean_episode_length": _mean([episode_length(r) for r in attempts]),
            "total_runtime_s": round(sum(runtime_s(r) or 0.0 for r in attempts), 1),
            "num_fail_trials": sum(1 for r in attempts if r.state == EvalResult.State.NOT_SCORED),
        })
    for number, row in enumerate(rows):
        row["task_num"] = number
    if rows:
        average = {"task_num": 0, "task_template": AVERAGE_ROW}
        for column in SUMMARY_COLUMNS[2:]:
            average[column] = _mean([row[column] for row in rows])
        rows.append(average)
    return rows


def androidworld_summary(eval_run: EvalRun, fmt: str = "csv"):
    """AndroidWorld's results table: CSV text (fmt="csv", the table only; its config is beside it in
    config.json and the first line of results.jsonl) or {"config", "rows", "average"} (fmt="dict")."""
    rows = androidworld_rows(eval_run)
    if fmt == "dict":
        return {"eval_run": eval_run.pk, "config": eval_run.config, "columns": list(SUMMARY_COLUMNS),
                "rows": rows[:-1], "average": rows[-1] if rows else None}
    if fmt != "csv":
        raise ValueError("fmt is csv or dict")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=SUMMARY_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        # The average row starts with "=", a key stored before keys were checked may too: no formulas.
        writer.writerow(spreadsheet_safe_row({k: row[k] for k in SUMMARY_COLUMNS}))
    return buffer.getvalue()


def write_run_export(eval_run: EvalRun, directory) -> dict:
    """results.jsonl, summary.csv and config.json of a run in `directory` (made if need be)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"results": directory / "results.jsonl", "summary": directory / "summary.csv",
             "config": directory / "config.json"}
    paths["results"].write_text(results_jsonl(eval_run), encoding="utf-8")
    paths["summary"].write_text(androidworld_summary(eval_run), encoding="utf-8")
    paths["config"].write_text(json.dumps({"eval_run": eval_run.pk, "config": eval_run.config,
                                           "scores": eval_run.scores}, ensure_ascii=False, indent=1),
                               encoding="utf-8")
    return {name: str(path) for name, path in paths.items()}
