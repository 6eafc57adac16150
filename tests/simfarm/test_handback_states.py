"""Hand-back states real apps show (forced update, region wall, ...): their exact texts and ids,
their buttons and Back, and the phone's own seeded schedule for them (`handback_rate`)."""
import pytest

from simfarm import __main__ as cli
from simfarm.anomalies import HANDBACK_SCHEDULE_KINDS, KINDS
from simfarm.farm import Farm
from simfarm.serve import build_farm
from tests.simfarm.phone_fixtures import focus, new_phone, node, sh, tap, texts

APP, LABEL = "com.sim.translator", "Translator"
SHOP = "com.sim.shop"  # has a login page and a logged_in flag
LAUNCHER = "com.google.android.apps.nexuslauncher"
NEW_KINDS = ("forced_update", "region_wall", "identity_verification", "account_restricted", "device_conflict",
             "age_verification", "service_maintenance", "rating_prompt")

# kind -> [(text, resource-id)] the dump must show, word for word (the product matches on them)
SHOWN = {
    "forced_update": [("Update required", None),
                      (f"This version of {LABEL} is no longer supported. Update to continue.", None),
                      ("Update now", f"{APP}:id/btn_force_update")],
    "region_wall": [("Not available in your region", f"{APP}:id/region_notice"),
                    ("This service is not available in your country or region.", None),
                    ("OK", f"{APP}:id/btn_region_ok")],
    "identity_verification": [("Verify your identity", f"{APP}:id/id_verify_title"),
                              ("Real-name verification is required to continue. Take a photo of your ID card.", None),
                              ("Start verification", f"{APP}:id/btn_start_verify"), ("Cancel", f"{APP}:id/btn_cancel")],
    "account_restricted": [("Account restricted", None),
                           ("Your account has been temporarily restricted for security reasons. "
                            "Contact support to restore access.", None),
                           ("Contact support", f"{APP}:id/btn_contact_support"), ("OK", f"{APP}:id/btn_ok")],
    "device_conflict": [("Signed in on another device", None),
                        ("Your account was signed in on another device. Sign in again to continue.", None),
                        ("Cancel", f"{APP}:id/btn_cancel"), ("Sign in", f"{APP}:id/btn_signin_again")],
    "age_verification": [("Age verification", None),
                         ("This content is for users 18 or older. Confirm your date of birth to continue.", None),
                         ("Cancel", f"{APP}:id/btn_cancel"), ("Verify age", f"{APP}:id/btn_verify_age")],
    "service_maintenance": [("Under maintenance", f"{APP}:id/maintenance_title"),
                            ("The service is under maintenance. Please try again later.", None),
                            ("Retry", f"{APP}:id/btn_retry_maintenance")],
    "rating_prompt": [(f"Enjoying {LABEL}?", None), ("Tap a star to rate us on the store.", None),
                      ("Not now", f"{APP}:id/btn_not_now"), ("Rate", f"{APP}:id/btn_rate")],
}
PAGES = {"region_wall": ".region.RegionBlockedActivity", "identity_verification": ".security.IdentityVerifyActivity",
         "service_maintenance": ".MaintenanceActivity"}


def active(phone):
    return phone.engine.anomalies.active()


def showing(kind, package=APP, **options):
    phone = new_phone(**options)
    sh(phone, f"monkey -p {package} 1")
    sh(phone, f"am broadcast -a com.sim.ANOMALY --es kind {kind}")
    assert active(phone) == [kind]
    return phone


def toast(phone):
    return phone.engine.toast_text


# -- the kinds ---------------------------------------------------------------------------------------

def test_the_eight_kinds_and_their_handoff():
    assert all(KINDS[kind][0] == "app" for kind in NEW_KINDS)
    assert [kind for kind in NEW_KINDS if not KINDS[kind][1]] == ["rating_prompt"]


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_texts_ids_and_focus(kind):
    phone = new_phone()
    sh(phone, f"monkey -p {APP} 1")
    app_focus = phone.engine.focus()
    sh(phone, f"am broadcast -a com.sim.ANOMALY --es kind {kind}")
    for text, rid in SHOWN[kind]:
        found = node(phone, text=text)
        assert found.attrib["package"] == APP
        if rid:
            assert found.attrib["resource-id"] == rid
    assert "Translate" not in texts(phone)  # the dump shows the anomaly's window only
    # Full pages are activities of their own (focus like captcha's); dialogs leave the app focused.
    assert phone.engine.focus() == ((APP, PAGES[kind], "") if kind in PAGES else app_focus)
    assert kind in sh(phone, "content query --uri content://sim/anomalies")


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_clear_and_force_stop_remove_them(kind):
    phone = showing(kind)
    sh(phone, "am broadcast -a com.sim.ANOMALY --es kind clear")
    assert active(phone) == []
    sh(phone, f"am broadcast -a com.sim.ANOMALY --es kind {kind}")
    sh(phone, f"am force-stop {APP}; monkey -p {APP} 1")
    assert active(phone) == []


def test_forced_update_cannot_be_dismissed():
    phone = showing("forced_update")
    tap(phone, resource_id=f"{APP}:id/btn_force_update")
    assert toast(phone) == "Downloading update…" and active(phone) == ["forced_update"]
    sh(phone, "input keyevent BACK")
    assert active(phone) == ["forced_update"] and focus(phone)[0] == APP
    sh(phone, "input tap 540 200")  # outside the dialog
    assert active(phone) == ["forced_update"]


@pytest.mark.parametrize("how", ["ok", "back"])
def test_region_wall_closes_the_app(how):
    phone = showing("region_wall")
    if how == "ok":
        tap(phone, resource_id=f"{APP}:id/btn_region_ok")
    else:
        sh(phone, "input keyevent BACK")
    assert active(phone) == [] and focus(phone)[0] == LAUNCHER
    assert phone.engine.task_of(APP) is None  # force-stopped, not just hidden


def test_identity_verification():
    phone = showing("identity_verification")
    tap(phone, text="Start verification")
    assert toast(phone) == "Camera unavailable" and active(phone) == ["identity_verification"]
    tap(phone, resource_id=f"{APP}:id/btn_cancel")
    assert toast(phone) == "Verification required to continue" and active(phone) == []
    assert focus(phone)[0] == APP
    sh(phone, "am broadcast -a com.sim.ANOMALY --es kind identity_verification")
    sh(phone, "input keyevent BACK")  # Back cancels, as the page's Cancel
    assert active(phone) == [] and focus(phone)[0] == APP


def test_account_restricted():
    phone = showing("account_restricted")
    tap(phone, text="Contact support")
    assert toast(phone) == "Opening support…" and active(phone) == ["account_restricted"]
    tap(phone, resource_id=f"{APP}:id/btn_ok")
    assert active(phone) == [] and focus(phone)[0] == APP


def test_device_conflict_logs_out_and_sign_in_opens_login():
    phone = new_phone()
    sh(phone, f"monkey -p {SHOP} 1")
    phone.app_state(SHOP)["logged_in"] = True
    sh(phone, "am broadcast -a com.sim.ANOMALY --es kind device_conflict")
    assert phone.app_state(SHOP)["logged_in"] is False  # the session ended, as login_expired does
    tap(phone, resource_id=f"{SHOP}:id/btn_signin_again")
    assert active(phone) == [] and phone.engine.foreground.top.page_id == "login"
    sh(phone, "am broadcast -a com.sim.ANOMALY --es kind device_conflict")
    tap(phone, resource_id=f"{SHOP}:id/btn_cancel")
    assert active(phone) == [] and phone.engine.foreground.top.page_id == "login"


def test_device_conflict_in_an_app_without_login_just_closes():
    phone = showing("device_conflict")
    page = phone.engine.foreground.top.page_id
    tap(phone, text="Sign in")
    assert active(phone) == [] and phone.engine.foreground.top.page_id == page


def test_age_verification():
    phone = showing("age_verification")
    tap(phone, text="Verify age")
    assert toast(phone) == "Verification needs your ID" and active(phone) == ["age_verification"]
    tap(phone, text="Cancel")
    assert active(phone) == [] and focus(phone)[0] == APP


def test_service_maintenance():
    phone = showing("service_maintenance")
    tap(phone, text="Retry")
    assert toast(phone) == "Still under maintenance" and active(phone) == ["service_maintenance"]
    sh(phone, "input keyevent BACK")
    assert active(phone) == [] and focus(phone)[0] == LAUNCHER and phone.engine.task_of(APP) is None


@pytest.mark.parametrize("button, message", [("Not now", None), ("Rate", "Thanks for rating")])
def test_rating_prompt(button, message):
    phone = showing("rating_prompt")
    tap(phone, text=button)
    assert active(phone) == [] and toast(phone) == message and focus(phone)[0] == APP


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_same_in_real_phone_mode(kind):
    """A real app draws these: a real-phone-mode phone shows and answers them the same way."""
    normal = showing(kind)
    real = new_phone(real_phone=True)
    sh(real, f"monkey -p {APP} 1")
    real.engine.anomalies.inject(kind)  # the app's own doing: no broadcast involved
    assert real.dump_hierarchy() == normal.dump_hierarchy()
    assert real.run("screencap -p").stdout == normal.run("screencap -p").stdout
    assert real.engine.focus() == normal.engine.focus()
    for phone in (normal, real):
        sh(phone, "input keyevent BACK")
    assert active(real) == active(normal) and real.engine.focus() == normal.engine.focus()


# -- the schedule ------------------------------------------------------------------------------------

def test_schedule_kinds():
    handoff = {kind for kind, (_, needs_person) in KINDS.items() if needs_person}
    assert set(HANDBACK_SCHEDULE_KINDS) == handoff | {"ad_popup", "update_prompt", "rating_prompt"}
    assert len(HANDBACK_SCHEDULE_KINDS) == len(set(HANDBACK_SCHEDULE_KINDS))
    assert all(KINDS[kind][0] == "app" for kind in HANDBACK_SCHEDULE_KINDS)


def test_rate_one_shows_a_state_after_an_input_in_an_app():
    phone = new_phone(handback_rate=1.0)
    sh(phone, "input keyevent VOLUME_UP")  # on the launcher: no app, nothing
    assert active(phone) == []
    sh(phone, f"monkey -p {APP} 1")
    assert active(phone) == []  # launching is not an input
    sh(phone, "input keyevent VOLUME_UP")
    (kind,) = active(phone)
    assert kind in HANDBACK_SCHEDULE_KINDS
    assert phone.engine.foreground.anomaly.package == APP


def test_one_at_a_time():
    phone = new_phone(handback_rate=1.0)
    sh(phone, f"monkey -p {APP} 1")
    sh(phone, "input keyevent VOLUME_UP")
    first = phone.engine.foreground.anomaly
    for _ in range(5):
        sh(phone, "input keyevent VOLUME_UP")
    assert phone.engine.foreground.anomaly is first  # none replaces one already showing


def test_rate_zero_never():
    phone = new_phone()
    assert phone.handback_rate == 0.0
    sh(phone, f"monkey -p {APP} 1")
    for _ in range(30):
        sh(phone, "input keyevent VOLUME_UP")
    assert active(phone) == []


def scheduled(seed=0, index=0, rate=0.5, steps=24, **options):
    phone = new_phone(index=index, seed=seed, handback_rate=rate, **options)
    sh(phone, f"monkey -p {APP} 1")
    seen = []
    for _ in range(steps):
        sh(phone, "input keyevent VOLUME_UP")
        seen.append(tuple(active(phone)))
        phone.run_in_normal_mode("am broadcast -a com.sim.ANOMALY --es kind clear")
    return seen


def test_same_seed_same_sequence():
    first = scheduled(seed=5)
    assert first == scheduled(seed=5)
    assert any(first) and not all(first)  # rate 0.5: some inputs, not all
    assert len({kind for step in first for kind in step}) > 2
    assert first != scheduled(seed=6) and first != scheduled(seed=5, index=1)  # per phone


def test_the_anomaly_rate_stream_is_untouched():
    def rng_state(handback_rate):
        phone = new_phone(anomaly_rate=0.3, handback_rate=handback_rate)
        sh(phone, f"monkey -p {APP} 1")
        for _ in range(10):
            sh(phone, "input keyevent VOLUME_UP")
        return phone.engine.anomalies.rng.getstate()
    assert rng_state(0.0) == rng_state(1.0)


def test_factory_reset_restarts_the_sequence():
    phone = new_phone(handback_rate=0.5)
    sh(phone, f"monkey -p {APP} 1")
    draws = [phone.engine.anomalies.handback_rng.random() for _ in range(3)]
    phone.factory_reset()
    assert [phone.engine.anomalies.handback_rng.random() for _ in range(3)] == draws


def test_schedule_works_in_real_phone_mode_where_the_broadcast_is_refused():
    phone = new_phone(real_phone=True, handback_rate=1.0)
    sh(phone, f"monkey -p {APP} 1")
    sh(phone, "am broadcast -a com.sim.ANOMALY --es kind rating_prompt")  # reaches nobody there
    assert active(phone) == []
    sh(phone, "input keyevent VOLUME_UP")
    (kind,) = active(phone)
    assert kind in HANDBACK_SCHEDULE_KINDS
    assert scheduled(seed=3, real_phone=True) == scheduled(seed=3)  # the same phone behaviour in both modes


# -- options -----------------------------------------------------------------------------------------

def test_farm_passes_the_rate_to_every_phone():
    farm = Farm(devices=2, handback_rate=0.25)
    assert farm.handback_rate == 0.25 and all(phone.handback_rate == 0.25 for phone in farm)
    assert all(phone.engine.anomalies.handback_rate == 0.25 for phone in farm)
    assert build_farm(1, 0, handback_rate=0.5).phones["sim-0001"].handback_rate == 0.5
    with pytest.raises(ValueError):
        Farm(devices=1, handback_rate=1.5)


def test_cli_flag_and_environment(monkeypatch):
    monkeypatch.delenv("SIMFARM_HANDBACK_RATE", raising=False)
    assert cli.parse_args([]).handback_rate == 0.0
    assert cli.parse_args(["--handback-rate", "0.2"]).handback_rate == 0.2
    monkeypatch.setenv("SIMFARM_HANDBACK_RATE", "0.3")
    assert cli.parse_args([]).handback_rate == 0.3
    assert cli.parse_args(["--handback-rate", "0.1"]).handback_rate == 0.1  # the flag wins
    monkeypatch.setenv("SIMFARM_HANDBACK_RATE", "lots")
    assert cli.parse_args([]).handback_rate == 0.0
    assert cli.main(["--handback-rate", "2", "--port", "0"]) == 2
