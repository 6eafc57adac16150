"""`make up`: migrate, seed, start every process of the console, stay in the foreground.

Starts Redis (when none answers at REDIS_URL), the virtual phone farm (unless ADB_SERVERS names
other phones), a Celery worker and beat, and the ASGI web server. Ctrl-C stops all of them.
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from urllib.parse import urlparse

from services import ROOT, port_open, redis_ping, start_redis, venv_bin

HOST = os.environ.get("WEB_HOST", "127.0.0.1")
PORT = int(os.environ.get("WEB_PORT", "8000"))
FARM_PORT = int(os.environ.get("FARM_PORT", "15037"))
FARM_DEVICES = os.environ.get("FARM_DEVICES", "4")
VAR = ROOT / "var"
VBENCH_FILE = ROOT.parent / "shared" / "data" / "mobilegui-vbench" / "MobileGUI-VBench.jsonl"
QUEUES = "default,collection,evaluation,repair,training,benchmark"


class Supervisor:
    def __init__(self):
        self.children = []  # (name, process)

    def start(self, name, argv, env):
        log = open(VAR / f"{name}.log", "ab")
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        self.children.append((name, process))
        print(f"  started {name} (pid {process.pid}, log var/{name}.log)", flush=True)
        return process

    def adopt(self, name, process):
        self.children.append((name, process))

    def stop_all(self):
        for _name, process in reversed(self.children):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    process.terminate()
        for name, process in reversed(self.children):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
            print(f"  stopped {name}", flush=True)

    def first_dead(self):
        for name, process in self.children:
            if process.poll() is not None:
                return name, process.returncode
        return None


def manage(*args, env):
    subprocess.run([venv_bin("python"), "manage.py", *args], cwd=ROOT, env=env, check=True)


def wait_for_ports(addresses, timeout=60):
    """Wait until every ADB server accepts connections (the farm takes a moment to start)."""
    deadline = time.monotonic() + timeout
    for address in (a.strip() for a in addresses.split(",") if a.strip()):
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


def main():
    VAR.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    supervisor = Supervisor()
    if port_open(HOST, PORT):
        sys.exit(f"Port {PORT} is already in use: is another `make up` running? "
                 f"Stop it, or set WEB_PORT to another port.")

    redis_url = env.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
    if redis_ping(redis_url):
        print(f"Redis: using {redis_url}")
    else:
        parsed = urlparse(redis_url)
        if parsed.hostname not in ("127.0.0.1", "localhost"):
            sys.exit(f"Redis at {redis_url} does not answer.")
        print(f"Redis: none answers at {redis_url}; starting one")
        supervisor.adopt("redis", start_redis(parsed.port or 6379, VAR / "redis.log"))

    try:
        print("Database: migrating")
        manage("migrate", "--no-input", "-v", "0", env=env)
        manage("seed_demo", env=env)
        if "ADB_SERVERS" not in os.environ:
            # The virtual farm's own task set, so its phones have work on a fresh install.
            manage("seed_console", "--tasks", str(ROOT / "simfarm" / "tasks" / "tasks.jsonl"), env=env)
        else:
            manage("seed_console", env=env)

        if "ADB_SERVERS" not in os.environ:
            env["ADB_SERVERS"] = f"127.0.0.1:{FARM_PORT}"
            if port_open("127.0.0.1", FARM_PORT):
                print(f"Virtual farm: something already listens on {FARM_PORT}; using it")
            else:
                supervisor.start("simfarm", [venv_bin("python"), "-m", "simfarm",
                                             "--devices", FARM_DEVICES, "--port", str(FARM_PORT)], env)
        print(f"Phones: ADB_SERVERS={env['ADB_SERVERS']}")
        wait_for_ports(env["ADB_SERVERS"])
        manage("discover_devices", env=env)
        # Benchmark versions (after the phones are known: an item no phone can run is marked so):
        # the farm's task set, frozen with a held-out third, and MobileGUI-VBench for expert review.
        seed_benchmarks = ["import_benchmark", "--seed", "--vbench", str(VBENCH_FILE)]
        if "ADB_SERVERS" not in os.environ:
            seed_benchmarks += ["--farm", str(ROOT / "simfarm" / "tasks" / "tasks.jsonl")]
        try:
            manage(*seed_benchmarks, env=env)
        except subprocess.CalledProcessError:
            print("Benchmarks: not seeded (see the message above); the console starts without them")

        # One collection queue per phone host: this worker drives the phones of every host listed.
        host_queues = ",".join("collection." + a.strip().replace(":", "-")
                               for a in env["ADB_SERVERS"].split(",") if a.strip())
        supervisor.start("worker", [venv_bin("celery"), "-A", "config", "worker", "-Q",
                                    f"{QUEUES},{host_queues}",
                                    "--concurrency", "2", "-l", "info", "-n", "console@%h"], env)
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
        while True:
            dead = supervisor.first_dead()
            if dead:
                print(f"{dead[0]} exited with code {dead[1]} (see var/{dead[0]}.log); stopping.")
                return 1
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

    # Explicit handlers: a shell that starts us in the background would otherwise ignore SIGINT.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sys.exit(main())
