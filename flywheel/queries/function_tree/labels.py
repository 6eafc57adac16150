"""Human names and path slugs for function-tree nodes, from what a page shows."""
import re

# Words of navigation chrome, not functions of the app: tapping them only leaves or dismisses.
CHROME_WORDS = {"back", "navigate up", "up", "close", "cancel", "ok", "dismiss", "more options"}
# What a switch or check box shows of its state: not the name of what it switches.
STATE_WORDS = {"on", "off", "yes", "no", "enabled", "disabled", "checked", "unchecked"}
MAX_LABEL = 60
# Decoration that list rows and buttons carry around their name.
_DECORATION = re.compile(r"^[\s>›»→•·:\-–—|]+|[\s>›»→•·:\-–—|]+$")


def human_label(text) -> str:
    """'  OFFLINE PACKS  › ' -> 'Offline packs'; '' when nothing readable is left."""
    text = " ".join(str(text or "").split())
    text = _DECORATION.sub("", text)
    if not text or len(text) > MAX_LABEL or not re.search(r"[^\W\d_]", text):
        return ""  # empty, a paragraph of content, or only numbers/prices: not a name
    if text.isupper() and len(text) > 3:
        text = text.capitalize()  # shouting headers read as names
    return text[0].upper() + text[1:]


def slug(label: str) -> str:
    """'Offline packs' -> 'offline_packs' (letters of any script are kept)."""
    return re.sub(r"[\W_]+", "_", str(label).lower()).strip("_")[:60].rstrip("_")


def label_from_resource_id(resource_id: str) -> str:
    """'com.x:id/offline_packs' -> 'Offline packs'."""
    name = str(resource_id or "").rsplit("/", 1)[-1]
    return human_label(name.replace("_", " ").replace("-", " "))


def element_label(element: dict) -> str:
    selector = element.get("selector") or {}
    for candidate in (element.get("text"), selector.get("text"), selector.get("content_desc"),
                      element.get("content_desc")):
        label = human_label(candidate)
        if label:
            return label
    return ""


def page_label(page) -> str:
    """A page's own name: its title, else its first header text, else its stored name."""
    for candidate in (page.title, *(page.texts or [])[:3]):
        label = human_label(candidate)
        if label:
            return label
    return human_label(page.name.replace("_", " ")) or f"Page {page.pk}"


def is_chrome(label: str) -> bool:
    """Back/close/OK chrome, or a bare state word: neither names a function."""
    return label.lower() in CHROME_WORDS or label.lower() in STATE_WORDS
