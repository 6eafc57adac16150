"""Benchmark: how right the offline evaluation systems are, against the farm's ground truth.

Replays the judge-evaluation set (flywheel/judging/judge_sets/<version>.jsonl, made by
perf/judge_set_generate.py) on a virtual farm phone through its ADB server, as the console's
`evaluate_judges` does on any phone, with a share of ordinary pages made dump-blind: first with the farm
answering everything, then in real-phone mode (the farm answers only what a real phone answers).
Since issue #36 System A reads only what any phone shows (system settings and providers, dumpsys,
shared files) in both modes and abstains on an app's own state, so the two lines agree unless a
judge asks the farm for something a real phone refuses. Offline systems only: no model endpoint. Each evaluation is recorded as the console records one.

Figures: HTSC's purity (share of True that are truly done), recall (truly done that reach True),
Undetermined rate, purity on dump-blind and trap screens; the benchmark's offline judges' accuracy
(unanimous terminal-state + milestones + path verdict against the truth; a split is not right); the
RL step judge's accuracy (eq. 4's rule rewards against each step's truth: on course ⇒ reward ≥ 0,
off course ⇒ −1). The real-phone mode's line is printed last:

    judges: sft_purity= true_recall= undetermined_rate= blind_purity= trap_purity= benchmark_judge_accuracy= step_judge_accuracy=

    make judges      (JUDGES_BLIND_SHARE=0.2 blinds a fifth of the ordinary pages too; JUDGES_LIMIT=N;
                      JUDGES_THROWAWAY=1 leaves no record)
"""
import os
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from throwaway_db import create_database, drop_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
STAMP = time.strftime("%Y%m%d_%H%M%S")
BLIND_SHARE = float(os.environ.get("JUDGES_BLIND_SHARE", "0"))
LIMIT = int(os.environ["JUDGES_LIMIT"]) if os.environ.get("JUDGES_LIMIT") else None
VERSION = os.environ.get("JUDGES_SET", "v1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# By default the evaluations are recorded in the console's own database (the "Judges vs truth" page
# shows them); JUDGES_THROWAWAY=1 measures in a PostgreSQL database made for the run and dropped.
BASE_URL = os.environ.get("DATABASE_URL", "")
DROP = ""
if os.environ.get("JUDGES_THROWAWAY") == "1":
    if not BASE_URL.startswith(("postgres://", "postgresql://")):
        raise SystemExit("JUDGES_THROWAWAY=1 needs DATABASE_URL to name a PostgreSQL server")
    DROP = f"judges_{STAMP}_{os.getpid()}"
    os.environ["DATABASE_URL"] = create_database(BASE_URL, DROP)

import django

django.setup()

from django.core.management import call_command

from benchmark.judges import SYSTEM_VOTES
from benchmark.rules.scoring import FAILURE, SPLIT, SUCCESS, unanimous_verdict
from devices.phone import PhoneConnection
from flywheel.judging.judge_figures import judge_figures
from flywheel.judging.judge_set import case_view, load_set, run_evaluation, start_evaluation
from flywheel.judging.system_b import milestone_progress
from simfarm.farm import Farm
from simfarm.serve import ServerThread
from training.rules.rewards import OFF_COURSE, step_reward
from training.step_judge import screen_keys, step_facts


def benchmark_verdict(case) -> str:
    """The benchmark's offline roster on this trajectory: terminal-state (A's reading), milestones
    (B), path (C), unanimous or split; a safety violation fails it."""
    if case.safety:
        return FAILURE
    return unanimous_verdict([SYSTEM_VOTES[case.votes[s]["vote"]] for s in ("A", "B", "C")])


def step_judge_hits(case, view) -> tuple[int, int]:
    """(right, judged) over the case's steps whose truth is on or off course."""
    milestones = (view.verification or {}).get("milestones") or []
    reached = milestone_progress(view, milestones, skip_missing=True) if milestones else []
    reached += [None] * (len(milestones) - len(reached))
    steps = [SimpleNamespace(pk=s.index, index=s.index, executed_action=s.action, proposed_action=None,
                             foreground_package=s.package, audit={}) for s in view.steps]
    success = case.outcome == "true"
    facts = step_facts(view, steps, steps, reached, success, [], screen_keys(view, case.key))
    right = judged = 0
    for fact, truth in zip(facts, case.step_truth):
        if truth == "neutral":
            continue
        reward = step_reward(fact)
        judged += 1
        right += (reward >= 0) if truth == "on_course" else (reward == OFF_COURSE)
    return right, judged


def measure(real_phone: bool, cases_in_set) -> dict:
    farm = Farm(devices=1, seed=0, blind_share=BLIND_SHARE, real_phone=real_phone)
    serial = next(iter(farm.phones))
    started = time.perf_counter()
    with ServerThread(farm) as server:
        connection = PhoneConnection(address=f"127.0.0.1:{server.port}", serial=serial)
        evaluation = start_evaluation(serial, VERSION, real_phone=real_phone, blind_share=BLIND_SHARE)
        total = min(LIMIT or len(cases_in_set), len(cases_in_set))

        def progress(n, _):
            if n % 25 == 0 or n == total:
                print(f"  {n}/{total} judged ({time.perf_counter() - started:.0f} s)", flush=True)

        run_evaluation(evaluation, connection, limit=LIMIT, progress=progress,
                       before_case=lambda: farm.factory_reset(serial))
    if evaluation.error:
        raise SystemExit(f"the evaluation stopped: {evaluation.error}")
    cases = list(evaluation.cases.all())
    by_key = {case["key"]: case for case in cases_in_set}
    figures = judge_figures(cases)
    bench_right = sum(1 for c in cases if benchmark_verdict(c) == (SUCCESS if c.truth else FAILURE))
    right = judged = 0
    for case in cases:
        hits = step_judge_hits(case, case_view(by_key[case.key], case.steps))
        right, judged = right + hits[0], judged + hits[1]
    splits = sum(1 for c in cases if benchmark_verdict(c) == SPLIT)
    figures.update(benchmark_judge_accuracy=bench_right / len(cases) if cases else None,
                   step_judge_accuracy=right / judged if judged else None,
                   seconds=time.perf_counter() - started, benchmark_splits=splits, steps_judged=judged,
                   kinds={k: sum(1 for c in cases if c.screen_kind == k) for k in ("ordinary", "blind", "trap")},
                   truly_done=sum(1 for c in cases if c.truth))
    return figures


def fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def line(f: dict) -> str:
    return ("judges: " + " ".join(f"{name}={fmt(f[name])}" for name in (
        "sft_purity", "true_recall", "undetermined_rate", "blind_purity", "trap_purity",
        "benchmark_judge_accuracy", "step_judge_accuracy")))


def main():
    call_command("migrate", verbosity=0)
    meta, cases_in_set, _ = load_set(VERSION)
    print(f"set {VERSION}: {len(cases_in_set)} cases ({meta.get('true')} truly done), "
          f"{BLIND_SHARE:.0%} of ordinary pages blinded")
    results = {}
    for real_phone in (False, True):
        mode = "real-phone mode" if real_phone else "full farm"
        print(f"{mode}:", flush=True)
        results[mode] = measure(real_phone, cases_in_set)
        f = results[mode]
        print(f"  {f['cases']} cases ({f['truly_done']} truly done), screens {f['kinds']}, "
              f"{f['seconds']:.0f} s; benchmark splits {f['benchmark_splits']}, {f['steps_judged']} steps judged")
    print(f"full farm → {line(results['full farm'])}")
    print(line(results["real-phone mode"]))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # stopped: the evaluation says so
    try:
        main()
    finally:
        from django.db import connections

        connections.close_all()
        if DROP:
            drop_database(BASE_URL, DROP)
