"""`make up` and the deploy roles: one command each, configured by the environment only.

    scripts/up.py               every role on this machine (`make up`): Redis when none answers,
                                the virtual farm, a worker on every queue, beat, the web server
                                and a model host
    scripts/up.py central       web + beat; migrates and seeds (PostgreSQL and Redis are the operator's)
    scripts/up.py phone-host    the collection worker of the ADB server beside it (a virtual farm too
                                when FARM_DEVICES is set); discovers and registers its phones
    scripts/up.py worker        evaluation, repair, training and benchmark queues
    scripts/up.py model-host    serves trained checkpoints (vLLM on a GPU, else the built-in server)

Each checks the database and Redis first and exits non-zero saying what is wrong, never half-started.
It stays in the foreground and restarts a process that dies, with backoff (1 s, doubling to 60 s;
reset once it has run a minute), instead of stopping the console. Ctrl-C stops all of them.
"""
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from services import ROOT, port_open, redis_ping, start_redis, venv_bin

HOST = os.environ.get("WEB_HOST", "127.0.0.1")
PORT = int(os.environ.get("WEB_PORT", "8000"))
FARM_PORT = int(os.environ.get("FARM_PORT", "15037"))
FARM_DEVICES = os.environ.get("FARM_DEVICES", "4")
VAR = Path(os.environ.get("FLYWHEEL_VAR_DIR", ROOT / "var"))
VBENCH_FILE = ROOT.parent / "shared" / "data" / "mobilegui-vbench" / "MobileGUI-VBench.jsonl"
FARM_TASKS = ROOT / "simfarm" / "tasks" / "tasks.jsonl"
FARM_RECIPES = ROOT / "simfarm" / "setup_recipes.jsonl"  # setup recipes of the farm's prerequisites
WORK_QUEUES = "default,collection,evaluation,repair,training,benchmark"
ROLES = ("all", "central", "phone-host", "worker", "model-host")
REFUSED = 3  # a worker's exit code when its phone host is served by a live worker elsewhere
MAX_BACKOFF_S = 60.0
STEADY_AFTER_S = 60.0


class Child:
    def __init__(self, name, start):
        self.name, self._start = name, start
        self.process, self.started_at, self.backoff_s, self.restart_at, self.restarts = None, 0.0, 1.0, None, 0

    def start(self):
        self.process, self.started_at, self.restart_at = self._start(), time.monotonic(), None
        return self.process


class Supervisor:
    """Starts processes and keeps them running: one that dies is started again after a backoff."""

    def __init__(self):
        self.children = []

    def start(self, name, argv, env):
        def launch():
            log = open(VAR / f"{name}.log", "ab")
            return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        return self.keep(name, launch)

    def keep(self, name, launch):
        child = Child(name, launch)
        self.children.append(child)
        process = child.start()
        print(f"  started {name} (pid {process.pid}, log var/{name}.log)", flush=True)
        return process

    def tend(self):
        """Restart what died; returns (name, code) of a process that must not be restarted."""
        now = time.monotonic()
        for child in self.children:
            code = child.process.poll()
            if code is None:
                if now - child.started_at >= STEADY_AFTER_S:
                    child.backoff_s = 1.0
                continue
            if code == REFUSED:
                return child.name, code
            if child.restart_at is None:
                child.restart_at = now + child.backoff_s
                print(f"{child.name} exited with code {code} (see var/{child.name}.log); "
                      f"restarting in {child.backoff_s:.0f} s", flush=True)
                child.backoff_s = min(MAX_BACKOFF_S, child.backoff_s * 2)
            elif now >= child.restart_at:
                child.restarts += 1
                process = child.start()
                print(f"  restarted {child.name} (pid {process.pid}, restart {child.restarts})", flush=True)
        return None

    def stop_all(self):
        for child in reversed(self.children):
            if child.process.poll() is None:
                try:
                    os.killpg(child.process.pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    child.process.terminate()
        for child in reversed(self.children):
            try:
                child.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.process.kill()
            print(f"  stopped {child.name}", flush=True)


def manage(*args, env):
    subprocess.run([venv_bin("python"), "manage.py", *args], cwd=ROOT, env=env, check=True)


def wait_for_ports(addresses, timeout=60):
    """Wait until every ADB server accepts connections (a farm takes a moment to start)."""
    deadline = time.monotonic() + timeout
    for address in addresses:
        host, _, port = address.rpartition(":")
        while not port_open(host or "127.0.0.1", int(port)) and time.monotonic() < deadline:
            time.sleep(0.2)


def wait_for_health(url, timeout=60):
    deadline, body = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                body = json.loads(response.read())
                if body.get("status") == "ok":
                    return body
        except Exception as error:  # not up yet
            body = getattr(error, "read", lambda: b"")()
        time.sleep(1)
    return body


def ensure_redis(env, supervisor):
    redis_url = env.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
    if redis_ping(redis_url):
        return
    parsed = urlparse(redis_url)
    if parsed.hostname not in ("127.0.0.1", "localhost"):
        sys.exit(f"Redis at {parsed.hostname}:{parsed.port or 6379} does not answer (REDIS_URL).")
    print(f"Redis: none answers at {parsed.hostname}:{parsed.port or 6379}; starting one")
    supervisor.keep("redis", lambda: start_redis(parsed.port or 6379, VAR / "redis.log"))


def start_worker(supervisor, env, name, queues, node):
    supervisor.start(name, [venv_bin("celery"), "-A", "config", "worker", "-Q", queues,
                            "--concurrency", os.environ.get("WORKER_CONCURRENCY", "2"), "-l", "info",
                            "-n", node], env)


def start_beat_and_web(supervisor, env):
    supervisor.start("beat", [venv_bin("celery"), "-A", "config", "beat", "-l", "info",
                              "--schedule", str(VAR / "celerybeat-schedule")], env)
    supervisor.start("web", [venv_bin("uvicorn"), "config.asgi:application", "--host", HOST,
                             "--port", str(PORT), "--timeout-graceful-shutdown", "5",
                             # Screens are JPEG and H.264: deflating them costs the web process
                             # ~1 ms of CPU per frame and saves nothing.
                             "--ws-per-message-deflate", "false"], env)
    url = f"http://{HOST}:{PORT}/"
    health = wait_for_health(url + "healthz")
    print("\nHealth:", json.dumps(health, indent=1) if not isinstance(health, dict)
          or health.get("status") != "ok" else "all green")
    print(f"\nThe flywheel console is up at {url}")
    print("Logins: see above, or var/demo-credentials.txt. Ctrl-C stops everything.\n", flush=True)


def seed_benchmarks(env, with_farm_tasks):
    # After the phones are known where possible: an item no phone can run is marked so.
    command = ["import_benchmark", "--seed", "--vbench", str(VBENCH_FILE)]
    if with_farm_tasks:
        command += ["--farm", str(FARM_TASKS)]
    try:
        manage(*command, env=env)
    except subprocess.CalledProcessError:
        print("Benchmarks: not seeded (see the message above); the console starts without them")


def role_all(supervisor, env):
    """One machine: every role, the virtual farm unless ADB_SERVERS names other phones."""
    if port_open(HOST, PORT):
        sys.exit(f"Port {PORT} is already in use: is another `make up` running? "
                 f"Stop it, or set WEB_PORT to another port.")
    ensure_redis(env, supervisor)
    print("Database: migrating")
    manage("migrate", "--no-input", "-v", "0", env=env)
    manage("seed_demo", env=env)
    own_farm = "ADB_SERVERS" not in os.environ
    # The virtual farm's own task set, so its phones have work on a fresh install.
    manage("seed_console", *(["--tasks", str(FARM_TASKS), "--recipes", str(FARM_RECIPES)] if own_farm else []), env=env)
    if own_farm:
        env["ADB_SERVERS"] = f"127.0.0.1:{FARM_PORT}"
        if port_open("127.0.0.1", FARM_PORT):
            print(f"Virtual farm: something already listens on {FARM_PORT}; using it")
        else:
            supervisor.start("simfarm", [venv_bin("python"), "-m", "simfarm", "--devices", FARM_DEVICES,
                                         "--port", str(FARM_PORT)], env)
    addresses = [entry.partition("=")[2] or entry for entry in env["ADB_SERVERS"].split(",") if entry.strip()]
    print(f"Phones: ADB_SERVERS={env['ADB_SERVERS']}")
    wait_for_ports(addresses)
    manage("discover_devices", env=env)
    seed_benchmarks(env, with_farm_tasks=own_farm)
    # This one worker is every phone host's worker too: one collection queue per ADB server.
    names = [entry.partition("=")[0].strip() for entry in env["ADB_SERVERS"].split(",") if entry.strip()]
    host_queues = ",".join("collection." + name.replace(":", "-") for name in names)
    start_worker(supervisor, env, "worker", f"{WORK_QUEUES},{host_queues}", "console@%h")
    start_model_host(supervisor, env)
    start_beat_and_web(supervisor, env)


def preflight(env, *args):
    try:
        manage("preflight", *args, env=env)
    except subprocess.CalledProcessError as error:
        sys.exit(error.returncode or 1)


def role_central(supervisor, env):
    if port_open(HOST, PORT):
        sys.exit(f"Port {PORT} is already in use: set WEB_PORT to another port.")
    ensure_redis(env, supervisor)
    preflight(env, "--no-migration-check")
    print("Database: migrating")
    manage("migrate", "--no-input", "-v", "0", env=env)
    manage("seed_demo", env=env)
    farm_tasks = os.environ.get("SEED_FARM_TASKS") == "1"  # phone hosts run virtual farms
    manage("seed_console", *(["--tasks", str(FARM_TASKS), "--recipes", str(FARM_RECIPES)] if farm_tasks else []),
           env=env)
    seed_benchmarks(env, with_farm_tasks=farm_tasks)
    start_beat_and_web(supervisor, env)


def phone_host_name():
    return os.environ.get("PHONE_HOST_NAME") or socket.gethostname()


def role_phone_host(supervisor, env):
    name = phone_host_name()
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}", name):
        sys.exit(f"PHONE_HOST_NAME {name!r}: letters, digits, '.', '_', ':' and '-' only")
    adb_server = os.environ.get("ADB_SERVER", "127.0.0.1:5037")
    adb_host, _, adb_port = adb_server.rpartition(":")
    preflight(env, "--phone-host", name)
    if "FARM_DEVICES" in os.environ and not port_open(adb_host or "127.0.0.1", int(adb_port)):
        # An ADB server never listens beyond its host: the farm binds the loopback address given.
        supervisor.start("simfarm", [venv_bin("python"), "-m", "simfarm", "--devices", FARM_DEVICES,
                                     "--host", adb_host or "127.0.0.1", "--port", adb_port], env)
        wait_for_ports([adb_server])
    if not port_open(adb_host or "127.0.0.1", int(adb_port)):
        sys.exit(f"No ADB server answers at {adb_server} (ADB_SERVER): start `adb start-server` "
                 f"or set FARM_DEVICES to run a virtual farm here.")
    env["ADB_SERVERS"] = f"{name}={adb_server}"
    print(f"Phone host {name!r}: ADB server {adb_server}")
    manage("discover_devices", env=env)
    start_worker(supervisor, env, "phone-host", "collection." + name.replace(":", "-"),
                 f"phone-host-{re.sub(r'[^A-Za-z0-9_.-]', '-', name)}@%h")
    print(f"\nPhone host {name!r} is serving. Ctrl-C stops it.\n", flush=True)


def role_worker(supervisor, env):
    preflight(env)
    start_worker(supervisor, env, "worker", WORK_QUEUES, "worker@%h")
    print("\nThe worker is serving. Ctrl-C stops it.\n", flush=True)


def start_model_host(supervisor, env):
    supervisor.start("model-host", [venv_bin("python"), "manage.py", "model_host"], env)


def role_model_host(supervisor, env):
    preflight(env)
    start_model_host(supervisor, env)
    print("\nThe model host is serving trained checkpoints as they need it. Ctrl-C stops it.\n", flush=True)


def warn_without_training_extras(role):
    """`make up`, central and worker install them; started some other way, say what the pages will say."""
    if role != "phone-host" and any(importlib.util.find_spec(name) is None for name in ("torch", "transformers")):
        print("Training extras: not installed here; the demo and training pages cannot launch until you run "
              "`make install-training`", flush=True)


def main(role):
    VAR.mkdir(exist_ok=True)
    warn_without_training_extras(role)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    supervisor = Supervisor()
    try:
        {"all": role_all, "central": role_central, "phone-host": role_phone_host, "worker": role_worker,
         "model-host": role_model_host}[role](supervisor, env)
        while True:
            refused = supervisor.tend()
            if refused:
                print(f"{refused[0]} refused to start (code {refused[1]}, see var/{refused[0]}.log); stopping.")
                return refused[1]
            time.sleep(1)
    except KeyboardInterrupt:
        print("\nStopping…", flush=True)
        return 0
    except subprocess.CalledProcessError as error:
        print(f"Setup step failed: {' '.join(error.cmd)}")
        return 1
    finally:
        supervisor.stop_all()


if __name__ == "__main__":
    def stop(*_):
        raise KeyboardInterrupt

    role = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FLYWHEEL_ROLE", "all")
    if role not in ROLES:
        sys.exit(f"unknown role {role!r}: one of {', '.join(ROLES)}")
    # Explicit handlers: a shell that starts us in the background would otherwise ignore SIGINT.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sys.exit(main(role))
