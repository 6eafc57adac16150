"""A replayable step (query format: {"action", "target": selector}) as a person reads it.

Used where a step is shown rather than replayed: an exploration's problems, the GEM path finder.
"""

VERBS = {"click": "tap", "double_click": "double-tap", "long_press": "long press", "type": "type into",
         "swipe": "swipe", "system_button": "press"}
# How a GEM edge other than a tap is taken (Edge.Via).
VIA_WORDS = {"back": "go back", "home": "press Home", "recents": "switch apps through Recents",
             "share": "share it", "clipboard": "copy it across"}


def target_name(target: dict) -> str:
    """What a person calls a selector's element: its text, its description, else its resource id by
    the id's last part (com.sim.translator:id/swap_button → "swap button")."""
    target = target if isinstance(target, dict) else {}
    return str(target.get("text") or target.get("content_desc") or
               str(target.get("resource_id") or "").rsplit("/", 1)[-1].replace("_", " "))


def step_words(step: dict) -> str:
    """'tap "Swap"', 'type "milk" into "Search"', 'swipe up', 'press back'."""
    if not isinstance(step, dict):
        return ""
    name = target_name(step.get("target"))
    action = step.get("action")
    verb = VERBS.get(action, str(action or "").replace("_", " "))
    if action == "type" and step.get("text"):
        typed = str(step["text"]).strip()
        return f'type "{typed}"' + (f' into "{name}"' if name else "")
    if action == "swipe" and step.get("direction"):
        return f"swipe {step['direction']}"
    if action == "system_button" and step.get("button"):
        return f"press {step['button']}"
    return f'{verb} "{name}"' if name else verb


def edge_words(via: str, action: dict, target_app: str = "") -> str:
    """How a GEM edge is taken: 'tap "Search"', 'open Notes', 'press Home'."""
    if via == "launch":
        return f"open {target_app}" if target_app else "open the app"
    if via in VIA_WORDS:
        return VIA_WORDS[via]
    return step_words(action) or "tap"
