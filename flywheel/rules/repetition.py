"""Repetition-to-reflection (§2.3.7): repeated steps leave the labels but stay in the history.

When a single action (or a small group of actions) is executed several times in a row without
progress, those repeats are masked from the training labels; the step that breaks out of the
stall stays a label, with the failed attempts still in its context.
"""


def same_action(a: dict | None, b: dict | None, tolerance: int = 24) -> bool:
    """The same action type, target (within a tolerance) and arguments."""
    if not a or not b or a.get("action") != b.get("action"):
        return False
    for key in ("point", "start", "end"):
        pa, pb = a.get(key), b.get(key)
        if (pa is None) != (pb is None):
            return False
        if pa is not None and (abs(pa[0] - pb[0]) > tolerance or abs(pa[1] - pb[1]) > tolerance):
            return False
    return all(a.get(k) == b.get(k) for k in ("text", "button", "direction", "app", "value"))


def repetition_mask(actions: list, max_group: int = 3) -> list[bool]:
    """For each step, True when it repeats the action group just before it (mask it).

    A group of 1..max_group actions that occurs again right after itself is a stall: every
    repetition after the first occurrence is masked. The first step that does something else is
    not masked.
    """
    masked = [False] * len(actions)
    i = 0
    while i < len(actions):
        repeated = False
        for size in range(1, max_group + 1):
            start = i - size
            if start < 0:
                break
            block = actions[start:i]
            if i + size <= len(actions) and all(same_action(block[k], actions[i + k]) for k in range(size)):
                for k in range(size):
                    masked[i + k] = True
                i += size
                repeated = True
                break
        if not repeated:
            i += 1
    return masked
