"""How each anomaly looks (Node trees) and how its buttons, Back and typing handle it."""
from simfarm import handback_views, ui, widgets
from simfarm.layout import text_node
from simfarm.ui import Node

PERMISSIONS = "com.android.permissioncontroller"
SYSTEMUI = "com.android.systemui"
PERMISSION_TEXTS = {
    "location": ("access this device's location", "location", True),
    "camera": ("take pictures and record video", "camera", True),
    "microphone": ("record audio", "mic", True),
    "notifications": ("send you notifications", "bell", False),
    "storage": ("access photos and media on this device", "apps", False),
    "contacts": ("access your contacts", "person", False),
}


def _label(anomalies, package):
    app = anomalies.engine.apps.get(package)
    return app.label if app else (package or "App")


def focus_of(anomalies, anomaly):
    kind, package = anomaly.kind, anomaly.package
    if kind == "permission_dialog":
        return (PERMISSIONS, "com.android.permissioncontroller.permission.ui.GrantPermissionsActivity", "")
    if kind == "app_crash":
        return ("", "", f"Application Error: {package}")
    if kind == "app_not_responding":
        return ("", "", f"Application Not Responding: {package}")
    if kind in ("low_battery", "storage_full"):
        return (SYSTEMUI, "", "SystemUI dialog")
    if kind in handback_views.KINDS:
        return handback_views.focus_of(anomaly)
    activity = {"captcha": ".security.CaptchaActivity", "risk_control": ".security.RiskVerifyActivity",
                "ad_popup": ".ads.SplashAdActivity", "payment_authentication": ".pay.PayPasswordActivity"}.get(kind)
    if activity:
        return (package, activity, "")
    return None  # app dialogs keep the app's window focused


def _button(rid, text, on_tap, style=None):
    return {"rid": rid, "text": text, "on_tap": lambda *a: on_tap(), "style": style}


def build(anomalies, anomaly) -> Node:
    engine = anomalies.engine
    m = engine.metrics
    kind, package = anomaly.kind, anomaly.package
    label = _label(anomalies, package)
    close = lambda: anomalies.dismiss(anomaly)  # noqa: E731 - tiny callbacks read best inline

    if kind in handback_views.KINDS:
        return handback_views.build(anomalies, anomaly, label)
    if kind == "permission_dialog":
        permission = anomaly.params.get("permission", "location")
        phrase, icon, foreground_only = PERMISSION_TEXTS.get(permission, PERMISSION_TEXTS["location"])

        def answer(result):
            engine.phone.set_permission(package, permission, result)
            close()
        if foreground_only:
            buttons = [_button(f"{PERMISSIONS}:id/permission_allow_foreground_only_button", "While using the app",
                               lambda: answer("granted")),
                       _button(f"{PERMISSIONS}:id/permission_allow_one_time_button", "Only this time",
                               lambda: answer("granted_once")),
                       _button(f"{PERMISSIONS}:id/permission_deny_button", "Don't allow", lambda: answer("denied"))]
        else:
            buttons = [_button(f"{PERMISSIONS}:id/permission_allow_button", "Allow", lambda: answer("granted")),
                       _button(f"{PERMISSIONS}:id/permission_deny_button", "Don't allow", lambda: answer("denied"))]
        return widgets.dialog_window(m, PERMISSIONS, f"Allow {label} to {phrase}?", "", buttons, stacked=True,
                                     icon=icon, window_title="GrantPermissionsActivity",
                                     rid_prefix=f"{PERMISSIONS}:id/permission_")
    if kind in ("app_crash", "app_not_responding"):
        def close_app():
            close()
            engine.force_stop(package)
        if kind == "app_crash":
            title = f"{label} keeps stopping"
            buttons = [_button("android:id/aerr_app_info", "App info", lambda: (close_app(), engine.phone.open_app_info(package))),
                       _button("android:id/aerr_close", "Close app", close_app)]
        else:
            title = f"{label} isn't responding"
            buttons = [_button("android:id/aerr_close", "Close app", close_app),
                       _button("android:id/aerr_wait", "Wait", close)]
        return widgets.dialog_window(m, "android", title, "", buttons, stacked=True, icon="info",
                                     window_title=f"Application Error: {package}")
    if kind == "low_battery":
        def saver():
            engine.phone.settings.put("global", "low_power", "1")
            close()
        level = engine.phone.battery_level
        return widgets.dialog_window(m, SYSTEMUI, "Battery may run out soon",
                                     f"{level}% remaining. Turn on Battery Saver to extend battery life.",
                                     [_button("android:id/button2", "Close", close),
                                      _button("android:id/button1", "Turn on Battery Saver", saver)],
                                     window_title="SystemUI dialog")
    if kind == "storage_full":
        return widgets.dialog_window(m, SYSTEMUI, "Storage space running out",
                                     "Some system functions may not work. Free up space to keep your phone working.",
                                     [_button("android:id/button2", "Dismiss", close),
                                      _button("android:id/button1", "Manage storage",
                                              lambda: (close(), engine.phone.open_settings_page("storage")))],
                                     window_title="SystemUI dialog")
    if kind == "login_expired":
        def relogin():
            close()
            app = engine.apps.get(package)
            if app and "login" in app.pages and engine.foreground is not None:
                engine.push_page(engine.foreground, "login")
        return widgets.dialog_window(m, package, "Login expired",
                                     "Your login session has expired. Please log in again to continue.",
                                     [_button(f"{package}:id/btn_cancel", "Cancel", close),
                                      _button(f"{package}:id/btn_relogin", "Log in", relogin)], rid_prefix=f"{package}:id/")
    if kind == "update_prompt":
        return widgets.dialog_window(m, package, "New version available",
                                     f"{label} {anomaly.params.get('version', '9.1.0')} brings bug fixes and "
                                     "performance improvements.",
                                     [_button(f"{package}:id/btn_later", "Later", close),
                                      _button(f"{package}:id/btn_update", "Update now",
                                              lambda: (close(), engine.show_toast("Downloading update…")))],
                                     rid_prefix=f"{package}:id/")
    if kind == "ad_popup":
        return _ad(anomalies, anomaly, m, package, close)
    if kind == "captcha":
        return _captcha(anomalies, anomaly, m, package, close)
    return _code_sheet(anomalies, anomaly, m, package, close)


def _page(m, package, window_title, bg=ui.SURFACE):
    return Node(bounds=(0, 0, m.width, m.height), window=window_title, package=package, draw="fill", style={"bg": bg})


def _ad(anomalies, anomaly, m, package, close):
    window = _page(m, package, f"{package}/.ads.SplashAdActivity", bg=(25, 25, 30))
    top = m.status_bar + m.px(200)
    banner = window.add(Node(cls="android.widget.ImageView", bounds=(m.px(80), top, m.width - m.px(80), top + m.px(1300)),
                             rid=f"{package}:id/ad_image", desc="Advertisement", package=package, draw="fill",
                             style={"bg": (255, 112, 67), "radius": m.px(48)}))
    banner.add(text_node(m, (m.px(120), top + m.px(420), m.width - m.px(120), top + m.px(560)), "Limited-time offer", 80,
                         ui.WHITE, align="center", package=package))
    banner.add(text_node(m, (m.px(120), top + m.px(600), m.width - m.px(120), top + m.px(700)), "Up to 70% off today only",
                         48, ui.WHITE, align="center", package=package))
    window.add(text_node(m, (m.px(80), top - m.px(120), m.px(300), top - m.px(40)), "Ad", 40, (189, 193, 198),
                         rid=f"{package}:id/ad_label", package=package))
    window.add(Node(cls="android.widget.Button", bounds=(m.px(200), top + m.px(1360), m.width - m.px(200), top + m.px(1500)),
                    text="Learn more", rid=f"{package}:id/ad_cta", package=package, clickable=True, draw="button",
                    style={"bg": ui.ACCENT, "fg": ui.WHITE, "size": m.font(46), "radius": m.px(70)},
                    on_tap=lambda *a: anomalies.engine.show_toast("Opening offer…")))
    size = m.px(120)
    window.add(Node(cls="android.widget.ImageButton", bounds=(m.width - m.px(60) - size, top - m.px(150),
                                                              m.width - m.px(60), top - m.px(150) + size),
                    rid=f"{package}:id/ad_close", desc="Close", package=package, clickable=True, draw="icon",
                    style={"icon": "close", "color": ui.WHITE}, on_tap=lambda *a: close()))
    return window


def _captcha(anomalies, anomaly, m, package, close):
    window = _page(m, package, f"{package}/.security.CaptchaActivity")
    y = m.status_bar + m.px(120)
    window.add(text_node(m, (m.margin, y, m.width - m.margin, y + m.px(100)), "Security verification", 60,
                         rid=f"{package}:id/captcha_title", package=package))
    window.add(text_node(m, (m.margin, y + m.px(120), m.width - m.margin, y + m.px(200)),
                         "Drag the slider to complete the puzzle", 42, ui.TEXT_SECONDARY, package=package))
    window.add(Node(cls="android.widget.ImageView", bounds=(m.margin, y + m.px(260), m.width - m.margin, y + m.px(860)),
                    rid=f"{package}:id/captcha_image", desc="Puzzle image", package=package, draw="fill",
                    style={"bg": (120, 144, 156), "radius": m.px(24)}))
    track = (m.margin, y + m.px(940), m.width - m.margin, y + m.px(1080))
    slider = window.add(Node(cls="android.widget.SeekBar", bounds=track, rid=f"{package}:id/captcha_slider",
                             text="0.0", desc="Slide to verify", package=package, clickable=True, draw="slider",
                             style={"fraction": 0.0, "color": ui.ACCENT}))

    def drag(dx, dy, x1, y1):
        if x1 < track[0] + m.px(200) and x1 + dx >= track[2] - m.px(60):
            close()
            anomalies.engine.show_toast("Verification passed")
        else:
            anomalies.engine.show_toast("Verification failed, try again")
    slider.on_swipe = drag
    window.add(Node(cls="android.widget.ImageButton", bounds=(m.width - m.px(180), m.status_bar + m.px(10),
                                                              m.width - m.px(60), m.status_bar + m.px(110)),
                    rid=f"{package}:id/captcha_refresh", desc="Refresh", package=package, clickable=True, draw="icon",
                    style={"icon": "refresh", "color": ui.TEXT}, on_tap=lambda *a: None))
    return window


def _code_sheet(anomalies, anomaly, m, package, close):
    """Payment password sheet or risk-control verification page: both take a 6-digit code."""
    payment = anomaly.kind == "payment_authentication"
    if payment:
        window = Node(bounds=(0, 0, m.width, m.height), window=f"{package}/.pay.PayPasswordActivity", package=package)
        window.add(Node(bounds=(0, 0, m.width, m.height), draw="scrim", in_dump=False))
        top = m.height - m.nav_bar - m.px(1250)
        window.add(Node(cls="android.widget.FrameLayout", bounds=(0, top, m.width, m.height), draw="fill",
                        style={"bg": ui.SURFACE, "radius": m.px(48)}, package=package))
        title, hint = "Enter payment password", f"Pay ${anomaly.params.get('amount', '99.00')} to the merchant"
        field_id = f"{package}:id/pay_password"
    else:
        window = _page(m, package, f"{package}/.security.RiskVerifyActivity")
        top = m.status_bar + m.px(100)
        title = "Unusual activity detected"
        hint = "For your account security this operation is restricted. Enter the SMS code sent to your phone."
        field_id = f"{package}:id/sms_code"
    window.add(text_node(m, (m.margin, top + m.px(60), m.width - m.margin, top + m.px(160)), title, 56,
                         rid=f"{package}:id/title", package=package))
    window.add(text_node(m, (m.margin, top + m.px(170), m.width - m.margin, top + m.px(330)), hint, 40,
                         ui.TEXT_SECONDARY, wrap=True, rid=f"{package}:id/message", package=package))
    code = window.add(Node(cls="android.widget.EditText", bounds=(m.margin, top + m.px(360), m.width - m.margin, top + m.px(520)),
                           rid=field_id, text="•" * len(anomaly.typed) if payment else anomaly.typed, password=payment,
                           focusable=True, focused=True, clickable=True, package=package, draw="input",
                           style={"size": m.font(56), "hint": not anomaly.typed, "color": ui.ACCENT}))
    if not anomaly.typed:
        code.text = "6-digit code"
    close_rid = f"{package}:id/btn_close" if payment else f"{package}:id/btn_cancel"
    window.add(Node(cls="android.widget.Button", bounds=(m.margin, top + m.px(560), m.width // 2 - m.px(20), top + m.px(700)),
                    text="Cancel", desc="Close", rid=close_rid, package=package, clickable=True, draw="button",
                    style={"bg": None, "fg": ui.ACCENT, "border": ui.DIVIDER, "size": m.font(44), "radius": m.px(70)},
                    on_tap=lambda *a: (close(), anomalies.engine.show_toast("Payment cancelled" if payment else "Operation cancelled"))))
    keypad_top = top + m.px(740)
    key_w, key_h = (m.width - 2 * m.margin) // 3, m.px(110)
    for i, key in enumerate(["1", "2", "3", "4", "5", "6", "7", "8", "9", "del", "0", "ok"]):
        x, y = m.margin + (i % 3) * key_w, keypad_top + (i // 3) * key_h
        window.add(Node(cls="android.widget.Button", bounds=(x, y, x + key_w, y + key_h), text=key, package=package,
                        clickable=True, draw="key", style={"size": m.font(48)},
                        on_tap=lambda *a, k=key: type_code(anomalies, anomaly, k)))
    return window


def type_code(anomalies, anomaly, text):
    for char in ([text] if text in ("del", "ok") else text):
        if char in ("⌫", "del"):
            anomaly.typed = anomaly.typed[:-1]
        elif char.isdigit() and len(anomaly.typed) < 6:
            anomaly.typed += char
    anomalies.engine.changed()
    if len(anomaly.typed) == 6:
        anomalies.dismiss(anomaly)
        anomalies.engine.show_toast("Verified" if anomaly.kind == "risk_control" else "Payment successful")
        if anomaly.kind == "payment_authentication":
            anomalies.engine.phone.record_payment(anomaly.package, anomaly.params.get("amount", "99.00"))


def on_back(anomalies, anomaly):
    """Back on each kind: what the real dialog or page does."""
    kind = anomaly.kind
    if kind in handback_views.KINDS:
        handback_views.on_back(anomalies, anomaly)
    elif kind == "permission_dialog":
        anomalies.engine.phone.set_permission(anomaly.package, anomaly.params.get("permission", "location"), "denied")
        anomalies.dismiss(anomaly)
    elif kind in ("app_crash", "app_not_responding"):
        anomalies.dismiss(anomaly)
        if kind == "app_crash":
            anomalies.engine.force_stop(anomaly.package)
    elif kind == "ad_popup":
        pass  # splash ads swallow Back: the close button is the way out
    else:
        anomalies.dismiss(anomaly)


def network_body(m, package, top, bottom, on_retry):
    mid = (top + bottom) // 2
    nodes = [Node(cls="android.widget.ImageView", bounds=(m.width // 2 - m.px(90), mid - m.px(380), m.width // 2 + m.px(90),
                                                          mid - m.px(200)), draw="icon", package=package,
                  rid=f"{package}:id/error_icon", style={"icon": "wifi_off", "color": ui.TEXT_SECONDARY}),
             text_node(m, (m.margin, mid - m.px(160), m.width - m.margin, mid - m.px(60)),
                       "Network unavailable, please retry", 48, rid=f"{package}:id/error_text", align="center", package=package),
             text_node(m, (m.margin, mid - m.px(50), m.width - m.margin, mid + m.px(30)),
                       "Check your network settings and try again", 38, ui.TEXT_SECONDARY, align="center", package=package),
             Node(cls="android.widget.Button", bounds=(m.width // 2 - m.px(200), mid + m.px(90), m.width // 2 + m.px(200), mid + m.px(230)),
                  text="Retry", rid=f"{package}:id/btn_retry", package=package, clickable=True, draw="button",
                  on_tap=on_retry, style={"bg": ui.ACCENT, "fg": ui.WHITE, "size": m.font(46), "radius": m.px(70)})]
    return nodes, bottom


def loading_body(m, package, top, bottom):
    mid = (top + bottom) // 2
    nodes = [Node(cls="android.widget.ProgressBar", bounds=(m.width // 2 - m.px(70), mid - m.px(200), m.width // 2 + m.px(70),
                                                            mid - m.px(60)), rid=f"{package}:id/loading", package=package,
                  draw="spinner", style={"color": ui.ACCENT}),
             text_node(m, (m.margin, mid, m.width - m.margin, mid + m.px(90)), "Loading…", 44, ui.TEXT_SECONDARY,
                       rid=f"{package}:id/loading_text", align="center", package=package)]
    return nodes, bottom


def heads_up(anomalies, anomaly) -> Node:
    engine = anomalies.engine
    m = engine.metrics
    box = (m.px(24), m.status_bar + m.px(10), m.width - m.px(24), m.status_bar + m.px(260))
    window = Node(bounds=box, window="HeadsUpNotification", package=SYSTEMUI, style={"modal": False, "always_dump": True})
    label = _label(anomalies, anomaly.package) if anomaly.package in engine.apps else "Shell"

    def open_it(*_):
        anomalies.dismiss(anomaly)
        if anomaly.package in engine.apps:
            engine.launch(anomaly.package)
    card = window.add(Node(cls="android.widget.FrameLayout", bounds=box, rid=f"{SYSTEMUI}:id/expandableNotificationRow",
                           desc=f"{label} notification: {anomaly.params.get('title')}", clickable=True, package=SYSTEMUI,
                           draw="fill", style={"bg": ui.SURFACE, "radius": m.px(36), "border": ui.DIVIDER}, on_tap=open_it))
    card.add(text_node(m, (m.px(80), box[1] + m.px(20), m.width - m.px(80), box[1] + m.px(80)), label, 34,
                       ui.TEXT_SECONDARY, rid="android:id/app_name_text", package=SYSTEMUI))
    card.add(text_node(m, (m.px(80), box[1] + m.px(80), m.width - m.px(80), box[1] + m.px(160)),
                       anomaly.params.get("title", ""), 44, rid="android:id/title", package=SYSTEMUI))
    card.add(text_node(m, (m.px(80), box[1] + m.px(160), m.width - m.px(80), box[1] + m.px(230)),
                       anomaly.params.get("text", ""), 38, ui.TEXT_SECONDARY, rid="android:id/text", package=SYSTEMUI))
    return window
