"""Discover the phones on every configured ADB server and keep their records current."""
import logging
import re

import adbutils
from django.conf import settings
from django.utils import timezone

from devices.baseline import read_baseline
from devices.health import check_device
from devices.models import Device
from devices.phone import PhoneConnection, PhoneUnavailable, adb_client

log = logging.getLogger(__name__)


def read_accounts(phone: PhoneConnection) -> list[str]:
    """The accounts the phone holds, as "type:name" (what readiness profiles and teardown compare)."""
    accounts = re.findall(r"Account \{name=([^,]+), type=([^}]+)\}", phone.shell("dumpsys account"))
    return sorted({f"{kind}:{name}" for name, kind in accounts})


def read_phone_facts(phone: PhoneConnection) -> dict:
    """What a phone says about itself over ADB: the facts of its readiness profile."""
    props = phone.shell("getprop ro.product.model; getprop ro.build.version.release; "
                        "getprop ro.build.characteristics")
    model, os_version, characteristics = (props.split("\n") + ["", "", ""])[:3]
    size = re.search(r"(\d+)x(\d+)", phone.shell("wm size"))
    packages = sorted(p.removeprefix("package:").strip()
                      for p in phone.shell("pm list packages").splitlines() if p.strip())
    battery = re.search(r"level:\s*(\d+)", phone.shell("dumpsys battery"))
    wifi = phone.shell("settings get global wifi_on").strip()
    data = phone.shell("settings get global mobile_data").strip()
    return {
        "model": model.strip(),
        "os_version": os_version.strip(),
        "device_type": "tablet" if "tablet" in characteristics else "phone",
        "resolution": f"{size.group(1)}x{size.group(2)}" if size else "",
        "installed_apps": packages,
        "accounts": read_accounts(phone),
        "battery": int(battery.group(1)) if battery else None,
        "network": {"wifi": wifi == "1", "data": data == "1"},
    }


def record_baseline(device, phone: PhoneConnection | None = None):
    """Take the phone's global settings now as the baseline every reset restores (an admin
    re-records it after setting a phone up by hand)."""
    phone = phone or PhoneConnection.for_device(device)
    device.baseline = read_baseline(phone)
    device.baseline_accounts = read_accounts(phone)
    Device.objects.filter(pk=device.pk).update(baseline=device.baseline, baseline_accounts=device.baseline_accounts)
    return device.baseline


def register_phone(address, serial):
    """Create or refresh one phone's record; a phone that was away is re-admitted by a check.
    A phone seen for the first time has its baseline recorded."""
    phone = PhoneConnection(address, serial)
    facts = read_phone_facts(phone)
    record, created = Device.objects.get_or_create(serial=serial, adb_server=address)
    for name, value in facts.items():
        setattr(record, name, value)
    record.last_seen = timezone.now()
    record.save()
    if not record.baseline and (created or record.status == Device.Status.IDLE):  # never mid-task
        try:
            record_baseline(record, phone)
        except ValueError as error:  # the phone's settings did not read back: try at the next discovery
            log.warning("baseline of %s not recorded: %s", record, error)
    if created or record.status in (Device.Status.OFFLINE, Device.Status.UNHEALTHY):
        record = check_device(record)
    return record


def discover_devices(addresses=None):
    """Record every phone that answers; mark phones that vanished as offline."""
    summary = {"servers": {}, "seen": 0, "offline": 0}
    for address in addresses or settings.ADB_SERVERS:
        seen = []
        try:
            for info in adb_client(address).list():
                if info.state != "device":
                    continue
                try:
                    register_phone(address, info.serial)
                except PhoneUnavailable as error:
                    log.warning("phone %s@%s did not answer: %s", info.serial, address, error)
                    continue
                seen.append(info.serial)
            summary["servers"][address] = {"ok": True, "phones": len(seen)}
        except (adbutils.AdbError, OSError) as error:
            log.warning("ADB server %s unreachable: %s", address, error)
            summary["servers"][address] = {"ok": False, "error": str(error)}
        gone = Device.objects.filter(adb_server=address).exclude(serial__in=seen).exclude(
            status__in=[Device.Status.OFFLINE, Device.Status.QUARANTINED])
        summary["offline"] += gone.update(status=Device.Status.OFFLINE)
        summary["seen"] += len(seen)
    return summary
