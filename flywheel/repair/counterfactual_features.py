"""What a failure class is made of (§2.5.2): its member failures, the text of their failure
features (embedded to cluster and to pick the typical cases), the induced structured features
(triggering scenarios, target operation flows, the missing interaction intuition) and the
contexts the adversarial queries are grounded in.
"""
from __future__ import annotations

import logging
from collections import Counter

import numpy as np
from django.db.models import Q
from django.utils import timezone

from flywheel.blobs import read_blob
from flywheel.models import App, Attribution, FunctionNode, GemPage
from flywheel.policies.protocol import describe_action
from flywheel.queries.generation.planner import load_contexts
from flywheel.queries.vocabulary import CAPABILITIES
from flywheel.repair.counterfactual_drafts import missing_intuition, screen_context, screen_texts
from flywheel.screens.embedding import embed_cached
from flywheel.screens.page_identity import fingerprint, match_page, thresholds_for

log = logging.getLogger(__name__)
EARLIER_SCREENS = 4


def _blob_text(field) -> str:
    if not field:
        return ""
    try:
        return read_blob(field.name).decode("utf-8", "replace")
    except OSError:
        return ""


def _blob_bytes(field) -> bytes:
    if not field:
        return b""
    try:
        return read_blob(field.name)
    except OSError:
        return b""


def class_label(cause: str, capability: str) -> str:
    words = (cause or "unknown cause").replace("_", " ")
    return f"{words} in {CAPABILITIES[capability].lower()}" if capability in CAPABILITIES else words


def level3_detail(attribution) -> str:
    for entry in attribution.evidence or []:
        if isinstance(entry, dict) and entry.get("level") == 3 and entry.get("detail"):
            return str(entry["detail"])
    return ""


class Member:
    """One failed trajectory of the class: the step it went wrong at and the screens up to it."""

    def __init__(self, attribution: Attribution):
        self.attribution = attribution
        self.trajectory = attribution.trajectory
        self.query = self.trajectory.query
        steps = list(self.trajectory.steps.order_by("index"))
        bad = attribution.first_bad_step
        at = [s for s in steps if s.index == bad] or steps[-1:]
        self.step = at[0] if at else None
        self.step_index = self.step.index if self.step else None
        self.failing_xml = _blob_text(self.step.hierarchy) if self.step else ""
        earlier = [s for s in steps if self.step is not None and s.index < self.step.index][-EARLIER_SCREENS:]
        self.earlier_xml = [x for x in (_blob_text(s.hierarchy) for s in earlier) if x]
        packages = self.query.app_packages
        self.package = (self.step.foreground_package if self.step and self.step.foreground_package else "") \
            or (packages[0] if packages else "")
        self.similarity = None

    @property
    def action(self) -> dict | None:
        return (self.step.executed_action or self.step.proposed_action) if self.step else None

    def screenshot(self) -> bytes:
        return _blob_bytes(self.step.screenshot) if self.step else b""


def failure_text(attribution: Attribution, member: Member | None = None) -> str:
    """The failure's features in words: cause, capability, task, the wrong action and the screen
    it was taken on, the attribution's own finding. This text is what is embedded."""
    member = member or Member(attribution)
    parts = [class_label(attribution.cause, attribution.capability), f"task: {member.query.text}"]
    if member.action:
        parts.append(f"wrong step: {describe_action(member.action)}")
    shown = screen_texts(member.failing_xml)[:12]
    if shown:
        parts.append("on a screen showing: " + ", ".join(shown))
    detail = level3_detail(attribution)
    if detail:
        parts.append(detail)
    return "; ".join(parts)[:1500]


def embed_texts(texts: list[str]) -> np.ndarray:
    return embed_cached(texts)


def members_of(failure_class, limit: int = 40) -> list[Member]:
    """The class's failed trajectories (newest attribution each), the most typical first: nearest
    to the centroid of the failure-feature embeddings."""
    members, seen = [], set()
    rows = (Attribution.objects.filter(failure_class=failure_class).select_related("trajectory__query")
            .order_by("-created_at", "-pk"))
    for attribution in rows[: limit * 3]:
        if attribution.trajectory_id in seen:
            continue
        seen.add(attribution.trajectory_id)
        members.append(Member(attribution))
        if len(members) >= limit:
            break
    if members and failure_class.centroid:
        centroid = np.asarray(failure_class.centroid, dtype=np.float32)
        vectors = embed_texts([failure_text(m.attribution, m) for m in members])
        for member, vector in zip(members, vectors):
            member.similarity = round(float(vector @ centroid / (np.linalg.norm(centroid) or 1.0)), 3)
        members.sort(key=lambda m: -(m.similarity or 0))
    return members


def gem_page_for(member: Member) -> GemPage | None:
    """The GEM page the failure happened on: same-page identity (pHash + layout), else the app's
    page sharing most of the screen's texts (at least half)."""
    if not member.package or not member.failing_xml:
        return None
    pages = list(GemPage.objects.filter(app__package=member.package).select_related("app"))
    if not pages:
        return None
    candidate = fingerprint(member.screenshot(), member.failing_xml)
    page = match_page(candidate, pages, thresholds_for(pages[0].app))
    if page is not None:
        return page
    shown = set(screen_texts(member.failing_xml))
    best, best_overlap = None, 0.0
    for page in pages:
        texts = set(page.texts or [])
        overlap = len(shown & texts) / len(shown | texts) if shown | texts else 0.0
        if overlap > best_overlap:
            best, best_overlap = page, overlap
    return best if best_overlap >= 0.5 else None


def induce_features(failure_class, members: list[Member]) -> dict:
    """The class's structured features (§2.5.2): where it is triggered, which operation flows it
    breaks, and the interaction intuition the model is missing."""
    scenarios, pages = [], []
    for member in members[:8]:
        page = gem_page_for(member)
        if page is not None and page.pk not in pages:
            pages.append(page.pk)
        if len(scenarios) < 5:
            shown = screen_texts(member.failing_xml)
            scenarios.append({
                "trajectory": member.trajectory.pk, "query": member.query.pk, "task": member.query.text[:200],
                "app": member.package, "step": member.step_index, "screen": shown[0] if shown else "",
                "page": page.pk if page else None, "page_name": (page.title or page.name) if page else "",
                "wrong_action": describe_action(member.action) if member.action else "",
                "detail": level3_detail(member.attribution)[:300], "similarity": member.similarity})
    flows, seen = [], set()
    for member in members:
        if member.query.pk in seen or len(flows) >= 5:
            continue
        seen.add(member.query.pk)
        flows.append({"query": member.query.pk, "text": member.query.text[:200], "apps": member.query.app_packages,
                      "functions": [link.function.label or link.function.path for link in
                                    member.query.function_links.select_related("function")],
                      "path": ((member.query.known_path or {}).get("summary") or "")[:200]})
    apps = [p for p, _n in Counter(m.package for m in members if m.package).most_common()]
    return {"label": class_label(failure_class.cause, failure_class.capability), "cause": failure_class.cause,
            "capability": failure_class.capability,
            "missing_intuition": missing_intuition(failure_class.cause, failure_class.capability),
            "triggering_scenarios": scenarios, "target_flows": flows, "apps": apps, "pages": pages,
            "members": len(members), "induced_at": timezone.now().isoformat()}


def _grounding(member: Member, failure_class) -> dict:
    return {"source_trajectory": member.trajectory.pk, "source_attribution": member.attribution.pk,
            "failure_class": failure_class.key,
            "functions": list(member.query.function_links.values_list("function_id", flat=True))}


def grounded_contexts(failure_class, members: list[Member], features: dict) -> tuple[list, str]:
    """(context, grounding) pairs, most relevant first, and where they come from ("gem" or
    "trajectory screens"). GEM: the leaves of the class's apps, those on the pages the failures
    happened on first, then the failing queries' functions. No GEM for these apps: the failing
    trajectories' own screens."""
    packages = [p for p in features.get("apps") or [] if p]
    contexts = load_contexts(packages) if packages else []
    if contexts:
        focus_pages = set(features.get("pages") or [])
        focus_functions = set(FunctionNode.objects.filter(
            Q(queries__in=[m.query.pk for m in members])).values_list("id", flat=True))
        contexts.sort(key=lambda c: (c.page_id not in focus_pages, c.leaf_id not in focus_functions))
        pairs = []
        for ctx in contexts:
            member = next((m for m in members if m.package == ctx.package), members[0])
            pairs.append((ctx, _grounding(member, failure_class)))
        return pairs, "gem"
    labels = dict(App.objects.filter(package__in=[m.package for m in members]).values_list("package", "label"))
    pairs = []
    for member in members:
        function_labels = [link.function.label for link in member.query.function_links.select_related("function")
                           if link.function.label]
        ctx = screen_context(member.package, labels.get(member.package) or member.package,
                             function_labels[0] if function_labels else "", member.failing_xml, member.earlier_xml)
        if ctx is not None:
            pairs.append((ctx, _grounding(member, failure_class)))
    return pairs, "trajectory screens"
