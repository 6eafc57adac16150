"""Fixtures that start the virtual farm's ADB server on a free port and stop it afterwards.

- `fake_server`: the server on a background thread over two FakePhones (protocol unit tests).
- `farm_server`: `python -m simfarm --port 0` in a subprocess over the REAL Farm
  (fidelity tests); skipped with "farm.py not built yet" while the phones do not exist.
- `adb_command`: runs Debian's `adb -P PORT ...` against a server, with HOME in a temp dir.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from simfarm.serve import ServerThread
from tests.farm import running_farm
from tests.simfarm.fakes import FakeFarm

REPO_ROOT = Path(__file__).resolve().parents[2]
FARM_DEVICES = 3
FARM_SEED = 7


def farm_is_built() -> bool:
    return importlib.util.find_spec("simfarm.farm") is not None


@pytest.fixture
def fake_server():
    with ServerThread(FakeFarm(devices=2)) as server:
        yield server


@pytest.fixture(scope="session")
def farm_server(tmp_path_factory):
    if not farm_is_built():
        pytest.skip("farm.py not built yet")
    with running_farm(FARM_DEVICES, FARM_SEED, log_path=tmp_path_factory.mktemp("farm") / "farm.log") as farm:
        yield farm


@pytest.fixture(scope="session")
def adb_binary():
    path = shutil.which("adb")
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("Debian's adb is required in CI (apt-get install adb)")
        pytest.skip("Debian's adb is not installed (apt-get install adb)")
    return path


@pytest.fixture
def adb_command(adb_binary, tmp_path):
    """adb_command(port, *args, check=True) -> CompletedProcess (bytes stdout/stderr)."""
    home = tmp_path / "adb-home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), ADB_VENDOR_KEYS=str(home))
    env.pop("ANDROID_SERIAL", None)

    def run(port: int, *args: str, check: bool = True, timeout: float = 30):
        result = subprocess.run([adb_binary, "-P", str(port), *args], env=env,
                                stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"adb {' '.join(args)} failed ({result.returncode}): "
                                 f"{result.stdout[-2000:]!r} {result.stderr[-2000:]!r}")
        return result

    return run


def raw_request(port: int, payload: bytes, read_until_close: bool = True,
                timeout: float = 5) -> bytes:
    """Send raw bytes to the server and return everything it answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(payload)
        chunks = []
        while read_until_close:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def smart_request(text: str) -> bytes:
    data = text.encode()
    return b"%04x" % len(data) + data
