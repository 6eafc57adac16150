"""The `sync:` device service (adb push / pull / ls / stat) over a phone's VirtualFS.

After `sync:` is answered with OKAY, the client sends requests of an id (4 ASCII bytes) and a
little-endian uint32 length followed by that many bytes (a path). Replies are fixed-size records
(see AOSP's file_sync_protocol.h). Errors are `FAIL` + uint32 LE length + message, as adbd sends them.
"""
from __future__ import annotations

import asyncio
import errno
import os
import posixpath
import stat
import struct

from simfarm.fs import VirtualFS
from simfarm.types import FileStat

MAX_PATH_LENGTH = 1024  # adbd refuses longer paths
MAX_DATA_CHUNK = 64 * 1024  # SYNC_DATA_MAX: the largest DATA message either side may send
# A pushed file lives in the farm's memory: one push may not exceed this (a real phone's storage
# is finite too; adbd then fails with ENOSPC).
MAX_PUSH_BYTES = int(os.environ.get("SIMFARM_MAX_PUSH_BYTES", str(64 * 1024 * 1024)))

# stat_v2 record after its id: error, dev, ino, mode, nlink, uid, gid, size, atime, mtime, ctime
STAT_V2 = struct.Struct("<IQQIIIIQqqq")
STAT_V1 = struct.Struct("<III")  # mode, size, mtime
DENT_V1 = struct.Struct("<IIII")  # mode, size, mtime, name length
UINT32 = struct.Struct("<I")

# Android mounts these read-only; pushing there fails on a real phone too.
READ_ONLY_ROOTS = ("/system", "/vendor", "/product", "/apex", "/proc")

SHELL_UID = 2000  # files adb pushes belong to the shell user


class SyncClosed(Exception):
    """The sync session is over (QUIT, or a fatal error already reported with FAIL)."""


def sync_fail(message: str) -> bytes:
    payload = message.encode("utf-8")
    return b"FAIL" + UINT32.pack(len(payload)) + payload


def _stat_v2_fields(info: FileStat | None, inode: int) -> bytes:
    if info is None:
        return STAT_V2.pack(errno.ENOENT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    links = 2 if stat.S_ISDIR(info.mode) else 1
    return STAT_V2.pack(0, 0xFC00, inode, info.mode, links, SHELL_UID, SHELL_UID, info.size,
                        info.mtime, info.mtime, info.mtime)


def _inode_for(path: str) -> int:
    return hash(path) & 0xFFFFFFFF  # stable within a run, which is all tools need


def _is_read_only(path: str) -> bool:
    """`path` must be normalised first: the file system resolves '..' the same way."""
    return any(path == root or path.startswith(root + "/") for root in READ_ONLY_ROOTS)


async def serve_sync(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     fs: VirtualFS) -> None:
    """Answer sync requests until the client sends QUIT or closes the connection."""
    session = _SyncSession(reader, writer, fs)
    try:
        while True:
            await session.handle_one_request()
    except SyncClosed:
        pass


class _SyncSession:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fs: VirtualFS):
        self.reader = reader
        self.writer = writer
        self.fs = fs

    async def handle_one_request(self) -> None:
        header = await self.reader.readexactly(8)
        request_id = header[:4]
        (length,) = UINT32.unpack_from(header, 4)
        if request_id == b"QUIT":
            raise SyncClosed()
        if length > MAX_PATH_LENGTH:
            await self._fatal(f"path too long: {length} bytes (limit {MAX_PATH_LENGTH})")
        path = (await self.reader.readexactly(length)).decode("utf-8", errors="replace")
        handlers = {
            b"STAT": self._stat_v1,
            b"LST2": self._stat_v2,
            b"STA2": self._stat_v2,
            b"LIST": self._list_v1,
            b"LIS2": self._list_v2,
            b"RECV": self._receive,
            b"SEND": self._send,
        }
        handler = handlers.get(request_id)
        if handler is None:
            await self._fatal(f"unknown sync command {request_id!r}")
        await handler(request_id, path)

    async def _fatal(self, message: str) -> None:
        """Report an error the session cannot continue after, then end it (as adbd does)."""
        self.writer.write(sync_fail(message))
        await self.writer.drain()
        raise SyncClosed()

    def _safe_stat(self, path: str) -> FileStat | None:
        try:
            return self.fs.stat(path)
        except ValueError:  # a relative path: adbd's lstat() fails with ENOENT the same way
            return None

    async def _stat_v1(self, request_id: bytes, path: str) -> None:
        info = self._safe_stat(path)
        fields = (0, 0, 0) if info is None else (info.mode, info.size, info.mtime)
        self.writer.write(b"STAT" + STAT_V1.pack(*fields))
        await self.writer.drain()

    async def _stat_v2(self, request_id: bytes, path: str) -> None:
        self.writer.write(request_id + _stat_v2_fields(self._safe_stat(path), _inode_for(path)))
        await self.writer.drain()

    def _entries(self, path: str) -> list[tuple[str, FileStat]]:
        """Directory entries as readdir() gives them, with "." and ".."; none for a non-directory."""
        try:
            entries = self.fs.listdir(path)
            here = self.fs.stat(path)
        except ValueError:
            return []
        if entries is None or here is None:
            return []
        return [(".", here), ("..", here)] + entries

    async def _list_v1(self, request_id: bytes, path: str) -> None:
        records = []
        for name, info in self._entries(path):
            encoded = name.encode("utf-8")
            records.append(b"DENT" + DENT_V1.pack(info.mode, info.size, info.mtime, len(encoded)))
            records.append(encoded)
        records.append(b"DONE" + bytes(DENT_V1.size))
        self.writer.write(b"".join(records))
        await self.writer.drain()

    async def _list_v2(self, request_id: bytes, path: str) -> None:
        records = []
        for name, info in self._entries(path):
            encoded = name.encode("utf-8")
            records.append(b"DNT2" + _stat_v2_fields(info, _inode_for(path + "/" + name)))
            records.append(UINT32.pack(len(encoded)) + encoded)
        records.append(b"DONE" + bytes(STAT_V2.size + UINT32.size))
        self.writer.write(b"".join(records))
        await self.writer.drain()

    async def _receive(self, request_id: bytes, path: str) -> None:
        try:
            data = self.fs.read(path)
        except (FileNotFoundError, ValueError):
            await self._fatal("open failed: No such file or directory")
        except IsADirectoryError:
            await self._fatal("read failed: Is a directory")
        view = memoryview(data)
        for offset in range(0, len(view), MAX_DATA_CHUNK):
            chunk = view[offset:offset + MAX_DATA_CHUNK]
            self.writer.write(b"DATA" + UINT32.pack(len(chunk)))
            self.writer.write(chunk)
            await self.writer.drain()  # keeps memory flat for big files and slow readers
        self.writer.write(b"DONE" + UINT32.pack(0))
        await self.writer.drain()

    async def _send(self, request_id: bytes, path_and_mode: str) -> None:
        path, _, mode_text = path_and_mode.rpartition(",")
        try:
            mode = int(mode_text)
        except ValueError:
            path, mode = path_and_mode, stat.S_IFREG | 0o644
        chunks, mtime = await self._read_file_data()
        error = self._store(path, mode, b"".join(chunks), mtime)
        if error:
            await self._fatal(error)
        self.writer.write(b"OKAY" + UINT32.pack(0))
        await self.writer.drain()

    async def _read_file_data(self) -> tuple[list[bytes], int]:
        """Collect DATA messages up to DONE (which carries the mtime), at most MAX_PUSH_BYTES."""
        chunks, size = [], 0
        while True:
            header = await self.reader.readexactly(8)
            message_id = header[:4]
            (value,) = UINT32.unpack_from(header, 4)
            if message_id == b"DONE":
                return chunks, value
            if message_id != b"DATA":
                await self._fatal(f"invalid data message {message_id!r} during SEND")
            if value > MAX_DATA_CHUNK:
                await self._fatal(f"oversize data message: {value} bytes (limit {MAX_DATA_CHUNK})")
            size += value
            if size > MAX_PUSH_BYTES:  # refused before the bytes are read, so memory stays bounded
                await self._fatal(f"write failed: No space left on device (a push may not exceed "
                                  f"{MAX_PUSH_BYTES} bytes)")
            chunks.append(await self.reader.readexactly(value))

    def _store(self, path: str, mode: int, data: bytes, mtime: int) -> str | None:
        """Write the pushed file; returns adbd's error text on failure."""
        if not path.startswith("/"):
            return f"couldn't create file {path!r}: path must be absolute"
        # '..' is resolved before the read-only check, as the write resolves it: /sdcard/../system/x
        # is /system/x.
        path = posixpath.normpath(path)
        if path.startswith("//"):  # POSIX keeps a leading '//'; the file system does not
            path = "/" + path.lstrip("/")
        if stat.S_ISLNK(mode):
            return "couldn't create symlink: symlinks are not supported by the virtual phone"
        if _is_read_only(path):
            return f"couldn't create file {path}: Read-only file system"
        try:
            self.fs.write(path, data, mode=stat.S_IFREG | stat.S_IMODE(mode), mtime=mtime or None)
        except IsADirectoryError:
            return f"couldn't create file {path}: Is a directory"
        except NotADirectoryError:
            return f"couldn't create file {path}: Not a directory"
        return None
