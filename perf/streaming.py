"""Benchmark of live screens as a browser sees them: the real ASGI server, Redis channel layer,
the virtual farm over ADB, and websocket clients that ack frames the way static/js/screen.js does.

    .venv/bin/python perf/streaming.py [--seconds 5] [--inputs 8] [--codecs jpeg,h264]

Starts what it needs: 16 virtual phones in 2 farm processes (`python -m simfarm --devices 8`, each its
own ADB server, as two phone hosts; BENCH_PHONES, BENCH_FARM_PROCESSES), a throwaway SQLite database
(FLYWHEEL_VAR_DIR = a temp dir; migrated; one admin who holds every phone's lease), uvicorn serving
config.asgi (REDIS_URL, default redis://127.0.0.1:6379/0), then logs in over HTTP and opens one
screen socket per phone. Each viewer says which codecs it decodes: `jpeg` (what a browser without
WebCodecs gets: minicap's frames relayed from the phone) and `h264` (what Chromium gets: scrcpy's
H.264 relayed; the bench counts packets, it does not decode them). For each codec and for 1, 4
and 16 phones watched at once it measures
- still screens: how often "unchanged" notes arrive and their capture -> receipt latency;
- changing screens (a thread per phone types into a search box and deletes, straight over ADB):
  new frames per second per phone and their capture -> client receipt latency (median, p95);
  this is the fps_per_phone figure (a still screen sends no frames, so it has no frame rate);
- input -> first frame showing its effect (tap an app icon / Home, alternately, through the
  websocket, the executor and its safety audit; median, p95);
- where the time goes: CPU cores used by the farm, the web server and the bench, the web server's
  CPU per relayed frame (all its CPU while screens change, divided by the frames its viewers got),
  time spent encoding in the web process, the executor's audit / execute times.
Other processes on the machine (say, a test run) share the CPUs: run it on a quiet machine.
Ends with one line (figures of the first codec named by --codecs, h264 by default, what Chromium gets):
`streaming: fps_per_phone_4=<n> frame_latency_ms_p95_4=<n> input_to_frame_ms_p95_4=<n> fps_per_phone_16=<n> web_cpu_ms_per_frame=<n>`
`run()` returns the same figures to perf/speed.py.
"""
import argparse
import asyncio
import http.cookiejar
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR_DIR = tempfile.mkdtemp(prefix="bench-streaming-")
os.environ.update(FLYWHEEL_VAR_DIR=VAR_DIR, FLYWHEEL_KEY_PREFIX=f"bench{os.getpid()}:",
                  DJANGO_SETTINGS_MODULE="config.settings", LOG_LEVEL="WARNING")
os.environ.pop("DATABASE_URL", None)  # always the throwaway SQLite file in VAR_DIR
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").exists() else sys.executable
PHONES = int(os.environ.get("BENCH_PHONES", "16"))
FARM_PROCESSES = int(os.environ.get("BENCH_FARM_PROCESSES", str(max(1, -(-PHONES // 8)))))
PASSWORD = "bench-password-123"
VIEW = {"width": 360, "height": 800}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))] if ordered else float("nan")


def cpu_seconds(pid):
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_farms(log):
    """PHONES phones in FARM_PROCESSES farms (ADB servers: phone hosts, as a farm of this size is
    deployed; one Python process renders and encodes on one core at most); polled until they answer."""
    import adbutils

    farms = []
    for number in range(FARM_PROCESSES):
        phones = PHONES // FARM_PROCESSES + (1 if number < PHONES % FARM_PROCESSES else 0)
        port = free_port()
        process = subprocess.Popen([PYTHON, "-m", "simfarm", "--devices", str(phones), "--port", str(port)],
                                   cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        farms.append((process, f"127.0.0.1:{port}", phones))
    deadline = time.monotonic() + 120
    waiting = list(farms)
    while waiting and time.monotonic() < deadline:
        process, address, phones = waiting[0]
        if process.poll() is not None:
            raise SystemExit(f"a farm exited with {process.returncode}; see {log.name}")
        try:
            host, port = address.split(":")
            if len(adbutils.AdbClient(host=host, port=int(port), socket_timeout=2).list()) == phones:
                waiting.pop(0)
                continue
        except (adbutils.AdbError, OSError):
            pass
        time.sleep(0.5)
    if waiting:
        raise SystemExit("the farms did not answer in 120 s")
    return [(process, address) for process, address, _ in farms]


def prepare_database(addresses):
    """Migrate, discover the phones, create an admin who holds every phone's console lease."""
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command

    from devices.models import Device
    from devices.registry import discover_devices
    from devices.streaming import control

    call_command("migrate", verbosity=0)
    discover_devices(addresses)
    admin = User.objects.create_user("bench-admin", password=PASSWORD)
    admin.groups.add(Group.objects.get_or_create(name="admin")[0])
    # Interleaved over the farms: the 4 phones measured first are on different hosts too.
    devices = list(Device.objects.filter(adb_server__in=addresses).order_by("serial", "adb_server"))
    for device in devices:
        control.take_control(device, admin)
    return devices


def app_icon_center(device, label):
    """Where the app's icon is on the phone's home screen (from its UI hierarchy)."""
    from devices.phone import PhoneConnection
    from devices.uitree import all_nodes, parse_hierarchy

    phone = PhoneConnection.for_device(device)
    for _ in range(3):
        phone.shell("input keyevent 3")  # Home (a keyboard left open may take the first press)
        for node in all_nodes(parse_hierarchy(phone.dump_hierarchy())):
            if node.clickable and label in (node.text, node.desc):
                return node.center
    raise SystemExit(f"no {label!r} icon on {device.serial}'s home screen")


SETTINGS_PATCH = """from config.settings import *  # noqa: F401,F403
# redis-py >= 6 reads with a 5 s socket timeout by default, the same 5 s channels_redis blocks in
# BZPOPMIN: an idle websocket then dies with 'Timeout reading from redis'. Until the project's
# settings give the channel layer a longer socket_timeout, the bench does.
for _layer in CHANNEL_LAYERS.values():
    _layer["CONFIG"]["hosts"] = [h if isinstance(h, dict) else {"address": h, "socket_timeout": 30}
                                 for h in _layer["CONFIG"]["hosts"]]
"""


def start_web(port, log):
    (Path(VAR_DIR) / "bench_settings.py").write_text(SETTINGS_PATCH)
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="bench_settings",
               PYTHONPATH=os.pathsep.join([VAR_DIR, str(ROOT)]))
    process = subprocess.Popen([str(Path(PYTHON).parent / "uvicorn"), "config.asgi:application",
                                "--host", "127.0.0.1", "--port", str(port), "--ws-per-message-deflate", "false", "--log-level", os.environ.get("BENCH_WEB_LOG_LEVEL", "warning")],
                               cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                if sock.getsockname() != sock.getpeername():  # not a connection to itself
                    return process
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"uvicorn did not start; see {log.name}")


def login(base):
    """A real login through the form; returns the Cookie header of the session."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(base + "/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode({"username": "bench-admin", "password": PASSWORD,
                                   "csrfmiddlewaretoken": token}).encode()
    opener.open(urllib.request.Request(base + "/login/", data=form, headers={"Referer": base + "/login/"}))
    cookies = {cookie.name: cookie.value for cookie in jar}
    if "sessionid" not in cookies:
        raise SystemExit("login failed")
    return "; ".join(f"{name}={value}" for name, value in cookies.items())


class Viewer:
    """One screen socket, acking every frame at once (what screen.js does after drawing)."""

    def __init__(self, device, icon, codecs):
        self.device, self.icon, self.codecs = device, icon, codecs
        self.frames = self.pixels = 0
        self.latencies, self.pixel_latencies = [], []
        self.last = None  # the newest frame header
        self.changed = asyncio.Event()  # a frame with new pixels arrived
        self.changed_at = None
        self.results = []
        self.split = []
        self.unseen = []  # inputs whose effect no frame showed within 5 s  # per input: (sent -> capture began, capture began -> frame received)
        self.stats = None

    async def run(self, url, cookie, origin, stop):
        from websockets.asyncio.client import connect

        from devices.streaming.frames import unpack

        async with connect(url, additional_headers={"Cookie": cookie}, origin=origin, max_size=2**24) as ws:
            self.ws = ws
            await ws.send(json.dumps({"type": "view", **VIEW, "max_fps": 60, "codecs": self.codecs}))
            async for message in ws:
                received = time.time()
                if isinstance(message, str):
                    data = json.loads(message)
                    if data["type"] == "input_result":
                        self.results.append(data)
                    elif data["type"] == "stats":
                        self.stats = data
                        return
                    continue
                header, jpeg = unpack(message)
                if jpeg or header.get("codec") != "h264":  # screen.js acks what it draws
                    await ws.send(json.dumps({"type": "ack", "seq": header["seq"]}))
                if stop.is_set():
                    await ws.send(json.dumps({"type": "stats"}))
                    continue
                self.frames += 1
                self.latencies.append(received - header["captured_at"])
                self.last = header
                if jpeg:
                    self.pixels += 1
                    self.pixel_latencies.append(received - header["captured_at"])
                    self.changed_at = (received, header["captured_at"])
                    self.changed.set()

    async def input_round(self, count, delays):
        """Alternately open the app (tap its icon) and go Home; time until a frame shows it."""
        for index in range(count):
            if index % 2 == 0:
                header = self.last
                x, y = self.icon
                message = {"action": "tap", "x": x * header["width"] / header["phone_width"],
                           "y": y * header["height"] / header["phone_height"],
                           "frame": {"seq": header["seq"], "width": header["width"], "height": header["height"]}}
            else:
                message = {"action": "key", "key": "home"}
            self.changed.clear()
            sent = time.time()
            await self.ws.send(json.dumps({"type": "input", "id": index, **message}))
            try:
                while True:
                    await asyncio.wait_for(self.changed.wait(), 5)
                    self.changed.clear()
                    received, captured = self.changed_at
                    if captured > sent:  # a capture that began after the input was sent
                        delays.append(received - sent)
                        self.split.append((captured - sent, received - captured))
                        break
            except TimeoutError:
                self.unseen.append((message, self.results[-1:]))
            await asyncio.sleep(0.3)


CHANGES_PER_S = float(os.environ.get("BENCH_CHANGES_PER_S", "60"))


def change_screens(device, icon, stop, made):
    """Keep a phone's screen changing: type into Chatter's search box, then delete, over and over,
    at most CHANGES_PER_S keystrokes a second (a 60 Hz display shows no more; unpaced, the bench's
    own commands would take the farm's CPU from its encoders). Each keystroke is a new picture; the
    farm repaints only the field, and serves screens it saw before from its cache."""
    from devices.phone import PhoneConnection
    from devices.uitree import all_nodes, parse_hierarchy

    phone = PhoneConnection.for_device(device)

    def tap(predicate):
        for node in all_nodes(parse_hierarchy(phone.dump_hierarchy())):
            if predicate(node):
                phone.shell("input tap {} {}".format(*node.center))
                return
        raise SystemExit(f"{device.serial}: the element to tap is not on the screen")

    phone.shell("am force-stop com.sim.chat")  # start from the app's first page whatever an earlier run left
    phone.shell("input tap {} {}".format(*icon))
    tap(lambda node: node.resource_id.endswith("action_search"))
    tap(lambda node: node.resource_id.endswith("message_search"))
    next_at = time.monotonic()
    while not stop.is_set():
        for command in [f"input text {letter}" for letter in "abcdefgh"] + ["input keyevent 67"] * 8:
            time.sleep(max(0.0, next_at - time.monotonic()))
            phone.shell(command)
            made.append(time.monotonic())
            next_at = max(next_at + 1 / CHANGES_PER_S, time.monotonic() - 1 / CHANGES_PER_S)
    phone.shell("input keyevent 3")


async def measure(count, devices, icons, base, cookie, seconds, inputs, pids, codecs):
    origin = base
    url = base.replace("http", "ws")
    stop = asyncio.Event()
    viewers = [Viewer(device, icons[device.pk], codecs) for device in devices[:count]]
    tasks = [asyncio.create_task(v.run(f"{url}/ws/devices/{v.device.pk}/screen/", cookie, origin, stop))
             for v in viewers]
    await asyncio.sleep(1.5)  # warm up: capture loops started, first pictures encoded

    def reset_counts():
        for viewer in viewers:
            viewer.frames, viewer.pixels, viewer.latencies, viewer.pixel_latencies = 0, 0, [], []
        return time.monotonic(), {name: sum(map(cpu_seconds, group)) for name, group in pids.items()}

    def cpu_since(began, before):
        elapsed = time.monotonic() - began
        return elapsed, {name: (sum(map(cpu_seconds, group)) - before[name]) / elapsed
                         for name, group in pids.items()}

    # 1. still screens: only "unchanged" notes flow (a few a second), no pixels
    began, before = reset_counts()
    await asyncio.sleep(seconds / 2)
    elapsed, cpu_still = cpu_since(began, before)
    still_rate = statistics.mean(v.frames / elapsed for v in viewers)
    still_latencies = [value * 1000 for v in viewers for value in v.latencies]

    # 2. screens that keep changing: every capture is a new picture to decode, scale and send
    halt = threading.Event()
    made = []  # when each screen change was made, all phones together
    drivers = [threading.Thread(target=change_screens, args=(v.device, v.icon, halt, made), daemon=True)
               for v in viewers]
    for driver in drivers:
        driver.start()
    await asyncio.sleep(0.5)
    began, before = reset_counts()
    await asyncio.sleep(seconds)
    elapsed, cpu_watch = cpu_since(began, before)
    changes = sum(1 for moment in made if moment >= began) / elapsed / count
    halt.set()
    for driver in drivers:
        await asyncio.to_thread(driver.join)
    fps = statistics.mean(v.pixels / elapsed for v in viewers)
    web_cpu_ms_per_frame = 1000 * cpu_watch["web"] * elapsed / max(1, sum(v.frames for v in viewers))
    latencies = [value * 1000 for v in viewers for value in v.pixel_latencies]
    await asyncio.sleep(0.5)

    for viewer in viewers:  # where the icon is now (the home screen may have changed meanwhile)
        viewer.icon = await asyncio.to_thread(app_icon_center, viewer.device, "Chatter")
    delays = []
    began, before = reset_counts()
    await asyncio.gather(*(v.input_round(inputs, delays) for v in viewers))
    elapsed, cpu_input = cpu_since(began, before)
    stop.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    delays_ms = [d * 1000 for d in delays]
    results = [r for v in viewers for r in v.results]
    refused = [r for r in results if not r["ok"]]
    captures = [v.stats["capture"] for v in viewers]
    capture_ms = 1000 * sum(c["capture_seconds"] for c in captures) / max(1, sum(c["captures"] for c in captures))
    encode_ms = 1000 * sum(v.stats["encode_seconds"] for v in viewers) / max(
        1, sum(c["changed"] for c in captures))
    timings = [r.get("timings", {}) for r in results if r["ok"]]
    figures = {
        "fps": fps, "lat_p50": statistics.median(latencies), "lat_p95": percentile(latencies, 0.95),
        "in_p50": statistics.median(delays_ms), "in_p95": percentile(delays_ms, 0.95),
        "web_cpu_ms_per_frame": web_cpu_ms_per_frame,
    }
    sources = sorted({v.stats.get("source", "?") for v in viewers})
    print(f"{count:>2} phone(s), codecs {'+'.join(codecs)}, still screens: {still_rate:.1f} 'unchanged' notes/s per phone, capture->receipt "
          f"median {statistics.median(still_latencies):.0f} ms; CPU cores: "
          + ", ".join(f"{n} {v:.2f}" for n, v in cpu_still.items()))
    print(f"   changing screens ({changes:.1f} changes made/s per phone): {fps:5.1f} new frames/s per phone; capture->receipt median "
          f"{figures['lat_p50']:.0f} ms, p95 {figures['lat_p95']:.0f} ms; CPU cores: "
          + ", ".join(f"{n} {v:.2f}" for n, v in cpu_watch.items()))
    print(f"   input->new frame median {figures['in_p50']:.0f} ms, p95 {figures['in_p95']:.0f} ms "
          f"(n={len(delays_ms)}, refused {len(refused)}); CPU cores: "
          + ", ".join(f"{n} {v:.2f}" for n, v in cpu_input.items()))
    unseen = [item for v in viewers for item in v.unseen]
    if unseen:
        print(f"   {len(unseen)} input(s) showed no change within 5 s, e.g. {unseen[0]}")
    splits = [split for v in viewers for split in v.split]
    print(f"     of which input sent -> capture began median "
          f"{statistics.median(a for a, _ in splits) * 1000:.0f} ms, capture began -> frame received median "
          f"{statistics.median(b for _, b in splits) * 1000:.0f} ms (p95 {percentile([b for _, b in splits], 0.95) * 1000:.0f})")
    if timings:
        audit = statistics.median(t.get("audit", 0) for t in timings)
        run = statistics.median(t.get("execute", 0) for t in timings)
        print(f"     executor per input: audit (hierarchy dump + rules) median {audit:.0f} ms, "
              f"execute median {run:.0f} ms")
    dumps = viewers[0].stats.get("screen_dumps", {})
    print(f"   web process UI dumps so far: {dumps.get('dumped', 0)} read, {dumps.get('reused', 0)} reused "
          "(screen unchanged since)")
    print(f"   source(s) {', '.join(sources)}; web CPU {web_cpu_ms_per_frame:.2f} ms per frame relayed; "
          f"mean capture {capture_ms:.1f} ms; encoding in the web process {encode_ms:.1f} ms per new picture")
    return figures


def run(seconds=5.0, inputs=8, codecs=("h264", "jpeg"), counts=(1, 4, 16)):
    """{codec: {phones: figures}} measured on a farm of PHONES phones started here."""
    logs = Path(VAR_DIR)
    farm_log, web_log = open(logs / "farm.log", "wb"), open(logs / "web.log", "wb")
    farms = start_farms(farm_log)
    web = None
    results = {}
    try:
        devices = prepare_database([address for _, address in farms])
        icons = {device.pk: app_icon_center(device, "Chatter") for device in devices}
        port = free_port()
        web = start_web(port, web_log)
        base = f"http://127.0.0.1:{port}"
        cookie = login(base)
        print(f"streaming bench: {len(devices)} virtual phones in {len(farms)} farm process(es), STREAM_SOURCE {os.environ.get('STREAM_SOURCE', 'auto')}, "
              f"view {VIEW['width']}x{VIEW['height']}, {os.cpu_count()} CPU(s), var {VAR_DIR}")
        pids = {"farm": [process.pid for process, _ in farms], "web": [web.pid], "perf": [os.getpid()]}
        for codec in codecs:
            wanted = [codec] if codec == "jpeg" else [codec, "jpeg"]
            results[codec] = {count: asyncio.run(measure(count, devices, icons, base, cookie, seconds, inputs,
                                                         pids, wanted)) for count in counts}
    finally:
        for process in [web, *(process for process, _ in farms)]:
            if process is not None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    print(f"pid {process.pid} ignored SIGTERM for 15 s; killed", file=sys.stderr)
                    process.kill()
    return results


def summary(results, codec):
    four, sixteen = results[codec][4], results[codec][16]
    web_cpu = statistics.mean(figures["web_cpu_ms_per_frame"] for figures in results[codec].values())
    return {"fps_per_phone_4": four["fps"], "frame_latency_ms_p95_4": four["lat_p95"],
            "input_to_frame_ms_p95_4": four["in_p95"], "fps_per_phone_16": sixteen["fps"],
            "web_cpu_ms_per_frame": web_cpu}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--inputs", type=int, default=8, help="inputs per phone (tap, home, ...)")
    parser.add_argument("--codecs", default="h264,jpeg", help="what the viewers decode, comma-separated")
    args = parser.parse_args()
    codecs = [codec.strip() for codec in args.codecs.split(",") if codec.strip()]
    results = run(args.seconds, args.inputs, codecs)
    for codec in codecs:
        figures = summary(results, codec)
        print(f"{codec}: " + " ".join(f"{name}={value:.1f}" for name, value in figures.items()))
    figures = summary(results, codecs[0])
    print(f"streaming: fps_per_phone_4={figures['fps_per_phone_4']:.1f} "
          f"frame_latency_ms_p95_4={figures['frame_latency_ms_p95_4']:.0f} "
          f"input_to_frame_ms_p95_4={figures['input_to_frame_ms_p95_4']:.0f} "
          f"fps_per_phone_16={figures['fps_per_phone_16']:.1f} "
          f"web_cpu_ms_per_frame={figures['web_cpu_ms_per_frame']:.2f}")


if __name__ == "__main__":
    main()
