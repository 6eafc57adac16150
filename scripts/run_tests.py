"""`make test`: run the whole suite against the real services; `make test-fast` (--fast) only the
tiers that start no process (pure and database, see tests/conftest.py).

PostgreSQL and Redis are used when DATABASE_URL / REDIS_URL are set; otherwise SQLite and a Redis
started here for the session (and stopped afterwards).
"""
import os
import subprocess
import sys

from services import ROOT, free_port, start_redis, venv_bin


def static_checks():
    """The architecture and lint rules, before any test runs: a violation fails with its reason."""
    checks = [("lint-imports", [venv_bin("lint-imports")],
               "an import crosses a layer: see the broken contract above (contracts: pyproject.toml)"),
              ("ruff", [venv_bin("ruff"), "check", "."], "ruff found problems (rules: pyproject.toml)")]
    for name, command, meaning in checks:
        print(f"make test: {name}", flush=True)
        if subprocess.call(command, cwd=ROOT) != 0:
            print(f"make test: {name} failed: {meaning}", file=sys.stderr, flush=True)
            return 1
    return 0


FAST = "not farm and not worker and not browser and not slow"  # the tiers tests/conftest.py applies


def main(argv):
    fast = "--fast" in argv
    argv = [arg for arg in argv if arg != "--fast"]
    if static_checks():
        return 1
    env = dict(os.environ)
    redis_process = None
    if not env.get("REDIS_URL"):
        port = free_port()
        (ROOT / "var").mkdir(exist_ok=True)
        redis_process = start_redis(port, ROOT / "var" / "test-redis.log")
        env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
    print(f"make test: database {env.get('DATABASE_URL', 'SQLite (var/)')}, redis {env['REDIS_URL']}",
          flush=True)
    try:
        # pytest-xdist, twice as many workers as cores: most of a process test's time is spent
        # waiting on the farm, a worker or a browser, which leaves a core idle at one per core (a third
        # of the CPU went unused). Work stealing evens out the few long tests. The whole suite names
        # its 25 slowest tests.
        tiers = ["-m", FAST] if fast else ["--durations=25"]
        tiers += ["-n", os.environ.get("TEST_WORKERS", str(2 * (os.cpu_count() or 1))), "--dist", "worksteal"]
        return subprocess.call([venv_bin("pytest"), *tiers, *argv], cwd=ROOT, env=env)
    finally:
        if redis_process:
            redis_process.terminate()
            redis_process.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
