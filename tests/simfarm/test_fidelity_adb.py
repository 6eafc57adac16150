"""Debian's `adb` (1.0.41), unchanged, drives the REAL virtual farm through its ADB server."""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ElementTree

import pytest

from tests.simfarm.conftest import FARM_DEVICES
from tests.simfarm.helpers import clickable_centres, png_size, wm_size

pytestmark = pytest.mark.adb


@pytest.fixture
def adb(adb_command, farm_server):
    """adb(*args, serial=None, check=True) against the farm; returns the CompletedProcess."""

    def run(*args, serial=None, check=True):
        prefix = ("-s", serial) if serial else ()
        return adb_command(farm_server.port, *prefix, *args, check=check)

    return run


def screencap(adb, serial) -> bytes:
    return adb("exec-out", "screencap", "-p", serial=serial).stdout


def dump_and_pull(adb, serial, tmp_path) -> str:
    adb("shell", "uiautomator", "dump", serial=serial)
    local = tmp_path / "window_dump.xml"
    adb("pull", "/sdcard/window_dump.xml", str(local), serial=serial)
    return local.read_text(encoding="utf-8")


def test_devices_l_lists_every_phone(adb, farm_server):
    lines = adb("devices", "-l").stdout.decode().splitlines()
    assert lines[0] == "List of devices attached"
    phones = [line.split() for line in lines[1:] if line.strip()]
    assert len(phones) == FARM_DEVICES
    assert [fields[0] for fields in phones] == farm_server.serials
    for fields in phones:
        assert fields[1] == "device"
        tags = dict(field.split(":", 1) for field in fields[2:])
        assert set(tags) == {"product", "model", "device", "transport_id"}
        assert tags["model"] and tags["transport_id"].isdigit()


def test_screencap_is_a_png_of_the_phones_size(adb, farm_server):
    serial = farm_server.serials[0]
    size = wm_size(adb("shell", "wm", "size", serial=serial).stdout.decode())
    assert png_size(screencap(adb, serial)) == size


def test_uiautomator_dump_then_pull_gives_the_hierarchy(adb, farm_server, tmp_path):
    serial = farm_server.serials[0]
    adb("shell", "input", "keyevent", "HOME", serial=serial)
    xml_text = dump_and_pull(adb, serial, tmp_path)
    assert xml_text.startswith("<?xml")
    root = ElementTree.fromstring(xml_text.encode())
    assert root.tag == "hierarchy" and len(list(root.iter("node"))) > 1


def test_input_tap_changes_the_screen(adb, farm_server, tmp_path):
    serial = farm_server.serials[1]
    adb("shell", "input", "keyevent", "HOME", serial=serial)
    targets = clickable_centres(dump_and_pull(adb, serial, tmp_path))
    assert targets, f"the home screen has nothing clickable: {(tmp_path / 'window_dump.xml').read_text()}"
    before = screencap(adb, serial)
    adb("shell", "input", "tap", *map(str, targets[0]), serial=serial)
    after = screencap(adb, serial)
    assert png_size(after) == png_size(before)
    assert after != before
    adb("shell", "input", "keyevent", "HOME", serial=serial)


def test_push_pull_round_trip(adb, farm_server, tmp_path):
    serial = farm_server.serials[2]
    payload = os.urandom(300_000) + "ünïcode\n".encode()
    source = tmp_path / "payload.bin"
    source.write_bytes(payload)
    adb("push", str(source), "/sdcard/Download/payload.bin", serial=serial)
    listing = adb("shell", "ls", "/sdcard/Download", serial=serial).stdout.decode()
    assert "payload.bin" in listing.split()
    back = tmp_path / "back.bin"
    adb("pull", "/sdcard/Download/payload.bin", str(back), serial=serial)
    assert back.read_bytes() == payload


def test_pull_of_a_missing_file_fails_clearly(adb, farm_server, tmp_path):
    result = adb("pull", "/sdcard/nothing-here", str(tmp_path / "x"), serial=farm_server.serials[0],
                 check=False)
    assert result.returncode != 0
    assert b"No such file or directory" in result.stderr + result.stdout


def test_unknown_shell_command_exits_127(adb, farm_server):
    result = adb("shell", "frobnicate", "--now", serial=farm_server.serials[0], check=False)
    assert result.returncode == 127
    assert result.stderr.decode().strip() == "/system/bin/sh: frobnicate: not found"


def test_unknown_serial_fails_clearly(adb):
    result = adb("shell", "echo", "hi", serial="no-such-phone", check=False)
    assert result.returncode != 0
    assert b"device 'no-such-phone' not found" in result.stderr


def test_off_screen_tap_is_ignored_and_the_phone_keeps_working(adb, farm_server):
    serial = farm_server.serials[0]
    adb("shell", "input", "keyevent", "HOME", serial=serial)
    before = screencap(adb, serial)
    adb("shell", "input", "tap", "99999", "-5", serial=serial, check=False)
    assert screencap(adb, serial) == before  # Android drops touches outside the display
    assert adb("shell", "echo", "still here", serial=serial).stdout == b"still here\n"


def test_exit_code_of_a_failing_command_reaches_adb(adb, farm_server):
    result = adb("shell", "ls", "/definitely/missing", serial=farm_server.serials[0], check=False)
    assert result.returncode != 0
    assert re.search(rb"No such file or directory", result.stderr)
