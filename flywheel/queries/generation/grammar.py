"""The offline template grammar: tier subclass × persona × capability, slots filled from GEM pages.

Nothing here knows an app: every slot comes from a `LeafContext` (planner.py), i.e. from the
texts of explored pages, the labels of the elements tapped along a GEM path and the function
tree. A sentence is built in three layers, each deterministic for a given `random.Random`:

1. the subclass template (§2.2.2): L1 narrates the path, L2 states the goal only, L3 hints;
2. one clause per capability dimension (§2.2.4), over page elements, numbers and states;
3. the persona's style filter (§2.2.3, Table 1) as generic rewrite rules: prefixes and suffixes,
   contractions, dropped fillers, slang words. Labels taken from the screen are protected from
   the rewrite, so an L1 sentence still names every tapped element after the filter.
"""
from __future__ import annotations

import re

from flywheel.queries.generation.operations import operation_clause

# --- 1. subclass templates ---------------------------------------------------------------------


def _narration(ctx) -> list[str]:
    """The path as imperative phrases: "open Shop", "tap Settings", "go back"..."""
    return [f"{verb} {obj}".strip() for verb, obj in ctx.narration]


def _join_steps(phrases: list[str], casual: bool) -> str:
    if not phrases:
        return ""
    if casual:
        links = ["first ", "then ", "after that ", "and then "]
        parts = [("finally " if i == len(phrases) - 1 and i else links[min(i, 3)]) + p
                 for i, p in enumerate(phrases)]
        return ", ".join(parts)
    if len(phrases) == 1:
        return phrases[0]
    return ", ".join(phrases[:-1]) + ", then " + phrases[-1]


def _function(ctx) -> str:
    return ctx.label


def _item(ctx, rng, default="the first entry") -> str:
    return rng.choice(ctx.items) if ctx.items else default


def plain_narration(ctx, rng):
    steps = _join_steps(_narration(ctx), casual=False)
    end = rng.choice(["", f" to get to {ctx.label}", f" and stay on {ctx.label}"])
    return f"{steps}{end}."


def colloquial_steps(ctx, rng):
    phrases = _narration(ctx)
    if len(phrases) > 1:  # "pick that X thing" on the second-to-last tap
        verb, obj = ctx.narration[-1]
        phrases[-1] = rng.choice([f"pick that {obj} thing", f"hit {obj}", f"go into {obj}"]) if verb == "tap" \
            else phrases[-1]
    return _join_steps(phrases, casual=True) + rng.choice([".", ", that's it.", " and you're there."])


def function_statement(ctx, rng):
    return rng.choice([f"Go to {ctx.label} in {ctx.app_label}.", f"Open {ctx.label} in {ctx.app_label}.",
                       f"Bring up {ctx.label} in {ctx.app_label}."])


PURPOSES = ["I need it sorted before I head out", "I have to check something there for work",
            "I'm setting things up for a trip", "a friend asked me about it",
            "I want to get this done before tonight"]


def purpose_statement(ctx, rng):
    return (f"{rng.choice(PURPOSES)}, so take me to {ctx.label} in {ctx.app_label}"
            f"{rng.choice(['.', ' and leave it open.', ' for me.'])}")


def dependent_operation(ctx, rng):
    item = _item(ctx, rng)
    follow = rng.choice([f"once it's there, open {item}", f"after that, read me what {item} says",
                         f"when it loads, find {item}"])
    return f"Open {ctx.label} in {ctx.app_label}, and {follow}."


def parallel_operation(ctx, rng):
    other = rng.choice(ctx.other_labels) if ctx.other_labels else _item(ctx, rng)
    return f"Go to {ctx.label} in {ctx.app_label}, and while you're at it have a look at {other}."


def conditional_operation(ctx, rng):
    item = _item(ctx, rng, default=ctx.label)
    return (f"Check whether {ctx.app_label} shows {item} under {ctx.label}, and if it does, "
            f"{rng.choice(['open it', 'select it', 'tell me what it says'])}.")


TIMES = ["before my meeting tomorrow", "tonight", "in the next ten minutes", "before I leave the house",
         "while I'm on the train", "by the end of the day"]


def state_constraint(ctx, rng):
    time = rng.choice(TIMES)
    return f"{time[:1].upper() + time[1:]}, I need {ctx.label} in {ctx.app_label} ready, open it for me."


def _hint_word(ctx) -> str:
    # A word of the function's label that is not the app's own name ("Notes, the notes bit" says nothing).
    app_words = {w.lower() for w in re.findall(r"[A-Za-z]+", ctx.app_label)}
    words = [w for w in re.findall(r"[A-Za-z]{3,}", ctx.label) if w.lower() not in app_words]
    return words[-1].lower() if words else "usual"  # not "that": "That that thing…"


def incomplete_instruction(ctx, rng):
    word = _hint_word(ctx)
    return rng.choice([f"That {word} thing in {ctx.app_label}…", f"The {word} one, in {ctx.app_label}, you know.",
                       f"{ctx.app_label}, the {word} bit, quick"])


def intent_inference(ctx, rng):
    """No functional words: the need is told through what the page shows, not what it is called."""
    if ctx.items:
        item = rng.choice(ctx.items)
        return rng.choice([f"Where was that {item} I saw in {ctx.app_label}? I can't find it again.",
                           f"I keep thinking about {item}, can {ctx.app_label} show me it?"])
    return rng.choice([f"I'm lost in {ctx.app_label}, I just want to get to the screen I need.",
                       f"{ctx.app_label} is confusing me, how do I get where I was going?"])


def colloquial_self_correction(ctx, rng):
    wrong = rng.choice(ctx.other_labels) if ctx.other_labels else ctx.app_label
    return f"Open {wrong} in {ctx.app_label}… wait no, {ctx.label}, I meant {ctx.label}."


SUBCLASS_BUILDERS = {
    "plain_narration": plain_narration, "colloquial_steps": colloquial_steps,
    "function_statement": function_statement, "purpose_statement": purpose_statement,
    "dependent_operation": dependent_operation, "parallel_operation": parallel_operation,
    "conditional_operation": conditional_operation, "state_constraint": state_constraint,
    "incomplete_instruction": incomplete_instruction, "intent_inference": intent_inference,
    "colloquial_self_correction": colloquial_self_correction,
}

# An operation's own forms of the subclasses whose page form asks for a second thing (open an item,
# look at another page): with an operation that second thing would be asked and never done.


def dependent_on_page(ctx, clause, rng):
    return f"Open {ctx.label} in {ctx.app_label}, and {rng.choice(['once it is there', 'when it loads'])}, {clause}."


def conditional_on_page(ctx, clause, rng):
    return (f"If {ctx.app_label} shows {ctx.operation.label} under {ctx.label}, {clause}; "
            f"{rng.choice(['otherwise tell me it is not there', 'if not, let me know'])}.")


OPERATION_BUILDERS = {"dependent_operation": dependent_on_page, "parallel_operation": dependent_on_page,
                      "conditional_operation": conditional_on_page}

# --- 2. capability clauses ------------------------------------------------------------------------


def multi_constraint(ctx, rng):
    chosen = rng.sample(ctx.filters, min(len(ctx.filters), rng.choice([2, 3])))
    return "with " + ", ".join(chosen[:-1]) + " and " + chosen[-1] + " all selected"


def numerical(ctx, rng):
    a, b = rng.sample(ctx.numbers, 2)
    return rng.choice([f"work out the difference between {a} and {b}",
                       f"tell me whether {a} is more than {b}", f"add up {a} and {b}"])


def conditional(ctx, rng):
    if ctx.toggles:
        toggle = rng.choice(ctx.toggles)
        return f"if {toggle} is on, turn it off, otherwise leave it as it is"
    return f"if you see {rng.choice(ctx.items)} there, open it, else tell me it's missing"


def cross_page(ctx, rng):
    return f"remember {rng.choice(ctx.path_texts)} from the way there and tell me it again on {ctx.title}"


def looping(ctx, rng):
    n = min(3, len(ctx.items))
    return f"for each of the first {n} entries on {ctx.title}, open it and come back"


def synthesis(ctx, rng):
    a, b = rng.sample(ctx.items, 2)
    return f"then put {a} and {b} together in one short summary for me"


# What each clause needs from the pages; without it the capability is not claimed at all.
MATERIAL = {
    "multi_constraint_filtering": lambda ctx: len(ctx.filters) >= 2,
    "numerical_reasoning": lambda ctx: len(ctx.numbers) >= 2,
    "conditional_logic": lambda ctx: bool(ctx.toggles or ctx.items),
    "cross_page_state_tracking": lambda ctx: bool(ctx.path_texts),
    "looping": lambda ctx: len(ctx.items) >= 2,
    "information_synthesis": lambda ctx: len(ctx.items) >= 2,
}


def has_material(ctx, capability: str) -> bool:
    check = MATERIAL.get(capability)
    return bool(check and check(ctx))


CAPABILITY_BUILDERS = {
    "multi_constraint_filtering": multi_constraint, "numerical_reasoning": numerical,
    "conditional_logic": conditional, "cross_page_state_tracking": cross_page,
    "looping": looping, "information_synthesis": synthesis,
}

# --- 3. persona style filters ---------------------------------------------------------------------

CONTRACTIONS = [("I am", "I'm"), ("do not", "don't"), ("it is", "it's"), ("you are", "you're"),
                ("cannot", "can't"), ("that is", "that's"), ("is not", "isn't")]
FILLERS = re.compile(r"\b(?:please|the|a|an|for me|just|you know|I need|so|that's it)\b[,]?\s*", re.I)
SLANG = [(r"\byou\b", "u"), (r"\bplease\b", "pls"), (r"\bare\b", "r"), (r"\bbecause\b", "bc"),
         (r"\bright now\b", "rn"), (r"\bto be honest\b", "tbh")]


def _contract(text):
    for long, short in CONTRACTIONS:
        text = re.sub(rf"\b{long}\b", short, text)
        text = re.sub(rf"\b{long.capitalize()}\b", short[0].upper() + short[1:], text)
    return text


def _expand(text):
    for long, short in CONTRACTIONS:
        text = text.replace(short, long).replace(short[0].upper() + short[1:], long[0].upper() + long[1:])
    return text


def _sentence(text):
    text = re.sub(r"\s+", " ", text).strip(" ,")
    return text[:1].upper() + text[1:] if text else text


def _body(text):
    return text.rstrip(" .!?…")


IMPERATIVE = re.compile(r"(?:\W*)(?:open|go|bring|take|check|copy|look|compare|tap|press|first|get|find|show)\b",
                        re.I)


def _lower_first(text):
    """Lower-case the first letter after a lead-in ("Oh dear, go to…"), but never the word I."""
    if re.match(r"I\b", text):
        return text
    return text[:1].lower() + text[1:]


def plain(text, rng):
    return _sentence(_contract(text))


def slang(text, rng):
    body = _body(text)
    for pattern, short in SLANG:
        body = re.sub(pattern, short, body, flags=re.I)
    body = _lower_first(body)
    return f"{rng.choice(['yo ', 'ok so ', 'ngl ', ''])}{_contract(body)}{rng.choice([' asap pls', ' fr', ' lol', ' 🙏'])}"


def terse(text, rng):
    body = FILLERS.sub("", _body(text))
    return _sentence(body) + "."


def formal(text, rng):
    body = _body(_expand(text))
    if not IMPERATIVE.match(body):  # a question or a statement: no "Could you please …"
        return f"Excuse me, {_lower_first(body)}. {rng.choice(['Thank you.', 'Much appreciated.'])}"
    lead = rng.choice(["Please ", "Kindly ", "Could you please "])
    return f"{lead}{_lower_first(body)}{'?' if lead.startswith('Could') else '.'} " \
           f"{rng.choice(['Thank you.', 'Thank you in advance.', 'Much appreciated.'])}"


def rambling(text, rng):
    body = _lower_first(_body(text))
    words = body.split(" ")
    # A hesitation where a speaker pauses: after a comma, near the middle ("…in Translator, um, and
    # while you're at it…"), never inside a phrase ("while oh, you're at it").
    pauses = [i + 1 for i, word in enumerate(words[:-2]) if word.endswith(",") and i >= 2]
    if len(words) > 6 and pauses:
        at = min(pauses, key=lambda i: abs(i - len(words) // 2))
        hesitations = ["um,", "oh,", "now where was I,"]
        if words[at].lower().strip(",") == "i":  # not "now where was I, I need…"
            hesitations.pop()
        words.insert(at, rng.choice(hesitations))
    return (f"{rng.choice(['Oh dear, ', 'Sorry to bother you, ', 'I am not good with these phones, '])}"
            f"{' '.join(words)}... {rng.choice(['I hope I did not break anything.', 'Is that all right?', 'I get so worried with this.'])}")


def clipped(text, rng):
    body = FILLERS.sub("", _contract(_body(text)))
    return f"{_sentence(body)}. {rng.choice(['Quick.', 'Now.', 'Hurry.', 'Fast pls.'])}"


def enthusiastic(text, rng):
    lead = rng.choice(['Omg, ', 'Yay! ', 'Okay, so excited, '])
    body = _contract(_body(text))
    return f"{lead}{body if lead == 'Yay! ' else _lower_first(body)}" \
           f"{rng.choice(['!', '!!', ', this is gonna be great!'])}"


def gentle(text, rng):
    body = _body(_contract(text))
    leads = ["When you get a sec, ", "Once the kids are in bed, "]
    if IMPERATIVE.match(body):
        leads.append("While the baby naps, could you ")
    lead = rng.choice(leads)
    asked = lead.endswith("could you ")  # only a request is a question
    return f"{lead}{_lower_first(body)}" \
           f"{rng.choice(['? Thanks, love.' if asked else '. Thanks, love.', ', and remind me to start dinner after.', ', no rush.'])}"


PERSONA_FILTERS = {
    "novice": plain, "gen_z_student": slang, "programmer": terse, "business_professional": formal,
    "senior_citizen": rambling, "delivery_rider": clipped, "travel_blogger": enthusiastic,
    "stay_at_home_parent": gentle,
}


def apply_persona(text: str, persona: str, rng, protected: list[str]) -> str:
    """The persona's filter over `text`; each protected label (screen text) comes back verbatim."""
    tokens = {}
    for i, label in enumerate(sorted({p for p in protected if p}, key=len, reverse=True)):
        token = f"\uE000{i}\uE001"
        if label in text:
            text = text.replace(label, token)
            tokens[token] = label
    text = PERSONA_FILTERS[persona](text, rng)
    for token, label in tokens.items():
        text = text.replace(token, label)
    return re.sub(r"\s+", " ", text).strip()


def compose(ctx, subclass: str, persona: str, capabilities: list[str], rng) -> str:
    """One query text for a leaf context: subclass template + capability clauses + persona."""
    operation = getattr(ctx, "operation", None)
    clauses = [CAPABILITY_BUILDERS[c](ctx, rng) for c in capabilities if has_material(ctx, c)]
    if operation is not None and subclass in OPERATION_BUILDERS:
        text = OPERATION_BUILDERS[subclass](ctx, operation_clause(operation, rng), rng)
    else:
        text = SUBCLASS_BUILDERS[subclass](ctx, rng)
        if operation is not None:  # the page is where; the operation is what is asked
            clauses.insert(0, operation_clause(operation, rng))
    if clauses:
        text = _body(text) + ", and " + ", and ".join(clauses) + "."
    protected = [obj for _verb, obj in ctx.narration] + [ctx.label, ctx.app_label, ctx.title, *ctx.items,
                                                          *ctx.filters, *ctx.toggles, *ctx.path_texts,
                                                          *ctx.other_labels]
    if operation is not None:
        protected += [operation.label, operation.field, f'"{operation.text}"' if operation.text else ""]
    return apply_persona(text, persona, rng, protected)


# --- cross-app relations (§2.2.5) ------------------------------------------------------------------


def relay(start, end, matched, rng):
    """A's output typed into B's input: "copy X from A and search it in B"."""
    what = matched.split(":", 1)[-1].strip() or "input"
    item = start.items[0] if start.items else start.title  # the page's main content, after its title
    return rng.choice([
        f"Copy {item} from {start.app_label} and type it into {end.title} in {end.app_label}.",
        f"Take {item} from {start.app_label} {start.title} and use it as the {what} in {end.app_label}.",
    ])


def contrast(start, end, matched, rng):
    item = _item(start, rng, start.label)
    return rng.choice([
        f"Look up {item} in {start.app_label} and in {end.app_label} {end.title}, and tell me which one has more.",
        f"Compare what {start.app_label} shows for {item} with what {end.app_label} {end.title} shows.",
    ])


def parallel(start, end, matched, rng):
    return rng.choice([
        f"Open {start.label} in {start.app_label}, and separately go to {end.title} in {end.app_label}.",
        f"Two things: {start.label} in {start.app_label}, then {end.title} in {end.app_label}.",
    ])


RELATION_BUILDERS = {"relay": relay, "contrast": contrast, "parallel": parallel}


def compose_cross(start, end, relation: str, matched: str, persona: str, capabilities: list[str], rng) -> str:
    text = RELATION_BUILDERS[relation](start, end, matched, rng)
    clauses = [CAPABILITY_BUILDERS[c](start, rng) for c in capabilities if has_material(start, c)]
    if clauses:
        text = _body(text) + ", and " + ", and ".join(clauses) + "."
    protected = [start.label, start.app_label, start.title, end.title, end.app_label, *start.items]
    return apply_persona(text, persona, rng, protected)
