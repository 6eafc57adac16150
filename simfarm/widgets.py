"""Screen chrome shared by apps, system UI and anomalies: bars, dialogs, keyboard, toast."""
from simfarm import ui
from simfarm.layout import text_node
from simfarm.ui import Node

SYSTEMUI = "com.android.systemui"
IME = "com.google.android.inputmethod.latin"
KEYBOARD_ROWS = ["1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm⌫", ",␣.⏎"]


def status_bar(m, clock_text, battery, wifi, data, airplane=False):
    """Drawn only: real uiautomator dumps of an app window do not include the status bar."""
    bar = Node(cls="android.widget.FrameLayout", bounds=(0, 0, m.width, m.status_bar), draw="fill",
               style={"bg": ui.STATUS_BAR}, package=SYSTEMUI, in_dump=False, window="StatusBar")
    h = m.status_bar
    bar.add(text_node(m, (m.px(48), 0, m.px(300), h), clock_text, 38, package=SYSTEMUI))
    right = m.width - m.px(40)
    bar.add(text_node(m, (right - m.px(100), 0, right, h), f"{battery}%", 34, align="right", package=SYSTEMUI))
    right -= m.px(110)
    bar.add(Node(bounds=(right - m.px(34), m.px(32), right, h - m.px(32)), draw="battery",
                 style={"level": battery}, package=SYSTEMUI))
    right -= m.px(60)
    for shown, icon in ((airplane, "airplane"), (data and not airplane, "signal"), (wifi and not airplane, "wifi")):
        if shown:
            bar.add(Node(bounds=(right - m.px(46), m.px(28), right, h - m.px(28)), draw="icon",
                         style={"icon": icon, "color": ui.TEXT}, package=SYSTEMUI))
            right -= m.px(64)
    return bar


def nav_bar(m):
    """The gesture navigation handle at the bottom (drawn only)."""
    top = m.height - m.nav_bar
    bar = Node(bounds=(0, top, m.width, m.height), draw="fill", style={"bg": ui.BACKGROUND}, in_dump=False,
               package=SYSTEMUI, window="NavigationBar")
    bar.add(Node(bounds=(m.width // 2 - m.px(110), top + m.px(26), m.width // 2 + m.px(110), top + m.px(38)),
                 draw="fill", style={"bg": ui.TEXT, "radius": m.px(6)}))
    return bar


def app_bar(m, package, title, show_back, on_back, actions, accent):
    top, bottom = m.status_bar, m.status_bar + m.app_bar
    bar = Node(cls="android.view.ViewGroup", bounds=(0, top, m.width, bottom), rid=f"{package}:id/toolbar",
               draw="fill", style={"bg": ui.BACKGROUND}, package=package)
    left = m.px(32)
    if show_back:
        size = m.px(120)
        y = top + (m.app_bar - size) // 2
        bar.add(Node(cls="android.widget.ImageButton", bounds=(left, y, left + size, y + size), desc="Navigate up",
                     draw="icon", style={"icon": "back", "color": ui.TEXT}, clickable=True, focusable=True,
                     on_tap=lambda *a: on_back(), package=package))
        left += size + m.px(16)
    else:
        left = m.margin
    right = m.width - m.px(24)
    action_nodes = []
    for action in reversed(actions):
        size = m.px(120)
        y = top + (m.app_bar - size) // 2
        action_nodes.insert(0, Node(cls="android.widget.ImageButton", bounds=(right - size, y, right, y + size),
                                    rid=action["rid"], desc=action["desc"], draw="icon",
                                    style={"icon": action["icon"], "color": ui.TEXT}, clickable=True,
                                    focusable=True, on_tap=action["on_tap"], package=package))
        right -= size + m.px(8)
    bar.add(text_node(m, (left, top, right, bottom), title, 60, package=package))
    for node in action_nodes:
        bar.add(node)
    return bar


def bottom_nav(m, package, tabs, bottom, accent):
    top = bottom - m.bottom_nav
    nav = Node(cls="android.widget.LinearLayout", bounds=(0, top, m.width, bottom), rid=f"{package}:id/bottom_nav",
               draw="fill", style={"bg": ui.SURFACE, "top_line": ui.DIVIDER}, package=package)
    width = m.width // max(1, len(tabs))
    for i, tab in enumerate(tabs):
        box = (i * width, top, (i + 1) * width, bottom)
        color = accent if tab["selected"] else ui.TEXT_SECONDARY
        item = Node(cls="android.widget.FrameLayout", bounds=box, rid=tab["rid"], desc=tab["text"], clickable=True,
                    selected=tab["selected"], on_tap=tab["on_tap"], package=package)
        mid = (box[0] + box[2]) // 2
        item.add(Node(cls="android.widget.ImageView", bounds=(mid - m.px(36), top + m.px(30), mid + m.px(36), top + m.px(102)),
                      draw="icon", style={"icon": tab.get("icon") or "star", "color": color}, package=package))
        item.add(text_node(m, (box[0], top + m.px(110), box[2], bottom - m.px(16)), tab["text"], 34, color,
                           align="center", package=package))
        nav.add(item)
    return nav


def fab(m, package, rid, desc, icon, on_tap, bottom, accent):
    size = m.px(168)
    box = (m.width - m.px(48) - size, bottom - m.px(48) - size, m.width - m.px(48), bottom - m.px(48))
    return Node(cls="android.widget.ImageButton", bounds=box, rid=rid, desc=desc, draw="fab", clickable=True,
                focusable=True, style={"icon": icon, "color": accent}, on_tap=on_tap, package=package)


def dialog_window(m, package, title, message, buttons, on_outside=None, body_builder=None, window_title="",
                  stacked=False, icon=None, rid_prefix="android:id/"):
    """An AlertDialog-style window: scrim + centered panel + title, message, optional body, buttons.

    `buttons` are dicts with rid, text, on_tap and optional style ("danger"); `body_builder(y)`
    returns (nodes, bottom) for extra elements such as inputs or a wheel.
    """
    width = m.width - 2 * m.px(84)
    x1 = (m.width - width) // 2
    pad = m.px(64)
    inner = width - 2 * pad
    parts = []
    y = 0
    if icon:
        parts.append(("icon", y, m.px(96)))
        y += m.px(130)
    title_lines = ui.wrap_text(title, m.font(54), inner) if title else []
    if title:
        h = int(len(title_lines) * m.font(54) * 1.3)
        parts.append(("title", y, h))
        y += h + m.px(28)
    if message:
        h = int(len(ui.wrap_text(message, m.font(42), inner)) * m.font(42) * 1.4)
        parts.append(("message", y, h))
        y += h + m.px(24)
    body_height = 0
    if body_builder:
        _, body_height = body_builder(0, measure=True)
        parts.append(("body", y, body_height))
        y += body_height
    button_h = m.px(132)
    buttons_h = (len(buttons) * (button_h + m.px(16))) if stacked else button_h
    total = pad + y + m.px(24) + buttons_h + pad // 2
    top = max(m.status_bar + m.px(40), (m.height - total) // 2)
    root = Node(bounds=(0, 0, m.width, m.height), window=window_title or package, package=package)
    scrim = root.add(Node(bounds=(0, 0, m.width, m.height), draw="scrim", package=package, in_dump=False))
    if on_outside:
        scrim.on_tap = lambda *a: on_outside()
    panel = root.add(Node(cls="android.widget.FrameLayout", bounds=(x1, top, x1 + width, top + total),
                          rid=f"{rid_prefix}parentPanel" if rid_prefix else "", draw="fill",
                          style={"bg": ui.SURFACE, "radius": m.px(56)}, package=package))
    for kind, offset, h in parts:
        box = (x1 + pad, top + pad + offset, x1 + width - pad, top + pad + offset + h)
        if kind == "icon":
            mid = (box[0] + box[2]) // 2
            panel.add(Node(cls="android.widget.ImageView", bounds=(mid - h // 2, box[1], mid + h // 2, box[1] + h),
                           draw="icon", style={"icon": icon, "color": ui.ACCENT}, package=package))
        elif kind == "title":
            panel.add(text_node(m, box, title, 54, rid=f"{rid_prefix}alertTitle" if rid_prefix == "android:id/" else f"{rid_prefix}title",
                                wrap=True, package=package, align="center" if icon else "left"))
        elif kind == "message":
            panel.add(text_node(m, box, message, 42, ui.TEXT_SECONDARY, rid=f"{rid_prefix}message", wrap=True,
                                package=package, align="center" if icon else "left"))
        elif kind == "body":
            nodes, _ = body_builder(box[1])
            for node in nodes:
                panel.add(node)
    by = top + pad + y + m.px(24)
    if stacked:
        for button in buttons:
            panel.add(_dialog_button(m, package, (x1 + pad, by, x1 + width - pad, by + button_h), button, filled=True))
            by += button_h + m.px(16)
    else:
        right = x1 + width - pad + m.px(24)
        placed = []
        for button in reversed(buttons):  # the last button is the positive one, at the right
            w = int(ui.text_width(button["text"], m.font(44))) + m.px(72)
            placed.insert(0, _dialog_button(m, package, (right - w, by, right, by + button_h), button))
            right -= w + m.px(8)
        panel.children.extend(placed)
    return root


def _dialog_button(m, package, box, button, filled=False):
    color = ui.DANGER if button.get("style") == "danger" else ui.ACCENT
    return Node(cls="android.widget.Button", bounds=box, text=button["text"], rid=button.get("rid", ""),
                draw="button", clickable=True, focusable=True, on_tap=button["on_tap"], package=package,
                style={"bg": (232, 240, 254) if filled else None, "fg": color, "border": None,
                       "size": m.font(44), "radius": m.px(66)})


def keyboard(m, on_key):
    """Gboard-like keyboard, drawn only (the IME window is not part of an app's dump)."""
    top = m.height - m.nav_bar - m.keyboard
    board = Node(bounds=(0, top, m.width, m.height - m.nav_bar), draw="fill", style={"bg": (232, 234, 237)},
                 package=IME, in_dump=False, window="InputMethod")
    row_h = m.keyboard // len(KEYBOARD_ROWS)
    for r, keys in enumerate(KEYBOARD_ROWS):
        y = top + r * row_h
        if r == 4:
            widths = [1.5, 6, 1.5, 1.5]
        else:
            widths = [1] * len(keys)
        unit = (m.width - m.px(16)) / (10 if r < 4 else sum(widths))
        x = m.px(8) + (m.width - m.px(16) - unit * sum(widths)) / 2
        for key, w in zip(keys, widths):
            box = (int(x + m.px(6)), y + m.px(10), int(x + unit * w - m.px(6)), y + row_h - m.px(10))
            label = {"␣": "space", "⏎": "enter", "⌫": "del"}.get(key, key)  # the bundled font lacks ⌫ ⏎
            board.add(Node(bounds=box, text=label, draw="key", clickable=True, in_dump=False, package=IME,
                           style={"size": m.font(44)}, on_tap=(lambda *a, k=key: on_key(k))))
            x += unit * w
    return board


def paste_popup(m, package, anchor, on_paste):
    """The floating "Paste" action shown above a long-pressed text field."""
    x, y = anchor[0], max(m.status_bar, anchor[1] - m.px(130))
    return Node(cls="android.widget.TextView", bounds=(x, y, x + m.px(260), y + m.px(120)), text="Paste", desc="Paste",
                clickable=True, draw="button", package=package, on_tap=on_paste,
                style={"bg": (60, 64, 67), "fg": ui.WHITE, "size": m.font(42), "radius": m.px(20)})


def toast(m, text):
    width = min(m.width - 2 * m.margin, int(ui.text_width(text, m.font(40))) + m.px(96))
    x1 = (m.width - width) // 2
    y2 = m.height - m.nav_bar - m.px(180)
    node = Node(cls="android.widget.Toast", bounds=(x1, y2 - m.px(110), x1 + width, y2), draw="fill",
                style={"bg": (60, 64, 67), "radius": m.px(55), "passthrough": True}, in_dump=False, package=SYSTEMUI,
                window="Toast")
    node.add(text_node(m, node.bounds, text, 40, ui.WHITE, align="center", package=SYSTEMUI))
    return node
