"""Start the virtual phone farm as a real ADB server in a subprocess, for tests and perf scripts.

    from simfarm.launch import running_farm
    with running_farm(devices=4, seed=0) as farm:
        farm.address, farm.serials   # "127.0.0.1:PORT", ["sim-0001", ...]

Also `stop(process)` (terminate, then kill) and `die_with_parent` (a Popen preexec_fn: the child
gets SIGTERM when its parent dies), for the other processes those scripts start beside the farm.
"""
from __future__ import annotations

import ctypes
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # where `python -m simfarm` finds the package


def stop(process, timeout: float = 15) -> None:
    """Terminate a child process, killing it when it does not stop within `timeout` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()


def die_with_parent() -> None:
    """preexec_fn: the subprocess gets SIGTERM if the process that started it dies (no orphans)."""
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


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the ADB server closed the connection early")
        data += chunk
    return data


def list_serials(port: int, host: str = "127.0.0.1", timeout: float = 10) -> list[str]:
    """The serials an ADB server on host:port lists (`host:devices`), in its order."""
    request = b"host:devices"
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(b"%04x" % len(request) + request)
        status = _read_exactly(sock, 4)
        length = int(_read_exactly(sock, 4), 16)
        body = _read_exactly(sock, length).decode("utf-8", "replace")
    if status != b"OKAY":
        raise RuntimeError(f"the ADB server refused host:devices: {body}")
    return [line.split("\t")[0] for line in body.splitlines() if line.strip()]


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
        yield RunningFarm(port=port, process=process, serials=list_serials(port))
    finally:
        stop(process, timeout=10)
        if log_path:
            log.close()
