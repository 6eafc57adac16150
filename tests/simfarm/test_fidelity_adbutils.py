"""adbutils 2.x, unchanged, drives the REAL virtual farm through its ADB server."""
from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading

import adbutils
import pytest

from tests.simfarm.conftest import FARM_DEVICES, smart_request
from tests.simfarm.helpers import centre, clickable_centres, editable_nodes, nodes, png_size


@pytest.fixture
def client(farm_server) -> adbutils.AdbClient:
    return adbutils.AdbClient(host="127.0.0.1", port=farm_server.port)


@pytest.fixture
def device(client, farm_server) -> adbutils.AdbDevice:
    phone = client.device(farm_server.serials[0])
    phone.keyevent("HOME")
    yield phone
    phone.keyevent("HOME")


def screenshot_bytes(device) -> bytes:
    return device.shell(["screencap", "-p"], encoding=None)


def test_device_list(client, farm_server):
    assert [d.serial for d in client.device_list()] == farm_server.serials
    assert len(farm_server.serials) == FARM_DEVICES
    infos = client.list(extended=True)
    assert all(info.tags.get("model") for info in infos)


def test_shell_and_shell2_exit_codes(device):
    assert device.shell("echo hello") == "hello"
    ok = device.shell2("echo hi")
    assert (ok.returncode, ok.output) == (0, "hi\n")
    missing = device.shell2("frobnicate")
    assert missing.returncode == 127 and "frobnicate: not found" in missing.output
    missing_v2 = device.shell2("frobnicate", v2=True)
    assert (missing_v2.returncode, missing_v2.stdout) == (127, "")
    assert missing_v2.stderr == "/system/bin/sh: frobnicate: not found\n"


def test_screenshot_and_window_size_agree(device):
    image = device.screenshot(error_ok=False)
    size = device.window_size()
    assert image.size == (size.width, size.height)
    assert png_size(screenshot_bytes(device)) == image.size


def test_click_changes_the_screen(device):
    targets = clickable_centres(device.dump_hierarchy())
    assert targets
    before = screenshot_bytes(device)
    device.click(*targets[0])
    assert screenshot_bytes(device) != before


def test_swipe_and_keyevent(device):
    size = device.window_size()
    device.swipe(size.width // 2, size.height * 3 // 4, size.width // 2, size.height // 4, 0.2)
    assert png_size(screenshot_bytes(device)) == (size.width, size.height)
    device.keyevent("HOME")
    home = screenshot_bytes(device)
    device.keyevent("HOME")
    assert screenshot_bytes(device) == home  # HOME on the home screen changes nothing


def test_app_start_current_stop_clear(device):
    packages = [p for p in device.list_packages() if "launcher" not in p]
    assert packages, "the phone has no apps installed"
    package = packages[0]
    device.app_start(package)
    assert device.app_current().package == package
    device.app_stop(package)
    assert device.app_current().package != package
    device.app_clear(package)
    device.app_start(package)
    assert device.app_current().package == package


def test_dump_hierarchy(device):
    xml_text = device.dump_hierarchy()
    assert xml_text.startswith("<?xml") and len(nodes(xml_text)) > 1


@pytest.mark.parametrize("text", ["héllo wörld 你好", "it's \"quoted\"", "100%s done & more; $HOME"])
def test_send_keys_types_exactly_that_text(device, text):
    field = _focus_a_text_field(device)
    device.send_keys(text)
    typed = [node.get("text") for node in editable_nodes(device.dump_hierarchy())]
    expected = text.replace("%s", " ")  # Android's `input text` types %s as a space
    assert any(expected in (value or "") for value in typed), (field, typed)


def _focus_a_text_field(device):
    """Open apps until one shows an EditText, tap it, and return its resource id."""
    for package in [p for p in device.list_packages() if "launcher" not in p]:
        device.app_start(package)
        fields = editable_nodes(device.dump_hierarchy())
        if fields:
            device.click(*centre(fields[0]))
            return fields[0].get("resource-id")
    pytest.fail("no installed app shows a text field on its first page")


def test_sync_push_pull_stat_list(client, farm_server, tmp_path):
    sync = client.device(farm_server.serials[1]).sync
    payload = os.urandom(150_000)
    sync.push(payload, "/data/local/tmp/fidelity/blob.bin", mode=0o644)
    assert sync.read_bytes("/data/local/tmp/fidelity/blob.bin") == payload
    assert sync.stat("/data/local/tmp/fidelity/blob.bin").size == len(payload)
    assert "blob.bin" in [entry.path for entry in sync.list("/data/local/tmp/fidelity")]
    assert sync.pull("/data/local/tmp/fidelity/blob.bin", tmp_path / "b") == len(payload)
    assert not sync.exists("/data/local/tmp/fidelity/none")
    with pytest.raises(adbutils.AdbError, match="No such file"):
        sync.read_bytes("/data/local/tmp/fidelity/none")


def test_client_vanishing_mid_push_leaves_others_working(client, farm_server):
    serial = farm_server.serials[1]
    path = "/data/local/tmp/half.bin"
    sock = socket.create_connection(("127.0.0.1", farm_server.port), timeout=5)
    sock.sendall(smart_request(f"host:tport:serial:{serial}"))
    assert sock.recv(12)[:4] == b"OKAY"
    sock.sendall(smart_request("sync:"))
    assert sock.recv(4) == b"OKAY"
    request = f"{path},33188".encode()
    sock.sendall(b"SEND" + struct.pack("<I", len(request)) + request
                 + b"DATA" + struct.pack("<I", 60_000) + b"x" * 1000)
    sock.close()  # gone mid-DATA
    device = client.device(serial)
    assert device.shell("echo after") == "after"
    assert not device.sync.exists(path)


def test_parallel_clients_on_every_phone(client, farm_server):
    errors = []

    def work(serial):
        try:
            device = client.device(serial)
            for _ in range(3):
                assert png_size(screenshot_bytes(device))[0] > 0
                assert device.shell("echo ok") == "ok"
        except Exception as error:  # collected for the main thread to report
            errors.append(error)

    threads = [threading.Thread(target=work, args=(serial,)) for serial in farm_server.serials * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []


def test_python_m_simfarm_serves_until_killed(tmp_path, own_processes):
    """`python -m simfarm --port 0` serves the farm without any database and stops on kill."""
    from tests.farm import _announced_port, die_with_parent
    from tests.simfarm.conftest import REPO_ROOT, farm_is_built

    if not farm_is_built():
        pytest.skip("farm.py not built yet")
    env = dict(os.environ, DATABASE_URL="sqlite:////nonexistent/dir/never.sqlite3")
    log_path = tmp_path / "simfarm.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "simfarm", "--devices", "2", "--port", "0"],
            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
            preexec_fn=die_with_parent)
        try:
            port = _announced_port(process, log_path, timeout=120)
            client = adbutils.AdbClient(host="127.0.0.1", port=port)
            assert len(client.device_list()) == 2
            client.server_kill()
            assert process.wait(timeout=15) == 0
        finally:
            if process.poll() is None:
                process.kill()
