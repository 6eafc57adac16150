"""`dumpsys wifi|bluetooth_manager|role|backup`: the Settings app's choices as a real phone's system
services print them (the sections and line formats of AOSP's dumps, cut down to what the farm knows).

- wifi: `Wi-Fi is enabled|disabled`; `mWifiInfo SSID: "NAME", ...` while connected (`<unknown ssid>`
  while on but not connected); WifiConfigManager's saved networks, one `ID: N SSID: "NAME" ...` line
  each (`* ` marks the current one) followed by indented detail lines; while the hotspot is on, the
  SoftApManager section with `mApConfig.SoftApConfiguration.SSID: NAME`.
- bluetooth_manager: `Bluetooth Status` (enabled, state ON / BLE_ON / OFF); while the adapter runs
  (on, or off with Bluetooth scanning kept on: BLE_ON) AdapterProperties with `  Bonded devices:`
  and one `    AA:BB:CC:DD:EE:FF [ DUAL ] NAME` line per paired device; fully off: `Bluetooth
  Service not connected`.
- role: RoleService's user state; `name=android.app.role.BROWSER` then `holders=PACKAGE` (no
  holders line when no browser is the default).
- backup: first line `Backup Manager is enabled|disabled / setup complete / not pending init`.
"""
from __future__ import annotations

import hashlib
import time

from simfarm.system_facts import BROWSERS, settings_state

DEVICE_TYPES = {"Headphones": " DUAL ", "Wearable": "  LE  "}   # others (speakers, car kits): BR/EDR
ROLES = {"android.app.role.ASSISTANT": "com.google.android.googlequicksearchbox",
         "android.app.role.DIALER": "com.google.android.dialer",
         "android.app.role.HOME": "com.google.android.apps.nexuslauncher",
         "android.app.role.SMS": "com.google.android.apps.messaging"}
BACKUP_TRANSPORT = "com.google.android.gms/.backup.BackupTransportService"


def bluetooth_address(*parts) -> str:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return ":".join(f"{byte:02X}" for byte in digest[:6])


# -- wifi --------------------------------------------------------------------------------------------

def dumpsys_wifi(phone, args):
    state = settings_state(phone)
    connected = state.get("connected_ssid", "SimLab-5G") if phone.wifi_on else ""
    saved = [record.get("title", "") for record in state.get("saved_networks", []) if isinstance(record, dict)]
    lines = [f"Wi-Fi is {'enabled' if phone.wifi_on else 'disabled'}", "Verbose logging is off",
             "Stay-awake conditions: 0", "mInIdleMode false", "mScanPending false"]
    if phone.wifi_on:
        lines += ["", "Dump of ClientModeImpl id=1",
                  "current StateMachine mode: " + ("L3ConnectedState" if connected else "DisconnectedState")]
        if connected:
            net_id = saved.index(connected) if connected in saved else -1
            lines.append(f'mWifiInfo SSID: "{connected}", BSSID: 02:00:00:00:00:00, MAC: {phone.mac_address}, '
                         f"IP: /{phone.ip_address}, Security type: 2, Supplicant state: COMPLETED, "
                         f"Wi-Fi standard: 11ac, RSSI: -55, Link speed: 866Mbps, Frequency: "
                         f"{5180 if '5G' in connected else 2437}MHz, Net ID: {net_id}, Metered hint: false")
        else:
            lines.append(f"mWifiInfo SSID: <unknown ssid>, BSSID: <none>, MAC: {phone.mac_address}, IP: null, "
                         "Security type: -1, Supplicant state: DISCONNECTED, RSSI: -127, Link speed: -1Mbps, "
                         "Net ID: -1, Metered hint: false")
    lines += ["", "Dump of WifiConfigManager", "WifiConfigManager - Configured networks Begin ----"]
    for net_id, ssid in enumerate(saved):
        mark = "* " if ssid == connected else ""
        lines += [f'{mark}ID: {net_id} SSID: "{ssid}" PROVIDER-NAME: null BSSID: null FQDN: null '
                  f"HOME-PROVIDER-NETWORK: false PRIO: 0 HIDDEN: false PMF: false CarrierId: -1 SubscriptionId: -1",
                  " NetworkSelectionStatus NETWORK_SELECTION_ENABLED",
                  " hasEverConnected: true",
                  f" KeyMgmt: {'WPA_PSK' if ssid.endswith('5G') else 'NONE'} Protocols: WPA RSN"]
    lines += ["WifiConfigManager - Configured networks End ----",
              f"WifiConfigManager - Next network ID to be allocated {len(saved)}"]
    if phone.settings.get("global", "hotspot_on") == "1":
        lines += ["", "--Dump of SoftApManager--", "current StateMachine mode: StartedState",
                  "mRole: ROLE_SOFTAP_TETHERED", "mApInterfaceName: wlan1", "mIfaceIsUp: true",
                  "mSoftApCountryCode: US", "mApConfig.targetMode: 1",
                  f"mApConfig.SoftApConfiguration.SSID: {state.get('hotspot_name', '')}",
                  "mApConfig.SoftApConfiguration.mBand: 3", "mApConfig.SoftApConfiguration.hiddenSSID: false",
                  "mApConfig.SoftApConfiguration.securityType: "
                  + ("1" if state.get("hotspot_password") else "0"),
                  "mConnectedClients.size(): 0", "mTimeoutEnabled: true"]
    return "\n".join(lines) + "\n"


# -- bluetooth_manager -------------------------------------------------------------------------------

def dumpsys_bluetooth_manager(phone, args):
    state = settings_state(phone)
    on = phone.settings.get("global", "bluetooth_on") == "1"
    ble = not on and phone.settings.get("global", "ble_scan_always_enabled") == "1"
    name = phone.settings.get("global", "device_name") or phone.profile["model"]
    address = bluetooth_address(phone.seed, phone.index, "bluetooth")
    status = "ON" if on else ("BLE_ON" if ble else "OFF")
    lines = ["Bluetooth Status", f"  enabled: {str(on).lower()}", f"  state: {status}", f"  address: {address}",
             f"  name: {name}", "", "Enable log:" if on else "Bluetooth never enabled!"]
    if on:
        lines.append("  " + time.strftime("%m-%d %H:%M:%S.000", time.gmtime(phone.now())) + " Enabled  by com.android.settings")
    lines += ["", "Bluetooth crashed 0 times", "", f"{1 if ble else 0} BLE app{'' if ble else 's'} registered", ""]
    if not (on or ble):
        return "\n".join(lines + ["Bluetooth Service not connected"]) + "\n"
    lines += ["AdapterProperties", f"  Name: {name}", f"  Address: {address}",
              "  ConnectionState: STATE_DISCONNECTED", f"  State: {status}", "  MaxConnectedAudioDevices: 5",
              "  A2dpOffloadEnabled: true", "  Discovering: false", "  DiscoveryEndMs: 0", "  Bonded devices:"]
    for device in state.get("paired_devices", []):
        if isinstance(device, dict) and device.get("title"):
            kind = DEVICE_TYPES.get(device.get("kind"), "BR/EDR")
            lines.append(f"    {bluetooth_address(device['title'])} [{kind}] {device['title']}")
    return "\n".join(lines) + "\n"


# -- role ----------------------------------------------------------------------------------------------

def dumpsys_role(phone, args):
    holders = dict(ROLES)
    browser = BROWSERS.get(str(settings_state(phone).get("default_browser", "Chrome")))
    holders["android.app.role.BROWSER"] = browser
    lines = ["user_states=[", "  {", "    user_id=0", "    version=4",
             f"    packages_hash={hashlib.sha256(','.join(sorted(phone.engine.apps)).encode()).hexdigest().upper()}",
             "    bypassing_role_qualification=false", "    roles=["]
    for role in sorted(holders):
        lines += ["      {", f"        name={role}"]
        if holders[role]:
            lines.append(f"        holders={holders[role]}")
        lines.append("      }")
    return "\n".join(lines + ["    ]", "  }", "]"]) + "\n"


# -- backup ----------------------------------------------------------------------------------------------

def dumpsys_backup(phone, args):
    enabled = settings_state(phone).get("backup_on", True)
    return (f"Backup Manager is {'enabled' if enabled else 'disabled'} / setup complete / not pending init\n"
            "Auto-restore is enabled\n"
            f"Last backup pass started: {int(phone.boot_time) * 1000} (now = {int(phone.now()) * 1000})\n"
            "  next scheduled: 0\n"
            "Transport whitelist:\n"
            f"    {BACKUP_TRANSPORT}\n"
            "Available transports:\n"
            f"  * {BACKUP_TRANSPORT}\n"
            "       destination: Google Account\n"
            "       intent: null\n")


SERVICES = {"wifi": dumpsys_wifi, "bluetooth_manager": dumpsys_bluetooth_manager, "role": dumpsys_role,
            "backup": dumpsys_backup}
