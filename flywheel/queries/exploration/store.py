"""Writes of an exploration: GemPages, Edges, problems. Each write is its own transaction, so an
interrupted run leaves whole pages and edges, never half of one."""
from __future__ import annotations

import hashlib
import json
import threading

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from flywheel.blobs import store_blob
from flywheel.models import App, Edge, ExplorationRun, GemPage
from flywheel.queries.page_io import describe_io
from flywheel.screens.page_identity import match_page, thresholds_for

_run_lock = threading.Lock()   # several phones' threads update the same run's JSON fields
MAX_PROBLEMS = 500
SYSTEM_HINTS = ("launcher", "resolver", "chooser", "systemui", "com.android.", "com.google.android.")


def app_row(package: str) -> App:
    app, _ = App.objects.get_or_create(
        package=package, defaults={"label": package.rsplit(".", 1)[-1],
                                   "is_system": any(hint in package for hint in SYSTEM_HINTS[:4])})
    return app


def thresholds(app) -> dict:
    return thresholds_for(app)


def pages_of(app) -> list[GemPage]:
    return list(GemPage.objects.filter(app=app).only(
        "id", "app_id", "name", "kind", "phash", "layout_signature", "layout_shape", "activity", "title",
        "texts", "elements"))


def page(page_id) -> GemPage | None:
    return GemPage.objects.select_related("app").filter(pk=page_id).first()


def page_count(app) -> int:
    return GemPage.objects.filter(app=app, kind__in=[GemPage.Kind.PAGE, GemPage.Kind.DIALOG]).count()


def update_run(run_id, change):
    """Read-modify-write of the run row under a lock (`change(run)` edits it in place)."""
    with _run_lock, transaction.atomic():
        run = ExplorationRun.objects.select_for_update().get(pk=run_id)
        change(run)
        run.heartbeat_at = timezone.now()
        run.save(update_fields=["pages_found", "actions_taken", "progress", "frontier", "report", "problems",
                                "heartbeat_at", "status", "finished_at", "started_at"])
        return run


def add_problem(run_id, package, kind, detail):
    def change(run):
        if len(run.problems) < MAX_PROBLEMS:
            run.problems.append({"at": timezone.now().isoformat(timespec="seconds"), "app": package,
                                 "kind": kind, "detail": str(detail)[:500]})
    update_run(run_id, change)


def _unique_name(app, base: str) -> str:
    base = (base or "page").strip()[:150] or "page"
    name, n = base, 2
    while GemPage.objects.filter(app=app, name=name).exists():
        name, n = f"{base} ({n})", n + 1
    return name


def _kind(reading, kind):
    if kind:
        return kind
    return GemPage.Kind.DIALOG if reading.is_dialog else GemPage.Kind.PAGE


def record_page(run_id, app, observed, depth, thresholds, is_start=False, kind=None):
    """The known page this observation is, or a new GemPage. Returns (page, created)."""
    seen, print_, reading = observed
    known = match_page(print_, [p for p in pages_of(app) if not kind or p.kind == kind], thresholds)
    if known is not None:
        touch_page(known, observed)
        if is_start and not known.is_start:
            GemPage.objects.filter(pk=known.pk).update(is_start=True)
        return known, False
    screenshot = store_blob(seen.png, "png") if seen.png else ""
    hierarchy = store_blob(seen.hierarchy_xml.encode("utf-8"), "xml")
    inputs, outputs = describe_io(reading.elements, reading.texts, reading.title)
    activity = seen.foreground.get("activity", "") if reading.package == seen.foreground.get("package") else ""
    base = reading.title or activity.rsplit(".", 1)[-1] or reading.package
    with transaction.atomic():
        created = GemPage.objects.create(
            app=app, name=_unique_name(app, base), kind=_kind(reading, kind), title=reading.title[:300],
            activity=activity[:300], phash=print_.phash, layout_signature=print_.layout_signature,
            layout_shape=print_.layout_shape[:400], texts=reading.texts, elements=reading.elements,
            node_count=print_.node_count, screenshot_sha=screenshot, hierarchy_sha=hierarchy,
            depth=min(depth, 32767), is_start=is_start, inputs=inputs, outputs=outputs,
            description=f"{reading.title or base}: {len(reading.elements)} actionable elements",
            explored_by_id=run_id, visits=1, last_seen_at=timezone.now())
    return created, True


def touch_page(page, observed=None):
    GemPage.objects.filter(pk=page.pk).update(visits=F("visits") + 1, last_seen_at=timezone.now())


def system_page(run_id, observed, kind, thresholds_):
    app = app_row(observed[2].package)
    if not app.is_system:
        App.objects.filter(pk=app.pk).update(is_system=True)
    page, _ = record_page(run_id, app, observed, depth=0, thresholds=thresholds_for(app), kind=kind)
    return page


def action_key(via: str, action: dict) -> str:
    return hashlib.sha1((via + json.dumps(action, sort_keys=True)).encode("utf-8")).hexdigest()[:40]


def record_edge(run_id, source, target, via, action, kind=None):
    kind = kind or (Edge.Kind.INTRA if source.app_id == target.app_id else Edge.Kind.CROSS)
    key = action_key(via, action)
    try:
        with transaction.atomic():
            edge, created = Edge.objects.get_or_create(
                source=source, target=target, action_key=key,
                defaults={"kind": kind, "via": via, "action": action, "explored_by_id": run_id,
                          "last_checked_at": timezone.now()})
    except IntegrityError:  # another phone wrote it meanwhile
        return Edge.objects.get(source=source, target=target, action_key=key)
    if not created:
        Edge.objects.filter(pk=edge.pk).update(last_checked_at=timezone.now())
    return edge


def add_clipboard_and_home_edges(run_id, app):
    """Edges every page of the app has through system surfaces: Home (to the launcher page) and,
    for pages that copy text, the clipboard (to other apps' pages that take text)."""
    launcher = GemPage.objects.filter(kind=GemPage.Kind.LAUNCHER).order_by("id").first()
    pages = list(GemPage.objects.filter(app=app, kind__in=[GemPage.Kind.PAGE, GemPage.Kind.DIALOG]))
    if launcher is not None:
        for page_ in pages:
            if page_.kind == GemPage.Kind.PAGE:
                record_edge(run_id, page_, launcher, "home", {"action": "system_button", "button": "home"},
                            kind="cross")
    copiers = [p for p in pages if any("copied" in output for output in p.outputs or [])]
    if not copiers:
        return
    takers = {}
    for candidate in GemPage.objects.exclude(app=app).filter(kind=GemPage.Kind.PAGE, app__is_system=False).order_by("depth", "id"):
        if candidate.app_id in takers or not candidate.inputs:
            continue
        takers[candidate.app_id] = candidate
    for source in copiers:
        for target in takers.values():
            field = next((e for e in target.elements if e.get("editable")), None)
            if field is None:
                continue
            record_edge(run_id, source, target, "clipboard",
                        {"action": "long_press", "target": field["selector"], "note": "paste the copied text"},
                        kind="cross")
