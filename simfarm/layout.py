"""Lay out an app page's elements (apps/FORMAT.md) as a Node tree with absolute bounds.

Builders return nodes positioned at absolute y before scrolling; `layout_body` shifts and clips
them to the scrolling viewport. `ctx` is the engine's PageContext: it evaluates templates and
expressions, reads/writes bound variables and turns action lists into callbacks.
"""
from simfarm import ui
from simfarm.ui import Node

ROW_HEIGHT, ROW_WITH_SUMMARY = 170, 216
WIDGET_CLASSES = {"toggle": "android.widget.Switch", "checkbox": "android.widget.CheckBox",
                  "radio": "android.widget.RadioButton"}
WIDGET_IDS = {"toggle": "android:id/switch_widget", "checkbox": "android:id/checkbox",
              "radio": "android:id/radio"}
TEXT_STYLES = {"body": (42, ui.TEXT), "title": (56, ui.TEXT), "caption": (36, ui.TEXT_SECONDARY),
               "big": (96, ui.TEXT)}


def resource_id(package: str, short: str | None) -> str:
    if not short:
        return ""
    return short if ":id/" in short else f"{package}:id/{short}"


def text_node(m, box, text, size=42, color=ui.TEXT, rid="", align="left", wrap=False, package=""):
    return Node(cls="android.widget.TextView", bounds=box, text=text, rid=rid, package=package,
                draw="text", style={"size": m.font(size), "color": color, "align": align, "wrap": wrap})


def build_elements(specs, ctx, y, item=None):
    """Lay out a vertical list of element specs from y; returns (nodes, bottom_y)."""
    nodes = []
    for spec in specs or []:
        if not ctx.cond(spec.get("visible_if"), item):
            continue
        built, y = build_element(spec, ctx, y, item)
        nodes.extend(built)
    return nodes, y


def build_element(spec, ctx, y, item=None):
    kind = spec["type"]
    builder = BUILDERS.get(kind)
    if builder is None:
        return [text_node(ctx.m, (ctx.m.x0, y, ctx.m.x1, y + ctx.m.px(60)), f"[unknown element {kind}]")], y + ctx.m.px(60)
    return builder(spec, ctx, y, item)


def _common(node, spec, ctx, item):
    node.rid = node.rid or resource_id(ctx.package, spec.get("id"))
    node.desc = ctx.text(spec.get("desc"), item) or node.desc
    node.package = ctx.package
    node.enabled = ctx.cond(spec.get("enabled_if"), item)
    if spec.get("tap") and node.enabled:
        node.clickable = True
        node.on_tap = ctx.callback(spec["tap"], item)
    if spec.get("long_press") and node.enabled:
        node.long_clickable = True
        node.on_long_press = ctx.callback(spec["long_press"], item)
    for child in node.walk():
        child.package = ctx.package
    return node


def _height(spec, ctx, default):
    return ctx.m.px(spec.get("height", default))


def build_header(spec, ctx, y, item):
    m = ctx.m
    h = _height(spec, ctx, 110)
    node = text_node(m, (m.x0 + m.margin, y + m.px(30), m.x1 - m.margin, y + h), ctx.text(spec.get("text"), item),
                     size=36, color=ctx.accent)
    return [_common(node, spec, ctx, item)], y + h


def build_text(spec, ctx, y, item):
    m = ctx.m
    size, color = TEXT_STYLES.get(spec.get("style", "body"), TEXT_STYLES["body"])
    text = ctx.text(spec.get("text"), item)
    width = m.x1 - m.x0 - 2 * m.margin
    lines = ui.wrap_text(text, m.font(size), width)
    line_h = m.font(size) * 1.35
    h = int(len(lines) * line_h) + m.px(36)
    node = text_node(m, (m.x0 + m.margin, y + m.px(18), m.x1 - m.margin, y + h - m.px(18)), text, size, color,
                     wrap=True, align=spec.get("align", "left"))
    return [_common(node, spec, ctx, item)], y + h


def build_row(spec, ctx, y, item):
    m = ctx.m
    kind = spec["type"]
    title = ctx.text(spec.get("text"), item)
    summary = ctx.text(spec.get("summary"), item)
    h = _height(spec, ctx, ROW_WITH_SUMMARY if summary else ROW_HEIGHT)
    row = Node(cls="android.widget.LinearLayout", bounds=(m.x0, y, m.x1, y + h), draw="row",
               style={"divider": spec.get("divider", True)})
    left = m.x0 + m.margin
    if spec.get("icon"):
        size = m.px(64)
        top = y + (h - size) // 2
        row.add(Node(cls="android.widget.ImageView", bounds=(left, top, left + size, top + size),
                     draw="icon", style={"icon": spec["icon"], "color": ctx.accent}))
        left += size + m.px(40)
    right = m.x1 - m.margin
    widget = None
    if kind in WIDGET_CLASSES:
        checked = ctx.is_checked(spec, item)
        w, wh = (m.px(132), m.px(72)) if kind == "toggle" else (m.px(64), m.px(64))
        top = y + (h - wh) // 2
        widget = Node(cls=WIDGET_CLASSES[kind], bounds=(right - w, top, right, top + wh), rid=WIDGET_IDS[kind],
                      draw=kind, checkable=True, checked=checked, focusable=True,
                      text=("ON" if checked else "OFF") if kind == "toggle" else "",
                      style={"color": ctx.accent})
        right -= w + m.px(32)
        row.checkable = False
    elif spec.get("chevron"):
        row.add(Node(cls="android.widget.ImageView", bounds=(right - m.px(48), y + h // 2 - m.px(24), right, y + h // 2 + m.px(24)),
                     draw="icon", style={"icon": "chevron", "color": ui.TEXT_SECONDARY}))
        right -= m.px(64)
    if summary:
        row.add(text_node(m, (left, y + m.px(38), right, y + m.px(108)), title, 46, rid="android:id/title"))
        row.add(text_node(m, (left, y + m.px(112), right, y + m.px(172)), summary, 36, ui.TEXT_SECONDARY,
                          rid="android:id/summary"))
    else:
        row.add(text_node(m, (left, y + (h - m.px(70)) // 2, right, y + (h + m.px(70)) // 2), title, 46,
                          rid="android:id/title"))
    if widget is not None:
        row.add(widget)
    _common(row, spec, ctx, item)
    if widget is not None:
        widget.enabled = row.enabled
        if row.enabled:  # the whole row flips the switch, then runs on_change / tap
            row.clickable = True
            row.on_tap = ctx.toggle_callback(spec, item)
    return [row], y + h


def build_button(spec, ctx, y, item):
    m = ctx.m
    style = spec.get("style", "outline")
    h = _height(spec, ctx, 184)
    colors = {"primary": (ctx.accent, ui.WHITE, None), "danger": (ui.DANGER, ui.WHITE, None),
              "outline": (ui.WHITE, ctx.accent, ui.DIVIDER), "text": (None, ctx.accent, None)}
    bg, fg, border = colors.get(style, colors["outline"])
    box = (m.x0 + m.margin, y + m.px(24), m.x1 - m.margin, y + h - m.px(24))
    if spec.get("width"):
        box = (m.x0 + m.margin, box[1], m.x0 + m.margin + m.px(spec["width"]), box[3])
    node = Node(cls="android.widget.Button", bounds=box, text=ctx.text(spec.get("text"), item), draw="button",
                clickable=True, focusable=True,
                style={"bg": bg, "fg": fg, "border": border, "size": m.font(44), "radius": m.px(68)})
    _common(node, spec, ctx, item)
    if not node.enabled:
        node.style["fg"] = ui.DIVIDER
    return [node], y + h


def build_input(spec, ctx, y, item):
    m = ctx.m
    multiline = spec.get("multiline", False)
    h = _height(spec, ctx, 330 if multiline else 190)
    value = ui_text(ctx.get(spec.get("bind"), item))
    focused = ctx.is_focused(spec)
    password = bool(spec.get("password"))
    shown = "•" * len(value) if password else value
    hint = ctx.text(spec.get("hint"), item) or ""
    node = Node(cls="android.widget.EditText", bounds=(m.x0 + m.margin, y + m.px(24), m.x1 - m.margin, y + h - m.px(24)),
                text=shown or hint, draw="input", clickable=True, focusable=True, focused=focused,
                password=password, long_clickable=True,
                style={"size": m.font(44), "hint": not shown, "color": ctx.accent, "multiline": multiline})
    _common(node, spec, ctx, item)
    node.on_tap = ctx.focus_callback(spec) if node.enabled else None
    node.on_long_press = ctx.paste_menu_callback(spec) if node.enabled else None
    if ctx.page.paste_menu is spec and ctx.phone.clipboard:
        ctx.paste_anchor = (node, ctx.paste_callback(spec))  # app_window draws "Paste" above it once scrolled
    return [node], y + h


def ui_text(value) -> str:
    return "" if value is None else str(value)


def build_slider(spec, ctx, y, item):
    m = ctx.m
    h = _height(spec, ctx, 150)
    low, high = spec.get("min", 0), spec.get("max", 100)
    value = _number(ctx.get(spec.get("bind"), item), low)
    box = (m.x0 + m.margin, y + m.px(30), m.x1 - m.margin, y + h - m.px(30))
    fraction = (value - low) / (high - low) if high > low else 0
    node = Node(cls="android.widget.SeekBar", bounds=box, text=f"{float(value)}", draw="slider", clickable=True,
                focusable=True, style={"fraction": round(fraction, 4), "color": ctx.accent})

    def on_tap_at(x, _y):
        ratio = min(1.0, max(0.0, (x - box[0]) / max(1, box[2] - box[0])))
        ctx.set_value(spec, low + round(ratio * (high - low)), item)

    _common(node, spec, ctx, item)
    node.on_tap = on_tap_at  # a SeekBar takes the value under the finger
    node.on_swipe = lambda dx, dy, x1, y1: on_tap_at(x1 + dx, y1)
    return [node], y + h


def _number(value, default):
    try:
        return float(value) if "." in str(value) else int(value)
    except (TypeError, ValueError):
        return default


def wheel_options(spec):
    if "range" in spec:
        low, high = spec["range"][:2]
        width = len(str(high))
        return [str(v).zfill(width) if spec.get("pad", True) else str(v) for v in range(low, high + 1)]
    return [str(option) for option in spec.get("options", [])]


def build_wheel(spec, ctx, y, item):
    m = ctx.m
    options = wheel_options(spec)
    current = ui_text(ctx.get(spec.get("bind"), item))
    index = options.index(current) if current in options else 0
    item_h = m.px(130)
    label = ctx.text(spec.get("label"), item)
    nodes = []
    top = y
    if label:
        nodes.append(text_node(m, (m.x0 + m.margin, y + m.px(20), m.x1 - m.margin, y + m.px(90)), label, 36,
                               ui.TEXT_SECONDARY, package=ctx.package))
        top = y + m.px(100)
    x1, x2 = (m.x0 + m.x1) // 2 - m.px(220), (m.x0 + m.x1) // 2 + m.px(220)
    picker = Node(cls="android.widget.NumberPicker", bounds=(x1, top, x2, top + 3 * item_h), draw="wheel",
                  scrollable=True, rid=resource_id(ctx.package, spec.get("id")), style={"color": ctx.accent})

    def select(new_index):
        new_index = max(0, min(len(options) - 1, new_index))
        ctx.set_value(spec, _number(options[new_index], options[new_index]) if spec.get("numeric") else options[new_index], item)

    for offset, cls in ((-1, "android.widget.Button"), (0, "android.widget.EditText"), (1, "android.widget.Button")):
        i = index + offset
        box = (x1, top + (offset + 1) * item_h, x2, top + (offset + 2) * item_h)
        if not 0 <= i < len(options):
            continue
        child = Node(cls=cls, bounds=box, text=options[i], draw="text",
                     rid="android:id/numberpicker_input" if offset == 0 else "",
                     style={"size": m.font(60 if offset == 0 else 48), "align": "center",
                            "color": ui.TEXT if offset == 0 else ui.TEXT_SECONDARY})
        if offset:
            child.clickable = True
            child.on_tap = (lambda *args, target=i: select(target))
        picker.add(child)
    picker.on_swipe = lambda dx, dy, x, yy: select(index + int(round(-dy / item_h)))
    nodes.append(picker)
    for node in nodes:
        for sub in node.walk():
            sub.package = ctx.package
    return nodes, top + 3 * item_h + m.px(20)


def build_chips(spec, ctx, y, item):
    m = ctx.m
    h = m.px(120)
    x = m.x0 + m.margin
    nodes = []
    row_y = y + m.px(20)
    for chip in spec.get("items", []):
        if not ctx.cond(chip.get("visible_if"), item):
            continue
        text = ctx.text(chip.get("text"), item)
        width = int(ui.text_width(text, m.font(40))) + m.px(88)
        if x + width > m.x1 - m.margin and x > m.x0 + m.margin:
            x, row_y = m.x0 + m.margin, row_y + h + m.px(20)
        selected = ctx.cond(chip.get("selected_if"), item) if chip.get("selected_if") else False
        node = Node(cls="android.widget.Button", bounds=(x, row_y, x + width, row_y + h), text=text, draw="button",
                    clickable=True, selected=selected,
                    style={"bg": ctx.accent if selected else ui.WHITE, "fg": ui.WHITE if selected else ui.TEXT,
                           "border": None if selected else ui.DIVIDER, "size": m.font(40), "radius": h // 2})
        nodes.append(_common(node, chip, ctx, item))
        x += width + m.px(24)
    return nodes, row_y + h + m.px(20)


def build_image(spec, ctx, y, item):
    m = ctx.m
    h = _height(spec, ctx, 420)
    color = ui.hex_color(ctx.text(spec.get("color"), item), (200, 214, 229))
    node = Node(cls="android.widget.ImageView", bounds=(m.x0 + m.margin, y + m.px(20), m.x1 - m.margin, y + h - m.px(20)),
                draw="fill", text="", style={"bg": color, "radius": m.px(24)})
    caption = ctx.text(spec.get("text"), item)
    if caption:
        node.add(text_node(m, node.bounds, caption, 44, ui.WHITE, align="center"))
    return [_common(node, spec, ctx, item)], y + h


def build_card(spec, ctx, y, item):
    m = ctx.m
    children, bottom = build_elements(spec.get("elements"), ctx, y + m.px(24), item)
    card = Node(cls="android.widget.FrameLayout", bounds=(m.x0 + m.px(24), y + m.px(12), m.x1 - m.px(24), bottom + m.px(12)),
                draw="fill", style={"bg": ui.SURFACE, "border": ui.DIVIDER, "radius": m.px(32)}, children=children)
    return [_common(card, spec, ctx, item)], bottom + m.px(36)


def build_list(spec, ctx, y, item):
    records = ctx.records(spec, item)
    nodes = []
    template = spec.get("item") or {"type": "row", "text": "{item:title}"}
    for record in records:
        built, y = build_element(template, ctx, y, record)
        nodes.extend(built)
    if not records and spec.get("empty_text"):
        built, y = build_text({"type": "text", "text": spec["empty_text"], "style": "caption", "align": "center"},
                              ctx, y, item)
        nodes.extend(built)
    return nodes, y


def build_spinner(spec, ctx, y, item):
    """An indeterminate ProgressBar with an optional caption ("Syncing…"); drawn still, so screens
    stay deterministic."""
    m = ctx.m
    h = _height(spec, ctx, 300)
    cx = (m.x0 + m.x1) // 2
    node = Node(cls="android.widget.ProgressBar", bounds=(cx - m.px(70), y + m.px(40), cx + m.px(70), y + m.px(180)),
                draw="spinner", style={"color": ctx.accent})
    nodes = [_common(node, spec, ctx, item)]
    caption = ctx.text(spec.get("text"), item)
    if caption:
        nodes.append(text_node(m, (m.x0 + m.margin, y + m.px(200), m.x1 - m.margin, y + h), caption, 44,
                               ui.TEXT_SECONDARY, align="center", package=ctx.package))
    return nodes, y + h


def build_spacer(spec, ctx, y, item):
    return [], y + _height(spec, ctx, 40)


BUILDERS = {
    "header": build_header, "text": build_text, "row": build_row, "toggle": build_row, "checkbox": build_row,
    "radio": build_row, "button": build_button, "input": build_input, "slider": build_slider,
    "wheel": build_wheel, "chips": build_chips, "image": build_image, "card": build_card,
    "list": build_list, "spacer": build_spacer, "spinner": build_spinner,
}


def place_in_viewport(nodes, viewport, scroll):
    """Shift by the scroll offset and clip to the viewport; invisible nodes are dropped."""
    visible = []
    for node in nodes:
        if _shift_and_clip(node, viewport, scroll):
            visible.append(node)
    return visible


def _shift_and_clip(node, viewport, scroll) -> bool:
    box = node.box
    frame = (box[0], box[1] - scroll, box[2], box[3] - scroll)
    bounds = ui.clip(frame, viewport)
    if bounds is None:
        return False
    node.frame, node.bounds = frame, bounds
    node.children = [child for child in node.children if _shift_and_clip(child, viewport, scroll)]
    return True
