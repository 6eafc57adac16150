"""Draft verification specs derived from a GEM path, in the check kinds Systems A and B read.

A generated query gets what the explored graph can vouch for, and nothing it cannot: System A's
terminal facts `foreground` (the target page's app and activity) and `screen` (the target page's
title is on the final screen), and System B's ordered milestones (the titles of the pages along
the path). The spec is marked `draft: true`: a person confirms or sharpens it in review before the
query is approved (docs/query-format.md, `verification.draft`).
"""
from __future__ import annotations

import re

from flywheel.queries.query_format import record_problems

ACTIVITY = re.compile(r"^[A-Za-z0-9_.$]{1,200}$")
PACKAGE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
# A title with markup characters appears escaped in the uiautomator XML; the screen check reads the
# raw XML, so such a title would never match there (the milestone, which reads parsed text, still can).
XML_ESCAPED = set("&<>\"'")


def activity_name(activity: str) -> str:
    """"com.x/.Main" → ".Main"; "" when the recorded activity is not a plain class name."""
    name = (activity or "").split("/", 1)[-1].strip()
    return name if ACTIVITY.match(name) else ""


def draft_verification(package: str, activity: str, title: str, milestone_titles: list[str]) -> dict:
    """A draft spec for a task that ends on the page (package, activity, title), reached through
    pages titled `milestone_titles` in order (the target's own title last, when it has one)."""
    terminal = []
    if PACKAGE.match(package or ""):
        check = {"check": "foreground", "package": package}
        if activity_name(activity):
            check["activity"] = activity_name(activity)
        terminal.append(check)
    title = (title or "").strip()
    if title and len(title) <= 1000 and not XML_ESCAPED & set(title):
        terminal.append({"check": "screen", "contains": title})
    milestones, seen = [], set()
    for name in milestone_titles:
        name = (name or "").strip()
        if name and name not in seen:
            seen.add(name)
            milestones.append({"name": f"reached {name}", "text": name})
    return {"terminal": terminal, "milestones": milestones, "draft": True}


def verification_problems(spec: dict, apps: list[str] | None = None) -> list[tuple[str, str]]:
    """(field, message) for every way the spec fails the published query schema."""
    record = {"key": "draft", "text": "draft", "apps": apps or ["com.example.app"], "tier": "L2",
              "verification": spec}
    return [(field, message) for field, message in record_problems(record)
            if field.startswith("verification") or field == "(line)"]
