"""VirtualFS: one virtual phone's file system, in memory and thread-safe.

The ADB server's `sync:` service (push, pull, stat, ls) and the phone's shell (`ls`, `cat`, `rm`,
`uiautomator dump FILE`) both read and write it, from different threads, so every public method
takes the lock.

Paths are absolute POSIX paths. The layout mimics a stock Android phone closely enough for the
paths that tools use: /sdcard (shared storage, also reachable as /storage/emulated/0 and
/storage/self/primary, as on a real phone), /data/local/tmp (where adb and adbutils drop files),
/system/bin (the commands the shell knows).
"""
from __future__ import annotations

import posixpath
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from simfarm.types import FileStat

DIR_MODE = stat.S_IFDIR | 0o755
FILE_MODE = stat.S_IFREG | 0o644
EXECUTABLE_MODE = stat.S_IFREG | 0o755

SHARED_STORAGE_ALIASES = ("/sdcard", "/storage/emulated/0", "/storage/self/primary")
SHARED_STORAGE_DIRS = ("Download", "DCIM", "Pictures", "Documents", "Movies", "Music", "Alarms",
                       "Notifications", "Ringtones", "Android", "Android/data", "Android/media")
SYSTEM_DIRS = ("/data/local/tmp", "/data/app", "/data/data", "/data/system", "/system/app",
               "/system/priv-app", "/system/etc", "/system/framework", "/vendor", "/product",
               "/apex", "/dev", "/proc", "/mnt", "/cache", "/etc", "/storage/self")
SYSTEM_COMMANDS = ("sh", "ls", "cat", "echo", "rm", "mkdir", "input", "screencap", "uiautomator",
                   "am", "pm", "wm", "dumpsys", "getprop", "settings", "monkey", "cmd", "svc", "service",
                   "app_process")


@dataclass
class _File:
    data: bytes
    mode: int
    mtime: int


@dataclass
class _Dir:
    mode: int
    mtime: int
    children: dict[str, _File | _Dir] = field(default_factory=dict)


class VirtualFS:
    """An in-memory tree of directories and files with Android's usual layout."""

    def __init__(self, clock: Callable[[], float] = time.time, android_layout: bool = True):
        self._clock = clock
        self._lock = threading.RLock()
        self._root = _Dir(DIR_MODE, self._now())
        if android_layout:
            self._make_android_layout()

    # -- queries -------------------------------------------------------------------------------

    def used_bytes(self) -> int:
        """The bytes every file holds (what `df` counts as used on top of the system's share)."""
        seen: set[int] = set()   # /sdcard and /storage/emulated/0 are one directory: count it once

        def size(node) -> int:
            if id(node) in seen:
                return 0
            seen.add(id(node))
            return len(node.data) if isinstance(node, _File) else sum(size(c) for c in node.children.values())
        with self._lock:
            return size(self._root)

    def stat(self, path: str) -> FileStat | None:
        with self._lock:
            node = self._lookup(path)
            return None if node is None else _stat_of(node)

    def listdir(self, path: str) -> list[tuple[str, FileStat]] | None:
        """Entries of a directory, sorted by name; None when `path` is not a directory."""
        with self._lock:
            node = self._lookup(path)
            if not isinstance(node, _Dir):
                return None
            return [(name, _stat_of(child)) for name, child in sorted(node.children.items())]

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def isdir(self, path: str) -> bool:
        with self._lock:
            return isinstance(self._lookup(path), _Dir)

    def isfile(self, path: str) -> bool:
        with self._lock:
            return isinstance(self._lookup(path), _File)

    def read(self, path: str) -> bytes:
        with self._lock:
            node = self._lookup(path)
            if node is None:
                raise FileNotFoundError(path)
            if isinstance(node, _Dir):
                raise IsADirectoryError(path)
            return node.data

    # -- changes -------------------------------------------------------------------------------

    def write(self, path: str, data: bytes, mode: int = FILE_MODE, mtime: int | None = None) -> None:
        """Create or replace a file, creating missing parent directories (like adbd's push)."""
        parent_path, name = self._split(path)
        if not stat.S_ISREG(mode):
            mode = stat.S_IFREG | stat.S_IMODE(mode)
        with self._lock:
            parent = self._make_dirs(parent_path)
            existing = parent.children.get(name)
            if isinstance(existing, _Dir):
                raise IsADirectoryError(path)
            when = self._now() if mtime is None else int(mtime)
            parent.children[name] = _File(bytes(data), mode, when)
            parent.mtime = self._now()

    def append(self, path: str, data: bytes) -> None:
        """Append to a file (creating it), as the shell's `>>` does."""
        with self._lock:
            node = self._lookup(path)
            if isinstance(node, _Dir):
                raise IsADirectoryError(path)
            if node is None:
                self.write(path, data)
            else:
                node.data += bytes(data)
                node.mtime = self._now()

    def remove(self, path: str, recursive: bool = False) -> bool:
        """Remove a file (or a directory when `recursive`); False when nothing was there."""
        parent_path, name = self._split(path)
        with self._lock:
            parent = self._lookup(parent_path)
            if not isinstance(parent, _Dir) or name not in parent.children:
                return False
            if isinstance(parent.children[name], _Dir) and not recursive:
                raise IsADirectoryError(path)
            del parent.children[name]
            parent.mtime = self._now()
            return True

    def mkdir(self, path: str, parents: bool = False, mode: int = DIR_MODE) -> None:
        parent_path, name = self._split(path)
        with self._lock:
            if parents:
                self._make_dirs(path, mode)
                return
            parent = self._lookup(parent_path)
            if parent is None:
                raise FileNotFoundError(parent_path)
            if not isinstance(parent, _Dir):
                raise NotADirectoryError(parent_path)
            if name in parent.children:
                raise FileExistsError(path)
            parent.children[name] = _Dir(stat.S_IFDIR | stat.S_IMODE(mode), self._now())
            parent.mtime = self._now()

    def rename(self, source: str, target: str) -> None:
        """Move a file or directory (the shell's `mv`); replaces a file at `target`."""
        source_parent_path, source_name = self._split(source)
        target_parent_path, target_name = self._split(target)
        with self._lock:
            source_parent = self._lookup(source_parent_path)
            if not isinstance(source_parent, _Dir) or source_name not in source_parent.children:
                raise FileNotFoundError(source)
            target_parent = self._lookup(target_parent_path)
            if not isinstance(target_parent, _Dir):
                raise FileNotFoundError(target_parent_path)
            if isinstance(target_parent.children.get(target_name), _Dir):
                raise IsADirectoryError(target)
            target_parent.children[target_name] = source_parent.children.pop(source_name)
            source_parent.mtime = target_parent.mtime = self._now()

    # -- internals -----------------------------------------------------------------------------

    def _now(self) -> int:
        return int(self._clock())

    @staticmethod
    def _parts(path: str) -> list[str]:
        if not path.startswith("/"):
            raise ValueError(f"virtual paths must be absolute: {path!r}")
        return [part for part in posixpath.normpath(path).split("/") if part]

    def _split(self, path: str) -> tuple[str, str]:
        parts = self._parts(path)
        if not parts:
            raise IsADirectoryError("/")
        return "/" + "/".join(parts[:-1]), parts[-1]

    def _lookup(self, path: str) -> _File | _Dir | None:
        node: _File | _Dir = self._root
        for part in self._parts(path):
            if not isinstance(node, _Dir) or part not in node.children:
                return None
            node = node.children[part]
        return node

    def _make_dirs(self, path: str, mode: int = DIR_MODE) -> _Dir:
        node = self._root
        for part in self._parts(path):
            child = node.children.get(part)
            if child is None:
                child = node.children[part] = _Dir(stat.S_IFDIR | stat.S_IMODE(mode), self._now())
            elif not isinstance(child, _Dir):
                raise NotADirectoryError(path)
            node = child
        return node

    def _make_android_layout(self) -> None:
        for path in SYSTEM_DIRS:
            self._make_dirs(path)
        self._lookup("/data/local/tmp").mode = stat.S_IFDIR | 0o771
        # Shared storage is one directory seen under three names, as the symlinks make it on Android.
        shared = _Dir(stat.S_IFDIR | 0o770, self._now())
        for alias in SHARED_STORAGE_ALIASES:
            parent_path, name = self._split(alias)
            self._make_dirs(parent_path).children[name] = shared
        for sub in SHARED_STORAGE_DIRS:
            self._make_dirs("/sdcard/" + sub, stat.S_IFDIR | 0o770)
        for command in SYSTEM_COMMANDS:
            self.write(f"/system/bin/{command}", b"\x7fELF virtual binary\n", EXECUTABLE_MODE)


def _stat_of(node: _File | _Dir) -> FileStat:
    size = len(node.data) if isinstance(node, _File) else 4096
    return FileStat(mode=node.mode, size=size, mtime=node.mtime)
