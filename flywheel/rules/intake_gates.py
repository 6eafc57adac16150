"""The offline rules of the intake gates for synthesized queries (report §2.2.6), as pure functions.

Gate 1 judges realism (hard filter) and labels complexity (not a filter); Gate 2 polishes the
text towards the persona's way of speaking. Completability (GEM reachability) and back-tagging
need the database and the embedding model: they are in flywheel/queries/gates.py.
"""
import hashlib
import re

MIN_REALISM = 0.5
MIN_WORDS, MAX_WORDS = 3, 60          # Latin-script queries
MIN_CJK, MAX_CJK = 4, 120             # Chinese characters

CJK = re.compile(r"[\u4e00-\u9fff]")
LATIN_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
QUOTED = re.compile(r"[“\"‘「『《](.+?)[”\"’」』》]")

# (penalty, reason, pattern). 1.0 means the query cannot pass at all.
REALISM_RULES = (
    (1.0, "template leftover", re.compile(r"[{}]|\$\{|\[\s*[A-Za-z_]+\s*\]|<\s*[A-Za-z_]+\s*>|__|\bTODO\b")),
    (1.0, "unfilled slot", re.compile(r"\b(None|null|undefined|NaN|nan)\b|%s|%\(\w+\)s|\bslot\b", re.I)),
    (1.0, "machine accent", re.compile(
        r"\bas an ai\b|\bas a (large )?language model\b|\bI('m| am) an AI\b|\bstep \d+\s*:|^\s*(sure|certainly|"
        r"here is|here's)\b[,!:]?|\bI hope this helps\b|作为(一个)?(AI|人工智能)|步骤\s*\d+\s*[:：]", re.I)),
    (1.0, "markdown", re.compile(r"\*\*|__|`|^\s*#{1,6}\s|^\s*[-*•]\s|\n\s*[-*•]\s|\[[^\]]*\]\([^)]*\)", re.M)),
    (0.4, "doubled word", re.compile(r"\b(\w+)\s+\1\b", re.I)),
    (0.3, "line breaks", re.compile(r"\n")),
    (0.2, "instruction boilerplate", re.compile(
        r"\b(please kindly|I would like you to|your task is to|you are required to|in order to accomplish)\b", re.I)),
)


def _outside_quotes(text: str) -> str:
    return QUOTED.sub(" ", text)


def realism(text: str) -> tuple[float, list[str]]:
    """(score 0..1, reasons): does it read like something a person would say to a phone?

    Hard problems (template leftovers, unfilled slots, machine accent, markdown) score 0; softer
    ones take a share off. Length is counted in words for Latin script, in characters for Chinese."""
    stripped = text.strip()
    reasons, score = [], 1.0
    if not stripped:
        return 0.0, ["empty text"]
    cjk = len(CJK.findall(stripped))
    words = LATIN_WORD.findall(_outside_quotes(stripped))
    if cjk >= len(words):
        if cjk < MIN_CJK:
            score, reasons = score - 0.6, [*reasons, f"too short ({cjk} characters)"]
        elif cjk > MAX_CJK:
            score, reasons = score - 0.5, [*reasons, f"too long ({cjk} characters)"]
    else:
        if len(words) < MIN_WORDS:
            score, reasons = score - 0.6, [*reasons, f"too short ({len(words)} words)"]
        elif len(words) > MAX_WORDS:
            score, reasons = score - 0.5, [*reasons, f"too long ({len(words)} words)"]
    for penalty, reason, pattern in REALISM_RULES:
        if pattern.search(stripped):
            score -= penalty
            reasons.append(reason)
    tokens = stripped.split()
    if words and len(tokens) >= 3:
        # "Mostly non-words": tokens without a letter (ids, hashes, numbers) outweigh the words.
        nonwords = [t for t in tokens if not re.search(r"[A-Za-z\u4e00-\u9fff]", t)
                    or re.fullmatch(r"[0-9a-f]{8,}|[A-Za-z0-9_]*\d[A-Za-z0-9_]*\d[A-Za-z0-9_]*", t)]
        if len(nonwords) * 2 > len(tokens):
            score -= 0.6
            reasons.append("mostly non-words")
    outside = _outside_quotes(stripped)
    cjk_out, latin_out = len(CJK.findall(outside)), len(LATIN_WORD.findall(outside))
    if cjk_out >= 4 and latin_out >= 4 and min(cjk_out / 2, latin_out) / max(cjk_out / 2, latin_out) > 0.5:
        # Chinese counted in words of about two characters; a few Latin names are normal.
        score -= 0.4
        reasons.append("language mix outside quotes")
    return round(max(0.0, min(1.0, score)), 3), reasons


# Report Table 4 path-complexity bins.
COMPLEXITY_BINS = ((5, "low"), (10, "medium"))
LEVELS = ("low", "medium", "high")


def complexity_label(path_steps: int, capabilities=()) -> str:
    """low (≤5 steps) / medium (6–10) / high (>10), one level up for two or more capability
    dimensions at once (decision difficulty adds to path length). Not a filter: a label."""
    level = next((i for i, (limit, _name) in enumerate(COMPLEXITY_BINS) if path_steps <= limit), 2)
    if len(set(capabilities or ())) >= 2:
        level = min(level + 1, 2)
    return LEVELS[level]


# --- Gate 2: polishing -----------------------------------------------------------------------------
ACCENT_REWRITES = (
    ("drop 'please kindly'", re.compile(r"\bplease kindly\b\s*", re.I), "please "),
    ("drop 'kindly'", re.compile(r"\bkindly\s+", re.I), ""),
    ("drop 'I would like you to'", re.compile(r"\b(I would like you to|I want you to|your task is to|"
                                              r"you are required to)\s+", re.I), ""),
    ("drop 'could you please'", re.compile(r"\b(could|can|would) you please\s+", re.I), ""),
    ("steps to clauses", re.compile(r"\s*\bstep\s*\d+\s*[:.)-]\s*", re.I), ", then "),
    ("drop 'in order to'", re.compile(r"\bin order to\b", re.I), "to"),
    ("drop 'utilize'", re.compile(r"\butili[sz]e\b", re.I), "use"),
    ("drop Chinese politeness", re.compile(r"^请您?|麻烦您"), ""),
)

# Persona style filters (vocabulary.PERSONAS): a few generic, deterministic English rules each.
PERSONA_STYLE = {
    "novice": {"period": True},
    "gen_z_student": {"abbrev": (("please", "pls"), ("right now", "rn"), ("to be honest", "tbh"),
                                 ("thanks", "thx"), ("you", "u")), "lower": True, "period": False,
                      "suffix": ("", " lol", " asap pls")},
    "programmer": {"drop": (r",?\s*\bplease\b,?", r"\bjust\s+", r"\bfor me\b\s*", r",?\s*\bright now\b"), "period": False},
    "business_professional": {"period": True, "capitalise": True},
    "senior_citizen": {"prefix": ("Hmm... ", "Oh dear, ", "Excuse me, "),
                       "suffix": (", I'm not sure how", "... thank you", ""), "period": True},
    "delivery_rider": {"drop": (r",?\s*\bplease\b,?", r"\bcould you\s+"), "suffix": (", quick", " now", ""),
                       "period": False},
    "travel_blogger": {"suffix": ("!", "! so excited", "!"), "period": False},
    "stay_at_home_parent": {"prefix": ("While I'm at it, ", "Oh and ", "Real quick, "), "period": True},
}


def _pick(options, text: str) -> str:
    """A deterministic choice per text (a rerun polishes the same way)."""
    return options[int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16) % len(options)]


def polish(text: str, persona: str = "") -> tuple[str, list[str]]:
    """(polished text, rules applied): machine accent removed, then the persona's style (natural
    pauses, abbreviations, colloquial noise). Quoted content is never touched. Chinese text only
    gets the accent rules."""
    original = text
    applied = []
    quotes = []

    def hide(match):
        quotes.append(match.group(0))
        return f"\x00{len(quotes) - 1}\x00"

    text = QUOTED.sub(hide, " ".join(text.split()))
    for name, pattern, replacement in ACCENT_REWRITES:
        new = pattern.sub(replacement, text)
        if new != text:
            applied.append(name)
            text = new
    text = re.sub(r"^[,\s]*then\s+", "", text, flags=re.I)
    text = re.sub(r"\s*,\s*,\s*|\s+,", ", ", text).strip(" ,")
    text = re.sub(r"\.(\s*,\s*then)", r"\1", text)
    style = PERSONA_STYLE.get(persona, {})
    latin = len(LATIN_WORD.findall(text)) > len(CJK.findall(text))
    if style and latin and text:
        for pattern in style.get("drop", ()):
            new = re.sub(pattern, "", text, flags=re.I)
            if new != text:
                applied.append(f"{persona}: drop filler")
                text = new
        for long, short in style.get("abbrev", ()):
            new = re.sub(rf"\b{re.escape(long)}\b", short, text, flags=re.I)
            if new != text:
                applied.append(f"{persona}: {long} → {short}")
                text = new
        body = text.rstrip(".!")
        if style.get("lower"):
            body = body[:1].lower() + body[1:]
            applied.append(f"{persona}: lower case")
        else:
            body = body[:1].upper() + body[1:]
        prefix = _pick(style.get("prefix", ("",)), original)
        if prefix:
            body = prefix + body[:1].lower() + body[1:]
            applied.append(f"{persona}: opening '{prefix.strip()}'")
        suffix = _pick(style.get("suffix", ("",)), original + "·")
        if suffix:
            body += suffix
            applied.append(f"{persona}: ending '{suffix.strip()}'")
        if style.get("period") and not body.endswith(("!", "?", ".", "…")):
            body += "."
        elif not style.get("period") and text.endswith(".") and not text.endswith("..."):
            applied.append(f"{persona}: no trailing period")
        text = body
    text = re.sub(r"\x00(\d+)\x00", lambda m: quotes[int(m.group(1))], text)
    return text, applied
