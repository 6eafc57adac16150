"""`make vlm-loop`: a real vision-language model round the self-evolution loop with nobody acting (issue #32).

The tiny Qwen2.5-VL built from a config goes through the scenario of tests/training/vlm_loop.py — a
small benchmark with a held-out split, the schema-guided line's data, M0 by SFT, then the loop's rounds
(rollout → HTSC → SFT → RL iterations, every checkpoint served by a model host before it is used),
and every checkpoint evaluated on the held-out split — through what `make up` runs: a virtual farm, a
Celery worker (every queue, beat embedded), a model host (`manage.py model_host`, built-in servers), and
a fresh database (removed at the end unless VLM_LOOP_KEEP=1).

Settings: VLM_LOOP_ROUNDS (2), VLM_LOOP_ITERATIONS (RL iterations per round, 1), VLM_LOOP_GROUP (G, 4),
VLM_LOOP_QUERIES (queries per iteration, 2), VLM_LOOP_PHONES (3), VLM_LOOP_TIMEOUT_MIN (60).
Ends with one line:
`vlm_loop: rounds= iterations= unattended= serve_s_p50= rollouts_per_min= minutes=`
(serve_s: checkpoint saved → its endpoint registered and answering).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from throwaway_db import create_database, drop_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
STAMP = time.strftime("%Y%m%d-%H%M%S")
VAR = ROOT / "var" / "vlm-loop" / f"run-{STAMP}"
VAR.mkdir(parents=True, exist_ok=True)
SIZE = {name: int(os.environ.get(f"VLM_LOOP_{name.upper()}", default))
        for name, default in (("rounds", 2), ("iterations", 1), ("group", 4), ("queries", 2), ("phones", 3))}
TIMEOUT_MIN = float(os.environ.get("VLM_LOOP_TIMEOUT_MIN", "60"))
os.environ["FLYWHEEL_VAR_DIR"] = str(VAR)
os.environ["TRAINING_ROOT"] = str(VAR / "training")
os.environ["FLYWHEEL_KEY_PREFIX"] = f"vlm{os.getpid()}:"
os.environ.setdefault("COLLECTION_REDISPATCH_AFTER_S", "20")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def fresh_database() -> tuple[str, str]:
    """(DATABASE_URL for this run, the PostgreSQL database to drop afterwards or "")."""
    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith(("postgres://", "postgresql://")):
        raise SystemExit("perf/vlm_loop.py needs DATABASE_URL to name a PostgreSQL server (workers share it)")
    name = f"vlm_loop_{STAMP.replace('-', '_')}_{os.getpid()}"
    return create_database(base, name), name


BASE_URL = os.environ.get("DATABASE_URL", "")
os.environ["DATABASE_URL"], DROP = fresh_database()

import django

django.setup()

from django.conf import settings
from django.core.management import call_command

from devices.hosts import host_queue
from devices.registry import discover_devices
from simfarm.launch import die_with_parent, running_farm, stop
from tests.training.vlm_loop import VlmLoop, applied_settings, line

for key, value in applied_settings(SIZE["phones"]).items():  # this process and the ones it starts
    os.environ[key] = value
    setattr(settings, key, int(value) if value.isdigit() else value)

QUEUES = "default,collection,evaluation,repair,training,benchmark"


def start(argv, log, **env):
    return subprocess.Popen(argv, cwd=ROOT, env=dict(os.environ, **env), stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=die_with_parent)


def main():
    call_command("migrate", verbosity=0)
    with running_farm(devices=SIZE["phones"], log_path=VAR / "farm.log") as farm, \
            open(VAR / "worker.log", "wb") as worker_log, open(VAR / "model-host.log", "wb") as host_log:
        os.environ["ADB_SERVERS"] = farm.address
        settings.ADB_SERVERS = [farm.address]
        discover_devices([farm.address])
        worker = start([str(ROOT / ".venv/bin/celery"), "-A", "config", "worker", "-B", "-s", str(VAR / "beat"),
                        "--concurrency", "2", "-l", "warning", "-Q", f"{QUEUES},{host_queue(farm.address)}",
                        "-n", f"vlm-{os.getpid()}@%h", "--without-mingle", "--without-gossip"], worker_log)
        host = start([str(ROOT / ".venv/bin/python"), "manage.py", "model_host", "--name", f"vlm-{os.getpid()}",
                      "--interval", "1"], host_log, MODEL_HOST_ENGINE="auto", MODEL_HOST_KEEP_WARM="2",
                     MODEL_HOST_PORT=os.environ.get("VLM_LOOP_PORT", "8300"))
        try:
            scenario = VlmLoop(VAR / "scenario", phones=SIZE["phones"], rounds=SIZE["rounds"],
                               rl_iterations=SIZE["iterations"], group=SIZE["group"], queries=SIZE["queries"],
                               timeout_s=TIMEOUT_MIN * 60,
                               say=lambda text: print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True))
            figures = scenario.run()
        finally:
            stop(host, timeout=30)
            stop(worker, timeout=30)
    for model in scenario.lineage:
        evaluation = scenario.evaluations[model.name]
        sr = (evaluation.scores or {}).get("sr")
        print(f"{model.name:<40} held-out SR {'n/a' if sr is None else sr} ({evaluation.status})")
    (VAR / "figures.json").write_text(json.dumps(figures, indent=2))
    print(line(figures))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: still drop the database
    try:
        main()
    finally:
        from django.db import connections

        connections.close_all()
        if os.environ.get("VLM_LOOP_KEEP") != "1":
            drop_database(BASE_URL, DROP)
            shutil.rmtree(VAR, ignore_errors=True)
