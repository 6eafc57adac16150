"""In-process timings of one virtual phone's screen (no ADB): what the phone itself costs.

    python perf/phone_render.py [--samples 30] [--index 0]

Prints medians and p95 for: an unchanged screencap (render cache), a screencap right after
typing one character (a few bands change), after navigating between known screens (cache hit
by signature), a screen never seen before (every band compressed), and `uiautomator dump`.
The ADB-level figures are perf/farm.py's.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simfarm import png
from simfarm.farm import Farm


def timed(fn, samples):
    values = []
    for i in range(samples):
        start = time.perf_counter()
        fn(i)
        values.append((time.perf_counter() - start) * 1000)
    values.sort()
    return statistics.median(values), values[int(len(values) * 0.95) - 1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--index", type=int, default=0, help="phone index (4 = 720x1600, 6 = 1440x3200)")
    args = parser.parse_args()
    farm = Farm(devices=args.index + 1, seed=0)
    phone = list(farm.phones.values())[args.index]
    print(f"phone {phone.serial} {phone.width}x{phone.height}")
    phone.run("monkey -p com.sim.translator 1")
    phone.run(f"input tap {phone.width // 2} {int(phone.height * 0.29)}")

    def report(name, fn):
        median, p95 = timed(fn, args.samples)
        print(f"{name:46s} median {median:7.2f} ms   p95 {p95:7.2f} ms")

    report("screencap -p, unchanged screen", lambda i: phone.run("screencap -p"))
    report("input text + screencap -p (new content)", lambda i: (phone.run("input text x"), phone.run("screencap -p")))
    phone.run("input keyevent BACK")
    report("tap/BACK between known screens + screencap", lambda i: (
        phone.run("input keyevent HOME" if i % 2 else "monkey -p com.android.settings 1"), phone.run("screencap -p")))

    def unseen(i):
        png.ENCODER._cache.clear()
        phone.render_cache._entries.clear()
        phone.engine.changed()
        phone.run("screencap -p")
    report("screen never seen before (no band reuse)", unseen)
    report("uiautomator dump /sdcard/d.xml", lambda i: phone.run("uiautomator dump /sdcard/d.xml"))
    print(f"bands compressed {png.ENCODER.compressed}, reused {png.ENCODER.reused}")


if __name__ == "__main__":
    main()
