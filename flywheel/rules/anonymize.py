"""Anonymisation of external queries before anything is stored (§2.3.5).

Replaces e-mail addresses, phone numbers, card numbers, ID numbers, postal addresses and
personal names with typed placeholders ([EMAIL], [PHONE], [CARD], [ID], [ADDRESS], [NAME]).
Rules err on the side of removing: a query that loses a word still replays; a leaked number
cannot be taken back.
"""
import re
from dataclasses import dataclass, field

from devices.sensitive_text import find_id_numbers

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
# Any 13–19 digit run (spaces or dashes between groups): card-shaped, valid checksum or not.
CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
CN_ID = re.compile(r"(?<![\dA-Za-z])\d{17}[\dXx](?![\dA-Za-z])|(?<!\d)\d{15}(?!\d)")
PHONE = re.compile(
    r"(?<![\w+])(?:\+?\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?)?\d{3,4}[ .-]?\d{3,4}(?:[ .-]?\d{2,4})?(?!\w)"
    r"|(?<!\d)1[3-9]\d{9}(?!\d)")
STREET_TYPES = (r"street|st\.?|road|rd\.?|avenue|ave\.?|boulevard|blvd\.?|lane|ln\.?|drive|dr\.?|"
                r"court|ct\.?|way|place|pl\.?|square|sq\.?|terrace")
ADDRESS = re.compile(
    rf"\b\d{{1,5}}[A-Za-z]?\s+(?:[A-Z][\w'-]*\s+){{1,4}}(?:{STREET_TYPES})\b(?:,?\s*(?:apt|unit|suite|#)\s*\w+)?"
    r"(?:,\s*[A-Z][\w-]+(?:\s+[A-Z][\w-]+)*)?(?:,?\s*[A-Z]{2}\s+\d{5}(?:-\d{4})?)?"
    r"|[\u4e00-\u9fff]{2,}(?:省|市)[\u4e00-\u9fff]{0,12}(?:区|县)[\u4e00-\u9fff\d]{0,20}(?:路|街|道|巷)\d+号"
    r"(?:[\u4e00-\u9fff\d]{0,10}(?:室|楼|单元))?"
    r"|[\u4e00-\u9fff]{2,10}(?:路|街|道|巷)\d+号(?:[\u4e00-\u9fff\d]{0,10}(?:室|楼|单元))?",
    re.IGNORECASE)
# Names follow words that introduce a person; capitalised words only, never app or place words.
NAME_CUES = (r"(?:to|call|text|message|email|tell|ask|invite|remind|with|from|for|named|called|"
             r"contact|friend|mom|dad|wife|husband|boss|colleague|brother|sister|send|pay|dear|"
             r"meet|visit|cc)")
NAME = re.compile(rf"\b(?i:{NAME_CUES})\s+((?:[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?)(?:\s+[A-Z][a-z]+)?)")
NOT_NAMES = {
    "the", "a", "an", "my", "me", "him", "her", "them", "us", "it", "this", "that", "all", "everyone",
    "settings", "wifi", "wlan", "bluetooth", "home", "work", "notes", "gallery", "chatter", "shopmart",
    "translator", "english", "japanese", "chinese", "french", "spanish", "german", "korean", "monday",
    "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "today", "tomorrow", "dinner",
    "lunch", "breakfast", "pizza", "coffee", "free", "sale", "photos", "photo", "video", "music", "google",
    "android", "me.", "group", "family", "team", "support", "help", "now", "later", "sure", "please",
}
CHINESE_NAME = re.compile(r"(?:小|老|阿)[\u4e00-\u9fff](?![\u4e00-\u9fff]{2})|"
                          r"(?<=[给叫和跟问找请])[王李张刘陈杨黄赵周吴徐孙马朱胡郭何林罗高郑梁谢宋唐许韩冯邓曹彭曾肖田董潘袁蔡蒋余于杜叶程魏苏吕丁任卢姚沈钟姜崔谭陆范汪廖石金贾夏韦付方邹熊白孟秦邱侯江尹薛闫段雷龙黎史陶贺毛郝顾龚邵万覃武钱戴严莫孔向常汤][\u4e00-\u9fff]{1,2}")


@dataclass
class Anonymized:
    text: str
    findings: dict = field(default_factory=dict)  # kind -> count (never the values)

    @property
    def changed(self):
        return bool(self.findings)


def _replace(pattern, placeholder, text, findings, keep=lambda match: False, group=0):
    """Replace each match (or just its `group`) with the placeholder, counting what was found."""
    def substitute(match):
        if keep(match):
            return match.group()
        findings[placeholder] = findings.get(placeholder, 0) + 1
        start, end = match.start(group) - match.start(), match.end(group) - match.start()
        whole = match.group()
        return whole[:start] + f"[{placeholder}]" + whole[end:]

    return pattern.sub(substitute, text)


def anonymize(text: str) -> Anonymized:
    findings = {}
    for number in find_id_numbers(text):
        findings["ID"] = findings.get("ID", 0) + 1
        text = text.replace(number, "[ID]")
    text = _replace(EMAIL, "EMAIL", text, findings)
    text = _replace(CN_ID, "ID", text, findings)
    text = _replace(CARD, "CARD", text, findings)
    text = _replace(ADDRESS, "ADDRESS", text, findings)
    text = _replace(PHONE, "PHONE", text, findings,
                    keep=lambda m: len(re.sub(r"\D", "", m.group())) < 7)
    text = _replace(NAME, "NAME", text, findings, group=1,
                    keep=lambda m: m.group(1).split()[0].lower() in NOT_NAMES)
    text = _replace(CHINESE_NAME, "NAME", text, findings)
    return Anonymized(text=text, findings=findings)
