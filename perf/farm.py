"""Benchmark of the virtual phone farm as clients see it: through its ADB server, with adbutils.

    .venv/bin/python perf/farm.py [--devices 16] [--seconds 6] [--samples 30]

Starts `python -m simfarm` in a subprocess on a free port, then measures
- screencap latency (adbutils `shell("screencap -p")`, the bytes `screenshot()` decodes) on an
  unchanged screen and right after the screen changed (median, p95);
- uiautomator dump latency (adbutils `dump_hierarchy()`: a shell command plus a sync pull);
- action + screenshot pairs per second with 1, 4 and 16 phones driven at once (one thread and
  one AdbClient per phone);
- the same screencap in-process (phone.run, no protocol), to show where the time goes.
Ends with one line: `farm: screencap_ms_p50=<n> screencap_changed_ms_p50=<n> pairs_per_s_16=<n>`.
"""
from __future__ import annotations

import argparse
import ctypes
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import adbutils

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_BOUNDS = re.compile(r"\[(\d+),(\d+)\]\[(\d+),(\d+)\]")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def summary(name: str, seconds: list[float]) -> float:
    millis = [value * 1000 for value in seconds]
    p50, p95 = statistics.median(millis), percentile(millis, 0.95)
    print(f"{name:<44} median {p50:7.1f} ms   p95 {p95:7.1f} ms   (n={len(millis)})")
    return p50


def die_with_parent() -> None:
    """preexec_fn: the farm gets SIGTERM if this benchmark dies, so no server is left behind."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def start_farm(devices: int, seed: int) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "simfarm", "--devices", str(devices), "--port", "0",
         "--seed", str(seed)], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, preexec_fn=die_with_parent)
    for line in process.stdout:
        match = re.search(r"listening on port (\d+)", line)
        if match:
            return process, int(match.group(1))
    raise SystemExit("the farm did not start (run `python -m simfarm --port 0` to see why)")


def screencap(device: adbutils.AdbDevice) -> bytes:
    png = device.shell(["screencap", "-p"], encoding=None)
    if not png.startswith(PNG_SIGNATURE):
        raise RuntimeError(f"screencap returned no PNG: {png[:80]!r}")
    return png


def tap_targets(device: adbutils.AdbDevice) -> list[tuple[int, int]]:
    """Centres of clickable nodes on the home screen: tapping one changes the screen."""
    device.keyevent("HOME")
    root = ElementTree.fromstring(device.dump_hierarchy().encode())
    targets = []
    for node in root.iter("node"):
        match = _BOUNDS.fullmatch(node.get("bounds", ""))
        if node.get("clickable") == "true" and match:
            left, top, right, bottom = map(int, match.groups())
            if right > left and bottom > top:
                targets.append(((left + right) // 2, (top + bottom) // 2))
    if not targets:
        raise RuntimeError("no clickable node on the home screen to tap")
    return targets


def focus_text_field(device: adbutils.AdbDevice) -> bool:
    """Open apps until one shows a text field and tap it; False when no app has one."""
    for package in [p for p in device.list_packages() if "launcher" not in p]:
        device.app_start(package)
        for node in ElementTree.fromstring(device.dump_hierarchy().encode()).iter("node"):
            match = _BOUNDS.fullmatch(node.get("bounds", ""))
            if node.get("class", "").endswith("EditText") and match:
                left, top, right, bottom = map(int, match.groups())
                device.click((left + right) // 2, (top + bottom) // 2)
                return True
    return False


class Driver:
    """Drives one phone so that every action changes the screen.

    "navigate": a tap on a home-screen icon, then HOME, and again (screens repeat, so the
    phone's render cache may answer); "type": one new character into a text field per action,
    so every screen is new and must be rendered (the worst case)."""

    def __init__(self, device: adbutils.AdbDevice, mode: str = "navigate"):
        self.device = device
        self.step = 0
        self.mode = mode
        if mode == "type" and not focus_text_field(device):
            self.mode = "navigate"
        if self.mode == "navigate":
            self.targets = tap_targets(device)

    def act(self) -> None:
        if self.mode == "type":
            self.device.send_keys("abcdefghijklmnopqrstuvwxyz"[self.step % 26])
        elif self.step % 2 == 0:
            x, y = self.targets[(self.step // 2) % len(self.targets)]
            self.device.click(x, y)
        else:
            self.device.keyevent("HOME")
        self.step += 1


def measure_latencies(device: adbutils.AdbDevice, samples: int) -> dict:
    screencap(device)  # warm up (first render, connection paths)
    unchanged = []
    for _ in range(samples):
        started = time.perf_counter()
        screencap(device)
        unchanged.append(time.perf_counter() - started)
    figures = {"unchanged": summary("screencap, unchanged screen", unchanged)}

    for mode, label in (("navigate", "screencap after navigation (tap/HOME)"),
                        ("type", "screencap after new content (typing)")):
        driver, changed, actually_changed = Driver(device, mode), [], 0
        previous = screencap(device)
        for _ in range(samples):
            driver.act()
            started = time.perf_counter()
            current = screencap(device)
            changed.append(time.perf_counter() - started)
            actually_changed += current != previous
            previous = current
        figures[mode] = summary(label, changed)
        print(f"  ({actually_changed}/{samples} actions changed the screen; {driver.mode})")
        device.keyevent("HOME")

    dumps = []
    for _ in range(max(5, samples // 3)):
        started = time.perf_counter()
        device.dump_hierarchy()
        dumps.append(time.perf_counter() - started)
    figures["dump"] = summary("uiautomator dump + pull (dump_hierarchy)", dumps)
    return figures


def pairs_per_second(port: int, serials: list[str], seconds: float, mode: str) -> float:
    """Action + screenshot pairs per second across `serials`, one thread and client each."""
    drivers = [Driver(adbutils.AdbClient(host="127.0.0.1", port=port).device(serial), mode)
               for serial in serials]
    counts = [0] * len(drivers)
    errors: list[BaseException] = []
    deadline = time.perf_counter() + seconds

    def drive(index: int) -> None:
        try:
            while time.perf_counter() < deadline:
                drivers[index].act()
                screencap(drivers[index].device)
                counts[index] += 1
        except BaseException as error:  # reported below; a thread's exception is otherwise lost
            errors.append(error)

    started = time.perf_counter()
    threads = [threading.Thread(target=drive, args=(i,)) for i in range(len(drivers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} phone threads failed: {errors[0]!r}")
    rate = sum(counts) / elapsed
    print(f"action+screenshot pairs, {len(serials):>2} phones, {mode:<8}   {rate:7.1f} pairs/s "
          f"({sum(counts)} in {elapsed:.1f} s)")
    return rate


def focus_text_field_in_process(phone) -> None:
    for line in phone.run("pm list packages").stdout.decode().split():
        package = line.removeprefix("package:")
        if "launcher" in package:
            continue
        phone.run(f"monkey -p {package} 1")
        phone.run("uiautomator dump /data/local/tmp/bench.xml")
        root = ElementTree.fromstring(phone.fs.read("/data/local/tmp/bench.xml"))
        for node in root.iter("node"):
            match = _BOUNDS.fullmatch(node.get("bounds", ""))
            if node.get("class", "").endswith("EditText") and match:
                left, top, right, bottom = map(int, match.groups())
                phone.run(f"input tap {(left + right) // 2} {(top + bottom) // 2}")
                return


def in_process_profile(samples: int) -> None:
    """The phone's own share of the time: phone.run() with no protocol at all."""
    from simfarm.farm import Farm

    phone = next(iter(Farm(devices=1, seed=0).phones.values()))
    phone.run("screencap -p")
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        phone.run("screencap -p")
        timings.append(time.perf_counter() - started)
    summary("in-process screencap, unchanged", timings)
    focus_text_field_in_process(phone)
    inputs, renders = [], []
    for index in range(samples):
        started = time.perf_counter()
        phone.run(f"input text {'abcdefghijklmnopqrstuvwxyz'[index % 26]}")
        inputs.append(time.perf_counter() - started)
        started = time.perf_counter()
        phone.run("screencap -p")
        renders.append(time.perf_counter() - started)
    summary("in-process `input text x` into a field", inputs)
    summary("in-process screencap after new content", renders)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=6.0, help="per throughput run")
    parser.add_argument("--samples", type=int, default=30, help="per latency figure")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    process, port = start_farm(args.devices, args.seed)
    try:
        client = adbutils.AdbClient(host="127.0.0.1", port=port)
        serials = [device.serial for device in client.device_list()]
        first = client.device(serials[0])
        size = first.window_size()
        print(f"farm of {len(serials)} phones on port {port}; screen {size.width}x{size.height}")
        latencies = measure_latencies(first, args.samples)
        rates = {}
        for mode in ("navigate", "type"):
            for count in (1, 4, 16):
                if count <= len(serials):
                    rates[mode, count] = pairs_per_second(port, serials[:count], args.seconds, mode)
    finally:
        process.terminate()
        process.wait(10)
    in_process_profile(args.samples)
    # The summary line reports the worst case: every screen new (typing), nothing from caches.
    pairs_16 = rates.get(("type", 16), 0.0)
    print(f"farm: screencap_ms_p50={latencies['unchanged']:.1f} "
          f"screencap_changed_ms_p50={latencies['type']:.1f} pairs_per_s_16={pairs_16:.1f}")


if __name__ == "__main__":
    main()
