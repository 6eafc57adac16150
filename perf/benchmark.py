"""Benchmark: evaluation runs on the virtual farm (issue #14's measured figures).

Starts what it needs: a virtual farm with 4 phones, one Celery worker on that host's collection
queue (the benchmark's rollouts run there like every line's), and a database (BENCH_DATABASE_URL,
else a throwaway SQLite). Redis comes from REDIS_URL under a private key prefix.

Imports the farm's task set as a frozen benchmark version, evaluates the built-in offline policy
on all of it (the goal alone in the prompt), then re-judges the finished run from what inference
stored, without any inference.

    tasks_per_min_4   benchmark items finished per minute on 4 phones (launch → run done)
    judge_agreement   share of judged rollouts on which every judge agreed (not sent to an expert)
    rejudge_s_100     seconds to re-judge 100 finished trajectories (measured over the run's, scaled)

Ends with one line: `benchmark: tasks_per_min_4=<n> judge_agreement=<n> rejudge_s_100=<n>`.
"""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = tempfile.mkdtemp(prefix="bench-benchmark-")
os.environ["FLYWHEEL_VAR_DIR"] = VAR
os.environ["FLYWHEEL_KEY_PREFIX"] = f"bench{os.getpid()}:"
os.environ["ECDM_AUTOMATIC"] = "0"
os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{VAR}/bench.sqlite3"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.conf import settings
from django.core.management import call_command

from benchmark.imports import import_farm_tasks
from benchmark.infer import launch_evaluation
from benchmark.judges import rejudge_evaluation
from benchmark.models import EvalResult, EvalRun
from devices.hosts import host_queue
from devices.registry import discover_devices
from flywheel.policies import default_policy_version
from flywheel.queries.recipes import import_recipes
from simfarm.launch import die_with_parent, running_farm

TASKS = ROOT / "simfarm" / "tasks" / "tasks.jsonl"
RECIPES = ROOT / "simfarm" / "setup_recipes.jsonl"
PHONES = 4


def start_worker(address, log):
    env = dict(os.environ, ADB_SERVERS=address)
    return subprocess.Popen(
        [str(ROOT / ".venv/bin/celery"), "-A", "config", "worker", "--pool", "solo", "-l", "warning",
         "-Q", host_queue(address), "-n", f"bench-{address.replace(':', '-')}@%h",
         "--without-mingle", "--without-gossip"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent)


def main():
    call_command("migrate", verbosity=0)
    with running_farm(devices=PHONES, log_path=Path(VAR) / "farm.log") as farm, \
            open(Path(VAR) / "worker.log", "wb") as log:
        settings.ADB_SERVERS = [farm.address]
        os.environ["ADB_SERVERS"] = farm.address
        discover_devices([farm.address])
        benchmark = import_farm_tasks(TASKS)
        import_recipes(RECIPES.read_text(encoding="utf-8"))   # what the tasks' prerequisites need
        worker = start_worker(farm.address, log)
        try:
            started = time.perf_counter()
            evaluation = launch_evaluation(benchmark, default_policy_version(), split="all",
                                           config={"phones": PHONES, "max_steps": 15})
            last = -1
            while EvalRun.objects.get(pk=evaluation.pk).status not in ("done", "cancelled", "failed"):
                done = EvalRun.objects.get(pk=evaluation.pk).completed
                if done != last:
                    print(f"  {done}/{evaluation.total} items", flush=True)
                    last = done
                time.sleep(1.0)
            minutes = (time.perf_counter() - started) / 60
        finally:
            worker.terminate()
            worker.wait(timeout=30)
        evaluation.refresh_from_db()
        scores = evaluation.scores
        print(f"evaluated {evaluation.completed} items in {minutes:.2f} min: SR {scores['sr']} over "
              f"{scores['scored']} scored, {scores['waiting_for_expert']} split, not scored {scores['not_scored']}")
        finished = EvalResult.objects.filter(eval_run=evaluation, superseded=False,
                                             evidence__stop_kind="finished").count()
        report = rejudge_evaluation(evaluation)
        rejudge_s_100 = report["seconds"] * 100 / max(report["judged"], 1)
        print(f"re-judged {report['judged']} of {finished} finished trajectories in {report['seconds']:.2f} s")
    agreement = scores["judge_agreement"]
    print(f"benchmark: tasks_per_min_4={evaluation.completed / minutes:.1f} "
          f"judge_agreement={agreement if agreement is not None else 'n/a'} rejudge_s_100={rejudge_s_100:.2f}")


if __name__ == "__main__":
    main()
