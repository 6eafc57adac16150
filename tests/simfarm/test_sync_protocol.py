"""The `sync:` service byte by byte (raw sockets against FakePhones)."""
from __future__ import annotations

import errno
import socket
import stat
import struct
import subprocess
import sys

import pytest

from simfarm.sync_protocol import STAT_V2
from tests.simfarm.conftest import REPO_ROOT, farm_is_built, smart_request
from tests.simfarm.test_adb_protocol import (
    OTHER,
    SERIAL,
    assert_still_serving,
    client_for,
    open_transport,
    recv_all,
    recv_exactly,
)


@pytest.fixture
def sync_socket(fake_server):
    sock = open_transport(fake_server.port)
    sock.sendall(smart_request("sync:"))
    assert recv_exactly(sock, 4) == b"OKAY"
    with sock:
        yield sock


def request(sock, request_id: bytes, path: str) -> None:
    encoded = path.encode()
    sock.sendall(request_id + struct.pack("<I", len(encoded)) + encoded)


def read_fail(sock) -> str:
    assert recv_exactly(sock, 4) == b"FAIL"
    (length,) = struct.unpack("<I", recv_exactly(sock, 4))
    return recv_exactly(sock, length).decode()


def push(sock, path_and_mode: str, data: bytes, mtime: int = 1_700_000_000) -> None:
    request(sock, b"SEND", path_and_mode)
    sock.sendall(b"DATA" + struct.pack("<I", len(data)) + data + b"DONE" + struct.pack("<I", mtime))


def test_stat_v1_and_v2_of_files_and_missing_paths(sync_socket, fake_server):
    fake_server.farm.phones[SERIAL].fs.write("/sdcard/a.txt", b"12345", mtime=99)
    request(sync_socket, b"STAT", "/sdcard/a.txt")
    assert recv_exactly(sync_socket, 16) == b"STAT" + struct.pack("<III", 0o100644, 5, 99)
    request(sync_socket, b"STAT", "/sdcard/missing")
    assert recv_exactly(sync_socket, 16) == b"STAT" + bytes(12)
    request(sync_socket, b"STA2", "/sdcard/a.txt")
    reply = recv_exactly(sync_socket, 4 + STAT_V2.size)
    fields = STAT_V2.unpack(reply[4:])
    assert reply[:4] == b"STA2" and fields[0] == 0 and fields[3] == 0o100644 and fields[7] == 5
    request(sync_socket, b"LST2", "/sdcard/missing")
    reply = recv_exactly(sync_socket, 4 + STAT_V2.size)
    assert reply[:4] == b"LST2" and STAT_V2.unpack(reply[4:])[0] == errno.ENOENT


def test_list_v1_and_v2(sync_socket, fake_server):
    fake_server.farm.phones[SERIAL].fs.write("/data/local/tmp/d/f", b"x")
    request(sync_socket, b"LIST", "/data/local/tmp/d")
    names = []
    while (record_id := recv_exactly(sync_socket, 4)) == b"DENT":
        mode, size, mtime, length = struct.unpack("<IIII", recv_exactly(sync_socket, 16))
        names.append(recv_exactly(sync_socket, length).decode())
    assert record_id == b"DONE" and recv_exactly(sync_socket, 16) == bytes(16)
    assert names == [".", "..", "f"]
    request(sync_socket, b"LIS2", "/data/local/tmp/d")
    names = []
    while (record_id := recv_exactly(sync_socket, 4)) == b"DNT2":
        fields = STAT_V2.unpack(recv_exactly(sync_socket, STAT_V2.size))
        (length,) = struct.unpack("<I", recv_exactly(sync_socket, 4))
        names.append((recv_exactly(sync_socket, length).decode(), stat.S_ISDIR(fields[3])))
    assert record_id == b"DONE" and recv_exactly(sync_socket, STAT_V2.size + 4)
    assert names == [(".", True), ("..", True), ("f", False)]


def test_send_keeps_mode_and_mtime_then_quit_closes(sync_socket, fake_server):
    push(sync_socket, "/sdcard/Download/new/deep.bin,33261", b"\x00\xff" * 10, mtime=12345)
    assert recv_exactly(sync_socket, 8) == b"OKAY" + bytes(4)
    request(sync_socket, b"QUIT", "")
    assert recv_all(sync_socket) == b""
    info = fake_server.farm.phones[SERIAL].fs.stat("/sdcard/Download/new/deep.bin")
    assert (info.mode, info.size, info.mtime) == (0o100755, 20, 12345)


@pytest.mark.parametrize("target, message", [
    ("/system/bin/evil,33188", "Read-only file system"),
    ("/sdcard/Download,33188", "Is a directory"),
    ("relative.txt,33188", "path must be absolute"),
    ("/sdcard/link,41471", "symlinks are not supported"),
])
def test_send_refusals(sync_socket, fake_server, target, message):
    push(sync_socket, target, b"data")
    assert message in read_fail(sync_socket)
    assert_still_serving(fake_server)


def test_recv_errors_and_oversize_chunks(fake_server):
    for path, message in (("/sdcard/none", "No such file or directory"),
                          ("/sdcard", "Is a directory")):
        with open_transport(fake_server.port) as sock:
            sock.sendall(smart_request("sync:"))
            assert recv_exactly(sock, 4) == b"OKAY"
            request(sock, b"RECV", path)
            assert message in read_fail(sock)
    with open_transport(fake_server.port) as sock:
        sock.sendall(smart_request("sync:"))
        assert recv_exactly(sock, 4) == b"OKAY"
        request(sock, b"SEND", "/sdcard/big,33188")
        sock.sendall(b"DATA" + struct.pack("<I", 70_000))
        assert "oversize data message" in read_fail(sock)


def test_unknown_sync_command_and_overlong_path(sync_socket, fake_server):
    request(sync_socket, b"ZAPP", "/x")
    assert read_fail(sync_socket) == "unknown sync command b'ZAPP'"
    with open_transport(fake_server.port, OTHER) as sock:
        sock.sendall(smart_request("sync:"))
        assert recv_exactly(sock, 4) == b"OKAY"
        sock.sendall(b"STAT" + struct.pack("<I", 5000))
        assert "path too long" in read_fail(sock)


def test_disconnect_mid_send_leaves_no_file_and_others_keep_working(fake_server):
    sock = open_transport(fake_server.port)
    sock.sendall(smart_request("sync:"))
    assert recv_exactly(sock, 4) == b"OKAY"
    request(sock, b"SEND", "/sdcard/partial.bin,33188")
    sock.sendall(b"DATA" + struct.pack("<I", 50_000) + b"x" * 100)
    sock.close()
    assert_still_serving(fake_server)
    assert not client_for(fake_server).device(SERIAL).sync.exists("/sdcard/partial.bin")


def test_cli_rejects_a_farm_without_phones(own_processes):
    result = subprocess.run([sys.executable, "-m", "simfarm", "--devices", "0"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--devices must be at least 1" in result.stderr


def test_cli_reports_a_busy_port(own_processes):
    if not farm_is_built():
        pytest.skip("farm.py not built yet")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "simfarm", "--devices", "1",
                                 "--port", str(port)], cwd=REPO_ROOT, capture_output=True,
                                text=True, timeout=60)
    assert result.returncode == 1 and f"cannot serve on 127.0.0.1:{port}" in result.stderr
