"""The BadCase intake channel of the RL query pool (§2.4.3): failed real-user cases.

"Targeted supplementation of BadCases exposed online / in evaluation" and business-side
supplementation: each case is a goal a user asked for, the app(s) it needs and, optionally, what
went wrong. A file (JSONL, or CSV with a header) or an API body of cases is validated whole first:
one bad case writes nothing. Each good case becomes a ready Query of source "badcase" (or
"business"), anonymised like every outside text (§2.3.5) and post-hoc tagged (§2.2.6), and is
offered to the RL pool through the Phase-1 gate: it waits, awaiting measurement, until the current
policy's rollouts on it are judged (flywheel/pools/rl.await_measurement).
"""
import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass

from django.db import transaction

from flywheel.events import publish
from flywheel.models import App, Query, RlQueryEntry
from flywheel.pools.rl import await_measurement
from flywheel.queries.external_tags import tag_external
from flywheel.rules.anonymize import anonymize

Channel = RlQueryEntry.Channel
CHANNELS = (Channel.BADCASE, Channel.BUSINESS)
FIELDS = ("goal", "apps", "notes", "channel")
PACKAGE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
MAX_CASES, MAX_GOAL, MAX_NOTES, MAX_APPS = 1000, 1000, 2000, 5
# What the upload form and the errors say a file looks like.
FORMAT_HELP = ('One case per line as JSON — {"goal": "Send the boarding pass to Anna in Chatter", "apps": '
               '["com.example.chatter"], "notes": "agent opened the wrong chat"} — or a CSV with the header '
               'goal,apps,notes (apps separated by ";"). goal and apps are required; notes, and channel '
               '("badcase" or "business"), are optional.')


class BadCasesInvalid(ValueError):
    """The cases as given cannot be imported; `problems` says where and why. Nothing was written."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass
class Case:
    goal: str
    apps: list[str]
    notes: str
    channel: str


def _apps(value) -> list[str] | None:
    if isinstance(value, str):
        value = [part for part in re.split(r"[;,\s]+", value) if part]
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        return None
    return list(dict.fromkeys(a.strip() for a in value if a.strip()))


def case_problems(record) -> tuple[Case | None, list[str]]:
    """One case, checked: (the case, []) or (None, what is wrong with it)."""
    if not isinstance(record, dict):
        return None, ["must be an object with goal, apps and optional notes"]
    problems = [f"unknown field {name!r} (allowed: {', '.join(FIELDS)})" for name in record if name not in FIELDS]
    goal = record.get("goal")
    if not isinstance(goal, str) or not goal.strip():
        problems.append("goal is required: what the user asked for")
    elif len(goal) > MAX_GOAL:
        problems.append(f"goal is longer than {MAX_GOAL} characters")
    apps = _apps(record.get("apps"))
    if not apps:
        problems.append("apps is required: the package name(s) of the app(s) the case needs")
    elif len(apps) > MAX_APPS:
        problems.append(f"at most {MAX_APPS} apps")
    else:
        problems += [f"{app!r} is not a package name (like com.example.app)" for app in apps if not PACKAGE.match(app)]
    notes = record.get("notes") or ""
    if not isinstance(notes, str):
        problems.append("notes must be text")
    elif len(notes) > MAX_NOTES:
        problems.append(f"notes are longer than {MAX_NOTES} characters")
    channel = record.get("channel") or Channel.BADCASE
    if channel not in CHANNELS:
        problems.append(f"channel must be one of {', '.join(CHANNELS)}, not {channel!r}")
    if problems:
        return None, problems
    return Case(" ".join(goal.split()), apps, notes.strip(), channel), []


def parse_cases(text: str, name: str = "") -> list:
    """The records of a JSONL file, or of a CSV one (by its name, or a first line naming goal)."""
    lines = text.lstrip("\ufeff")
    first = lines.split("\n", 1)[0].strip().lower()
    if name.lower().endswith(".csv") or (first.startswith("goal") and not first.startswith("{")):
        rows = list(csv.DictReader(io.StringIO(lines)))
        return [{k: v for k, v in row.items() if k is not None and v not in (None, "")} for row in rows]
    records = []
    for number, line in enumerate(lines.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise BadCasesInvalid([f"line {number}: not JSON ({error.msg}); {FORMAT_HELP}"]) from None
    return records


def validate_cases(records) -> list[Case]:
    """Every case checked, or BadCasesInvalid naming each bad one (1-based)."""
    if not isinstance(records, list) or not records:
        raise BadCasesInvalid([f"no cases given. {FORMAT_HELP}"])
    if len(records) > MAX_CASES:
        raise BadCasesInvalid([f"{len(records)} cases: at most {MAX_CASES} per import; split the file"])
    cases, problems, seen = [], [], {}
    for number, record in enumerate(records, 1):
        case, wrong = case_problems(record)
        if case is not None and case.goal.lower() in seen:
            wrong = [f"the same goal as case {seen[case.goal.lower()]}"]
        problems += [f"case {number}: {why}" for why in wrong]
        if case is not None and not wrong:
            seen[case.goal.lower()] = number
            cases.append(case)
    if problems:
        raise BadCasesInvalid(problems)
    return cases


def _key(case: Case, goal: str) -> str:
    digest = hashlib.sha1(f"{goal}|{'|'.join(case.apps)}".encode()).hexdigest()[:12]
    return f"{case.channel}-{digest}"


def _write(case: Case) -> tuple[Query, bool]:
    goal, notes = anonymize(case.goal), anonymize(case.notes)
    key = _key(case, goal.text)
    existing = Query.objects.filter(key=key).first()
    if existing is not None:
        return existing, False
    tags = tag_external(goal.text)
    query = Query.objects.create(
        key=key, text=goal.text, tier=tags["ambiguity"], source=case.channel, tags=[case.channel],
        risk=tags["risk"], prerequisites=tags["prerequisites"], verification={}, status=Query.Status.READY,
        labels={"intake": case.channel, "what_went_wrong": notes.text, "step_depth": tags["step_depth"],
                "ambiguity": tags["ambiguity"], "risk_reasons": tags["risk_reasons"], "tagged_by": tags["tagged_by"]},
        gate_results={"anonymization": {**goal.findings, **{f"notes {k}": n for k, n in notes.findings.items()}}},
        status_reason=f"{Channel(case.channel).label}: a failed real-user case")
    query.set_apps([App.objects.get_or_create(package=p, defaults={"label": p})[0] for p in case.apps])
    return query, True


def import_cases(records) -> dict:
    """Validate every case, then write them in one transaction and send each through the Phase-1
    gate. {"created", "existing", "measuring", "results": [{key, created, state}]}."""
    cases = validate_cases(records)
    results = []
    with transaction.atomic():
        for case in cases:
            query, created = _write(case)
            entry = await_measurement(query, case.channel)
            results.append({"key": query.key, "created": created, "state": entry.state if entry else "held out"})
    publish("pools", pool="rl")
    return {"created": sum(r["created"] for r in results), "existing": sum(not r["created"] for r in results),
            "measuring": sum(r["state"] == RlQueryEntry.State.MEASURING for r in results), "results": results}
