"""The calibration page (§2.4.2): rounds, the thresholds they chose, agreement with the people
before and after, and the consensus rate per round, rising or not. Managers and adjudicators."""
from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import ADJUDICATOR, MANAGER, role_required
from flywheel.judging.calibration import calibrate, min_cases, rounds_table, system_agreement
from flywheel.judging.thresholds import DEFAULT_THRESHOLDS, active_thresholds, judge_examples
from flywheel.models import Adjudication

TREND_MARKS = {"rising": "▲ rising", "falling": "▼ falling", "level": "= level", "": ""}


def _percent(rate):
    return "–" if rate is None else f"{round(rate * 100)}%"


def _row(entry) -> dict:
    round_, after, before = entry["round"], entry["round"].agreement_after or {}, entry["round"].agreement_before or {}
    thresholds = round_.thresholds or {}
    return {
        "round": round_, "trend": entry["trend"], "trend_mark": TREND_MARKS.get(entry["trend"], ""),
        "rate": _percent(round_.consensus_rate),
        "share": (thresholds.get("B") or {}).get("milestone_share"),
        "loop": (thresholds.get("C") or {}).get("loop_length"),
        "detour": (thresholds.get("C") or {}).get("detour_factor"),
        "agreement": [(system, _percent((before.get(system) or {}).get("rate")),
                       _percent((after.get(system) or {}).get("rate"))) for system in ("B", "C")],
        "changed": after.get("changed") or [], "note": after.get("note", ""),
        "examples": len(round_.examples or []),
    }


@role_required(MANAGER, ADJUDICATOR)
def calibration(request):
    table = rounds_table()
    rows = [_row(entry) for entry in table["rows"]]
    live = table["live"]
    return render(request, "flywheel/calibration.html", {
        "rows": list(reversed(rows)), "live": {**live, "rate_text": _percent(live["rate"]),
                                               "trend_mark": TREND_MARKS.get(live["trend"], "")},
        "active": active_thresholds(), "defaults": DEFAULT_THRESHOLDS, "agreement": system_agreement(),
        "adjudicated": Adjudication.objects.exclude(decision="").values("trajectory_id").distinct().count(),
        "min_cases": min_cases(), "examples": judge_examples(),
    })


@role_required(MANAGER, ADJUDICATOR)
@require_POST
def calibration_run(request):
    """Calibrate now: quick enough to run in the request (at most CALIBRATION_MAX_CASES cases)."""
    try:
        round_ = calibrate(request.user)
    except ValueError as error:
        messages.error(request, f"No round recorded: {error}")
        return redirect("calibration")
    after = round_.agreement_after or {}
    changes = "; ".join(after.get("changed") or []) or "thresholds kept (the people's decisions do not ask for a change)"
    if after.get("note"):
        changes = after["note"]
    messages.success(request, f"Calibration round {round_.number} from {round_.adjudications_used} adjudicated "
                              f"trajectories: {changes}.")
    return redirect("calibration")
