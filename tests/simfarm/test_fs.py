"""VirtualFS: the per-phone in-memory file system."""
import stat
import threading

import pytest

from simfarm.fs import VirtualFS


@pytest.fixture
def fs():
    return VirtualFS(clock=lambda: 1_700_000_000)


def test_android_layout(fs):
    for path in ("/sdcard/Download", "/sdcard/DCIM", "/sdcard/Pictures", "/data/local/tmp",
                 "/system/bin"):
        assert fs.isdir(path), path
    assert fs.isfile("/system/bin/screencap")
    assert stat.S_ISDIR(fs.stat("/sdcard").mode)


def test_shared_storage_has_three_names(fs):
    fs.write("/sdcard/Download/a.txt", b"hi")
    assert fs.read("/storage/emulated/0/Download/a.txt") == b"hi"
    assert fs.read("/storage/self/primary/Download/a.txt") == b"hi"


def test_write_read_stat_and_parents(fs):
    fs.write("/data/local/tmp/deep/er/f.bin", b"\x00\x01", mode=0o100600, mtime=42)
    assert fs.read("/data/local/tmp/deep/er/f.bin") == b"\x00\x01"
    info = fs.stat("/data/local/tmp/deep/er/f.bin")
    assert (info.mode, info.size, info.mtime) == (0o100600, 2, 42)
    assert fs.isdir("/data/local/tmp/deep/er")
    assert fs.stat("/nope") is None and not fs.exists("/nope")


def test_listdir(fs):
    fs.write("/sdcard/b", b"1")
    fs.write("/sdcard/a", b"22")
    names = [name for name, _ in fs.listdir("/sdcard")]
    assert names == sorted(names) and {"a", "b", "Download"} <= set(names)
    assert fs.listdir("/sdcard/a") is None and fs.listdir("/missing") is None


def test_errors(fs):
    with pytest.raises(FileNotFoundError):
        fs.read("/sdcard/missing")
    with pytest.raises(IsADirectoryError):
        fs.read("/sdcard")
    with pytest.raises(IsADirectoryError):
        fs.write("/sdcard/Download", b"x")
    fs.write("/sdcard/file", b"x")
    with pytest.raises(NotADirectoryError):
        fs.write("/sdcard/file/child", b"x")
    with pytest.raises(ValueError):
        fs.read("relative/path")


def test_remove_mkdir_rename_append(fs):
    fs.write("/sdcard/x", b"1")
    assert fs.remove("/sdcard/x") is True and fs.remove("/sdcard/x") is False
    fs.mkdir("/sdcard/d")
    with pytest.raises(FileExistsError):
        fs.mkdir("/sdcard/d")
    with pytest.raises(FileNotFoundError):
        fs.mkdir("/sdcard/no/such")
    fs.mkdir("/sdcard/no/such", parents=True)
    fs.write("/sdcard/d/f", b"1")
    with pytest.raises(IsADirectoryError):
        fs.remove("/sdcard/d")
    assert fs.remove("/sdcard/d", recursive=True) and not fs.exists("/sdcard/d/f")
    fs.append("/sdcard/log", b"a")
    fs.append("/sdcard/log", b"b")
    fs.rename("/sdcard/log", "/sdcard/Download/log2")
    assert fs.read("/sdcard/Download/log2") == b"ab" and not fs.exists("/sdcard/log")


def test_concurrent_writers(fs):
    def writer(index):
        for round_ in range(200):
            fs.write(f"/data/local/tmp/t{index}/f{round_}", bytes([index]))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(len(fs.listdir(f"/data/local/tmp/t{i}")) == 200 for i in range(8))
