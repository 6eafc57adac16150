"""Cleaning and intent classification of external queries (§2.3.5), by rules.

Every removed query keeps its reason. (An LLM classifier can sit behind the same function when
an endpoint is configured; the rules are the offline default and the first filter.)
"""
import re
from dataclasses import dataclass, field

GUI_VERBS = re.compile(
    r"\b(open|launch|turn|switch|enable|disable|set|change|send|share|buy|order|search|find|look up|"
    r"download|install|play|watch|call|text|message|book|add|remove|delete|edit|create|make a note|"
    r"write|save|show|check|view|go to|navigate|translate|pay|subscribe|follow|like|post|upload|copy|"
    r"paste|pin|favourite|favorite|compare|filter|sort|mute|unmute|connect|pair|reset|clear|"
    r"record|take|scan|update|rename|move|select|reply|forward|block|unblock|report|cancel|deliver|ship|"
    r"get|grab|download|use)\b|打开|设置|发送|搜索|购买|下载|播放|查看|分享|关闭|开启|删除|添加", re.I)
KNOWLEDGE_QUESTION = re.compile(r"^\s*(what|who|why|when|where|how (much|many|old|far|long|tall))\b"
                                r"(?!.*\b(app|settings|phone|screen)\b)", re.I)
SMALL_TALK = re.compile(r"^\s*(hi|hello|hey|thanks|thank you|tell me a joke|how are you|good (morning|night))\b",
                        re.I)
PHYSICAL_WORLD = re.compile(r"\b(make me (a )?(coffee|tea|sandwich)|cook|clean (the|my) (room|house)|"
                            r"walk the dog|fold the laundry|drive me)\b", re.I)
SENSITIVE = {
    "money transfer": re.compile(r"\b(transfer|wire|send)\b.{0,30}(\b(money|dollars|yuan|rmb|funds)\b|[$¥€£]\s?\d+)|转账", re.I),
    "account deletion": re.compile(r"\b(delete|close|deactivate)\b.{0,20}\baccount\b|注销", re.I),
    "factory reset": re.compile(r"\bfactory reset\b|\berase all data\b|恢复出厂", re.I),
    "credential harvesting": re.compile(r"\b(password|verification code|otp|pin)\b.{0,30}\b(of|for|from)\b.{0,20}"
                                        r"\b(someone|my (boss|friend|wife|husband)|others?)\b", re.I),
    "illegal or harmful": re.compile(r"\b(hack|crack|pirat\w*|counterfeit|drugs?|weapon|gun|bomb|"
                                     r"stalk|spy on|track (my|his|her) (wife|husband|girlfriend|boyfriend))\b", re.I),
    "adult content": re.compile(r"\b(porn\w*|nsfw|nude|sexual)\b", re.I),
}
DOMAINS = {
    "system": r"settings|wi-?fi|wlan|bluetooth|brightness|dark mode|battery|ringtone|wallpaper|language|"
              r"date|time zone|hotspot|airplane|storage|mac address|location",
    "shopping": r"buy|cart|coupon|order|shop|price|checkout|deliver(y)? to|discount",
    "food_delivery": r"food|restaurant|takeout|take-?away|pizza|burger|noodles|meal|menu",
    "messaging": r"message|text|chat|group|contact|reply|send .* to",
    "notes": r"note|memo|to-?do|checklist|reminder",
    "photo": r"photo|picture|album|gallery|screenshot|image",
    "video_news": r"video|watch|news|article|channel|subscribe|feed|episode",
    "translation": r"translat|offline pack|language pack|dictionary",
}
INTENTS = {
    "purchase": r"\b(buy|order|checkout|pay)\b",
    "search": r"\b(search|find|look up|look for)\b",
    "communicate": r"\b(send|message|text|call|reply|share|forward)\b",
    "create": r"\b(create|add|new|write|make|save|take)\b",
    "modify": r"\b(turn|switch|enable|disable|set|change|edit|rename|mute|pin|clear|reset)\b",
    "delete": r"\b(delete|remove)\b",
    "download": r"\b(download|install)\b",
    "view": r"\b(open|show|check|view|go to|watch|play|read)\b",
}


@dataclass
class Cleaning:
    keep: bool
    reason: str = ""                     # why it was removed
    category: str = ""                   # invalid / sensitive / non_executable
    intent: dict = field(default_factory=dict)


def classify_intent(text: str) -> dict:
    lowered = text.lower()
    domain = next((d for d, pattern in DOMAINS.items() if re.search(pattern, lowered)), "other")
    intent = next((i for i, pattern in INTENTS.items() if re.search(pattern, lowered)), "other")
    return {"domain": domain, "intent": intent, "cross_app": bool(re.search(
        r"\b(then|and then|and share|and send|compare)\b.*\b(in|on|to|with)\b", lowered))}


def clean_query(text: str, seen: set | None = None) -> Cleaning:
    """Decide whether an (already anonymised) external query may be replayed on phones."""
    stripped = " ".join(text.split())
    letters = sum(ch.isalpha() for ch in stripped)
    if not stripped or letters < 4 or len(stripped.split()) < 2 and not re.search(r"[\u4e00-\u9fff]{4,}", stripped):
        return Cleaning(False, "too short or empty to be a task", "invalid")
    if letters < 0.4 * len(stripped.replace(" ", "")):
        return Cleaning(False, "mostly symbols or numbers, not a sentence", "invalid")
    if seen is not None:
        key = stripped.lower()
        if key in seen:
            return Cleaning(False, "duplicate of an earlier query", "invalid")
        seen.add(key)
    for label, pattern in SENSITIVE.items():
        if pattern.search(stripped):
            return Cleaning(False, label, "sensitive")
    if SMALL_TALK.search(stripped):
        return Cleaning(False, "small talk, nothing to do on the phone", "non_executable")
    if PHYSICAL_WORLD.search(stripped):
        return Cleaning(False, "asks for something in the physical world", "non_executable")
    if KNOWLEDGE_QUESTION.search(stripped) and not GUI_VERBS.search(stripped):
        return Cleaning(False, "a knowledge question, not a phone operation", "non_executable")
    if not GUI_VERBS.search(stripped):
        return Cleaning(False, "no operation on the phone is asked for", "non_executable")
    return Cleaning(True, intent=classify_intent(stripped))
