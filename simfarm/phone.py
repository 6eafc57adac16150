"""VirtualPhone: one simulated Android phone (state, apps, screen, shell) behind a lock."""
import copy
import hashlib
import logging
import threading
import time
import traceback

from simfarm import app_commands, blind, device_commands, dumpsys, hierarchy, render, screen_daemons, shell_commands, ui
from simfarm.engine import Engine
from simfarm.fs import VirtualFS
from simfarm.phone_state import PROFILES, SettingsStore
from simfarm.shell import Shell
from simfarm.system_facts import derived_props, link_settings, seed_files
from simfarm.types import ShellResult

log = logging.getLogger(__name__)
BASE_EPOCH = 1773651600  # 2026-03-16 09:00:00 UTC: every farm starts on the same simulated morning
FEATURES = ["shell_v2", "cmd", "stat_v2", "ls_v2", "fixed_push_mkdir", "apex", "abb", "abb_exec",
            "sendrecv_v2"]
COMMANDS = dict(shell_commands.COMMANDS)
COMMANDS.update({
    "input": device_commands.cmd_input, "screencap": device_commands.cmd_screencap,
    "uiautomator": device_commands.cmd_uiautomator, "wm": device_commands.cmd_wm,
    "getprop": device_commands.cmd_getprop, "setprop": device_commands.cmd_setprop,
    "settings": device_commands.cmd_settings, "svc": device_commands.cmd_svc, "am": app_commands.cmd_am,
    "pm": app_commands.cmd_pm, "monkey": app_commands.cmd_monkey, "cmd": app_commands.cmd_cmd,
    "content": app_commands.cmd_content, "dumpsys": dumpsys.cmd_dumpsys, "service": device_commands.cmd_service,
})


def stable_int(*parts) -> int:
    """A hash that is the same in every process (Python's hash() is salted)."""
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big")


class VirtualPhone:
    def __init__(self, index: int, seed: int, apps: dict, anomaly_rate: float = 0.0, features=None,
                 blind_share: float = 0.0, real_phone: bool = False, handback_rate: float = 0.0):
        profile = PROFILES[index % len(PROFILES)]
        self.index, self.seed = index, seed
        self.serial = f"sim-{index + 1:04d}"
        self.model = profile["model"].replace(" ", "_")
        self.product = profile["product"]
        self.device_name = profile["device"]
        self.profile = profile
        self.transport_id = index + 1
        self.state = "device"
        self.features = list(features or FEATURES)
        self.width, self.height, self.density = profile["width"], profile["height"], profile["density"]
        self.lock = threading.RLock()
        self.all_apps = apps
        self.anomaly_rate = anomaly_rate
        self.handback_rate = float(handback_rate)  # chance per input of an app's own hand-back state
        self.blind_share = float(blind_share)   # share of ordinary pages drawn as web views / canvases
        self.real_phone = bool(real_phone)      # answer only what a real phone answers (real_phone.py)
        self.farm_only_count, self.farm_only_calls = 0, []   # what real-phone mode refused (real_phone.refused)
        self.boot_time = BASE_EPOCH - 3600
        self._boot()

    def _boot(self):
        """Everything a factory reset restores: settings, apps and their data, files, clock, UI."""
        index, seed, profile = self.index, self.seed, self.profile
        self.size_override = self.density_override = None
        self.clock = float(BASE_EPOCH + index * 7)
        self.fs = VirtualFS(clock=self.now)
        screen_daemons.preinstall(self.fs)
        self.settings = SettingsStore({"global": {"device_name": profile["model"]},
                                       "secure": {"android_id": f"{stable_int(seed, index, 'aid'):016x}"}})
        self.settings.listeners.append(self._on_setting_changed)
        self.battery_level = 45 + stable_int(seed, index, "battery") % 55
        self.battery_plugged = True
        self.screen_on = True
        self.clipboard = ""
        self.notifications: list[dict] = []
        self.permissions: dict[str, dict] = {}
        self.payments: list[dict] = []
        self.extra_props: dict[str, str] = {}
        self.accounts = [("com.google", f"simuser{index + 1:04d}@gmail.com")]
        self._app_states: dict[str, dict] = {}
        self.engine = Engine(self, self._choose_apps(self.all_apps), self.width, self.height)
        self.engine.anomalies.configure(self.anomaly_rate, stable_int(seed, index, "anomalies"))
        self.engine.anomalies.configure_handback(self.handback_rate, stable_int(seed, index, "handback"))
        link_settings(self)   # Settings' choices as a real phone shows them (settings keys)
        seed_files(self)
        self.render_cache = render.RenderCache()
        self._flip_state, self._page_flips = None, 0
        self.shell = Shell(self, COMMANDS)
        self._notification_id = 0

    def set_display_size(self, size):
        """`wm size WxH` / `wm size reset`: the screen is laid out and captured at that size."""
        self.size_override = tuple(size) if size else None
        width, height = self.size_override or (self.width, self.height)
        self.engine.metrics = ui.Metrics(width, height)
        self.engine.changed()

    def factory_reset(self):
        """Back to the state the farm created (same seed → same phone); the serial stays online."""
        with self.lock:
            self._boot()

    def _choose_apps(self, apps):
        """Core and system apps everywhere; each other app on a seeded ~80% of phones (all on sim-0001)."""
        chosen = {}
        for package, spec in apps.items():
            if spec.core or spec.system or self.index == 0 or stable_int(self.seed, self.index, package) % 100 < 80:
                chosen[package] = spec
        return chosen

    # -- the ADB-facing entry point ---------------------------------------------------------------

    def run(self, cmd: str) -> ShellResult:
        """Run a whole shell command line; never raises (errors become stderr and exit 1)."""
        with self.lock:
            try:
                if self.state != "device":
                    return ShellResult(b"", b"error: device offline\n", 1)
                result = self.shell.run(cmd)
                return ShellResult(result.stdout, result.stderr, result.code, result.combined)
            except Exception as exc:  # the phone must survive any bug in an app file or command
                log.exception("phone %s failed on %r", self.serial, cmd)
                detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                return ShellResult(b"", f"/system/bin/sh: internal error: {detail}\n".encode(), 1)

    # -- screen -----------------------------------------------------------------------------------

    def screencap_png(self) -> bytes:
        with self.lock:
            if not self.screen_on:  # a real screencap of a sleeping screen is black
                return render.black_png(self.engine.metrics.width, self.engine.metrics.height)
            png = self.render_cache.png(self.engine.version, self.engine.screen())
            self.engine.anomalies.observed()  # after the look: "Loading…" lasts a few looks
            return png

    def screencap_raw(self) -> bytes:
        from io import BytesIO

        from PIL import Image
        return render.raw_framebuffer(Image.open(BytesIO(self.screencap_png())))

    def page_flip_count(self) -> int:
        """SurfaceFlinger's page-flip counter (`service call SurfaceFlinger 1013`): it moves
        whenever the display may have changed since it was last read."""
        with self.lock:
            state = screen_daemons.display_state(self)
            if state != self._flip_state:
                self._flip_state = state
                self._page_flips += 1
            return self._page_flips

    def dump_hierarchy(self) -> str:
        with self.lock:
            xml = hierarchy.dump_xml(self.engine.screen())
            self.engine.anomalies.observed()
            return xml

    def screen_kind(self) -> str:
        """The farm's truth about what the phone shows now: "ordinary", "blind" or "trap"."""
        with self.lock:
            return blind.screen_kind(self.engine)

    def drawn_texts(self) -> list[str]:
        """The words in the pixels (what OCR could read), blind pages included."""
        with self.lock:
            return [node.text for node in self.engine.screen().walk() if node.text]

    def run_in_normal_mode(self, cmd: str) -> ShellResult:
        """`run()` with the farm's own providers and broadcasts, also in real-phone mode (ground truth)."""
        with self.lock:
            saved, self.real_phone = self.real_phone, False
            try:
                return self.run(cmd)
            finally:
                self.real_phone = saved

    # -- clock ------------------------------------------------------------------------------------

    def now(self) -> float:
        return self.clock

    def tick(self, seconds: float = 1.0):
        """Simulated time moves one second per input, so runs are deterministic."""
        self.advance_clock(seconds)

    def advance_clock(self, seconds: float):
        before = self.clock_text()
        self.clock += max(0.0, seconds)
        self.engine.anomalies.time_passed(seconds)
        if self.clock_text() != before:
            self.engine.changed()

    def clock_text(self, long=False) -> str:
        moment = time.gmtime(self.clock)
        if long:
            return time.strftime("%a, %b ", moment) + str(moment.tm_mday)
        fmt = "%H:%M" if self.settings.get("system", "time_12_24") != "12" else "%I:%M"
        return time.strftime(fmt, moment)

    # -- facts for app templates ------------------------------------------------------------------

    @property
    def wifi_on(self):
        return self.settings.get("global", "wifi_on") == "1" and not self.airplane_on

    @property
    def data_on(self):
        return self.settings.get("global", "mobile_data") == "1" and not self.airplane_on

    @property
    def airplane_on(self):
        return self.settings.get("global", "airplane_mode_on") == "1"

    @property
    def offline(self):
        return not (self.wifi_on or self.data_on)

    @property
    def ip_address(self):
        return f"192.168.1.{100 + self.index % 150}"

    @property
    def mac_address(self):
        value = stable_int(self.seed, self.index, "mac")
        return ":".join(f"{(value >> (8 * i)) & 0xFF:02x}" for i in range(6))

    def fact(self, name):
        facts = {
            "model": self.profile["model"], "serial": self.serial, "android": self.profile["release"],
            "sdk": self.profile["sdk"], "battery": self.battery_level, "charging": self.battery_plugged,
            "account": self.accounts[0][1] if self.accounts else "", "clipboard": self.clipboard,
            "resolution": f"{self.width}x{self.height}", "wifi": self.wifi_on, "data": self.data_on,
            "offline": self.offline, "mac_address": self.mac_address, "ip_address": self.ip_address,
            "time": time.strftime("%H:%M", time.gmtime(self.clock)),
            "date": time.strftime("%Y-%m-%d", time.gmtime(self.clock)),
            "locale": self.locale, "manufacturer": self.profile["manufacturer"],
            "device_name": self.settings.get("global", "device_name"), "storage_used": "38.2 GB",
            "notifications": len(self.notifications),
            "apps": [{"package": p, "label": a.label, "version": a.version, "system": a.system}
                     for p, a in sorted(self.engine.apps.items(), key=lambda kv: kv[1].label.lower())],
        }
        return facts.get(name)

    def set_fact(self, name, value):
        """The few phone facts an app (Settings) may change."""
        if name in ("time", "date"):
            moment = time.gmtime(self.clock)
            try:
                if name == "time":
                    hours, minutes = [int(v) for v in str(value).split(":")[:2]]
                    self.clock += (hours - moment.tm_hour) * 3600 + (minutes - moment.tm_min) * 60
                else:
                    target = time.strptime(str(value), "%Y-%m-%d")
                    self.clock += (time.mktime(target) - time.mktime(time.strptime(time.strftime("%Y-%m-%d", moment), "%Y-%m-%d")))
            except ValueError:
                return
            self.engine.changed()
        elif name == "locale":
            self.put_setting("system", "system_locales", str(value))
        elif name == "clipboard":
            self.clipboard = str(value)
        elif name == "battery":
            self.set_battery_level(int(value))

    def props(self) -> dict:
        p = self.profile
        props = {
            "ro.product.model": p["model"], "ro.product.brand": p["brand"], "ro.product.name": p["product"],
            "ro.product.device": p["device"], "ro.product.manufacturer": p["manufacturer"],
            "ro.build.version.release": p["release"], "ro.build.version.sdk": str(p["sdk"]),
            "ro.build.version.security_patch": "2026-02-05", "ro.serialno": self.serial,
            "ro.boot.serialno": self.serial, "ro.product.cpu.abi": "arm64-v8a",
            "ro.product.cpu.abilist": "arm64-v8a,armeabi-v7a,armeabi", "ro.build.type": "user",
            "ro.build.tags": "release-keys", "ro.sf.lcd_density": str(self.density), "ro.debuggable": "0",
            "ro.build.fingerprint": f"{p['brand']}/{p['product']}/{p['device']}:{p['release']}/SIM.260305.001/1:user/release-keys",
            "ro.build.id": "SIM.260305.001", "ro.kernel.qemu": "0", "sys.boot_completed": "1",
            "ro.product.locale": "en-US", "gsm.operator.alpha": "SimTel", "net.hostname": self.serial,
        }
        props.update(self.extra_props)
        props.update(derived_props(self))
        props.update({"persist.sys.locale": self.locale, "persist.sys.language": self.locale.split("-")[0]})
        return props

    @property
    def locale(self) -> str:
        """The language lives in the settings table, so `settings get/put` reach it as on Android."""
        return (self.settings.get("system", "system_locales") or "en-US").split(",")[0]

    # -- apps -------------------------------------------------------------------------------------

    def app_state(self, package) -> dict:
        if package not in self._app_states:
            spec = self.engine.apps.get(package) or self.all_apps.get(package)
            self._app_states[package] = spec.fresh_state() if spec else {}
        return self._app_states[package]

    def apk_path(self, package) -> str:
        spec = self.engine.apps[package]
        if spec.system:
            return f"/system/priv-app/{spec.label.replace(' ', '')}/{spec.label.replace(' ', '')}.apk"
        token = f"{stable_int(package, 'apk'):016x}"
        return f"/data/app/~~{token[:11]}==/{package}-{token[11:]}==/base.apk"

    def force_stop(self, package):
        self.engine.force_stop(package)

    def clear_app(self, package):
        """pm clear: stop the app and drop its data, login and permissions, as on a real phone."""
        self.engine.force_stop(package)
        self._app_states.pop(package, None)
        self.permissions.pop(package, None)
        self.notifications = [n for n in self.notifications if n["package"] != package]
        self.fs.remove(f"/sdcard/Android/data/{package}", recursive=True)
        seed_files(self, [package])
        self.engine.changed()

    def uninstall(self, package):
        self.clear_app(package)
        self.engine.apps.pop(package, None)
        self.engine.changed()

    def start_activity(self, intent) -> str | None:
        from simfarm.intents import start_activity
        return start_activity(self, intent)

    def broadcast(self, intent) -> str | None:
        return app_commands.handle_broadcast(self, intent)

    def open_app_info(self, package):
        """Settings → App info for a package (from a crash dialog or a launcher shortcut)."""
        spec = self.engine.apps.get(package)
        params = {"package": package, "label": spec.label if spec else package, "version": spec.version if spec else ""}
        self.engine.launch("com.android.settings", page="app_detail", params=params)

    def open_settings_page(self, page):
        self.engine.launch("com.android.settings", page=page)

    def reset_ui(self):
        for task in list(self.engine.tasks):
            self.engine.force_stop(task.package)
        self.engine.anomalies.clear()
        self.engine.home()

    def pid_of(self, package) -> int:
        return 1000 + stable_int(package) % 28000

    def processes(self):
        procs = [(1, "init"), (600, "system_server"), (900, "com.android.systemui")]
        return procs + [(self.pid_of(t.package), t.package) for t in self.engine.tasks]

    # -- settings-driven behaviour -----------------------------------------------------------------

    def put_setting(self, namespace, key, value):
        self.settings.put(namespace, key, value)

    def _on_setting_changed(self, namespace, key, value):
        self.engine.changed()

    def toggle_quick_setting(self, namespace, key):
        self.settings.flip(namespace, key)

    def open_setting_for_tile(self, key):
        page = {"wifi_on": "wlan", "bluetooth_on": "bluetooth", "low_power": "battery_saver",
                "airplane_mode_on": "connection", "location_mode": "location", "ui_night_mode": "display"}.get(key)
        if page:
            self.open_settings_page(page)

    def set_battery_level(self, level: int):
        before = self.battery_level
        self.battery_level = max(0, min(100, level))
        if self.battery_level <= 15 < before:
            self.battery_plugged = False
            self.engine.anomalies.inject("low_battery", level=self.battery_level)
        self.engine.changed()

    def set_permission(self, package, permission, result):
        if package:
            self.permissions.setdefault(package, {})[permission] = result

    def record_payment(self, package, amount):
        self.payments.append({"id": len(self.payments) + 1, "package": package, "amount": str(amount)})

    # -- notifications ------------------------------------------------------------------------------

    def post_notification(self, package, title, text, notify_only=False, tag=None):
        self._notification_id += 1
        spec = self.engine.apps.get(package)
        self.notifications.append({"id": self._notification_id, "package": package, "title": title, "text": text,
                                   "tag": tag, "app_label": spec.label if spec else "Shell", "time": int(self.clock)})
        self.engine.changed()

    def open_notification(self, note):
        self.dismiss_notification(note)
        self.engine.shade_open = False
        if note["package"] in self.engine.apps:
            self.engine.launch(note["package"])

    def dismiss_notification(self, note):
        self.notifications = [n for n in self.notifications if n is not note]
        self.engine.changed()

    def clear_notifications(self):
        self.notifications.clear()
        self.engine.shade_open = False
        self.engine.changed()

    # -- content providers ----------------------------------------------------------------------------

    def content_rows(self, uri):
        from simfarm.intents import content_rows
        return content_rows(self, uri)

    def content_write(self, verb, uri, binds, where):
        from simfarm.intents import content_write
        return content_write(self, verb, uri, binds, where)

    def snapshot(self) -> dict:
        """Everything an app stores, for tests and debugging."""
        return copy.deepcopy(self._app_states)
