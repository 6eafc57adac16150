"""Re-checking GEM edges whose cool-down has passed (§2.2.5 feedback, second half).

On an idle phone that has the app: lease it, reset it to its baseline, replay the known path to
the edge's source page and the edge's action (every input through the safety audit, as the
executor always does), then look at the screen: is it the edge's target page? A working edge is
restored (and the queries held for it with it); a broken one waits longer. With no idle phone the
edge stays due: it is never restored blindly. Phone I/O runs outside transactions; each outcome is
written in one.
"""
from __future__ import annotations

import logging
import time

from django.db import transaction
from django.utils import timezone

from devices import leases
from devices.executor import ActionExecutor
from devices.models import Device
from devices.observation import observe
from devices.phone import PhoneConnection, PhoneUnavailable
from devices.profiles import satisfies
from devices.reset import ResetError, reset_phone
from devices.uitree import all_nodes, page_text, parse_hierarchy
from flywheel.models import Edge, GemPage
from flywheel.queries.gem import graph as gem
from flywheel.queries.gem.feedback import cooldown_for, restore_edge
from flywheel.screens.page_identity import fingerprint, same_page, thresholds_for
from flywheel.screens.selectors import find_target

log = logging.getLogger(__name__)
SETTLE_S = 0.3          # after each input, before reading the next screen
RECHECKS_PER_CALL = 10  # beat calls again every 120 s
HOME_KINDS = (GemPage.Kind.LAUNCHER,)


class RecheckFailed(Exception):
    """The edge did not do what the GEM says (target not on screen, another page, a block)."""


def due_edges(now=None):
    return (Edge.objects.filter(reachable=False, unreachable_until__lte=now or timezone.now())
            .select_related("source__app", "target__app").order_by("unreachable_until"))


def recheck_due_edges(limit: int = RECHECKS_PER_CALL) -> dict:
    """Re-check edges whose unreachable_until has passed; {"restored", "failed", "left_due"} ids."""
    summary = {"restored": [], "failed": [], "left_due": []}
    for edge in list(due_edges()[:limit]):
        outcome = recheck_edge(edge)
        summary[{"restored": "restored", "failed": "failed"}.get(outcome, "left_due")].append(edge.pk)
    return summary


def replay_plan(edge: Edge) -> tuple[list[str], list[dict]] | None:
    """(apps the phone needs, the steps from a fresh reset through the edge's action), or None
    when the GEM knows no way to the edge's source page."""
    source = edge.source
    apps = {page.app.package for page in (edge.source, edge.target) if not page.app.is_system}
    if source.kind in HOME_KINDS:
        return sorted(apps), [edge.action]  # the reset ends on Home
    path = gem.path_to_page(source.pk)
    if path is None:
        return None
    return sorted(apps), [{"action": "open", "app": source.app.package}, *gem.known_path_steps(path), edge.action]


def recheck_edge(edge: Edge) -> str:
    """'restored', 'failed', or why it was left due ('no phone', 'no path', 'phone lost')."""
    plan = replay_plan(edge)
    if plan is None:
        return _record_failure(edge, "no known path to its source page")
    apps, steps = plan
    holder = f"gem:recheck:edge:{edge.pk}"
    lease = device = None
    for candidate in Device.objects.filter(status=Device.Status.IDLE).order_by("pk"):
        if satisfies(candidate.readiness_profile, {"apps": apps}):
            try:
                lease, device = leases.acquire(candidate, holder=holder, purpose="gem re-check"), candidate
                break
            except leases.LeaseRefused:
                continue
    if lease is None:
        log.info("GEM edge %s: no idle phone with %s; left due", edge.pk, apps)
        return "no phone"
    try:
        phone = PhoneConnection.for_device(device)
        reset_phone(phone, apps=apps, baseline=device.baseline)
        replay(phone, steps, device=device, lease=lease, holder=holder)
        observation = observe(phone)
        shown = _shows_page(observation, edge.target)
    except RecheckFailed as error:
        return _record_failure(edge, str(error))
    except (PhoneUnavailable, ResetError) as error:
        log.warning("GEM edge %s: re-check on %s interrupted: %s", edge.pk, device.serial, error)
        return "phone lost"
    finally:
        leases.release(lease)
    if not shown:
        return _record_failure(edge, f"the screen after the action is not page #{edge.target_id} "
                                     f"({edge.target.title or edge.target.name})")
    restore_edge(edge)
    log.info("GEM edge %s re-checked on %s and restored", edge.pk, device.serial)
    return "restored"


def replay(phone, steps: list[dict], *, device=None, lease=None, holder=""):
    """Run known-path steps (targets resolved in the current hierarchy) through the executor."""
    executor = ActionExecutor(phone, holder=holder, device=device, lease=lease)
    for number, step in enumerate(steps, 1):
        action = concrete_action(step, phone.dump_hierarchy())
        if action is None:
            raise RecheckFailed(f"step {number}: target {step.get('target')} is not on the screen")
        result = executor.execute(action)
        if result.phone_lost:
            raise PhoneUnavailable(result.error)
        if not result.ok:
            raise RecheckFailed(f"step {number} ({step.get('action')}): "
                                f"{'blocked by the safety audit: ' + result.reason if result.blocked else result.error}")
        time.sleep(SETTLE_S)


def concrete_action(step: dict, hierarchy_xml: str) -> dict | None:
    """A known-path step with its `target` selector turned into the element's pixel point
    (docs/query-format.md), as the offline policy does when following a known path."""
    target = step.get("target")
    action = {key: value for key, value in step.items() if key != "target"}
    if not target:
        return action
    node = find_target(all_nodes(parse_hierarchy(hierarchy_xml)), target)
    if node is None:
        return None
    return {**action, "point": list(node.center), "coords": "pixel"}


def _shows_page(observation, page: GemPage) -> bool:
    """Same page by fingerprint when the GEM page has one, else by activity and title."""
    if page.layout_signature or page.phash:
        return same_page(fingerprint(observation.png, observation.hierarchy_xml), page, thresholds_for(page.app))
    activity = observation.foreground.get("activity", "")
    if page.activity and not activity.endswith(page.activity):
        return False
    return not page.title or page.title in page_text(parse_hierarchy(observation.hierarchy_xml))


def _record_failure(edge: Edge, why: str) -> str:
    now = timezone.now()
    with transaction.atomic():
        locked = Edge.objects.select_for_update().get(pk=edge.pk)
        locked.failures += 1
        locked.unreachable_until = now + cooldown_for(locked.failures)
        locked.unreachable_reason = f"re-check failed: {why}"[:2000]
        locked.last_checked_at = now
        locked.save(update_fields=["failures", "unreachable_until", "unreachable_reason", "last_checked_at"])
        transaction.on_commit(gem.invalidate)
    log.info("GEM edge %s: re-check failed (%s); next try after %s", edge.pk, why, locked.unreachable_until)
    return "failed"
