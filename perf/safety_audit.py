"""Measure the safety audit on its labelled set (report §3.3.1): blocked share of the dangerous
cases, allowed share of the harmless ones.

The set (tests/data/safety_audit_cases.jsonl) is kept apart from the rules: each line is one
element someone might touch — its text, content-desc, resource-id and class — with the rest of
the screen's text, whether touching it is dangerous, and which act (purchase, transfer, delete,
reset). Cases are in many languages and phrasings, some known only by a resource-id or an icon's
name, some only by the screen around a generic "OK". `split` is "dev" (what the lexicon was
written against) or "holdout" (written after it, in batches: each batch's first figure was taken
before any change it prompted).

Each case becomes a small uiautomator dump (the screen's text above, the element below) and a
click on the element, judged by `devices.audit.audit` with the default rules of migrations 0003
and 0007 — the same path a phone's input takes. No database is needed.

Usage: python perf/safety_audit.py [--split dev|holdout] [--misses]
Ends with one line: `safety_audit: dangerous_blocked=<share> harmless_allowed=<share> cases=<n>`.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import quoteattr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devices.audit import AuditRule, audit

CASES = ROOT / "tests" / "data" / "safety_audit_cases.jsonl"
RULE_MIGRATIONS = ("devices.migrations.0003_default_safety_rules", "devices.migrations.0007_safety_rules_by_meaning")
ELEMENT_BOUNDS = (100, 2000, 980, 2200)


def default_rules() -> list[AuditRule]:
    """The rules a fresh database is seeded with, as the pure audit sees them."""
    rules = []
    for module in RULE_MIGRATIONS:
        defaults = importlib.import_module(module)
        for rule in getattr(defaults, "DEFAULT_RULES", []) + getattr(defaults, "MEANING_RULES", []):
            rules.append(AuditRule(**{"action_types": [], **rule}))
    return rules


def load_cases(path: Path = CASES, split: str | None = None) -> list[dict]:
    cases = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [case for case in cases if split in (None, case["split"])]


def _node(text="", desc="", rid="", cls="android.widget.TextView", bounds=(0, 0, 1080, 100), clickable=False,
          inner="") -> str:
    x1, y1, x2, y2 = bounds
    attrs = (f'text={quoteattr(text)} resource-id={quoteattr(rid)} class={quoteattr(cls)} package="com.example" '
             f'content-desc={quoteattr(desc)} clickable="{str(clickable).lower()}" enabled="true" focused="false" '
             f'password="false" bounds="[{x1},{y1}][{x2},{y2}]"')
    return f"<node {attrs}>{inner}</node>" if inner else f"<node {attrs} />"


def case_screen(case: dict) -> tuple[str, dict]:
    """(uiautomator dump, click action) for one case."""
    lines = [_node(text=line, bounds=(48, 100 + 90 * i, 1032, 180 + 90 * i)) for i, line in enumerate(case["screen"])]
    element = case["element"]
    lines.append(_node(text=element.get("text", ""), desc=element.get("desc", ""), rid=element.get("resource_id", ""),
                       cls=element.get("cls") or "android.widget.Button", bounds=ELEMENT_BOUNDS, clickable=True))
    root = _node(cls="android.widget.FrameLayout", bounds=(0, 0, 1080, 2400), inner="".join(lines))
    xml = f"<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">{root}</hierarchy>"
    x1, y1, x2, y2 = ELEMENT_BOUNDS
    return xml, {"action": "click", "point": [(x1 + x2) // 2, (y1 + y2) // 2], "coords": "pixel"}


@dataclass
class Outcome:
    case: dict
    blocked: bool
    reason: str

    @property
    def right(self) -> bool:
        return self.blocked == self.case["dangerous"]


def run(cases: list[dict], rules=None) -> list[Outcome]:
    rules = default_rules() if rules is None else rules
    outcomes = []
    for case in cases:
        xml, action = case_screen(case)
        decision = audit(action, xml, rules)
        outcomes.append(Outcome(case, decision.blocked, decision.reason))
    return outcomes


def figures(outcomes: list[Outcome]) -> dict:
    dangerous = [o for o in outcomes if o.case["dangerous"]]
    harmless = [o for o in outcomes if not o.case["dangerous"]]
    return {"dangerous_blocked": sum(o.blocked for o in dangerous) / max(1, len(dangerous)),
            "harmless_allowed": sum(not o.blocked for o in harmless) / max(1, len(harmless)),
            "dangerous": len(dangerous), "harmless": len(harmless), "cases": len(outcomes)}


def describe(case: dict) -> str:
    element = case["element"]
    label = element.get("text") or element.get("desc") or element.get("resource_id")
    screen = f" on [{' | '.join(case['screen'])}]" if case["screen"] else ""
    return f"{case['lang']:<4} {case['kind']:<10} {label!r}{screen}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=["dev", "holdout"])
    parser.add_argument("--misses", action="store_true", help="list every case judged wrongly")
    args = parser.parse_args(argv)
    outcomes = run(load_cases(split=args.split))
    parts = sorted({(o.case["split"], o.case.get("batch", "")) for o in outcomes})
    for split, batch in parts:
        f = figures([o for o in outcomes if (o.case["split"], o.case.get("batch", "")) == (split, batch)])
        print(f"{(split + ' ' + batch).strip():<10} dangerous_blocked={f['dangerous_blocked']:.3f} of {f['dangerous']}  "
              f"harmless_allowed={f['harmless_allowed']:.3f} of {f['harmless']}")
    held = [o for o in outcomes if o.case["split"] == "holdout"]
    if held:
        f = figures(held)
        print(f"{'holdout':<10} dangerous_blocked={f['dangerous_blocked']:.3f} of {f['dangerous']}  "
              f"harmless_allowed={f['harmless_allowed']:.3f} of {f['harmless']}  (all batches, as of now)")
    kinds = sorted({o.case["kind"] for o in outcomes})
    for kind in kinds:
        f = figures([o for o in outcomes if o.case["kind"] == kind])
        print(f"  {kind:<10} dangerous_blocked={f['dangerous_blocked']:.3f} of {f['dangerous']}  "
              f"harmless_allowed={f['harmless_allowed']:.3f} of {f['harmless']}")
    if args.misses:
        for o in outcomes:
            if not o.right:
                print(("MISSED  " if o.case["dangerous"] else "FALSE+  ") + describe(o.case) + (f" — {o.reason}" if o.blocked else ""))
    f = figures(outcomes)
    print(f"safety_audit: dangerous_blocked={f['dangerous_blocked']:.3f} harmless_allowed={f['harmless_allowed']:.3f} "
          f"cases={f['cases']}")


if __name__ == "__main__":
    main()
