"""An app's name as people read it when no label was recorded for it.

A package id (`com.sim.translator`) is an address, not a name: pages and generated queries say
"Translator". The farm's and the catalogue's labels come first (App.label); this is the fallback
for an app known only by its package, and for a label that is only the package's last part.
"""
import re

# Package parts that name a vendor or a platform, never the app.
GENERIC_PARTS = {"com", "org", "net", "io", "android", "app", "apps", "mobile", "sim", "google", "www", "cn"}


def name_from_package(package: str) -> str:
    """`com.sim.translator` -> "Translator", `com.example.my_notes` -> "My notes"."""
    parts = [p for p in str(package or "").split(".") if p]
    meaningful = [p for p in parts if p.lower() not in GENERIC_PARTS] or parts
    if not meaningful:
        return str(package or "")
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", meaningful[-1]).replace("_", " ").replace("-", " ").split()
    text = " ".join(words).lower()
    return text[:1].upper() + text[1:]


def display_name(package: str, label: str = "") -> str:
    """The recorded label, unless it is only the package (or its last part) written again."""
    label = (label or "").strip()
    package = str(package or "")
    if label and label != package and label != package.rsplit(".", 1)[-1]:  # "ShopMart" stays, "translator" not
        return label
    return name_from_package(package) if package else label


# Packages that are the phone's own chrome (home screens, pickers, system dialogs), not apps a task is done
# in: an agent is never offered them.
CHROME_HINTS = ("launcher", "resolver", "chooser", "systemui", "permissioncontroller")


def agent_may_open(package: str) -> bool:
    """Settings and other system apps are apps people use; a launcher or the system UI is not."""
    return bool(package) and not any(hint in package for hint in CHROME_HINTS)
