"""Every anomaly kind: injectable, visible in hierarchy and screenshot, handled the real way."""
import pytest

from simfarm.anomalies import KINDS
from tests.simfarm.phone_fixtures import bounds, focus, new_phone, node, sh, tap, texts

APP = "com.sim.translator"


def active(phone):
    return sh(phone, "content query --uri content://sim/anomalies")


def drag_captcha(phone):
    x1, y1, x2, y2 = bounds(phone, resource_id=f"{APP}:id/captcha_slider")
    sh(phone, f"input swipe {x1 + 20} {(y1 + y2) // 2} {x2 - 5} {(y1 + y2) // 2} 600")


# kind -> (what the dump shows, how a person or agent handles it)
CASES = {
    "permission_dialog": ({"resource_id": "com.android.permissioncontroller:id/permission_allow_foreground_only_button"},
                          lambda p: tap(p, text="While using the app")),
    "ad_popup": ({"resource_id": f"{APP}:id/ad_close"}, lambda p: tap(p, content_desc="Close")),
    "push_notification": ({"text": "You have 1 new message"}, lambda p: sh(p, "input swipe 540 300 540 50 200")),
    "low_battery": ({"text": "Battery may run out soon"}, lambda p: tap(p, text="Turn on Battery Saver")),
    "network_unavailable": ({"text": "Network unavailable, please retry"},
                            lambda p: tap(p, resource_id=f"{APP}:id/btn_retry")),
    "slow_network": ({"resource_id": f"{APP}:id/loading"}, lambda p: sh(p, "sleep 2")),
    "app_crash": ({"text": "Translator keeps stopping"}, lambda p: tap(p, resource_id="android:id/aerr_close")),
    "app_not_responding": ({"text": "Translator isn't responding"}, lambda p: tap(p, resource_id="android:id/aerr_wait")),
    "login_expired": ({"resource_id": f"{APP}:id/btn_relogin"}, lambda p: tap(p, text="Cancel")),
    "captcha": ({"resource_id": f"{APP}:id/captcha_slider"}, drag_captcha),
    "payment_authentication": ({"resource_id": f"{APP}:id/pay_password"}, lambda p: sh(p, "input text 123456")),
    "risk_control": ({"text": "Unusual activity detected"}, lambda p: sh(p, "input text 246810")),
    "update_prompt": ({"text": "New version available"}, lambda p: tap(p, text="Later")),
    "storage_full": ({"text": "Storage space running out"}, lambda p: tap(p, text="Dismiss")),
    # Hand-back states (tests/simfarm/test_handback_states.py covers each button and Back).
    "forced_update": ({"resource_id": f"{APP}:id/btn_force_update"},
                      lambda p: sh(p, f"am force-stop {APP}; monkey -p {APP} 1")),  # it cannot be dismissed
    "region_wall": ({"resource_id": f"{APP}:id/region_notice"}, lambda p: tap(p, text="OK")),
    "identity_verification": ({"resource_id": f"{APP}:id/btn_start_verify"}, lambda p: tap(p, text="Cancel")),
    "account_restricted": ({"text": "Account restricted"}, lambda p: tap(p, resource_id=f"{APP}:id/btn_ok")),
    "device_conflict": ({"resource_id": f"{APP}:id/btn_signin_again"}, lambda p: tap(p, text="Cancel")),
    "age_verification": ({"resource_id": f"{APP}:id/btn_verify_age"}, lambda p: tap(p, text="Cancel")),
    "service_maintenance": ({"text": "Under maintenance"}, lambda p: sh(p, "input keyevent BACK")),
    "rating_prompt": ({"text": "Enjoying Translator?"}, lambda p: tap(p, text="Not now")),
}
CLOSES_THE_APP = ("app_crash", "region_wall", "service_maintenance")


def test_all_twenty_two_kinds_are_covered():
    assert set(CASES) == set(KINDS) and len(KINDS) == 22


@pytest.mark.parametrize("kind", sorted(CASES))
def test_inject_see_and_handle(kind):
    phone = new_phone()
    sh(phone, f"monkey -p {APP} 1")
    before = phone.run("screencap -p").stdout
    sh(phone, f"am broadcast -a com.sim.ANOMALY --es kind {kind}")
    marker, handle = CASES[kind]
    node(phone, **marker)  # in the hierarchy
    assert phone.run("screencap -p").stdout != before  # and on the screen
    if kind != "slow_network":  # two looks already finished loading
        assert kind in active(phone)
    handle(phone)
    assert kind not in active(phone)
    expected = "com.google.android.apps.nexuslauncher" if kind in CLOSES_THE_APP else APP
    assert focus(phone)[0] == expected


def test_permission_answer_is_recorded_and_back_denies():
    phone = new_phone()
    sh(phone, f"monkey -p {APP} 1")
    sh(phone, "am broadcast -a com.sim.ANOMALY --es kind permission_dialog --es permission notifications")
    assert node(phone, resource_id="com.android.permissioncontroller:id/permission_allow_button").attrib["text"] == "Allow"
    assert focus(phone)[0] == "com.android.permissioncontroller"
    sh(phone, "input keyevent BACK")
    assert sh(phone, "content query --uri content://sim/permissions") == \
        f"Row: 0 package={APP}, permission=notifications, result=denied\n"


def test_camera_page_asks_for_permission_once():
    phone = new_phone()
    sh(phone, f"monkey -p {APP} 1")
    tap(phone, text="Camera translation")
    assert "Allow Translator to take pictures and record video?" in texts(phone)
    tap(phone, text="Only this time")
    sh(phone, "input keyevent BACK")
    tap(phone, text="Camera translation")
    assert "Capture" in texts(phone)
    assert "granted=true" in sh(phone, f"dumpsys package {APP}")


def test_dialog_dump_shows_only_the_dialog_window():
    phone = new_phone()
    sh(phone, f"monkey -p {APP} 1")
    sh(phone, "am broadcast -a com.sim.ANOMALY --es kind app_crash")
    assert "Translate" not in texts(phone)
    assert "Application Error: com.sim.translator" in sh(phone, "dumpsys window windows | grep mCurrentFocus")


def test_ordinary_adb_ways_trigger_anomalies():
    phone = new_phone()
    sh(phone, "monkey -p com.sim.shop 1") if "com.sim.shop" in phone.engine.apps else None
    sh(phone, "svc wifi disable; svc data disable")
    if "com.sim.shop" in phone.engine.apps and phone.engine.apps["com.sim.shop"].network:
        assert "Network unavailable, please retry" in texts(phone)
        tap(phone, text="Retry")
        assert "Network unavailable, please retry" in texts(phone)  # still offline
        sh(phone, "svc wifi enable")
        assert "Network unavailable, please retry" not in texts(phone)
    sh(phone, "dumpsys battery set level 9")
    assert "Battery may run out soon" in texts(phone)
    tap(phone, text="Close")
    sh(phone, "cmd notification post -t Hello tag 'Meeting at 10'")
    assert "Meeting at 10" in texts(phone)
    sh(phone, "am broadcast -a android.intent.action.DEVICE_STORAGE_LOW")
    assert "Storage space running out" in texts(phone)


def test_in_app_anomaly_waits_for_its_app_and_force_stop_clears_it():
    phone = new_phone()
    sh(phone, f"am broadcast -a com.sim.ANOMALY --es kind ad_popup --es package {APP}")
    assert "Limited-time offer" not in texts(phone)
    sh(phone, f"monkey -p {APP} 1")
    assert "Limited-time offer" in texts(phone)
    sh(phone, "input keyevent BACK")
    assert "Limited-time offer" in texts(phone)  # splash ads swallow Back
    sh(phone, f"am force-stop {APP}; monkey -p {APP} 1")
    assert "Limited-time offer" not in texts(phone)


def test_unknown_kind_is_a_clear_error():
    phone = new_phone()
    result = phone.run("am broadcast -a com.sim.ANOMALY --es kind meteor_strike")
    assert result.exit_code == 1 and b"unknown anomaly kind" in result.stderr


def test_random_rate_is_seeded():
    def run(seed):
        phone = new_phone(seed=seed, anomaly_rate=0.5)
        sh(phone, f"monkey -p {APP} 1")
        seen = []
        for _ in range(12):
            phone.run("input tap 540 1200")
            seen.append(tuple(phone.engine.anomalies.active()))
        return seen
    assert run(5) == run(5)
    assert any(run(5))
