"""Discover the phones on every configured ADB server and keep their records current."""
import logging
import re

import adbutils
from django.conf import settings
from django.utils import timezone

from .models import Device

log = logging.getLogger(__name__)


def _client(address):
    host, _, port = address.rpartition(":")
    return adbutils.AdbClient(host=host or "127.0.0.1", port=int(port), socket_timeout=10)


def read_phone_facts(device):
    """What a phone says about itself over ADB (model, OS, resolution, apps, battery)."""
    props = device.shell("getprop ro.product.model; getprop ro.build.version.release")
    model, _, os_version = props.strip().partition("\n")
    size = re.search(r"(\d+)x(\d+)", device.shell("wm size"))
    packages = sorted(p.removeprefix("package:").strip()
                      for p in device.shell("pm list packages").splitlines() if p.strip())
    battery = re.search(r"level:\s*(\d+)", device.shell("dumpsys battery"))
    return {
        "model": model.strip(),
        "os_version": os_version.strip(),
        "resolution": f"{size.group(1)}x{size.group(2)}" if size else "",
        "installed_apps": packages,
        "battery": int(battery.group(1)) if battery else None,
    }


def discover_devices(addresses=None):
    """Record every phone that answers; mark phones that vanished as offline."""
    summary = {"servers": {}, "seen": 0, "offline": 0}
    for address in addresses or settings.ADB_SERVERS:
        seen = []
        try:
            for info in _client(address).list():
                if info.state != "device":
                    continue
                device = _client(address).device(serial=info.serial)
                facts = read_phone_facts(device)
                record, _ = Device.objects.get_or_create(serial=info.serial, adb_server=address)
                for name, value in facts.items():
                    setattr(record, name, value)
                record.last_seen = timezone.now()
                record.consecutive_failures = 0
                if record.status == "offline":
                    record.status = "idle"
                record.save()
                seen.append(info.serial)
            summary["servers"][address] = {"ok": True, "phones": len(seen)}
        except (adbutils.AdbError, OSError) as error:
            log.warning("ADB server %s unreachable: %s", address, error)
            summary["servers"][address] = {"ok": False, "error": str(error)}
        gone = Device.objects.filter(adb_server=address).exclude(serial__in=seen).exclude(
            status__in=["offline", "quarantined"])
        summary["offline"] += gone.update(status="offline")
        summary["seen"] += len(seen)
    return summary
