"""In-app hand-back states real apps show (forced update, region wall, identity check, ...): how
each looks and how its buttons and Back answer.

The product recognises these by their texts and resource-ids, so the wording is fixed. They are
what a real app draws, so they look and answer the same in real-phone mode.
"""
from simfarm import ui, widgets
from simfarm.layout import text_node
from simfarm.ui import Node

# Full-page kinds and the activity that owns their window (focus, like captcha's).
PAGES = {"region_wall": ".region.RegionBlockedActivity",
         "identity_verification": ".security.IdentityVerifyActivity",
         "service_maintenance": ".MaintenanceActivity"}
DIALOGS = ("forced_update", "account_restricted", "device_conflict", "age_verification", "rating_prompt")
KINDS = tuple(PAGES) + DIALOGS


def focus_of(anomaly):
    activity = PAGES.get(anomaly.kind)
    return (anomaly.package, activity, "") if activity else None  # dialogs keep the app focused


def _button(rid, text, on_tap):
    return {"rid": rid, "text": text, "on_tap": lambda *a: on_tap()}


def _relogin(engine, close, package):
    """What login_expired's "Log in" does: dismiss, then the app's own login page if it has one."""
    close()
    app = engine.apps.get(package)
    if app and "login" in app.pages and engine.foreground is not None:
        engine.push_page(engine.foreground, "login")


def build(anomalies, anomaly, label) -> Node:
    engine = anomalies.engine
    m = engine.metrics
    kind, package = anomaly.kind, anomaly.package
    rid = f"{package}:id/"
    close = lambda: anomalies.dismiss(anomaly)  # noqa: E731 - tiny callbacks read best inline
    toast = engine.show_toast

    if kind in PAGES:
        return _page(anomalies, anomaly, m, package, close)
    if kind == "forced_update":
        # No Later and no outside-tap: the old version refuses to run, so the dialog never goes.
        return widgets.dialog_window(m, package, "Update required",
                                     f"This version of {label} is no longer supported. Update to continue.",
                                     [_button(f"{rid}btn_force_update", "Update now",
                                              lambda: toast("Downloading update…"))], rid_prefix=rid)
    if kind == "account_restricted":
        return widgets.dialog_window(m, package, "Account restricted",
                                     "Your account has been temporarily restricted for security reasons. "
                                     "Contact support to restore access.",
                                     [_button(f"{rid}btn_contact_support", "Contact support",
                                              lambda: toast("Opening support…")),
                                      _button(f"{rid}btn_ok", "OK", close)], rid_prefix=rid)
    if kind == "device_conflict":
        return widgets.dialog_window(m, package, "Signed in on another device",
                                     "Your account was signed in on another device. Sign in again to continue.",
                                     [_button(f"{rid}btn_cancel", "Cancel", close),
                                      _button(f"{rid}btn_signin_again", "Sign in",
                                              lambda: _relogin(engine, close, package))], rid_prefix=rid)
    if kind == "age_verification":
        return widgets.dialog_window(m, package, "Age verification",
                                     "This content is for users 18 or older. Confirm your date of birth to continue.",
                                     [_button(f"{rid}btn_cancel", "Cancel", close),
                                      _button(f"{rid}btn_verify_age", "Verify age",
                                              lambda: toast("Verification needs your ID"))], rid_prefix=rid)
    # rating_prompt: the in-app review card, five stars above its buttons.
    def rate():
        close()
        toast("Thanks for rating")
    return widgets.dialog_window(m, package, f"Enjoying {label}?", "Tap a star to rate us on the store.",
                                 [_button(f"{rid}btn_not_now", "Not now", close),
                                  _button(f"{rid}btn_rate", "Rate", rate)], rid_prefix=rid,
                                 body_builder=lambda y, measure=False: _stars(m, package, y, rate))


def _stars(m, package, y, on_rate):
    """A RatingBar (one node in the dump, as on Android); a tap on it rates, like "Rate"."""
    size, gap = m.px(110), m.px(20)
    width = 5 * size + 4 * gap
    x0 = (m.width - width) // 2
    bar = Node(cls="android.widget.RatingBar", bounds=(x0, y + m.px(10), x0 + width, y + m.px(10) + size),
               rid=f"{package}:id/rating_bar", desc="Rate 1 to 5 stars", package=package,
               clickable=True, focusable=True, on_tap=lambda *a: on_rate())
    for i in range(5):
        x = x0 + i * (size + gap)
        bar.add(Node(cls="android.widget.ImageView", bounds=(x, bar.bounds[1], x + size, bar.bounds[3]), draw="icon",
                     style={"icon": "star", "color": (251, 188, 4)}, package=package, in_dump=False))
    return [bar], size + m.px(40)


def _page(anomalies, anomaly, m, package, close):
    """Region wall, identity check and maintenance: a full page with a symbol, words and buttons."""
    engine = anomalies.engine
    kind, rid = anomaly.kind, f"{package}:id/"
    window = Node(bounds=(0, 0, m.width, m.height), window=f"{package}/{PAGES[kind]}", package=package,
                  draw="fill", style={"bg": ui.SURFACE})

    def stop_app():
        close()
        engine.force_stop(package)

    if kind == "region_wall":
        icon, title, title_rid = "info", "Not available in your region", f"{rid}region_notice"
        message = "This service is not available in your country or region."
        buttons = [(f"{rid}btn_region_ok", "OK", stop_app, True)]
    elif kind == "identity_verification":
        icon, title, title_rid = "person", "Verify your identity", f"{rid}id_verify_title"
        message = "Real-name verification is required to continue. Take a photo of your ID card."
        buttons = [(f"{rid}btn_start_verify", "Start verification", lambda: engine.show_toast("Camera unavailable"), True),
                   (f"{rid}btn_cancel", "Cancel", lambda: cancel_identity(anomalies, anomaly), False)]
    else:
        icon, title, title_rid = "settings", "Under maintenance", f"{rid}maintenance_title"
        message = "The service is under maintenance. Please try again later."
        buttons = [(f"{rid}btn_retry_maintenance", "Retry", lambda: engine.show_toast("Still under maintenance"), True)]

    mid, y = m.width // 2, m.status_bar + m.px(360)
    window.add(Node(cls="android.widget.ImageView", bounds=(mid - m.px(110), y, mid + m.px(110), y + m.px(220)),
                    draw="icon", style={"icon": icon, "color": ui.ACCENT}, package=package))
    y += m.px(300)
    window.add(text_node(m, (m.margin, y, m.width - m.margin, y + m.px(100)), title, 60, rid=title_rid, align="center",
                         package=package))
    y += m.px(130)
    window.add(text_node(m, (m.margin * 2, y, m.width - m.margin * 2, y + m.px(200)), message, 42, ui.TEXT_SECONDARY,
                         wrap=True, align="center", rid=f"{rid}message", package=package))
    y += m.px(300)
    for button_rid, text, on_tap, primary in buttons:
        window.add(Node(cls="android.widget.Button", bounds=(m.margin * 2, y, m.width - m.margin * 2, y + m.px(140)),
                        text=text, rid=button_rid, package=package, clickable=True, focusable=True, draw="button",
                        style={"bg": ui.ACCENT if primary else None, "fg": ui.WHITE if primary else ui.ACCENT,
                               "border": None if primary else ui.DIVIDER, "size": m.font(46), "radius": m.px(70)},
                        on_tap=lambda *a, f=on_tap: f()))
        y += m.px(170)
    return window


def cancel_identity(anomalies, anomaly):
    anomalies.dismiss(anomaly)
    anomalies.engine.show_toast("Verification required to continue")


def on_back(anomalies, anomaly):
    """Back the way each real screen answers it."""
    kind = anomaly.kind
    if kind == "forced_update":
        return  # not cancelable: the app cannot be used in this version
    if kind in ("region_wall", "service_maintenance"):
        anomalies.dismiss(anomaly)
        anomalies.engine.force_stop(anomaly.package)  # the only activity left finishes: back to the launcher
    elif kind == "identity_verification":
        cancel_identity(anomalies, anomaly)
    else:
        anomalies.dismiss(anomaly)
