"""Start the virtual phone farm as a real ADB server in a subprocess (for any test package)."""
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class RunningFarm:
    port: int
    process: subprocess.Popen
    serials: list

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"


@contextmanager
def running_farm(devices=3, seed=7, log_path=None, timeout=120):
    """Yield a RunningFarm on a free port; stop it afterwards."""
    log = open(log_path, "w") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "devices.simulator", "--devices", str(devices), "--port", "0",
         "--seed", str(seed)], cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        port, deadline = None, time.monotonic() + timeout
        while port is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"the farm exited with {process.wait()}; see {log_path}")
            match = re.search(r"listening on port (\d+)", line)
            port = int(match.group(1)) if match else None
        if port is None:
            raise TimeoutError("the farm did not announce its port")
        import adbutils

        serials = [d.serial for d in adbutils.AdbClient(host="127.0.0.1", port=port).list()]
        yield RunningFarm(port=port, process=process, serials=serials)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        if log_path:
            log.close()
