"""Flagged verification rules (§2.5.1 Level 2): a rule that failed a correctly completed
trajectory. A manager fixes the query's verification spec and marks the flag fixed (the trajectory
is evaluated again), or finds the rule was right and dismisses it (the trajectory is attributed
again without the verifier check and goes on through the ECDM)."""
import json

from django.contrib import messages
from django.db import transaction
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import MANAGER, role_required
from flywheel.models import Query, RuleFlag
from flywheel.queries.query_format import verification_problems
from flywheel.repair import ecdm

REVIEWABLE = (Query.Status.REVIEW, Query.Status.READY, Query.Status.REJECTED)  # statuses query review lists


@role_required(MANAGER)
def rule_flags(request):
    open_flags = list(RuleFlag.objects.filter(status=RuleFlag.Status.OPEN)
                      .select_related("query", "trajectory").order_by("created_at", "pk"))
    for flag in open_flags:
        flag.rule_text = json.dumps(flag.rule, ensure_ascii=False, sort_keys=True)
        flag.spec_text = json.dumps(flag.query.verification, ensure_ascii=False, indent=2, sort_keys=True)
    resolved = (RuleFlag.objects.exclude(status=RuleFlag.Status.OPEN)
                .select_related("query", "trajectory", "resolved_by").order_by("-resolved_at", "-pk")[:50])
    return render(request, "flywheel/rule_flags.html", {
        "open_flags": open_flags, "resolved": resolved, "reviewable": [s.value for s in REVIEWABLE]})


@role_required(MANAGER)
@require_POST
def resolve(request, flag_id):
    """Fixed (fixed=1): the trajectory re-enters evaluation. Rule was right (fixed=0): dismissed."""
    flag = get_object_or_404(RuleFlag, pk=flag_id)
    choice = request.POST.get("fixed")
    if choice not in ("0", "1"):
        messages.error(request, "Say whether the rule was fixed or was right.")
    elif flag.status != RuleFlag.Status.OPEN:
        messages.info(request, f"That flag was already resolved ({flag.get_status_display().lower()}).")
    else:
        try:
            flag = ecdm.resolve_rule_flag(flag, request.user, fixed=choice == "1")
        except ValueError as error:
            messages.error(request, f"Not resolved: {error}")
        else:
            what = ("re-evaluated after the fix" if choice == "1"
                    else "dismissed; the trajectory is attributed again without the verifier check")
            messages.success(request, f"Rule flag on trajectory #{flag.trajectory_id}: {what}.")
    return redirect("rule-flags")


@role_required(MANAGER)
@require_POST
def fix_spec(request, flag_id):
    """Write the corrected verification spec (validated against the published schema), then
    resolve the flag as fixed: the trajectory is evaluated again under the new rule."""
    flag = get_object_or_404(RuleFlag.objects.select_related("query"), pk=flag_id)
    if flag.status != RuleFlag.Status.OPEN:
        messages.info(request, f"That flag was already resolved ({flag.get_status_display().lower()}).")
        return redirect("rule-flags")
    try:
        spec = json.loads(request.POST.get("verification") or "")
    except ValueError as error:
        messages.error(request, f"The spec is not JSON: {error}. Nothing was changed.")
        return redirect("rule-flags")
    problems = verification_problems(spec)
    if problems:
        listed = "; ".join(f"verification.{field}: {message}" for field, message in problems[:5])
        messages.error(request, f"The spec was not saved: {listed}.")
        return redirect("rule-flags")
    try:
        with transaction.atomic():
            Query.objects.filter(pk=flag.query_id).update(verification=spec)
            flag = ecdm.resolve_rule_flag(flag, request.user, fixed=True)
    except ValueError as error:
        messages.error(request, f"Not resolved: {error}")
        return redirect("rule-flags")
    messages.success(request, f"Spec of {flag.query.key} saved; trajectory #{flag.trajectory_id} is evaluated again.")
    return redirect("rule-flags")
