"""Live panels that htmx polls: the pages of a collection, exploration or generation run, an
evolution loop, an evaluation and a training run.

A run's page wraps its live part in an element that polls the page's own URL every few seconds
while the run is live (templates/flywheel/_live_panel.html). Each view keeps its own access
checks and context, then answers through render_live: the whole page to a browser, the live panel
alone to htmx's poll, and 286 to a poll once the run is over, which tells htmx to stop polling
(htmx still swaps in that last answer, so the panel shows how the run ended).

Imports only Django, so every app above flywheel (annotation, benchmark, training, flywheel_demo)
may use it.
"""
from django.shortcuts import render

STOP_POLLING = 286  # htmx: "stop polling" (the answer is still swapped in)


def render_live(request, template, context, *, live, panel=None):
    """Render `template` (the page), or for an htmx request its live `panel` (a template); with no
    panel the poll gets the whole page too (the page's poll picks its part with hx-select). A
    poll of a run that is no longer live answers STOP_POLLING; a browser's request always 200."""
    polled = bool(request.headers.get("HX-Request"))
    status = 200 if live or not polled else STOP_POLLING
    return render(request, panel if polled and panel else template, context, status=status)
