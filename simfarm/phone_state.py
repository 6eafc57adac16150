"""Per-phone data that is not UI: device profiles, the settings tables and default values."""
import threading

PROFILES = [  # cycled by phone index: most phones are 1080x2400, some differ as in a real farm
    dict(model="Pixel 7", product="panther", device="panther", manufacturer="Google", brand="google",
         width=1080, height=2400, density=420, release="14", sdk=34),
    dict(model="Pixel 6", product="oriole", device="oriole", manufacturer="Google", brand="google",
         width=1080, height=2400, density=420, release="13", sdk=33),
    dict(model="SM-A546B", product="a54xnsxx", device="a54x", manufacturer="samsung", brand="samsung",
         width=1080, height=2340, density=450, release="14", sdk=34),
    dict(model="Pixel 8", product="shiba", device="shiba", manufacturer="Google", brand="google",
         width=1080, height=2400, density=420, release="14", sdk=34),
    dict(model="SM-A145F", product="a14mnsxx", device="a14m", manufacturer="samsung", brand="samsung",
         width=720, height=1600, density=300, release="13", sdk=33),
    dict(model="2201116SG", product="veux_global", device="veux", manufacturer="Xiaomi", brand="Redmi",
         width=1080, height=2400, density=440, release="12", sdk=31),
    dict(model="2201122G", product="zeus_global", device="zeus", manufacturer="Xiaomi", brand="Xiaomi",
         width=1440, height=3200, density=560, release="13", sdk=33),
    dict(model="Pixel 7a", product="lynx", device="lynx", manufacturer="Google", brand="google",
         width=1080, height=2400, density=420, release="14", sdk=34),
]

DEFAULT_SETTINGS = {
    "global": {
        "wifi_on": "1", "mobile_data": "1", "bluetooth_on": "0", "airplane_mode_on": "0", "auto_time": "1",
        "auto_time_zone": "1", "low_power": "0", "zen_mode": "0", "adb_enabled": "1", "data_roaming": "0",
        "development_settings_enabled": "0", "stay_on_while_plugged_in": "0", "window_animation_scale": "1.0",
        "transition_animation_scale": "1.0", "animator_duration_scale": "1.0", "nfc_on": "1",
        "wifi_scan_always_enabled": "1", "private_dns_mode": "opportunistic", "hotspot_on": "0",
        "wifi_mac_randomization": "1",
    },
    "system": {
        "screen_brightness": "128", "screen_brightness_mode": "1", "screen_off_timeout": "30000",
        "font_scale": "1.0", "accelerometer_rotation": "1", "time_12_24": "24", "haptic_feedback_enabled": "1",
        "sound_effects_enabled": "1", "dtmf_tone": "1", "vibrate_when_ringing": "0", "volume_ring": "5",
        "volume_music": "7", "volume_alarm": "6", "show_touches": "0", "pointer_location": "0",
        "system_locales": "en-US",  # the language: Settings, `getprop persist.sys.locale` and `settings` agree
    },
    "secure": {
        "location_mode": "3", "ui_night_mode": "1", "default_input_method":
        "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME", "screensaver_enabled": "0",
        "enabled_accessibility_services": "", "accessibility_enabled": "0", "lockscreen.disabled": "1",
        "show_ime_with_hard_keyboard": "0", "bluetooth_name": "",
    },
}

# Quick-settings tiles and Settings switches whose "on" value is not "1".
ON_OFF_VALUES = {("secure", "ui_night_mode"): ("2", "1"), ("secure", "location_mode"): ("3", "0")}


class SettingsStore:
    """The three `settings` tables; values are strings as on Android.

    A linked key (`links[(namespace, key)] = (read, write)`) is a view of state kept elsewhere (the
    Settings app's own data, system_facts.py): `read(stored)` gives its value from that state (the
    stored string is what was last put, or the default), `write(value)` changes that state.
    """

    def __init__(self, overrides: dict | None = None):
        self._tables = {ns: dict(values) for ns, values in DEFAULT_SETTINGS.items()}
        for ns, values in (overrides or {}).items():
            self._tables[ns].update(values)
        self._lock = threading.RLock()
        self.listeners = []  # fn(namespace, key, value) called after a change
        self.links = {}      # (namespace, key) -> (read(stored) -> str | None, write(value))

    def get(self, namespace, key):
        with self._lock:
            stored = self._tables.get(namespace, {}).get(key)
            link = self.links.get((namespace, key))
            return link[0](stored) if link else stored

    def put(self, namespace, key, value):
        with self._lock:
            old = self.get(namespace, key)
            self._tables[namespace][key] = str(value)
            link = self.links.get((namespace, key))
            if link:
                link[1](str(value))
        if old != str(value):
            for listener in self.listeners:
                listener(namespace, key, str(value))

    def delete(self, namespace, key) -> bool:
        with self._lock:
            return self._tables[namespace].pop(key, None) is not None

    def items(self, namespace):
        with self._lock:
            keys = set(self._tables.get(namespace, {})) | {k for ns, k in self.links if ns == namespace}
            values = ((key, self.get(namespace, key)) for key in sorted(keys))
            return [(key, value) for key, value in values if value is not None]

    def is_on(self, namespace, key) -> bool:
        on, _ = ON_OFF_VALUES.get((namespace, key), ("1", "0"))
        value = self.get(namespace, key)
        return value == on if (namespace, key) in ON_OFF_VALUES else value not in (None, "", "0")

    def flip(self, namespace, key):
        on, off = ON_OFF_VALUES.get((namespace, key), ("1", "0"))
        self.put(namespace, key, off if self.is_on(namespace, key) else on)
