"""Start the virtual phone farm as a real ADB server in a subprocess (for any test package)."""
import ctypes
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stop(process, timeout: float = 15) -> None:
    """Terminate a child process, killing it when it does not stop within `timeout` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()


def die_with_parent() -> None:
    """preexec_fn: the farm subprocess gets SIGTERM if the test process dies (no orphans)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass  # not Linux: teardown still terminates it on a normal exit


@dataclass
class RunningFarm:
    port: int
    process: subprocess.Popen
    serials: list

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"


def _announced_port(process, log_path, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        match = re.search(r"listening on port (\d+)", line)
        if match:
            return int(match.group(1))
    log = Path(log_path).read_text()[-3000:] if log_path else ""
    raise RuntimeError(f"the farm did not start; its log says:\n{log}")


@contextmanager
def running_farm(devices=3, seed=7, log_path=None, timeout=120, extra_args=()):
    """Yield a RunningFarm on a free port; stop it afterwards."""
    log = open(log_path, "w") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "simfarm", "--devices", str(devices), "--port", "0",
         "--seed", str(seed), *extra_args], cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
        preexec_fn=die_with_parent)
    try:
        port = _announced_port(process, log_path, timeout)
        import adbutils

        serials = [d.serial for d in adbutils.AdbClient(host="127.0.0.1", port=port).list()]
        yield RunningFarm(port=port, process=process, serials=serials)
    finally:
        stop(process, timeout=10)
        if log_path:
            log.close()
