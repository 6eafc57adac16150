"""A tiny stand-in for the virtual farm's phones, for protocol unit tests of the ADB server.

It has the attributes the server relies on (serial, model, product, device_name, transport_id,
state, features, fs, run) and a shell that knows just enough: echo, true/false, exit, cat, ls,
sleep, `;` / `&&` / `||` and `$?`. Fidelity tests use the real Farm instead.
"""
from __future__ import annotations

import shlex
import threading
import time

from simfarm.fs import VirtualFS
from simfarm.types import ShellResult

FEATURES = ["shell_v2", "cmd", "stat_v2", "ls_v2", "fixed_push_mkdir", "apex", "abb", "abb_exec"]


class FakePhone:
    def __init__(self, index: int):
        self.serial = f"fake-{index:04d}"
        self.model = "Fake_Phone"
        self.product = "fake_product"
        self.device_name = "fake"
        self.transport_id = index + 1
        self.state = "device"
        self.features = list(FEATURES)
        self.fs = VirtualFS()
        self.commands_run: list[str] = []
        self._lock = threading.Lock()

    def run(self, cmd: str) -> ShellResult:
        with self._lock:
            self.commands_run.append(cmd)
            return _FakeShell(self.fs).run(cmd)


class FakeFarm:
    def __init__(self, devices: int = 2):
        self.phones = {phone.serial: phone for phone in (FakePhone(i) for i in range(devices))}


class _FakeShell:
    def __init__(self, fs: VirtualFS):
        self.fs = fs
        self.stdout: list[bytes] = []
        self.stderr: list[bytes] = []
        self.status = 0

    def run(self, command_line: str) -> ShellResult:
        lexer = shlex.shlex(command_line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        words, connector = [], ";"
        for token in list(lexer) + [";"]:
            if token in (";", "&&", "||"):
                if words and (connector == ";" or (connector == "&&") == (self.status == 0)):
                    if self._run_words(words) == "exit":
                        break
                words, connector = [], token
            else:
                words.append(token.replace("$?", str(self.status)))
        return ShellResult(b"".join(self.stdout), b"".join(self.stderr), self.status)

    def _run_words(self, words: list[str]):
        name, args = words[0], words[1:]
        self.status = 0
        if name == "echo":
            self.stdout.append((" ".join(args) + "\n").encode())
        elif name in ("true", "false"):
            self.status = int(name == "false")
        elif name == "exit":
            self.status = int(args[0]) if args else 0
            return "exit"
        elif name == "sleep":
            time.sleep(float(args[0]))
        elif name == "cat":
            for path in args:
                try:
                    self.stdout.append(self.fs.read(path))
                except (FileNotFoundError, IsADirectoryError, ValueError):
                    self.stderr.append(f"cat: {path}: No such file or directory\n".encode())
                    self.status = 1
        elif name == "ls":
            for path in args or ["/"]:
                entries = self.fs.listdir(path)
                if entries is None:
                    self.stderr.append(f"ls: {path}: No such file or directory\n".encode())
                    self.status = 1
                else:
                    self.stdout.append("".join(f"{entry}\n" for entry, _ in entries).encode())
        else:
            self.stderr.append(f"/system/bin/sh: {name}: not found\n".encode())
            self.status = 127
