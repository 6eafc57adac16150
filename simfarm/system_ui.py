"""System surfaces drawn by code: launcher (Home), Recents, notification shade, share sheet."""
import zlib

from PIL import Image

from simfarm import ui
from simfarm.layout import text_node
from simfarm.ui import Node

LAUNCHER = "com.google.android.apps.nexuslauncher"
SYSTEMUI = "com.android.systemui"
RESOLVER = "com.android.intentresolver"
COLUMNS, ROWS = 4, 5
QUICK_TILES = [  # (label, settings namespace, key)
    ("Internet", "global", "wifi_on"), ("Bluetooth", "global", "bluetooth_on"),
    ("Airplane mode", "global", "airplane_mode_on"), ("Battery Saver", "global", "low_power"),
    ("Do Not Disturb", "global", "zen_mode"), ("Auto-rotate", "system", "accelerometer_rotation"),
    ("Location", "secure", "location_mode"), ("Dark theme", "secure", "ui_night_mode"),
]


def launcher(engine) -> Node:
    m = engine.metrics
    apps = sorted(engine.apps.values(), key=lambda a: a.label.lower())
    per_page = COLUMNS * ROWS
    pages = max(1, (len(apps) + per_page - 1) // per_page)
    engine.home_page = min(engine.home_page, pages - 1)
    window = Node(bounds=(0, 0, m.width, m.height), window=f"{LAUNCHER}/{LAUNCHER}.NexusLauncherActivity",
                  package=LAUNCHER, draw="fill", style={"bg": (210, 227, 252)})
    workspace = window.add(Node(cls="android.view.ViewGroup", bounds=(0, m.status_bar, m.width, m.height - m.nav_bar),
                                rid=f"{LAUNCHER}:id/workspace", package=LAUNCHER, scrollable=pages > 1))

    def flip(dx, dy, *_):
        if abs(dx) > abs(dy):
            engine.home_page = max(0, min(pages - 1, engine.home_page + (1 if dx < 0 else -1)))
            engine.changed()

    workspace.on_swipe = flip
    cell_w = m.width // COLUMNS
    cell_h = m.px(300)
    top = m.status_bar + m.px(220)
    workspace.add(text_node(m, (m.margin, m.status_bar + m.px(40), m.width - m.margin, m.status_bar + m.px(170)),
                            engine.phone.clock_text(long=True), 64, package=LAUNCHER))
    menus = []
    for i, app in enumerate(apps[engine.home_page * per_page:(engine.home_page + 1) * per_page]):
        col, row = i % COLUMNS, i // COLUMNS
        x, y = col * cell_w, top + row * cell_h
        icon = workspace.add(Node(cls="android.widget.TextView", bounds=(x, y, x + cell_w, y + cell_h), text=app.label,
                                  desc=app.label, package=LAUNCHER, clickable=True, long_clickable=True,
                                  on_tap=lambda *a, p=app.package: engine.launch(p),
                                  on_long_press=lambda *a, p=app.package: _open_icon_menu(engine, p)))
        if engine.launcher_menu == app.package:
            menu_y = y + cell_h if row < ROWS - 1 else y - m.px(140)
            menu_x = min(x, m.width - m.px(360))
            window_menu = Node(cls="android.widget.TextView", bounds=(menu_x, menu_y, menu_x + m.px(340), menu_y + m.px(130)),
                               text="App info", rid=f"{LAUNCHER}:id/bubble_text", package=LAUNCHER, clickable=True,
                               draw="button", style={"bg": ui.SURFACE, "fg": ui.TEXT, "border": ui.DIVIDER,
                                                     "size": m.font(42), "radius": m.px(30)},
                               on_tap=lambda *a, p=app.package: engine.phone.open_app_info(p))
            menus.append(window_menu)
        size = m.px(160)
        ix = x + (cell_w - size) // 2
        icon.add(Node(bounds=(ix, y + m.px(30), ix + size, y + m.px(30) + size), draw="app_icon", in_dump=False,
                      style={"color": ui.hex_color(app.icon.get("color"), ui.ACCENT),
                             "glyph": app.icon.get("glyph") or app.label[:1]}))
        icon.add(Node(bounds=(x, y + m.px(206), x + cell_w, y + m.px(270)), draw="text", in_dump=False,
                      text=ui.ellipsize(app.label, m.font(36), cell_w - m.px(16)),
                      style={"size": m.font(36), "color": ui.TEXT, "align": "center"}))
    for menu in menus:
        workspace.add(menu)  # the long-press shortcut popup, above the icons
    if pages > 1:
        y = m.height - m.nav_bar - m.px(120)
        for p in range(pages):
            cx = m.width // 2 + (p - (pages - 1) / 2) * m.px(48)
            workspace.add(Node(bounds=(int(cx - m.px(10)), y, int(cx + m.px(10)), y + m.px(20)), draw="dot",
                               in_dump=False, style={"on": p == engine.home_page}))
    return window


def _open_icon_menu(engine, package):
    engine.launcher_menu = package
    engine.changed()


def recents(engine) -> Node:
    m = engine.metrics
    window = Node(bounds=(0, 0, m.width, m.height), window=f"{LAUNCHER}/com.android.quickstep.RecentsActivity",
                  package=LAUNCHER, draw="fill", style={"bg": (60, 64, 67)})
    tasks = list(reversed(engine.tasks))
    if not tasks:
        window.add(text_node(m, (0, m.height // 2 - m.px(60), m.width, m.height // 2 + m.px(60)),
                             "No recent items", 48, ui.WHITE, align="center", package=LAUNCHER))
        return window
    # Up to four tasks, most recent first, as portrait snapshots in a 2x2 grid.
    card_w = int(m.width * 0.36)
    card_h = int(card_w * m.height / m.width)
    label_h = m.px(90)
    gap = (m.width - 2 * card_w) // 3
    for i, task in enumerate(tasks[:4]):
        app = engine.apps.get(task.package)
        label = app.label if app else task.package
        x = gap + (i % 2) * (card_w + gap)
        y = m.status_bar + m.px(30) + (i // 2) * (card_h + label_h + m.px(30))
        card = window.add(Node(cls="android.widget.FrameLayout", bounds=(x, y, x + card_w, y + label_h + card_h),
                               rid=f"{LAUNCHER}:id/snapshot", desc=label, package=LAUNCHER, clickable=True,
                               on_tap=lambda *a, p=task.package: engine.launch(p)))
        card.on_swipe = lambda dx, dy, *a, t=task: engine.remove_task(t) if abs(dy) > abs(dx) and dy < 0 else None
        card.add(text_node(m, (x, y, x + card_w, y + label_h), label, 40, ui.WHITE, rid=f"{LAUNCHER}:id/title",
                           package=LAUNCHER))
        snapshot_box = (x, y + label_h, x + card_w, y + label_h + card_h)
        snapshot = _task_snapshot(engine, task, snapshot_box)
        card.add(Node(bounds=snapshot_box, draw="snapshot", in_dump=False,
                      style={"_snapshot": snapshot, "digest": zlib.crc32(snapshot.tobytes()) if snapshot else 0}))
    button_y = m.height - m.nav_bar - m.px(200)
    window.add(Node(cls="android.widget.Button", bounds=(m.width // 2 - m.px(180), button_y, m.width // 2 + m.px(180),
                                                        button_y + m.px(120)),
                    text="Clear all", rid=f"{LAUNCHER}:id/clear_all", package=LAUNCHER, clickable=True, draw="button",
                    style={"bg": (95, 99, 104), "fg": ui.WHITE, "size": m.font(42), "radius": m.px(60)},
                    on_tap=lambda *a: _clear_all(engine)))
    return window


def _task_snapshot(engine, task, box):
    """The task's last screen, scaled into the Recents card (as Android keeps task snapshots)."""
    from simfarm import app_window, render  # render imports ui only; kept local to stay light
    if task.package not in engine.apps:
        return None
    image = render.render_image(app_window.app_window(engine, task))
    return image.resize((box[2] - box[0], box[3] - box[1]), Image.BILINEAR)


def _clear_all(engine):
    engine.tasks.clear()
    engine.home()


def shade(engine) -> Node:
    m = engine.metrics
    phone = engine.phone
    window = Node(bounds=(0, 0, m.width, m.height), window="NotificationShade", package=SYSTEMUI, draw="fill",
                  style={"bg": (32, 33, 36)})
    y = m.status_bar
    window.add(text_node(m, (m.margin, y, m.width - m.margin, y + m.px(120)), phone.clock_text(long=True), 52,
                         ui.WHITE, rid=f"{SYSTEMUI}:id/date", package=SYSTEMUI))
    y += m.px(140)
    tile_w, tile_h = (m.width - 3 * m.margin) // 2, m.px(150)
    for i, (label, namespace, key) in enumerate(QUICK_TILES):
        x = m.margin + (i % 2) * (tile_w + m.margin)
        ty = y + (i // 2) * (tile_h + m.px(24))
        on = phone.settings.is_on(namespace, key)
        tile = window.add(Node(cls="android.widget.Switch", bounds=(x, ty, x + tile_w, ty + tile_h), desc=label,
                               text=label, checkable=True, checked=on, clickable=True, package=SYSTEMUI,
                               draw="button", style={"bg": (168, 199, 250) if on else (60, 64, 67),
                                                     "fg": ui.TEXT if on else ui.WHITE, "size": m.font(40),
                                                     "radius": m.px(40), "align": "left"},
                               on_tap=lambda *a, n=namespace, k=key: phone.toggle_quick_setting(n, k)))
        tile.on_long_press = lambda *a, k=key: phone.open_setting_for_tile(k)
    y += 4 * (tile_h + m.px(24)) + m.px(30)
    notifications = list(reversed(phone.notifications))
    if not notifications:
        window.add(text_node(m, (0, y + m.px(100), m.width, y + m.px(200)), "No notifications", 44, (189, 193, 198),
                             align="center", package=SYSTEMUI))
    card_h = m.px(230)
    # As many cards as leave "Clear all" on the screen (SystemUI folds the rest into its shelf).
    room = (m.height - m.nav_bar - m.px(140) - y) // (card_h + m.px(20))
    for note in notifications[:max(1, min(6, room))]:
        card = window.add(Node(cls="android.widget.FrameLayout", bounds=(m.px(32), y, m.width - m.px(32), y + card_h),
                               rid=f"{SYSTEMUI}:id/expandableNotificationRow", desc=f"{note['app_label']} notification: {note['title']}",
                               clickable=True, package=SYSTEMUI, draw="fill",
                               style={"bg": ui.SURFACE, "radius": m.px(36)},
                               on_tap=lambda *a, n=note: phone.open_notification(n)))
        card.on_swipe = lambda dx, dy, *a, n=note: phone.dismiss_notification(n) if abs(dx) > abs(dy) else None
        card.add(text_node(m, (m.px(80), y + m.px(20), m.width - m.px(80), y + m.px(80)), note["app_label"], 34,
                           ui.TEXT_SECONDARY, rid="android:id/app_name_text", package=SYSTEMUI))
        card.add(text_node(m, (m.px(80), y + m.px(80), m.width - m.px(80), y + m.px(150)), note["title"], 44,
                           rid="android:id/title", package=SYSTEMUI))
        card.add(text_node(m, (m.px(80), y + m.px(150), m.width - m.px(80), y + m.px(210)), note["text"], 38,
                           ui.TEXT_SECONDARY, rid="android:id/text", package=SYSTEMUI))
        y += card_h + m.px(20)
    if notifications:
        window.add(Node(cls="android.widget.Button", bounds=(m.width - m.px(340), y + m.px(10), m.width - m.px(40), y + m.px(120)),
                        text="Clear all", rid=f"{SYSTEMUI}:id/dismiss_text", clickable=True, package=SYSTEMUI,
                        draw="button", style={"bg": (60, 64, 67), "fg": ui.WHITE, "size": m.font(40), "radius": m.px(55)},
                        on_tap=lambda *a: phone.clear_notifications()))
    return window


def share_sheet(engine) -> Node:
    m = engine.metrics
    targets = [app for app in engine.apps.values() if app.share_target and app.package != getattr(engine, "share_source", None)]
    rows = (len(targets) + 1 + COLUMNS - 1) // COLUMNS
    height = m.px(420) + rows * m.px(280)
    top = m.height - m.nav_bar - height
    window = Node(bounds=(0, 0, m.width, m.height), window=f"{RESOLVER}/.ChooserActivity", package=RESOLVER)
    scrim = window.add(Node(bounds=(0, 0, m.width, m.height), draw="scrim", in_dump=False, package=RESOLVER))
    scrim.on_tap = lambda *a: _close_share(engine)
    sheet = window.add(Node(cls="android.widget.LinearLayout", bounds=(0, top, m.width, m.height), draw="fill",
                            rid=f"{RESOLVER}:id/chooser_header", package=RESOLVER,
                            style={"bg": ui.SURFACE, "radius": m.px(48)}))
    sheet.add(text_node(m, (m.margin, top + m.px(40), m.width - m.margin, top + m.px(130)), "Share", 52,
                        rid="android:id/title", package=RESOLVER))
    sheet.add(text_node(m, (m.margin, top + m.px(150), m.width - m.margin, top + m.px(230)),
                        ui.ellipsize(engine.share_text or "", m.font(40), m.width - 2 * m.margin), 40,
                        ui.TEXT_SECONDARY, rid=f"{RESOLVER}:id/content_preview_text", package=RESOLVER))
    cell_w = m.width // COLUMNS
    entries = [("Copy", None)] + [(app.label, app) for app in sorted(targets, key=lambda a: a.label)]
    for i, (label, app) in enumerate(entries):
        x, y = (i % COLUMNS) * cell_w, top + m.px(300) + (i // COLUMNS) * m.px(280)
        target = sheet.add(Node(cls="android.widget.LinearLayout", bounds=(x, y, x + cell_w, y + m.px(260)), desc=label,
                                rid=f"{RESOLVER}:id/text1" if app is None else f"{RESOLVER}:id/item", clickable=True,
                                package=RESOLVER, on_tap=lambda *a, target=app: _share_to(engine, target)))
        size = m.px(130)
        ix = x + (cell_w - size) // 2
        target.add(Node(bounds=(ix, y + m.px(20), ix + size, y + m.px(20) + size), draw="app_icon", in_dump=False,
                        style={"color": ui.hex_color((app.icon if app else {}).get("color"), (95, 99, 104)),
                               "glyph": (app.icon.get("glyph") or app.label[:1]) if app else "⧉"}))
        target.add(text_node(m, (x, y + m.px(170), x + cell_w, y + m.px(240)), ui.ellipsize(label, m.font(34), cell_w - 8),
                             34, align="center", package=RESOLVER))
    return window


def _close_share(engine):
    engine.share_text = None
    engine.changed()


def _share_to(engine, app):
    text = engine.share_text or ""
    engine.share_text = None
    if app is None:
        engine.phone.clipboard = text
        engine.show_toast("Copied")
        return
    target = app.share_target
    engine.launch(app.package, page=target.get("page"), params={target.get("param", "text"): text})
