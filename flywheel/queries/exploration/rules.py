"""What the explorer taps and what it never taps (§2.2.5), and how it reads a screen's kind.

Pure functions of a screen reading (flywheel/queries/page_io.py), shared by the engine
(explorer.py). Irreversible labels are never tapped: STRICT_WORDS on any element, SOFT_WORDS on
buttons and inside dialogs (where a confirmation's positive button is).
"""
from __future__ import annotations

import json
import re

from devices.audit import element_text

# Never tapped, whatever the element: money, messages to others, sessions, the phone itself.
STRICT_WORDS = ("pay", "pay now", "buy now", "purchase", "place order", "order now", "send", "post",
                "publish", "log out", "logout", "sign out", "uninstall", "confirm payment", "transfer",
                "支付", "付款", "购买", "立即购买", "提交订单", "下单", "发送", "发布", "退出登录", "注销",
                "卸载", "确认支付", "转账")
# Not tapped on buttons nor inside dialogs (where the confirmation is); a list row with such a
# word usually opens a page or a confirmation, which is recorded and backed out of.
SOFT_WORDS = ("delete", "remove", "clear", "reset", "erase", "format", "discard", "unsubscribe",
              "block", "report", "submit", "forget", "unpair", "wipe", "empty",
              "删除", "移除", "清除", "清空", "重置", "格式化", "恢复出厂", "举报", "拉黑")
DEFAULT_AVOID_WORDS = STRICT_WORDS + SOFT_WORDS
SIGN_IN_WORDS = re.compile(r"\b(sign in|log in|login|sign-in)\b|登录", re.IGNORECASE)
CRASH_WORDS = re.compile(r"has stopped|keeps stopping|isn't responding|is not responding|停止运行|无响应",
                         re.IGNORECASE)
NAVIGATE_UP = re.compile(r"^(navigate up|back|返回)$", re.IGNORECASE)


def words_pattern(words):
    ascii_words = [re.escape(w) for w in words if w.isascii()]
    other = [re.escape(w) for w in words if not w.isascii()]
    parts = []
    if ascii_words:
        parts.append(r"\b(?:" + "|".join(ascii_words) + r")\b")
    parts.extend(other)
    return re.compile("|".join(parts), re.IGNORECASE) if parts else re.compile(r"(?!x)x")


def element_key(element: dict, action: str) -> str:
    return action + ":" + json.dumps(element["selector"], sort_keys=True)


def element_actions(element, reading, per_id, strict, soft, max_same_id=2) -> tuple[list[str], bool]:
    """The actions to try on `element` ([] for none) and whether it was skipped as irreversible.
    `per_id` counts repeated list rows by resource-id: only the first `max_same_id` are tried."""
    if not element["enabled"]:
        return [], False
    label = f"{element['text']} {element['selector'].get('content_desc', '')} " \
            f"{element['resource_id'].rsplit('/', 1)[-1].replace('_', ' ')}"
    if NAVIGATE_UP.match(element["text"] or element["selector"].get("content_desc", "")):
        return [], False
    is_button = "Button" in element["class"] or element["resource_id"].startswith("android:id/button")
    if strict.search(label) or (soft.search(label) and (is_button or reading.is_dialog)):
        return [], True
    if element["repeated"] and element["resource_id"]:
        seen = per_id.get(element["resource_id"], 0)
        per_id[element["resource_id"]] = seen + 1
        if seen >= int(max_same_id):
            return [], False
    if element["editable"]:
        return ["type"], False
    actions = ["click"] if element["clickable"] or element["checkable"] else []
    if element["long_clickable"] and not element["editable"] and not soft.search(label):
        actions.append("long_press")
    return actions, False


def irreversible_hit(hit, roots, strict, soft) -> bool:
    """Whether the element a touch would actually hit (devices.uitree.node_at) is one the explorer never
    taps — judged on the screen as it is when the touch is sent, not on the page the target was chosen
    on: a screen that changed in between (a dialog that opened late) must not turn a tap into a
    confirmation's positive button."""
    if hit is None:
        return False
    # the audit's own reading of a hit element (a row's title and summary too), and its id as words
    label = element_text(hit) + "\n" + hit.resource_id.rsplit("/", 1)[-1].replace("_", " ")
    in_dialog = any(node.resource_id.startswith("android:id/button") for root in roots for node in root.walk())
    is_button = "Button" in hit.cls or hit.resource_id.startswith("android:id/button")
    return bool(strict.search(label) or (soft.search(label) and (is_button or in_dialog)))


def path_key(path) -> str:
    return json.dumps(path or [], sort_keys=True)


def switch_state(node) -> bool:
    """A switch row's state: its own checked flag or its checkable child's."""
    if node.checked:
        return True
    return any(child.checked for child in node.walk() if child is not node)


def is_sign_in(page) -> bool:
    texts = " ".join([page.title or "", *(page.texts or [])[:6]])
    has_password = any(e.get("editable") and "password" in (e.get("hint") or "").lower() for e in page.elements or [])
    return has_password or bool(SIGN_IN_WORDS.search(page.title or "")) or (
        bool(SIGN_IN_WORDS.search(texts)) and any(e.get("editable") for e in page.elements or []))


def is_share_sheet(reading) -> bool:
    package = reading.package.lower()
    return "resolver" in package or "chooser" in package or (
        reading.title.strip().lower() in ("share", "share with", "分享", "分享到"))
