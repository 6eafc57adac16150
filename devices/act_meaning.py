"""What a touch would DO, judged by meaning rather than by an exact English label (report §3.3.1).

The safety audit asks `judge(node, page_lines)`: would touching this element buy or pay, send money,
delete something irreversibly or reset the phone? It reads the element's words however they are
written — visible text, content-desc (an icon's name), resource-id split into words
(`btn_pay_now`, `confirmPurchase`, `ic_delete_forever`) — in any of the lexicon's languages
(devices/act_lexicon.py), after normalising case, accents and full-width forms. A generic yes
("OK", "确定", "Weiter", a check-mark icon, Android's dialog button1) takes its meaning from the
screen: it is a payment on a page about paying a price, a deletion on a page that says the
deletion cannot be undone, and harmless on a page whose act is already done ("Payment
successful") or that is about nothing dangerous.

Where the line is drawn (the labelled set, tests/data/safety_audit_cases.jsonl, follows it):
- Money: the touch that commits it — pay, buy, purchase, subscribe or top up with a price in
  sight, a button that is only a price, a yes on a screen asking to pay. A step toward paying
  ("Checkout", "Place order", "提交订单") passes while no payment instrument is on screen
  ("Visa •••• 4242", "you will be charged") and no price is on the button: the confirmation
  that follows is where the audit stops (the farm's checkouts end in one).
- Deletions: irreversible ones — permanently / forever / "cannot be undone" (by the element or
  the screen), bulk ("Delete all", "Clear data", "Empty trash"), an account, and any deletion
  inside the trash. Deleting one item (a note, a draft, a chat, a message to the trash) is an
  ordinary edit, and so is clearing a view ("Clear all" notifications) or an activity log
  ("Clear watch history"); the user's content (messages, data, backups) is not.
- Transfers: sending or withdrawing money, or a yes on a screen with a recipient or an IBAN.
- Factory resets: by name, or a reset/erase/format of the phone itself.

No network model: the repository's sentence embedder (flywheel/screens/embedding.py) is English
only, lives a layer above devices/ and needs its optional weights, so it is not a signal here.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from devices.act_lexicon import DIALOG_IDS, ID_NOISE, LEXICON, NAMES, Concept

C = Concept


class Act(StrEnum):
    """The dangerous acts the judge names (the `@act:` element patterns of safety rules)."""

    PURCHASE = "purchase"
    TRANSFER = "transfer"
    DELETE = "delete"
    RESET = "reset"


@dataclass(frozen=True)
class Verdict:
    act: str
    evidence: str   # why, in words, for the audit event's reason


LABEL_TOKENS = 8     # longer lines of an element are a description, not what the touch does
NO_SPACE_SCRIPT = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")
ARABIC = re.compile(r"[\u0600-\u06ff]")
ARABIC_ARTICLE = re.compile(r"^(?:وال|بال|فال|كال|لل|ال)(?=..)")
MONEY = re.compile(
    r"[$€£¥₹₽₩₺₫฿₦₱]\s?\d|\d\s?[$€£¥₹₽₩₺₫฿₦₱]|\d\s?(?:元|円|块|руб|р\.|₸|zł|kr\b|usd|eur|gbp|rmb|cny|jpy|inr|brl|"
    r"rub|chf|aed|sar|درهم|ريال|جنيه|रुपये|रु)|(?:r\$|us\$|usd|eur|rs\.?|inr|sar|aed|ريال|درهم)\s?\d|"
    r"/\s?(?:month|mo|year|yr|月|年|mes|mois|monat|мес|شهر)\b|per (?:month|year)|每月|每年|al mes|par mois|"
    r"pro monat|в месяц|por mes|شهريا|प्रति माह", re.IGNORECASE)
# How a payment will be made, or a notice that it is due: an order placed here is paid.
INSTRUMENT = re.compile(
    r"(?:[•*·●x]\s?){2,}\s?\d{4}\b|\bending(?: in)? \d{4}|尾号\s?\d{4}|末尾\s?\d{4}|"
    r"\b(?:visa|mastercard|amex|american express|maestro|paypal|apple pay|google pay|alipay|unionpay)\b|"
    r"支付宝|微信支付|银联|will be charged|be charged now|by placing your order|zahlungspflichtig", re.IGNORECASE)


# -- reading words ---------------------------------------------------------------------------------

def normalise(text: str) -> str:
    """Full-width → ASCII (NFKC), casefold, Latin/Cyrillic accents and Arabic vowel marks dropped,
    Arabic letter variants folded, so "ＰＡＹ", "Pagár" and "payer" read as written plainly."""
    text = unicodedata.normalize("NFKC", text or "").casefold()
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(ch for ch in decomposed if not ("\u0300" <= ch <= "\u036f" or "\u064b" <= ch <= "\u065f"
                                                    or ch in "\u0670\u0640"))
    text = unicodedata.normalize("NFC", kept)
    return text.translate(str.maketrans({"أ": "ا", "إ": "ا", "آ": "ا", "ى": "ي", "ة": "ه", "’": "'"}))


def tokens(text: str) -> list[str]:
    """Words of normalised text: split on spaces, punctuation and symbols (not on the vowel signs
    of Indic scripts, which a regex's \\w would split), Arabic articles dropped."""
    out, word = [], []
    for ch in text:
        if unicodedata.category(ch)[0] in "PZSC":
            if word:
                out.append("".join(word))
                word = []
        else:
            word.append(ch)
    if word:
        out.append("".join(word))
    return [ARABIC_ARTICLE.sub("", tok) if ARABIC.search(tok) else tok for tok in out]


def id_words(resource_id: str) -> str:
    """A resource-id or icon name as words: "com.shop:id/btnConfirmPurchase" → "confirm purchase"."""
    if not resource_id:
        return ""
    name = resource_id.rsplit("/", 1)[-1]
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", name)
    name = re.sub(r"([A-Za-z])(\d)", r"\1 \2", name)
    words = [w for w in re.split(r"[^A-Za-z0-9]+", name.lower()) if w and w not in ID_NOISE and not w.isdigit()]
    return " ".join(words)


# -- the lexicon, indexed --------------------------------------------------------------------------

@dataclass(frozen=True)
class _Term:
    concept: Concept
    words: tuple        # token sequence; a word ending in "*" is a prefix
    text: str           # normalised, for substring terms


def _term_words(text: str) -> tuple:
    """A term's tokens, keeping a trailing "*" (a prefix) on the word it ends."""
    words = []
    for piece in text.split():
        parts = tokens(piece.rstrip("*"))
        if parts and piece.endswith("*"):
            parts[-1] += "*"
        words.extend(parts)
    return tuple(words)


def _index():
    by_first, by_prefix, substrings, whole = {}, {}, [], {}
    for concept, terms in LEXICON.items():
        for raw in terms:
            text = normalise(raw)
            if NO_SPACE_SCRIPT.search(text):
                compact = text.replace(" ", "")
                if len(compact) == 1:      # one CJK character is a word only as the whole label
                    whole.setdefault(compact, set()).add(concept)
                else:
                    substrings.append(_Term(concept, (), compact))
                continue
            words = _term_words(text)
            if not words:
                continue
            term = _Term(concept, words, text)
            if words[0].endswith("*"):
                by_prefix.setdefault(words[0][0], []).append(term)
            else:
                by_first.setdefault(words[0], []).append(term)
    return by_first, by_prefix, substrings, whole


_BY_FIRST, _BY_PREFIX, _SUBSTRINGS, _WHOLE = _index()
_NAMES = [normalise(name) for name in NAMES]


def _word_matches(pattern: str, word: str) -> bool:
    return word.startswith(pattern[:-1]) if pattern.endswith("*") else word == pattern


def _sequence_at(words: tuple, toks: list[str], at: int) -> bool:
    if at + len(words) > len(toks):
        return False
    return all(_word_matches(p, toks[at + i]) for i, p in enumerate(words))


@dataclass(frozen=True)
class LineMeaning:
    concepts: frozenset
    first: frozenset      # concepts whose term starts the line (a "no" must come first)
    money: bool
    words: int
    price_only: bool      # the line is a price and nothing else ("$4.99")
    instrument: bool      # it names how a payment is made ("Visa •••• 4242") or that it is due


@lru_cache(maxsize=4096)
def read_line(text: str) -> LineMeaning:
    """The concepts one line of text names. Money words used for browsing ("Payment methods",
    "Pay attention", "Purchase history") name no money act."""
    norm = normalise(text)
    instrument = bool(INSTRUMENT.search(norm))
    for name in _NAMES:
        norm = norm.replace(name, " ")
    toks = tokens(norm)
    found, first = set(), set()
    for at, tok in enumerate(toks):
        for term in [*_BY_FIRST.get(tok, ()), *_BY_PREFIX.get(tok[:1], ())]:
            if _sequence_at(term.words, toks, at):
                found.add(term.concept)
                first.update({term.concept} if at == 0 else ())
    if NO_SPACE_SCRIPT.search(norm):
        compact = "".join(toks)
        for term in _SUBSTRINGS:
            if term.text in compact:
                found.add(term.concept)
                first.update({term.concept} if compact.startswith(term.text) else ())
        for concept in _WHOLE.get(compact, ()):
            found.add(concept)
            first.add(concept)
    if C.LOOKALIKE in found:      # a browsing label: "Continue shopping" is no yes to paying
        found -= {C.PAY, C.PAY_WEAK, C.PAY_TOPIC, C.ORDER_STEP, C.TRANSFER, C.SEND, C.CONFIRM, C.COMMIT}
    if C.ACTIVITY_LOG in found:   # "Clear watch history" is not "Clear chat history"
        found.discard(C.DATA)
    if C.ORDER_STEP in found:     # "Place order", "Confirm order": one step, not a yes to the order
        found -= {C.CONFIRM, C.COMMIT, C.PAY_TOPIC}
    # about three characters make a word of Chinese or Japanese
    words = len(toks) if not NO_SPACE_SCRIPT.search(norm) else max(len(toks), len("".join(toks)) // 3)
    money = bool(MONEY.search(norm))
    price_only = money and not found and any(ch in "123456789" for ch in norm) and all(any(ch.isdigit() for ch in tok) or len(tok) <= 3 for tok in toks)
    return LineMeaning(frozenset(found), frozenset(first & found), money, words, price_only, instrument)


# -- the judge -------------------------------------------------------------------------------------

@dataclass
class ElementMeaning:
    concepts: set
    money: bool           # a price is on the element
    negative: bool        # it says no
    price_only: bool      # it is nothing but a price
    words: int = 0        # its title's words (0: an id or icon only)


def element_meaning(labels: list[str], resource_id: str) -> ElementMeaning:
    """What an element says it does: its title (first label) and short labels, its id's words,
    and for an icon its name. A row's longer summary ("Tap to restore or delete forever") is a
    description, not its act."""
    lines = [read_line(label) for label in labels if label and label.strip()]
    acting = [line for i, line in enumerate(lines) if line.words <= (LABEL_TOKENS if i == 0 else 3)]
    dialog = DIALOG_IDS.get(resource_id)
    id_line = read_line(id_words(resource_id)) if resource_id and not dialog else None
    concepts = set().union(*(line.concepts for line in acting)) if acting else set()
    labelled = bool(concepts)
    if id_line is not None:
        concepts |= id_line.concepts
    if C.LOOKALIKE in concepts:      # the label's browsing sense wins over an id's act word
        concepts -= {C.PAY, C.PAY_WEAK, C.PAY_TOPIC, C.ORDER_STEP, C.TRANSFER, C.SEND}
    if C.ACTIVITY_LOG in concepts:
        concepts.discard(C.DATA)
    if dialog and not labelled:      # a dialog's positive button means what its label says, else "yes"
        concepts.add(C.CONFIRM if dialog == "confirm" else C.NEGATIVE)
    if C.COMMIT in concepts:
        concepts.add(C.CONFIRM)
    lead = acting[0].first if acting and labelled else (id_line.first if id_line else frozenset())
    negative = C.NEGATIVE in lead or (dialog == "negative" and not labelled)
    return ElementMeaning(concepts, any(line.money for line in lines), negative,
                          len(lines) == 1 and lines[0].price_only and not concepts,
                          acting[0].words if acting and labelled else 0)


def own_act(e: set, money: bool) -> Verdict | None:
    """An act the element's own words name, whatever the screen."""
    if C.RESET in e or (C.RESET_WEAK in e and (C.DEVICE in e or C.FACTORY in e)):
        return Verdict(Act.RESET, "a factory reset")
    if (C.DELETE in e or C.END in e) and C.ACCOUNT in e:
        return Verdict(Act.DELETE, "deleting or closing an account")
    if C.DELETE in e and (C.PERMANENT in e or C.BULK in e or C.DATA in e):
        return Verdict(Act.DELETE, "an irreversible deletion")
    if C.CLEAR in e and (C.PERMANENT in e or C.DATA in e):
        return Verdict(Act.DELETE, "clearing data or history")
    if C.EMPTY in e and C.TRASH in e:
        return Verdict(Act.DELETE, "emptying the trash")
    if C.TRANSFER in e or (C.SEND in e and (money or C.MONEY_WORD in e)) or (C.CONFIRM in e and C.TRANSFER_TOPIC in e):
        return Verdict(Act.TRANSFER, "sending money")
    if C.PAY in e or ((C.PAY_WEAK in e or C.ORDER_STEP in e) and money) or \
            (C.CONFIRM in e and (C.PAY_TOPIC in e or money)):
        return Verdict(Act.PURCHASE, "a purchase or payment")
    return None


@dataclass
class PageMeaning:
    topics: set           # the dangerous acts the screen is about
    done: bool            # its act is already over ("Payment successful")
    money: bool           # it shows a price
    instrument: bool      # it shows how the payment will be made
    prices: int           # lines that are only a price (several: a choice of amounts)
    amount: bool          # it names an amount ("Amount", "金额")


def page_meaning(page_lines: list[str]) -> PageMeaning:
    lines = [read_line(line) for line in page_lines if line and line.strip()]
    every = set().union(*(line.concepts for line in lines)) if lines else set()
    money = any(line.money for line in lines)
    topics = set()
    for line in lines:
        c = line.concepts
        if C.RESET in c or (C.RESET_WEAK in c and (C.DEVICE in c or C.FACTORY in c)):
            topics.add(Act.RESET)
        if (C.DELETE in c or C.END in c) and C.ACCOUNT in c:
            topics.add(Act.DELETE)
        if (C.DELETE in c or C.EMPTY in c) and (C.PERMANENT in every or C.BULK in c or C.DATA in c):
            topics.add(Act.DELETE)
        if C.CLEAR in c and (C.PERMANENT in every or C.DATA in c):
            topics.add(Act.DELETE)
        if C.TRASH in c and line.words <= 2:          # a title: this screen is the trash
            topics.add(Act.DELETE)
        if C.TRANSFER in c or C.TRANSFER_TOPIC in c or (C.SEND in c and C.MONEY_WORD in c) or \
                (C.SEND in line.first and line.money):
            topics.add(Act.TRANSFER)
        if C.PAY in c or ((C.PAY_TOPIC in c or C.PAY_WEAK in c or C.ORDER_STEP in c) and money):
            topics.add(Act.PURCHASE)
    return PageMeaning(topics, C.DONE in every, money, any(line.instrument for line in lines),
                       sum(line.price_only for line in lines), C.AMOUNT in every)


# Which screen topics give which kind of element its meaning.
CONTEXT_ACTS = {
    C.CONFIRM: tuple(Act),
    C.DELETE: (Act.DELETE, Act.RESET),
    C.RESET_WEAK: (Act.RESET,),
    C.EMPTY: (Act.DELETE,),
    C.SEND: (Act.TRANSFER,),
    C.PAY_WEAK: (Act.PURCHASE,),
    C.COMMIT: (Act.PURCHASE,),
}
# A reset that names what it resets ("Reset Wi-Fi, mobile & Bluetooth", "Reset app preferences") is
# that reset, even listed beside "Erase all data (factory reset)"; a bare "Reset" / "Reset all" / "初期化"
# takes the screen's meaning.
BARE_RESET_WORDS = 2
CONTEXT_EVIDENCE = {Act.PURCHASE: "a confirmation on a payment screen",
                    Act.TRANSFER: "a confirmation on a money-transfer screen",
                    Act.DELETE: "a confirmation of an irreversible deletion",
                    Act.RESET: "a confirmation of a factory reset"}


def judge_words(labels: list[str], resource_id: str, page_lines: list[str]) -> Verdict | None:
    """The dangerous act touching an element with these labels and id on this screen would do."""
    element = element_meaning(labels, resource_id)
    e = element.concepts
    if element.negative and not ((C.END in e or C.DELETE in e) and C.ACCOUNT in e):
        return None
    verdict = own_act(e, element.money)
    if verdict is not None:
        return verdict
    if not element.price_only and not any(kind in e for kind in (*CONTEXT_ACTS, C.ORDER_STEP)):
        return None
    page = page_meaning(page_lines)
    if element.price_only and not page.prices:      # one price to press, not a choice of amounts
        return Verdict(Act.PURCHASE, "a button that is a price")
    if C.SEND in e and page.amount and page.money and not page.done:   # "Transfer" under "Amount $500"
        return Verdict(Act.TRANSFER, "sending an amount of money")
    if C.ORDER_STEP in e and page.instrument and not page.done:
        return Verdict(Act.PURCHASE, "placing an order on a screen that shows how it is paid")
    if (C.PAY_WEAK in e or C.COMMIT in e) and page.money and not page.done:  # "Subscribe" under "$9.99/month"
        page.topics.add(Act.PURCHASE)
    kinds = [kind for kind in CONTEXT_ACTS if kind in e and not (kind == C.RESET_WEAK and element.words > BARE_RESET_WORDS)]
    for act in Act:
        if act in page.topics and any(act in CONTEXT_ACTS[kind] for kind in kinds):
            if page.done and act in (Act.PURCHASE, Act.TRANSFER):
                continue
            return Verdict(act, CONTEXT_EVIDENCE[act])
    return None


def node_labels(node) -> list[str]:
    """A clickable element's texts and content-descs with its children's (a row's title)."""
    nodes = node.walk() if (node.clickable or node.long_clickable) else [node]
    return [part for n in nodes for part in (n.text, n.desc) if part]


def judge(node, page_lines: list[str]) -> Verdict | None:
    """The act of touching `node` on a screen with these lines (the node's own among them)."""
    if node is None:
        return None
    labels = node_labels(node)
    rest = list(page_lines)
    for label in labels:          # the screen around the element, not the element again
        if label in rest:
            rest.remove(label)
    return judge_words(labels, node.resource_id, rest)
