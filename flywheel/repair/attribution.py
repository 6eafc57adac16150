"""Cascaded failure attribution over the database (§2.5.1), and what each conclusion sets off.

    attribute(trajectory, skip_verifier=False) -> Attribution
        reads the stored steps (screens through flywheel.blobs, anomaly records, actions and
        reasoning), the stop reason, the latest vote of each system, a person's decision and the
        query's spec; runs Level 1 → 2 → 3 (flywheel.rules.attribution); persists ONE Attribution
        with the evidence of every level examined and features["facts"] for ECDM dispatch; then:
          Level 1 on a False trajectory → re-routed as Env_ERROR (self-healing and re-collection);
          Level 2 task-spec defect       → the query goes back to review with the reason;
          Level 2 verifier defect        → a RuleFlag on the failing rule (fixed, then re-judged).
A person's answer to a RuleFlag is the ECDM's (flywheel/repair/ecdm.py resolve_rule_flag).

A trajectory with no steps, no screenshots or unreadable dumps is still attributed: the evidence
says what was missing, and nothing raises.

Perception drift is checked against the pixels too: a tapping step whose [Decision] names an
element, or whose dump is blind (web view, canvas), has its frame's OCR words passed to the rules
(in screen pixels, as the action's points); a frame or an OCR that fails is noted as missing.
"""
import hashlib
import io
import logging

from django.db import transaction
from PIL import Image, UnidentifiedImageError

from devices.uitree import page_text, parse_hierarchy
from flywheel.blobs import read_blob
from flywheel.judging.destinations import route_trajectory
from flywheel.models import Attribution, Edge, GemPage, Outcome, Query, RuleFlag, Trajectory
from flywheel.queries.gem import graph as gem
from flywheel.rules.attribution import VERIFIER_DEFECT, Conclusion, cascaded_attribution
from flywheel.rules.attribution_trace import SeenWord, StepFacts, TaskSpec, Trace, VoteFacts, decision_label
from flywheel.screens.blindness import hierarchy_is_blind
from flywheel.screens.ocr import OcrFailed, ocr_words
from flywheel.screens.page_identity import fingerprint, layout_of, match_page, thresholds_for
from flywheel.screens.selectors import find

log = logging.getLogger(__name__)


# -- reading a trajectory ----------------------------------------------------------------------------

def _blob_text(field) -> str | None:
    """The stored dump's text; '' when none was stored, None when it cannot be read."""
    if not field:
        return ""
    try:
        return read_blob(field.name).decode("utf-8", "replace")
    except (OSError, ValueError):
        log.warning("attribution: blob %s is missing", field.name)
        return None


def page_key(xml: str) -> str:
    """A page fingerprint for loop detection: the layout's structure and the screen's texts (the
    same layout with another product's title is another place to be)."""
    if not xml:
        return ""
    signature, _shape, _count = layout_of(xml)
    if not signature:
        return ""
    texts = page_text(parse_hierarchy(xml))
    return f"{signature[:16]}:{hashlib.sha1(texts.encode('utf-8')).hexdigest()[:12]}"


def milestones_on(xml: str, milestones: list) -> tuple:
    held = []
    for number, milestone in enumerate(milestones):
        try:
            if xml and isinstance(milestone, dict) and find(xml, milestone):
                held.append(number)
        except Exception:  # a malformed selector holds nowhere
            continue
    return tuple(held)


def gem_distances(query: Query, screens: dict) -> dict:
    """step index -> GEM edges from the step's page to the query's target page (the target of its
    GEM path's last edge); empty without a GEM path or when the GEM cannot answer."""
    path = [e for e in query.gem_path or [] if isinstance(e, int)]
    if not path:
        return {}
    try:
        target = Edge.objects.filter(pk=path[-1]).values_list("target_id", flat=True).first()
        pages = list(GemPage.objects.filter(app__package__in=query.app_packages).select_related("app"))
        if target is None or not pages:
            return {}
        graph, thresholds, distances = gem.gem_graph(), thresholds_for(pages[0].app), {}
        for index, (xml, screenshot) in screens.items():
            if not xml:
                continue
            page = match_page(fingerprint(b"", xml), pages, thresholds)
            if page is None and screenshot:
                try:
                    page = match_page(fingerprint(read_blob(screenshot), xml), pages, thresholds)
                except OSError:
                    page = None
            route = gem.shortest_path(page.pk, target, graph) if page is not None else None
            distances[index] = len(route) if route is not None else None
        return distances
    except Exception:  # the GEM is a hint: attribution goes on without it
        log.exception("attribution: GEM distances of query %s not computed", query.pk)
        return {}


POINTED = ("click", "double_click", "long_press", "type")


def wants_pixels(step, blind: bool) -> bool:
    """A tap whose claim the pixels can check: its [Decision] names an element, or the dump is blind."""
    action = step.executed_action if isinstance(step.executed_action, dict) else {}
    if action.get("action") not in POINTED or not isinstance(action.get("point"), (list, tuple)):
        return False
    return blind or bool(decision_label(step.cot if isinstance(step.cot, dict) else {}))


def frame_words(step, missing: list) -> tuple | None:
    """The OCR words of the step's frame, boxes scaled to the screen's pixels; None when not read
    (no frame, tesseract not installed, or a failure noted in `missing`)."""
    if not step.screenshot:
        return None
    try:
        png = read_blob(step.screenshot.name)
        words = ocr_words(png)
        size = Image.open(io.BytesIO(png)).size
    except (OSError, UnidentifiedImageError):
        missing.append(f"step {step.index}: screenshot unreadable")
        return None
    except OcrFailed as error:
        missing.append(f"step {step.index}: {error}")
        return None
    if words is None:
        return None
    screen = (step.timings or {}).get("screen") if isinstance(step.timings, dict) else None
    try:
        sx, sy = int(screen[0]) / size[0], int(screen[1]) / size[1]
    except (TypeError, ValueError, IndexError, ZeroDivisionError):
        sx = sy = 1.0  # no recorded screen size: the frame is the screen
    return tuple(SeenWord(w.text, (round(w.left * sx), round(w.top * sy), round((w.left + w.width) * sx),
                                   round((w.top + w.height) * sy))) for w in words)


def latest_votes(trajectory: Trajectory) -> list[VoteFacts]:
    latest = {}
    for vote in trajectory.votes.order_by("-created_at", "-pk"):
        latest.setdefault(vote.system, vote)
    return [VoteFacts(v.system, v.vote, v.rationale or "", v.details if isinstance(v.details, dict) else {})
            for _system, v in sorted(latest.items())]


def trace_of(trajectory: Trajectory) -> tuple[Trace, list[str]]:
    """The rules' view of a stored trajectory, and what could not be read."""
    query = trajectory.query
    verification = query.verification if isinstance(query.verification, dict) else {}
    milestones = list(verification.get("milestones") or [])
    stored = list(trajectory.steps.order_by("index"))
    dumps, screens, missing = {}, {}, []
    for step in stored:
        text = _blob_text(step.hierarchy)
        if text is None:
            missing.append(f"step {step.index}: dump unreadable")
        elif not text:
            missing.append(f"step {step.index}: no dump")
        elif not parse_hierarchy(text):
            missing.append(f"step {step.index}: dump does not parse")
            text = ""
        if not step.screenshot:
            missing.append(f"step {step.index}: no screenshot")
        dumps[step.index] = text or ""
        screens[step.index] = (text or "", step.screenshot.name if step.screenshot else "")
    distances = gem_distances(query, screens)
    blind = {s.index: bool(dumps[s.index]) and hierarchy_is_blind(dumps[s.index]) for s in stored}
    words = {s.index: frame_words(s, missing) for s in stored if wants_pixels(s, blind[s.index])}
    steps = tuple(StepFacts(
        index=s.index, hierarchy=dumps[s.index],
        action=s.executed_action if isinstance(s.executed_action, dict) else None,
        cot=s.cot if isinstance(s.cot, dict) else {}, package=s.foreground_package or "",
        anomaly=s.anomaly if isinstance(s.anomaly, dict) else None, page=page_key(dumps[s.index]),
        milestones=milestones_on(dumps[s.index], milestones), gem_distance=distances.get(s.index),
        screenshot=bool(s.screenshot), answer=str((s.edit or {}).get("clarify_answer") or "")
        if isinstance(s.edit, dict) else "", words=words.get(s.index), blind=blind[s.index]) for s in stored)
    votes = latest_votes(trajectory)
    verdict = trajectory.verdicts.order_by("-created_at", "-pk").first()
    safety = ""
    if verdict is not None and verdict.safety_vetoed:
        safety = next((v.safety_violation for v in trajectory.votes.order_by("-created_at", "-pk")
                       if v.safety_violation), "") or verdict.rationale.removeprefix("safety veto: ")
    decided = (trajectory.adjudications.exclude(decision="").order_by("-decided_at", "-pk")
               .values_list("decision", flat=True).first()) or ""
    spec = TaskSpec(text=query.text or "", tier=query.tier or "", verification=verification,
                    known_path=query.known_path if isinstance(query.known_path, dict) else None,
                    capabilities=tuple(c for c in query.capabilities or () if isinstance(c, str)))
    trace = Trace(steps=steps, spec=spec, stop_kind=trajectory.stop_kind, stop_reason=trajectory.stop_reason or "",
                  votes=tuple(votes), verdict=trajectory.verdict, adjudication=decided, safety=safety)
    if not stored:
        missing.append("no steps")
    return trace, missing


# -- attributing -------------------------------------------------------------------------------------

def attribute(trajectory: Trajectory, skip_verifier: bool = False) -> Attribution:
    """Run the cascade and persist its one Attribution; the conclusion's effects happen in the
    same transaction (what touches the world runs after commit)."""
    trace, missing = trace_of(trajectory)
    conclusion = cascaded_attribution(trace, skip_verifier=skip_verifier)
    finding = conclusion.finding
    evidence = [dict(entry) for entry in conclusion.evidence]
    if missing:
        shown = "; ".join(missing[:8]) + (f"; and {len(missing) - 8} more" if len(missing) > 8 else "")
        evidence[0]["missing"] = missing
        evidence[0]["detail"] = f"{evidence[0]['detail']} (missing: {shown})"
    features = {**finding.features, "facts": conclusion.facts()}
    if missing:
        features["missing"] = missing
    with transaction.atomic():
        attribution = Attribution.objects.create(
            trajectory=trajectory, level=finding.level, cause=finding.cause[:60],
            first_bad_step=finding.first_bad_step, features=features, evidence=evidence,
            capability=conclusion.capability[:40], owner=conclusion.owner)
        apply_conclusion(trajectory, conclusion)
    return attribution


def apply_conclusion(trajectory: Trajectory, conclusion: Conclusion) -> None:
    """Every level's conclusion has an owner (§2.5.1): environment maintenance, query review,
    evaluation revision; Level 3 goes on to the ECDM (the caller dispatches it)."""
    finding = conclusion.finding
    if finding.level == 1:
        if trajectory.verdict == Outcome.FALSE:
            route_trajectory(trajectory, Outcome.ENV_ERROR,
                             reason=f"attribution Level 1 ({finding.cause}): {finding.detail}"[:2000])
        return
    if finding.level != 2:
        return
    if finding.cause == VERIFIER_DEFECT:
        system = str(finding.features.get("system") or "")[:1]
        flag = RuleFlag.objects.filter(trajectory=trajectory, system=system, status=RuleFlag.Status.OPEN).first()
        if flag is None:
            RuleFlag.objects.create(query_id=trajectory.query_id, trajectory=trajectory, system=system,
                                    rule=finding.features.get("rule") or {}, reason=finding.detail)
        return
    Query.objects.filter(pk=trajectory.query_id).exclude(status=Query.Status.REJECTED).update(
        status=Query.Status.REVIEW, status_reason=f"attribution: {finding.detail}")
