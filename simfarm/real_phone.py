"""Real-phone mode: a phone answers only what a real Android phone answers.

A real phone has no `content://com.sim.*` or `content://sim/*` providers (the farm's windows onto
third-party apps' state and its own test hooks), nor one onto the Settings app's own pages
(`content://com.android.settings/...`: saved networks, paired devices; system settings themselves stay
readable as `content://settings/...` and `settings get`) and no receiver for `com.sim.*` broadcasts, and its
`dumpsys input` has no farm-only gesture log. Everything else (settings, files, dumpsys, pm, am,
input, screencap, uiautomator) is the same in both modes. The Settings app's choices stay readable the
way a real phone shows them: settings keys, `getprop persist.sys.timezone` (system_facts.py) and
`dumpsys wifi|bluetooth_manager|role|backup` (dumpsys_system.py).
"""
import logging

from simfarm.shell_commands import fail

FARM_BROADCAST_PREFIX = "com.sim."
KEPT = 200   # the latest farm-only requests a phone keeps (the count goes on)
log = logging.getLogger(__name__)


def refused(phone, request: str) -> None:
    """A client asked a phone in real-phone mode for something only the farm offers: count it, so a
    test or a benchmark can prove the console never does (a real phone would just fail it)."""
    phone.farm_only_count += 1
    phone.farm_only_calls.append(request[:300])
    del phone.farm_only_calls[:-KEPT]
    log.warning("%s: farm-only request in real-phone mode: %s", phone.serial, request[:200])


def authority(uri: str) -> str:
    rest = uri.split("://", 1)[1] if "://" in uri else uri
    return rest.split("/", 1)[0]


def farm_only_uri(uri: str) -> bool:
    name = authority(uri)
    return name in ("sim", "com.android.settings") or name.startswith("com.sim.")


def farm_only_broadcast(action: str) -> bool:
    return str(action).startswith(FARM_BROADCAST_PREFIX)


def unknown_authority(uri: str):
    """What `content` prints on Android when no provider holds the authority."""
    name = authority(uri)
    return fail(f"Error while accessing provider:{name}\n"
                f"java.lang.IllegalStateException: Could not find provider: {name}\n"
                "\tat com.android.commands.content.Content$Command.execute(Content.java:512)\n"
                "\tat com.android.commands.content.Content.main(Content.java:735)\n"
                "\tat com.android.internal.os.RuntimeInit.nativeFinishInit(Native Method)\n"
                "\tat com.android.internal.os.RuntimeInit.main(RuntimeInit.java:355)")
