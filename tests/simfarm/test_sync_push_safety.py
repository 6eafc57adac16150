"""`adb push` to the real virtual farm (a subprocess ADB server, driven by adbutils): a path that
climbs out of shared storage with '..' meets the read-only check, and a push is size-limited."""
from __future__ import annotations

import io

import adbutils
import pytest

from tests.farm import running_farm
from tests.simfarm.conftest import farm_is_built

LIMIT = 200_000


@pytest.fixture(scope="module")
def small_farm(tmp_path_factory):
    """One phone whose pushes are limited to LIMIT bytes (SIMFARM_MAX_PUSH_BYTES, read at start)."""
    if not farm_is_built():
        pytest.skip("farm.py not built yet")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SIMFARM_MAX_PUSH_BYTES", str(LIMIT))
        with running_farm(1, seed=0, log_path=tmp_path_factory.mktemp("farm") / "farm.log") as farm:
            patch.delenv("SIMFARM_MAX_PUSH_BYTES")
            device = adbutils.AdbClient(host="127.0.0.1", port=farm.port).device(serial=farm.serials[0])
            device.farm_port = farm.port
            yield device


def push(device, data: bytes, path: str):
    device.sync.push(io.BytesIO(data), path)


@pytest.mark.parametrize("path, resolved", [
    ("/sdcard/../system/evil", "/system/evil"),
    ("/sdcard/Download/../../../system/bin/sh", "/system/bin/sh"),
    ("/data/local/tmp/../../../vendor/x", "/vendor/x"),
    ("//system/evil", "/system/evil"),
])
def test_dot_dot_cannot_reach_a_read_only_root(small_farm, path, resolved):
    before = small_farm.sync.read_bytes("/system/bin/sh")
    with pytest.raises(adbutils.AdbError):  # adbd answered FAIL (Read-only file system)
        push(small_farm, b"owned", path)
    if resolved != "/system/bin/sh":
        assert not small_farm.sync.exists(resolved)
    assert small_farm.sync.read_bytes("/system/bin/sh") == before


def test_dot_dot_inside_writable_storage_still_works(small_farm):
    push(small_farm, b"fine", "/sdcard/Download/../Documents/ok.txt")
    assert small_farm.sync.read_bytes("/sdcard/Documents/ok.txt") == b"fine"


def test_a_push_over_the_limit_is_refused_and_stores_nothing(small_farm):
    with pytest.raises(adbutils.AdbError):  # FAIL (No space left on device)
        push(small_farm, b"x" * (LIMIT + 1), "/sdcard/Download/too-big.bin")
    assert not small_farm.sync.exists("/sdcard/Download/too-big.bin")
    push(small_farm, b"y" * LIMIT, "/sdcard/Download/just-fits.bin")
    assert small_farm.sync.stat("/sdcard/Download/just-fits.bin").size == LIMIT
    assert small_farm.shell("echo still serving").strip() == "still serving"


@pytest.mark.adb
def test_debians_adb_reports_why(small_farm, adb_command, tmp_path):
    local = tmp_path / "payload.bin"
    local.write_bytes(b"owned")
    port = small_farm.farm_port
    result = adb_command(port, "-s", small_farm.serial, "push", str(local), "/sdcard/../system/via-adb", check=False)
    assert result.returncode != 0 and b"Read-only file system" in result.stdout + result.stderr
    local.write_bytes(b"z" * (LIMIT + 1))
    result = adb_command(port, "-s", small_farm.serial, "push", str(local), "/sdcard/Download/big.bin", check=False)
    assert result.returncode != 0 and b"No space left on device" in result.stdout + result.stderr
