"""Benchmark: how fast a person clears the human repair queue in a browser, keyboard only (§2.5.2).

    .venv/bin/python perf/repair_queue.py [--n 12]

Starts what it needs: a throwaway SQLite database (FLYWHEEL_VAR_DIR = a temp dir, migrated; or
BENCH_DATABASE_URL), uvicorn serving config.asgi (REDIS_URL, default redis://127.0.0.1:6379/0),
and Debian's chromium through Playwright. It seeds N repairs waiting for a person from a stored
failed trajectory: one with screenshots in the database if there is one (say, after perf/ecdm.py
on BENCH_DATABASE_URL), else one recorded here from an in-process virtual phone (Settings: the
model tapped the wrong row). Each repair has a Teacher attempt the ECDM did not trust (confidence
0.35), or none (every fourth).

Then one annotator, signed in, clears the queue with keys only, as the page lists them:
- Teacher attempt right: T, Ctrl+Enter;
- Teacher attempt off by 50 px: T, Shift+↑ twice, Ctrl+Enter;
- no Teacher: 1 (click), Shift+arrows to the target, R, the plan, Tab, the decision, Esc, Ctrl+Enter.
Every item is written by the real apply_correction (sample + SFT entry); the replays it queues are
purged afterwards (no worker runs here). The bot does not think, so the figure is the page's own
ceiling (load, draw, check, write, next), not a person's pace.

Ends with one line: `repair_queue: repair_items_per_min=<n> n=<n>`.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = tempfile.mkdtemp(prefix="bench-repairs-")
os.environ.update(FLYWHEEL_VAR_DIR=VAR, FLYWHEEL_KEY_PREFIX=f"bench{os.getpid()}:",
                  DJANGO_SETTINGS_MODULE="config.settings", ECDM_AUTOMATIC="0", ECDM_REPLAY="0", LOG_LEVEL="WARNING")
os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{VAR}/bench.sqlite3"
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").exists() else sys.executable
BIN = Path(PYTHON).parent
PASSWORD = "bench-password-123"

import django

django.setup()

from django.core.management import call_command


def free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- the stored trajectory --------------------------------------------------------------------------

def stored_failure():
    """A failed trajectory with a screenshot on a step after the first, if the database has one."""
    from flywheel.models import Step

    step = (Step.objects.filter(trajectory__verdict__in=["false", "env_error"], index__gte=1)
            .exclude(screenshot="").exclude(trajectory__line="ecdm").order_by("trajectory_id", "index").first())
    return (step.trajectory, step.index) if step else (None, None)


def recorded_failure():
    """Record one here: Home → open Settings → tap the wrong row → stop. Screens from a virtual phone."""
    from devices.uitree import all_nodes, parse_hierarchy
    from flywheel.blobs import store_blob
    from flywheel.models import Query, Step, Trajectory, Verdict
    from simfarm.farm import Farm

    phone = list(Farm(devices=1, seed=0).phones.values())[0]
    query, _ = Query.objects.get_or_create(key="bench-repair-settings", defaults={
        "text": "Open the Bluetooth settings", "tier": "L2", "verification": {}})
    trajectory = Trajectory.objects.create(query=query, line="automatic", status="completed", verdict="false",
                                           destination="ecdm", stop_kind="terminate_failure",
                                           stop_reason="bench: recorded failure")
    Verdict.objects.create(trajectory=trajectory, outcome="false")

    def record(index, action, cot):
        screen = (phone.width, phone.height)
        Step.objects.create(trajectory=trajectory, index=index, executed_action=action, cot=cot,
                            screenshot=store_blob(phone.screencap_png(), "png"),
                            hierarchy=store_blob(phone.dump_hierarchy().encode(), "xml"), timings={"screen": list(screen)})

    record(0, {"action": "open", "app": "Settings"}, {"Observation": "The home screen.", "Plan": "Open Settings.",
                                                     "Decision": "Open the app for \"Settings\""})
    phone.run("monkey -p com.android.settings 1")
    rows = [n for n in all_nodes(parse_hierarchy(phone.dump_hierarchy())) if n.clickable and n.all_text().strip()]
    wrong = rows[min(3, len(rows) - 1)]
    record(1, {"action": "click", "point": list(wrong.center)},
           {"Observation": "Settings is open.", "Plan": "Find Bluetooth.", "Decision": f"Tap \"{wrong.all_text()}\""})
    phone.run(f"input tap {wrong.center[0]} {wrong.center[1]}")
    record(2, {"action": "terminate", "status": "failure"}, {"Observation": "Not Bluetooth.", "Plan": "Give up.",
                                                             "Decision": "Stop: failure"})
    target = next((n for n in rows if n is not wrong), rows[0])
    return trajectory, 1, list(target.center)


def seed_repairs(n):
    """N copies of the stored failure, each with its repair waiting for a person."""
    from datetime import timedelta

    from django.utils import timezone

    from devices.uitree import all_nodes, parse_hierarchy
    from flywheel.blobs import read_blob
    from flywheel.models import Attribution, Repair, Step, Trajectory

    original, index = stored_failure()
    target = None
    if original is None:
        original, index, target = recorded_failure()
    frozen = original.steps.get(index=index)
    if target is None:
        wrong = (frozen.executed_action or {}).get("point")
        rows = [node for node in all_nodes(parse_hierarchy(read_blob(frozen.hierarchy.name).decode("utf-8", "replace")))
                if node.clickable] if frozen.hierarchy else []
        others = [node for node in rows if not wrong or not node.contains(*wrong)]
        target = list(others[0].center) if others else [200, 400]
    print(f"seeding {n} repairs from trajectory #{original.pk}, step {index}; target {target}", flush=True)
    plans, copies = [], []
    for number in range(n):
        copy = Trajectory.objects.create(query=original.query, line=original.line, status="completed",
                                         verdict="false", destination="ecdm", stop_kind=original.stop_kind,
                                         stop_reason=f"bench copy of #{original.pk}")
        Step.objects.bulk_create([Step(trajectory=copy, index=s.index, screenshot=s.screenshot.name,
                                       hierarchy=s.hierarchy.name, executed_action=s.executed_action, cot=s.cot,
                                       timings=s.timings, foreground_package=s.foreground_package)
                                  for s in original.steps.order_by("index")])
        attribution = Attribution.objects.create(trajectory=copy, level=3, cause="perception_drift",
                                                 first_bad_step=index, owner="ecdm", ecdm_path="step")
        kind = "none" if number % 4 == 3 else "off" if number % 2 else "right"
        point = [target[0], target[1] + 50] if kind == "off" else target
        teacher = None if kind == "none" else {
            "action": {"action": "click", "point": point}, "confidence": 0.35, "source": "bench",
            "rationale": "a plausible row", "cot": {"Observation": "Settings lists its sections.",
                                                    "Plan": "Open the section the goal names.",
                                                    "Decision": f"Tap at ({point[0]}, {point[1]})"}}
        Repair.objects.create(trajectory=copy, attribution=attribution, path="step", step_index=index,
                              teacher_output=teacher, confidence=0.35 if teacher else None, human_fallback=True,
                              status="needs_human", human_reason="bench: Teacher confidence 0.35 below 0.6"
                              if teacher else "bench: the Teacher failed")
        plans.append(kind)
        copies.append(copy.pk)
    # First in the queue (it lists the oldest first), before any repair the database already had.
    Repair.objects.filter(trajectory_id__in=copies, status="needs_human").update(
        created_at=timezone.now() - timedelta(days=3650))
    return plans, target, frozen


# -- the browser ------------------------------------------------------------------------------------

def start_server():
    port = free_port()
    log = open(Path(VAR) / "web.log", "wb")
    process = subprocess.Popen([str(BIN / "uvicorn"), "config.asgi:application", "--host", "127.0.0.1",
                                "--port", str(port), "--ws-per-message-deflate", "false"], cwd=ROOT, env=dict(os.environ), stdout=log,
                               stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"uvicorn exited; see {log.name}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2)
            return process, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    process.terminate()
    raise SystemExit("uvicorn did not answer")


def clear_queue(page, base, plans, target, start_point):
    """Keys only, from the queue page to the empty queue; returns the seconds it took."""
    started = time.perf_counter()
    page.keyboard.press("Enter")
    for kind in plans:
        page.wait_for_url("**/repairs/*/", timeout=30000)
        page.wait_for_selector("[data-testid=editor]", timeout=30000)
        if kind == "right":
            page.keyboard.press("t")
        elif kind == "off":
            page.keyboard.press("t")
            page.keyboard.press("Shift+ArrowUp")
            page.keyboard.press("Shift+ArrowUp")
        else:
            page.keyboard.press("1")
            dx, dy = target[0] - start_point[0], target[1] - start_point[1]
            for key, steps in (("ArrowRight" if dx > 0 else "ArrowLeft", abs(dx) // 25),
                               ("ArrowDown" if dy > 0 else "ArrowUp", abs(dy) // 25)):
                for _ in range(steps):
                    page.keyboard.press(f"Shift+{key}")
            empty = page.evaluate("['observation', 'plan', 'decision'].filter((t) => "
                                  "!document.querySelector(`[data-testid=cot-${t}]`).value.trim()).length")
            for text in ["The screen lists rows", "Open the row the goal names", "Tap that row"][-empty:] if empty else []:
                page.keyboard.press("r")                    # R: the first required tag still empty
                page.keyboard.type(text)
                page.keyboard.press("Escape")
        url = page.url
        page.keyboard.press("Control+Enter")
        page.wait_for_function(f"location.href !== {url!r}", timeout=30000)
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=12)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("no chromium installed: apt-get install chromium")
    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import Group, User

    from annotation.repair_queue import screen_size
    from flywheel.models import Repair, SftEntry

    user = User.objects.create_user(username=f"bench-annotator-{os.getpid()}", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="annotator")[0])
    plans, target, frozen = seed_repairs(args.n)
    width, height = screen_size(frozen)
    seeded = list(Repair.objects.filter(status="needs_human").order_by("created_at", "pk")
                  .values_list("pk", flat=True)[:args.n])
    server, base = start_server()
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True,
                                                 args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.goto(base + "/login/?next=/repairs/")
            page.fill("input[name=username]", user.username)
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(base + "/repairs/")
            seconds = clear_queue(page, base, plans, target, [round(width / 2), round(height / 2)])
            browser.close()
    finally:
        # The last submit claimed the next waiting repair, if the database had more: give it back.
        Repair.objects.filter(claimed_by=user, status="needs_human").update(claimed_by=None, claimed_until=None)
        server.terminate()
        server.wait(timeout=15)
        from config.celery import app

        try:
            with app.connection_for_write() as connection:
                connection.default_channel.queue_purge("repair")
        except Exception as error:  # the broker is only where the replays were queued
            print(f"could not purge the queued replays: {error}")
    done = Repair.objects.filter(pk__in=seeded, status="done", correction__by="human").count()
    entries = SftEntry.objects.filter(repair_id__in=seeded, intake="ecdm_repaired").count()
    print(f"{done}/{len(seeded)} repaired by the person ({entries} SFT entries ecdm_repaired) in {seconds:.1f} s",
          flush=True)
    if done != len(seeded):
        raise SystemExit("not every repair was written: see the web log in " + VAR)
    print(f"repair_queue: repair_items_per_min={done / seconds * 60:.1f} n={done}")


if __name__ == "__main__":
    main()
