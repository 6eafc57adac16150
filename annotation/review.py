"""Query review: a person approves, edits or rejects generated queries before collection draws them.

Generated queries wait with status "review" (docs: contracts, flywheel/queries/generation/runs.py).
Approving makes a query "ready" — the only status collection runs draw — and clears the draft flag
of its verification spec: the person has confirmed it. Every change happens in one transaction and
records who reviewed and when. A row someone else changed since the page showed it (its
`updated_at`, the version the page sent back, differs, or its status moved on) is reported as a
conflict and left as it is, never overwritten silently.
"""
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.roles import ANNOTATOR, MANAGER, has_role
from flywheel.models import Query
from flywheel.pools.rl import offer_generated
from flywheel.queries.vocabulary import vocabulary_errors

DEFAULT_REJECT_REASON = "rejected in review"
# What each action may start from: a person may overrule a gate's rejection by approving (or by
# editing, which puts the query back in review); only what waits for review can be rejected.
APPROVABLE = (Query.Status.REVIEW, Query.Status.REJECTED)
REJECTABLE = (Query.Status.REVIEW,)
EDITABLE = (Query.Status.REVIEW, Query.Status.REJECTED)
EDITABLE_FIELDS = ("text", "tier", "subclass", "persona", "capabilities", "risk")


def may_review_queries(user) -> bool:
    """Managers and admins; annotators only where settings.QUERY_REVIEW_ALLOW_ANNOTATORS."""
    if has_role(user, MANAGER):
        return True
    return bool(settings.QUERY_REVIEW_ALLOW_ANNOTATORS) and has_role(user, ANNOTATOR)


def version_of(query) -> str:
    """The version a page shows and sends back: the row's last change."""
    return query.updated_at.isoformat() if query.updated_at else ""


@dataclass
class ReviewOutcome:
    changed: list[int] = field(default_factory=list)
    conflicts: dict[int, str] = field(default_factory=dict)  # query id -> why it was left alone

    def summary(self, verb: str) -> str:
        parts = [f"{len(self.changed)} {'query' if len(self.changed) == 1 else 'queries'} {verb}."]
        parts += [f"#{pk} not changed: {why}." for pk, why in self.conflicts.items()]
        return " ".join(parts)


class ReviewConflict(Exception):
    """The query changed since the page showed it (or cannot take this action)."""


def _changed_by_someone(query) -> str:
    who = f" by {query.reviewed_by}" if query.reviewed_by_id else ""
    when = f" at {timezone.localtime(query.reviewed_at):%Y-%m-%d %H:%M}" if query.reviewed_at else ""
    return f"{who}{when}"


def _conflict(query, version, allowed) -> str:
    """Why `query` must not be changed now ('' when it may)."""
    if query.status not in allowed:
        return f"it is already {query.get_status_display().lower()}{_changed_by_someone(query)}"
    if version and version != version_of(query):
        return (f"it was changed{_changed_by_someone(query)} after you opened the page; "
                "reload to see it")
    return ""


def _locked(versions: dict[int, str]):
    return {query.pk: query for query in
            Query.objects.select_for_update(of=("self",)).select_related("reviewed_by").filter(pk__in=list(versions))}


def _apply(versions: dict[int, str], allowed, change) -> ReviewOutcome:
    """Run `change(query)` on every query of `versions` ({id: version shown, '' for none}) that
    may take it, in one transaction; report the rest."""
    outcome = ReviewOutcome()
    with transaction.atomic():
        queries = _locked(versions)
        for pk in versions:
            query = queries.get(pk)
            if query is None:
                outcome.conflicts[pk] = "it no longer exists"
                continue
            why = _conflict(query, versions[pk], allowed)
            if why:
                outcome.conflicts[pk] = why
                continue
            change(query)
            query.save()  # updated_at moves on: the next stale page is caught
            outcome.changed.append(pk)
    return outcome


def approve(versions: dict[int, str], user) -> ReviewOutcome:
    """Approved queries become "ready" (what collection draws); their verification is confirmed.
    Under Phase 1 the RL-pool candidates among them go to the pool's uniform gate (§2.4.3): they
    wait for the current policy's measurement, never enter unmeasured."""
    now = timezone.now()

    def change(query):
        query.status, query.status_reason = Query.Status.READY, ""
        query.verification = {k: v for k, v in (query.verification or {}).items() if k != "draft"}
        query.reviewed_by, query.reviewed_at = user, now

    with transaction.atomic():
        outcome = _apply(versions, APPROVABLE, change)
        offer_generated(outcome.changed)
    return outcome


def reject(versions: dict[int, str], user, reason: str = "") -> ReviewOutcome:
    reason = (reason or "").strip()[:500] or DEFAULT_REJECT_REASON
    now = timezone.now()

    def change(query):
        query.status, query.status_reason = Query.Status.REJECTED, reason
        query.reviewed_by, query.reviewed_at = user, now

    return _apply(versions, REJECTABLE, change)


def edit_errors(changes: dict) -> dict[str, list[str]]:
    """Field -> problems of an edit's labels against the vocabularies ({} when fine)."""
    per_field = {
        "subclass": vocabulary_errors(changes.get("tier", ""), changes.get("subclass", ""), "", []),
        "persona": vocabulary_errors("", "", changes.get("persona", ""), []),
        "capabilities": vocabulary_errors("", "", "", changes.get("capabilities") or []),
    }
    return {name: messages for name, messages in per_field.items() if messages}


def edit(query_id: int, version: str, user, changes: dict) -> Query:
    """Change a query's text and labels; it stays (or goes back) in review until approved.
    Raises ReviewConflict when it changed since `version`, ValueError when a label is unknown."""
    changes = {name: changes[name] for name in EDITABLE_FIELDS if name in changes}
    with transaction.atomic():
        query = _locked({query_id: version}).get(query_id)
        if query is None:
            raise ReviewConflict("it no longer exists")
        why = _conflict(query, version, EDITABLE)
        if why:
            raise ReviewConflict(why)
        if query.locked and any(name in Query.LOCKED_FIELDS and changes[name] != getattr(query, name)
                                for name in changes):
            raise ReviewConflict("it is frozen into a benchmark version: what it asks and how it is judged "
                                 "stay as they are (derive a new benchmark version to change it)")
        merged = {name: changes.get(name, getattr(query, name)) for name in EDITABLE_FIELDS}
        problems = edit_errors(merged)
        if problems:
            raise ValueError("; ".join(m for messages in problems.values() for m in messages))
        for name, value in merged.items():
            setattr(query, name, value)
        query.status, query.status_reason = Query.Status.REVIEW, ""
        query.reviewed_by, query.reviewed_at = user, timezone.now()
        query.save()
    return query
