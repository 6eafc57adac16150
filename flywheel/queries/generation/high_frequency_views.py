"""High-frequency task data (Xiaomi-GUI-0 §3.1) on the generation page (managers and admins): the
most-used functions and their entry-point paths (GET, a panel the page loads), and the launch (POST)."""
from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.roles import MANAGER, role_required
from flywheel.queries.high_frequency import (
    LIMITS,
    create_high_frequency_queries,
    function_paths,
    functions_with_collected_paths,
    top_functions,
)

PREVIEW_TOP_K = 10
PREVIEW_PATHS = 3


def _preview() -> dict:
    rows = [{"leaf": leaf, "usage": usage, "trajectories": tried,
             "paths": len(function_paths(leaf, PREVIEW_PATHS))}
            for leaf, usage, tried in top_functions(PREVIEW_TOP_K)]
    return {"rows": rows, "collected": functions_with_collected_paths(), "limits": LIMITS,
            "preview_paths": PREVIEW_PATHS}


@role_required(MANAGER)
@require_http_methods(["GET", "POST"])
def high_frequency(request):
    if request.method == "GET":
        return render(request, "flywheel/_high_frequency.html", _preview())
    post = request.POST
    try:
        result = create_high_frequency_queries(top_k=post.get("top_k"), per_function=post.get("per_function"),
                                               apps=post.getlist("apps"), seed=post.get("seed") or 0,
                                               user=request.user)
    except ValueError as error:
        messages.error(request, f"Nothing was launched: {error}")
        return redirect("generation-list")
    for problem in result.problems[:5]:
        messages.info(request, problem)
    if result.run is None:
        messages.info(request, "No new high-frequency query: every path found is written already, "
                               "or no function has a second entry point.")
        return redirect("generation-list")
    messages.success(request, f"{result.run}: {result.created} high-frequency queries over "
                              f"{sum(bool(p.paths) for p in result.functions)} functions, "
                              f"{result.passed} passed the gates and wait in review.")
    return redirect("generation-detail", run_id=result.run.pk)
