"""Exploration runs: launch, dispatch, drive phones (one app per phone at a time), progress,
cancel, resume.

A run's per-app state lives in `run.frontier[package]` and is saved after every action, so a task
that dies is continued by another one (beat: resume_stale_runs) from where it stopped.
"""
from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from devices import leases
from devices.models import Device
from devices.phone import PhoneConnection, PhoneUnavailable
from devices.reset import reset_phone
from flywheel import jobs
from flywheel.models import App, Edge, ExplorationRun, GemPage
from flywheel.models.exploration import RunStatus
from flywheel.queries.exploration import store
from flywheel.queries.exploration.explorer import AppExplorer, ExplorationStopped

log = logging.getLogger(__name__)
DEFAULT_CONFIG = {"max_depth": 6, "max_pages": 120, "max_seconds": 15 * 60, "phones": 4,
                  "sample_text": "test", "max_same_id": 2, "max_actions_per_page": 60, "max_scrolls": 8}
LIMITS = {"max_depth": (1, 20), "max_pages": (1, 2000), "max_seconds": (10, 6 * 3600), "phones": (1, 64)}
TASK_BUDGET_S = 30 * 60   # one task works this long at most; a fresh one continues


def clean_config(config: dict | None) -> dict:
    out = dict(DEFAULT_CONFIG)
    for key, value in (config or {}).items():
        if key in LIMITS:
            low, high = LIMITS[key]
            out[key] = max(low, min(high, int(value)))
        elif key in ("sample_text",) and isinstance(value, str) and value.strip():
            out[key] = value.strip()[:40]
        elif key == "avoid_words" and isinstance(value, list):
            out[key] = [str(word).strip()[:40] for word in value if str(word).strip()][:100]
        elif key in ("max_same_id", "max_actions_per_page", "max_variants", "max_elements", "max_scrolls",
                     "reset_after"):
            out[key] = value
    return out


def launch_exploration(apps, config=None, user=None, dispatch=True) -> ExplorationRun:
    apps = list(dict.fromkeys(app for app in apps if app))
    if not apps:
        raise ValueError("choose at least one app to explore")
    run = ExplorationRun.objects.create(apps=apps, config=clean_config(config), created_by=user,
                                        status=RunStatus.QUEUED,
                                        progress={app: {"status": "queued", "pages": 0} for app in apps})
    if dispatch:
        transaction.on_commit(lambda: dispatch_exploration(run))
    return run


def dispatch_exploration(run):
    result = jobs.task(jobs.EXPLORE_APPS).apply_async((run.pk,))
    ExplorationRun.objects.filter(pk=run.pk).update(celery_task_id=result.id[:64], heartbeat_at=timezone.now())
    return result.id


def cancel_exploration(run):
    ExplorationRun.objects.filter(pk=run.pk, status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).update(
        status=RunStatus.CANCELLED, finished_at=timezone.now())


def is_cancelled(run_id) -> bool:
    return ExplorationRun.objects.filter(pk=run_id, status=RunStatus.CANCELLED).exists()


def resume_stale_runs(after=None):
    """Beat: running runs whose heartbeat is older than `after` lost their task; send it again."""
    after = after if after is not None else timedelta(seconds=settings.EXPLORATION_STALE_AFTER_S)
    stale = ExplorationRun.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=timezone.now() - after)
    resumed = []
    for run in stale:
        log.warning("exploration run %s: no heartbeat since %s; dispatching it again", run.pk, run.heartbeat_at)
        ExplorationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
        dispatch_exploration(run)
        resumed.append(run.pk)
    return {"resumed": resumed}


def refresh_totals(run):
    """Counts from the per-app progress (called inside update_run)."""
    run.pages_found = sum(int(p.get("pages", 0)) for p in run.progress.values() if isinstance(p, dict))
    run.actions_taken = sum(int(s.get("stats", {}).get("actions", 0)) for s in run.frontier.values()
                            if isinstance(s, dict))


def _save_app(run_id, package, explorer_state, status=None):
    app = App.objects.filter(package=package).first()
    pages = GemPage.objects.filter(app=app, kind__in=[GemPage.Kind.PAGE, GemPage.Kind.DIALOG]).count() if app else 0
    edges = Edge.objects.filter(source__app=app).count() if app else 0

    def change(run):
        run.frontier[package] = explorer_state
        # Without a final status this is a phone's progress report: the app is being explored
        # (a "queued" or "paused" left from before would say otherwise).
        run.progress[package] = {"status": status or "exploring", "pages": pages,
                                 "edges": edges, "frontier": len(explorer_state.get("queue", [])),
                                 "actions": explorer_state.get("stats", {}).get("actions", 0),
                                 "device": explorer_state.get("device", "")}
        stats = explorer_state.get("stats", {})
        run.report[package] = {"pages": pages, "edges": edges, "merged_duplicates": stats.get("merged", 0),
                               "thresholds": explorer_state.get("thresholds", {}),
                               "skipped_irreversible": stats.get("skipped_avoid", 0),
                               "blocked_by_audit": stats.get("blocked", 0),
                               "backed_out": stats.get("backed_out", 0), "relaunches": stats.get("relaunches", 0)}
        refresh_totals(run)
    store.update_run(run_id, change)


def explore_app_on_phone(run_id, package, device, lease, deadline, keeper=None):
    """Explore one app with a leased phone until done, cancelled or out of time."""
    run = ExplorationRun.objects.get(pk=run_id)
    config = {**DEFAULT_CONFIG, **run.config, "_deadline": deadline}
    state = dict(run.frontier.get(package) or {})
    phone = PhoneConnection.for_device(device)
    fresh = not state.get("start")
    spec = None if fresh else {"force_stop": [package], "clear": [], "home": True}
    reset_phone(phone, spec, apps=[package], baseline=device.baseline or None)
    state["device"] = device.serial
    explorer = AppExplorer(run_id, package, phone, device, lease, config, state,
                           should_stop=lambda: is_cancelled(run_id),
                           on_progress=lambda: _save_app(run_id, package, state))
    explorer.keeper = keeper
    state["thresholds"] = explorer.thresholds
    status = "done"
    try:
        explorer.run()
    except ExplorationStopped as stop:
        status = "cancelled" if str(stop) == "cancelled" else "stopped"
        if str(stop) == "time budget spent" and time.monotonic() >= config["_deadline"]:
            status = "paused"
    except PhoneUnavailable as error:
        store.add_problem(run_id, package, "phone", str(error)[:300])
        status = "failed"
        state["attempts"] = state.get("attempts", 0) + 1
        state["done"] = state["attempts"] >= 3  # a phone that drops: another try, not forever
    except Exception as error:  # one app's failure must not stop the others
        log.exception("exploring %s failed", package)
        store.add_problem(run_id, package, "error", f"{type(error).__name__}: {error}"[:300])
        status = "failed"
        state["done"] = True
    finally:
        if config.get("reset_after", True):
            try:
                reset_phone(phone, apps=[package, *state.get("touched", [])], baseline=device.baseline or None)
            except PhoneUnavailable as error:
                store.add_problem(run_id, package, "phone", f"final reset failed: {error}"[:300])
    _save_app(run_id, package, state, status=status)
    return status


def _pending_apps(run_id) -> list[str]:
    run = ExplorationRun.objects.get(pk=run_id)
    return [app for app in run.apps if not (run.frontier.get(app) or {}).get("done")]


def _phones(run, devices=None):
    if devices is not None:
        return list(devices)
    return list(Device.objects.filter(adb_server__in=settings.ADB_SERVERS, status=Device.Status.IDLE).order_by("serial"))


def explore_run(run_id, devices=None, budget_s=None):
    """Task body: lease phones, one thread each; each thread takes the next app it has installed."""
    run = ExplorationRun.objects.get(pk=run_id)
    if run.status in (RunStatus.CANCELLED, RunStatus.DONE, RunStatus.FAILED):
        return {"status": run.status}

    def start(r):
        r.status = RunStatus.RUNNING
        r.started_at = r.started_at or timezone.now()
    run = store.update_run(run_id, start)
    elapsed = (timezone.now() - run.started_at).total_seconds() if run.frontier else 0.0
    remaining = max(1.0, float(run.config.get("max_seconds", DEFAULT_CONFIG["max_seconds"])) - elapsed)
    deadline = time.monotonic() + min(remaining, budget_s or TASK_BUDGET_S)
    pending = _pending_apps(run_id)
    lock = threading.Lock()
    ttl = timedelta(seconds=settings.COLLECTION_LEASE_SECONDS)
    leased = []
    for device in _phones(run, devices):
        if len(leased) >= min(int(run.config.get("phones", 4)), len(pending)):
            break
        try:
            leased.append((device, leases.acquire(device, holder=f"exploration:run:{run_id}", ttl=ttl,
                                                  purpose=str(run))))
        except leases.LeaseRefused:
            continue
    if not leased and pending:
        store.add_problem(run_id, "", "no_phone", "no idle phone could be leased; the run waits for beat")
        return {"phones": 0}

    def drive(device, lease):
        try:
            with leases.kept_alive(lease, ttl=ttl) as keeper:
                while time.monotonic() < deadline and not is_cancelled(run_id) and not keeper.lost:
                    with lock:
                        installed = set(device.installed_apps or [])
                        package = next((p for p in pending if not installed or p in installed), None)
                        if package is None:
                            return
                        pending.remove(package)
                    explore_app_on_phone(run_id, package, device, lease, deadline, keeper)
        finally:
            leases.release(lease)
            close_old_connections()

    threads = [threading.Thread(target=drive, args=pair, name=f"explore{run_id}-{pair[0].serial}", daemon=True)
               for pair in leased]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    phones_have = set().union(*[set(device.installed_apps or []) for device, _ in leased])
    for package in [p for p in pending if phones_have and p not in phones_have]:
        store.add_problem(run_id, package, "no_phone", "no leased phone has this app installed")
        _save_app(run_id, package, {"done": True}, status="not installed")
    return finish_if_done(run_id)


def finish_if_done(run_id):
    left = _pending_apps(run_id)
    run = ExplorationRun.objects.get(pk=run_id)
    out_of_time = (timezone.now() - (run.started_at or timezone.now())).total_seconds() >= float(
        run.config.get("max_seconds", DEFAULT_CONFIG["max_seconds"]))

    def change(r):
        if r.status != RunStatus.RUNNING:
            return
        if not left or out_of_time:
            r.status = RunStatus.DONE
            r.finished_at = timezone.now()
            for package in left:
                r.progress.setdefault(package, {})["status"] = "out of time"
        refresh_totals(r)
    run = store.update_run(run_id, change)
    return {"status": run.status, "left": left}


def explore_apps_now(packages, config=None, devices=None, user=None) -> ExplorationRun:
    """Run an exploration synchronously in this process (scripts, tests)."""
    run = launch_exploration(packages, config, user=user, dispatch=False)
    left = None
    while True:
        outcome = explore_run(run.pk, devices=devices)
        run.refresh_from_db()
        if run.status != RunStatus.RUNNING or outcome.get("phones") == 0 or outcome.get("left") == left:
            return run
        left = outcome.get("left")
