"""An app's window: app bar, scrolling body, bottom navigation, FAB; and its dialogs."""
from simfarm import blind, layout, ui, widgets
from simfarm.layout import resource_id
from simfarm.ui import Node


def app_window(engine, task) -> Node:
    m = engine.metrics
    app = engine.apps[task.package]
    page = task.top
    spec = app.pages[page.page_id]
    ctx = engine.context(task, page)
    package = task.package
    window = Node(bounds=(0, 0, m.width, m.height), window=f"{package}/{app.activity_of(page.page_id)}",
                  package=package, draw="fill", style={"bg": ui.BACKGROUND})
    top = m.status_bar
    if spec.get("app_bar", True):
        top += m.app_bar
    bottom = m.height - m.nav_bar
    if page.focused is not None and not engine.anomalies.covers_app():
        bottom -= m.keyboard
    tabs = spec.get("bottom_nav") or []
    nav_bottom = bottom
    if tabs:
        bottom -= m.bottom_nav

    placeholder = engine.anomalies.page_placeholder(task, ctx)
    if placeholder is not None:
        body_nodes, content_bottom = placeholder(top, bottom)
        page.scroll = 0
    else:
        body_nodes, content_bottom = layout.build_elements(spec.get("elements"), ctx, top)
        content_bottom += m.px(32)
    max_scroll = max(0, content_bottom - bottom)
    page.scroll = max(0, min(page.scroll, max_scroll))
    body = Node(cls="androidx.recyclerview.widget.RecyclerView" if max_scroll else "android.widget.ScrollView",
                bounds=(0, top, m.width, bottom), rid=f"{package}:id/recycler_view", package=package,
                scrollable=bool(max_scroll))
    body.children = layout.place_in_viewport(body_nodes, (0, top, m.width, bottom), page.scroll)

    def scroll(dx, dy, *_):
        if abs(dy) >= abs(dx):
            page.scroll = max(0, min(max_scroll, page.scroll - int(dy)))
            engine.changed()
        else:
            engine.horizontal_swipe_on_page(task, dx)

    body.on_swipe = scroll
    window.add(body)
    if ctx.paste_anchor is not None and any(node is ctx.paste_anchor[0] for node in body.walk()):
        anchor, on_paste = ctx.paste_anchor
        window.add(widgets.paste_popup(m, package, anchor.bounds, on_paste))

    if spec.get("app_bar", True):
        show_back = spec.get("back_button", "auto")
        show_back = len(task.stack) > 1 if show_back == "auto" else bool(show_back)
        actions = [{"rid": resource_id(package, a.get("id")), "desc": ctx.text(a.get("desc") or a.get("id")),
                    "icon": a.get("icon", "more"), "on_tap": ctx.callback(a.get("tap"))}
                   for a in spec.get("actions") or [] if ctx.cond(a.get("visible_if"))]
        title = ctx.text(spec.get("title", app.label))
        window.add(widgets.app_bar(m, package, title, show_back, engine.back, actions, ctx.accent))
    if tabs:
        window.add(widgets.bottom_nav(m, package, [
            {"rid": resource_id(package, t.get("id")), "text": ctx.text(t.get("text")), "icon": t.get("icon"),
             "selected": bool(t.get("selected")), "on_tap": ctx.callback(t.get("tap"))} for t in tabs], nav_bottom, ctx.accent))
    fab = spec.get("fab")
    if fab and ctx.cond(fab.get("visible_if")) and placeholder is None:
        window.add(widgets.fab(m, package, resource_id(package, fab.get("id")), ctx.text(fab.get("desc")),
                               fab.get("icon", "add"), ctx.callback(fab.get("tap")), bottom, ctx.accent))
    if spec.get("trap"):
        window.truth = "trap"
    phone = engine.phone
    blind.mark(window, body, blind.page_render(app, page.page_id, phone.seed, getattr(phone, "blind_share", 0.0)))
    return window


def app_dialog(engine, task):
    page = task.top
    if page.dialog is None:
        return None
    app = engine.apps[task.package]
    dialog_id, _params = page.dialog
    spec = app.dialogs.get(dialog_id)
    if spec is None:
        page.dialog = None
        return None
    ctx = engine.context(task, page)

    def close_then(actions):
        def run(*_):
            page.dialog = None
            page.focused = None
            engine.changed()
            ctx.run(actions or [])
        return run

    buttons = [{"rid": b.get("id", ""), "text": ctx.text(b.get("text")), "style": b.get("style"),
                "on_tap": close_then(b.get("tap"))} for b in spec.get("buttons") or []
               if ctx.cond(b.get("visible_if"))]
    for button in buttons:
        if button["rid"] and ":id/" not in button["rid"]:
            button["rid"] = resource_id(task.package, button["rid"])
    m = engine.metrics
    pad = m.px(84) + m.px(64)

    def build_body(y, measure=False):
        """Extra elements (inputs, radios, a wheel) laid out in the dialog's narrower column."""
        ctx.m = m.inset(pad - m.px(64), m.width - pad + m.px(64), m.px(64))
        nodes, bottom = layout.build_elements(spec["elements"], ctx, y)
        ctx.m = m
        return nodes, bottom - y

    body_builder = build_body if spec.get("elements") else None
    cancelable = spec.get("cancelable", True)
    return widgets.dialog_window(engine.metrics, task.package, ctx.text(spec.get("title")), ctx.text(spec.get("message")),
                                 buttons, on_outside=close_then([]) if cancelable else None, body_builder=body_builder,
                                 window_title=f"{task.package}/{app.activity_of(page.page_id)}")
