"""What a shell can read on any Android phone, and what it cannot (issue #36).

System A's terminal checks read device facts over ADB. On a real phone a shell reads system settings,
system properties, the system's own content providers (settings, media, contacts, call log, SMS,
calendar, downloads...), shared storage, `dumpsys` and package state; a third-party app's own
provider or its private data directory is closed to it. A check on such state is never asked, on
any phone: System A abstains there and B and C judge the task.
"""
from __future__ import annotations

# Providers Android itself exports to the shell (AOSP's framework and system providers).
SYSTEM_PROVIDERS = frozenset({
    "settings", "media", "com.android.contacts", "contacts", "call_log", "sms", "mms", "mms-sms", "telephony",
    "com.android.calendar", "calendar", "downloads", "user_dictionary", "com.android.blockednumber", "icc",
    "com.android.voicemail", "com.android.externalstorage.documents", "com.android.providers.media.documents",
    "com.android.providers.downloads.documents", "browser", "com.android.browser",
})
PRIVATE_DIRECTORIES = ("/data/data/", "/data/user/", "/data/user_de/")


def authority(uri: str) -> str:
    rest = uri.split("://", 1)[1] if "://" in uri else uri
    return rest.split("/", 1)[0]


def private_state(check: dict) -> str:
    """Why no phone lets a shell read this check's fact ('' when any phone does)."""
    kind = check.get("check")
    if kind == "content" and authority(str(check.get("uri", ""))) not in SYSTEM_PROVIDERS:
        return (f"{authority(str(check['uri']))} is an app's own provider: no phone lets a shell read it "
                "(judged by B and C)")
    if kind == "file" and str(check.get("path", "")).startswith(PRIVATE_DIRECTORIES):
        return f"{check['path']} is in an app's private data: no phone lets a shell read it (judged by B and C)"
    return ""
