"""The farm's ADB server speaks the ADB server protocol: tested over raw sockets and adbutils
against FakePhones (the real phones are exercised by the fidelity tests)."""
from __future__ import annotations

import os
import socket
import struct
import threading
import time

import adbutils
import pytest

from simfarm.serve import ServerThread
from simfarm.types import ShellResult
from tests.simfarm.conftest import raw_request, smart_request
from tests.simfarm.fakes import FakeFarm

SERIAL = "fake-0000"
OTHER = "fake-0001"


def client_for(server) -> adbutils.AdbClient:
    return adbutils.AdbClient(host="127.0.0.1", port=server.port)


def fail_message(reply: bytes) -> str:
    assert reply[:4] == b"FAIL", reply
    length = int(reply[4:8], 16)
    assert len(reply) == 8 + length, reply
    return reply[8:].decode()


def assert_still_serving(server) -> None:
    assert client_for(server).device(OTHER).shell("echo alive") == "alive"


def open_transport(port: int, serial: str = SERIAL) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(smart_request(f"host:tport:serial:{serial}"))
    reply = recv_exactly(sock, 12)
    assert reply[:4] == b"OKAY"
    return sock


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def recv_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


# -- host queries ----------------------------------------------------------------------------

def test_version_is_41_and_connection_closes(fake_server):
    assert raw_request(fake_server.port, smart_request("host:version")) == b"OKAY00040029"


def test_devices_lists_every_phone_in_both_formats(fake_server):
    short = raw_request(fake_server.port, smart_request("host:devices"))
    listing = b"fake-0000\tdevice\nfake-0001\tdevice\n"
    assert short == b"OKAY" + b"%04x" % len(listing) + listing
    infos = client_for(fake_server).list(extended=True)
    assert [info.serial for info in infos] == [SERIAL, OTHER]
    assert infos[1].tags == {"product": "fake_product", "model": "Fake_Phone", "device": "fake",
                             "transport_id": "2"}


def test_device_queries_via_adbutils(fake_server):
    device = client_for(fake_server).device(SERIAL)
    assert device.get_state() == "device"
    assert device.get_serialno() == SERIAL
    assert device.get_devpath() == "unknown"
    assert set(device.get_features().split(",")) >= {"shell_v2", "stat_v2", "cmd"}
    assert device.forward_list() == []


def test_features_are_limited_to_what_the_server_implements(fake_server):
    fake_server.farm.phones[SERIAL].features.append("sendrecv_v2")
    reply = raw_request(fake_server.port, smart_request(f"host-serial:{SERIAL}:features"))
    assert b"sendrecv_v2" not in reply and b"shell_v2" in reply


def test_tport_answers_the_transport_id_then_serves_one_service(fake_server):
    with open_transport(fake_server.port, OTHER) as sock:
        pass
    sock = socket.create_connection(("127.0.0.1", fake_server.port), timeout=5)
    with sock:
        sock.sendall(smart_request(f"host:tport:serial:{OTHER}"))
        assert recv_exactly(sock, 12) == b"OKAY" + struct.pack("<Q", 2)
        sock.sendall(smart_request("shell:echo one"))
        assert recv_all(sock) == b"OKAYone\n"


def test_transport_by_id_and_host_transport(fake_server):
    device = adbutils.AdbDevice(client_for(fake_server), transport_id=2)
    assert device.shell("echo by-id") == "by-id"
    sock = socket.create_connection(("127.0.0.1", fake_server.port), timeout=5)
    with sock:
        sock.sendall(smart_request(f"host:transport:{SERIAL}"))
        assert recv_exactly(sock, 4) == b"OKAY"
        sock.sendall(smart_request("exec:echo plain"))
        assert recv_all(sock) == b"OKAYplain\n"


def test_transport_any_refuses_when_several_phones(fake_server):
    reply = raw_request(fake_server.port, smart_request("host:transport-any"))
    assert fail_message(reply) == "more than one device/emulator"
    reply = raw_request(fake_server.port, smart_request("host:tport:usb"))
    assert "not USB" in fail_message(reply)


def test_transport_any_picks_the_only_phone():
    with ServerThread(FakeFarm(devices=1)) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        with sock:
            sock.sendall(smart_request("host:transport-any") + smart_request("shell:echo only"))
            assert recv_all(sock) == b"OKAYOKAYonly\n"


def test_unknown_serial_fails_clearly(fake_server):
    for request in ("host:transport:nope", "host:tport:serial:nope", "host-serial:nope:get-state"):
        assert fail_message(raw_request(fake_server.port, smart_request(request))) == \
            "device 'nope' not found"
    with pytest.raises(adbutils.AdbError, match="device 'nope' not found"):
        client_for(fake_server).device("nope").shell("echo x")


def test_unknown_host_service_fails_clearly(fake_server):
    message = fail_message(raw_request(fake_server.port, smart_request("host:frobnicate")))
    assert message == "unknown host service 'frobnicate'"
    message = fail_message(raw_request(fake_server.port, smart_request(f"host-serial:{SERIAL}:zap")))
    assert message == "unknown host service 'zap'"


def test_forwarding_is_refused_clearly(fake_server):
    with pytest.raises(adbutils.AdbError, match="forwarding is not supported"):
        client_for(fake_server).device(SERIAL).forward("tcp:1234", "tcp:80")
    with pytest.raises(adbutils.AdbError, match="listener 'tcp:1234' not found"):
        client_for(fake_server).device(SERIAL).forward_remove("tcp:1234")
    assert raw_request(fake_server.port, smart_request("host:list-forward")) == b"OKAY0000"


@pytest.mark.parametrize("payload", [b"zz!!host:version", b"-001", b"0000", b"\xff\xfe\x00\x01"])
def test_malformed_length_prefix_fails_and_others_keep_working(fake_server, payload):
    message = fail_message(raw_request(fake_server.port, payload))
    assert message.startswith("malformed request")
    assert_still_serving(fake_server)


def test_client_leaving_mid_request_does_not_disturb_others(fake_server):
    with socket.create_connection(("127.0.0.1", fake_server.port)) as sock:
        sock.sendall(b"00ffhost:ver")  # promises 255 bytes, sends 8, leaves
    assert_still_serving(fake_server)


def test_wait_for_device_returns_once_present(fake_server):
    client_for(fake_server).wait_for(SERIAL, timeout=5)
    client_for(fake_server).wait_for(transport="local", timeout=5)


# -- device services -------------------------------------------------------------------------

def test_shell_v1_merges_output_and_adbutils_shell2_gets_exit_codes(fake_server):
    device = client_for(fake_server).device(SERIAL)
    assert device.shell("echo hi; echo there") == "hi\nthere"
    result = device.shell2("cat /nope")
    assert result.returncode == 1 and "No such file" in result.output
    assert device.shell2("true && false").returncode == 1


def test_shell_v2_separates_streams_and_exit_code(fake_server):
    result = client_for(fake_server).device(SERIAL).shell2("ls /sdcard /nope", v2=True)
    assert result.returncode == 1
    assert "Download" in result.stdout and "Download" not in result.stderr
    assert result.stderr == "ls: /nope: No such file or directory\n"


def test_unknown_shell_command_is_not_found_127(fake_server):
    result = client_for(fake_server).device(SERIAL).shell2("frob --x", v2=True)
    assert (result.returncode, result.stderr) == (127, "/system/bin/sh: frob: not found\n")


def test_shell_v2_options_and_stdin_packets_are_tolerated(fake_server):
    with open_transport(fake_server.port) as sock:
        sock.sendall(smart_request("shell,v2,TERM=xterm-256color,raw:echo 'a:b'"))
        assert recv_exactly(sock, 4) == b"OKAY"
        # stdin data, then close-stdin (id 3 in old clients' numbering, 4 in AOSP's): ignored
        sock.sendall(b"\x00\x05\x00\x00\x00hello" + b"\x03\x00\x00\x00\x00" + b"\x04\x00\x00\x00\x00")
        reply = recv_all(sock)
    assert reply == b"\x01\x04\x00\x00\x00a:b\n" + b"\x03\x01\x00\x00\x00\x00"


def test_interactive_shell_and_unknown_services_fail_clearly(fake_server):
    for service, expected in (("shell:", "interactive shell is not supported"),
                              ("frobnicate:", "unknown device service 'frobnicate:'"),
                              ("reboot:", "reboot is not supported"),
                              ("framebuffer:", "use `screencap -p`")):
        with open_transport(fake_server.port) as sock:
            sock.sendall(smart_request(service))
            assert expected in fail_message(recv_all(sock))
    assert_still_serving(fake_server)


def test_exec_is_binary_clean(fake_server):
    device = client_for(fake_server).device(SERIAL)
    blob = bytes(range(256)) * 1000 + b"\r\n\x00\n"
    device.sync.push(blob, "/data/local/tmp/blob.bin")
    with open_transport(fake_server.port) as sock:
        sock.sendall(smart_request("exec:cat /data/local/tmp/blob.bin"))
        assert recv_all(sock) == b"OKAY" + blob


def test_big_output_arrives_whole_over_shell_v1_and_v2(fake_server):
    device = client_for(fake_server).device(SERIAL)
    blob = os.urandom(3 * 1024 * 1024)
    device.sync.push(blob, "/sdcard/big.bin")
    assert device.shell("cat /sdcard/big.bin", encoding=None) == blob
    assert device.shell2("cat /sdcard/big.bin", v2=True, encoding=None).stdout == blob


def test_root_gets_adbds_production_answer(fake_server):
    assert "cannot run as root" in client_for(fake_server).device(SERIAL).root()


def test_a_slow_phone_does_not_block_another(fake_server):
    slow = threading.Thread(target=client_for(fake_server).device(SERIAL).shell, args=("sleep 1.5",))
    slow.start()
    time.sleep(0.1)
    started = time.monotonic()
    assert_still_serving(fake_server)
    assert time.monotonic() - started < 1.0
    slow.join()


def test_many_clients_at_once(fake_server):
    errors = []

    def worker(index):
        try:
            device = client_for(fake_server).device([SERIAL, OTHER][index % 2])
            for round_ in range(5):
                assert device.shell(f"echo {index}-{round_}") == f"{index}-{round_}"
        except Exception as error:  # collected: an assert in a thread would be lost
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []


def test_a_phone_that_raises_gives_an_error_not_a_dead_server(fake_server):
    phone = fake_server.farm.phones[SERIAL]

    def broken(cmd):
        raise RuntimeError("renderer exploded")

    phone.run = broken
    result = client_for(fake_server).device(SERIAL).shell2("echo hi", v2=True)
    assert result.returncode == 1 and "renderer exploded" in result.stderr
    assert_still_serving(fake_server)


def test_offline_phone_is_listed_but_refuses_services(fake_server):
    fake_server.farm.phones[SERIAL].state = "offline"
    assert ("fake-0000", "offline") in [(i.serial, i.state) for i in client_for(fake_server).list()]
    assert fail_message(raw_request(fake_server.port, smart_request(
        f"host:tport:serial:{SERIAL}"))) == "device offline"
    assert client_for(fake_server).device(SERIAL).get_state() == "offline"


# -- presence hooks and tracking -------------------------------------------------------------

def test_sim_disconnect_and_connect_flip_presence(fake_server):
    client = client_for(fake_server)
    assert raw_request(fake_server.port, smart_request(f"host:sim-disconnect:{SERIAL}")) == \
        b"OKAY" + b"%04x" % 22 + b"disconnected fake-0000"
    assert [info.serial for info in client.list()] == [OTHER]
    with pytest.raises(adbutils.AdbError, match="not found"):
        client.device(SERIAL).shell("echo x")
    raw_request(fake_server.port, smart_request(f"host:sim-connect:{SERIAL}"))
    assert [info.serial for info in client.list()] == [SERIAL, OTHER]
    assert client.device(SERIAL).shell("echo back") == "back"
    assert "not found" in fail_message(raw_request(fake_server.port,
                                                   smart_request("host:sim-disconnect:zz")))


def test_disconnect_drops_open_streams_of_that_phone(fake_server):
    with open_transport(fake_server.port) as sock:
        sock.sendall(smart_request("shell,v2:sleep 1"))
        assert recv_exactly(sock, 4) == b"OKAY"
        raw_request(fake_server.port, smart_request(f"host:sim-disconnect:{SERIAL}"))
        started = time.monotonic()
        try:
            leftover = recv_all(sock)
        except ConnectionResetError:
            leftover = b""
        assert leftover == b"" and time.monotonic() - started < 0.9


def test_track_devices_streams_changes(fake_server):
    events = client_for(fake_server).track_devices()
    first = {(next(events).serial) for _ in range(2)}
    assert first == {SERIAL, OTHER}
    raw_request(fake_server.port, smart_request(f"host:sim-disconnect:{OTHER}"))
    event = next(events)
    assert (event.present, event.serial, event.status) == (False, OTHER, "absent")
    raw_request(fake_server.port, smart_request(f"host:sim-connect:{OTHER}"))
    event = next(events)
    assert (event.present, event.serial, event.status) == (True, OTHER, "device")


def test_track_devices_long_format_and_farm_side_changes(fake_server):
    with socket.create_connection(("127.0.0.1", fake_server.port), timeout=5) as sock:
        sock.sendall(smart_request("host:track-devices-l"))
        assert recv_exactly(sock, 4) == b"OKAY"
        first = recv_exactly(sock, int(recv_exactly(sock, 4), 16)).decode()
        assert "model:Fake_Phone" in first and "transport_id:1" in first
        fake_server.farm.phones[SERIAL].state = "offline"  # the farm changes a phone by itself
        second = recv_exactly(sock, int(recv_exactly(sock, 4), 16)).decode()
        assert second.splitlines()[0].split()[:2] == [SERIAL, "offline"]


def test_kill_stops_the_server():
    server = ServerThread(FakeFarm(devices=1)).start()
    client = adbutils.AdbClient(host="127.0.0.1", port=server.port)
    client.server_kill()
    server._thread.join(5)
    assert not server.running
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1)


def test_phone_results_are_plain_shell_results():
    phone = FakeFarm(devices=1).phones["fake-0000"]
    assert phone.run("echo x") == ShellResult(b"x\n", b"", 0)


# -- Debian's adb against the fake phones (protocol only; fidelity tests use the real farm) --

@pytest.mark.adb
def test_adb_client_speaks_to_the_server(fake_server, adb_command, tmp_path):
    listing = adb_command(fake_server.port, "devices", "-l").stdout.decode()
    assert "fake-0000              device product:fake_product model:Fake_Phone" in listing
    result = adb_command(fake_server.port, "-s", SERIAL, "shell", "cat", "/nope", check=False)
    assert (result.returncode, result.stderr) == (1, b"cat: /nope: No such file or directory\n")
    source = tmp_path / "in.bin"
    source.write_bytes(os.urandom(200_000))
    adb_command(fake_server.port, "-s", OTHER, "push", str(source), "/data/local/tmp/")
    adb_command(fake_server.port, "-s", OTHER, "pull", "/data/local/tmp/in.bin", str(tmp_path / "o"))
    assert (tmp_path / "o").read_bytes() == source.read_bytes()
    assert b"in.bin" in adb_command(fake_server.port, "-s", OTHER, "ls", "/data/local/tmp").stdout


@pytest.mark.adb
def test_adb_without_serial_and_several_phones_is_refused(fake_server, adb_command):
    result = adb_command(fake_server.port, "shell", "echo", "x", check=False)
    assert result.returncode != 0 and b"more than one device" in result.stderr


def test_host_request_parsing_handles_serials_with_colons():
    from simfarm.host_requests import split_host_request, transport_target

    known = ["127.0.0.1:5555", "sim-1"]
    assert split_host_request("host-serial:127.0.0.1:5555:features", known) == \
        ("host-serial", "127.0.0.1:5555", None, "features")
    assert split_host_request("host-serial:other:get-state", known) == \
        ("host-serial", "other", None, "get-state")
    assert split_host_request("host-transport-id:7:features", known) == \
        ("host-transport-id", None, "7", "features")
    assert split_host_request("shell:ls", known) == (None, None, None, "shell:ls")
    assert transport_target("tport:serial:sim-1") == ("serial", "sim-1", True)
    assert transport_target("transport-any") == ("any", None, False)
    assert transport_target("devices") is None


def test_wait_for_an_unplugged_phone_returns_when_plugged_back(fake_server):
    raw_request(fake_server.port, smart_request(f"host:sim-disconnect:{SERIAL}"))
    waiter = threading.Thread(target=client_for(fake_server).wait_for, args=(SERIAL,),
                              kwargs={"timeout": 10})
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive()  # still waiting: the phone is unplugged
    raw_request(fake_server.port, smart_request(f"host:sim-connect:{SERIAL}"))
    waiter.join(5)
    assert not waiter.is_alive()
