"""The query review page: generated queries with their labels and gate results, approved, edited or
rejected one by one (htmx, in place) or in bulk, from the keyboard (static/js/review_keys.js)."""
from functools import wraps
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotation import review
from flywheel.models import App, GenerationRun, Query, Risk, Source, Tier
from flywheel.queries import vocabulary
from flywheel.rules.numbers import row_id

PAGE_SIZE = 50
STATUSES = (Query.Status.REVIEW, Query.Status.READY, Query.Status.REJECTED)
FILTERS = ("tier", "subclass", "persona", "capability", "app", "status", "source", "run", "q")
GATES = ("gate1", "gate2", "gate3")
SHOWN_LABELS = ("relation", "complexity", "step_depth", "ambiguity")


def reviewer_required(view):
    """Managers and admins; annotators when settings.QUERY_REVIEW_ALLOW_ANNOTATORS."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not review.may_review_queries(request.user):
            raise PermissionDenied("Query review is for managers (annotators when the site allows it).")
        return view(request, *args, **kwargs)

    return wrapped


class QueryEditForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))
    tier = forms.ChoiceField(choices=Tier.choices)
    subclass = forms.ChoiceField(choices=[("", "—"), *vocabulary.subclass_choices()], required=False)
    persona = forms.ChoiceField(choices=[("", "—"), *vocabulary.persona_choices()], required=False)
    capabilities = forms.MultipleChoiceField(choices=vocabulary.capability_choices(), required=False,
                                             widget=forms.CheckboxSelectMultiple)
    risk = forms.ChoiceField(choices=Risk.choices)

    def clean_text(self):
        text = self.cleaned_data["text"].strip()
        if not text:
            raise forms.ValidationError("The query needs some text.")
        return text

    def clean(self):
        cleaned = super().clean()
        for name, problems in review.edit_errors(cleaned).items():
            for problem in problems:
                self.add_error(name, problem)
        return cleaned


def _filters(params) -> dict:
    chosen = {name: params.get(name, "").strip() for name in FILTERS}
    if chosen["status"] not in STATUSES:
        chosen["status"] = Query.Status.REVIEW
    if row_id(chosen["run"]) is None:
        chosen["run"] = ""
    return chosen


def filtered_queries(chosen: dict):
    queries = Query.objects.filter(status=chosen["status"])
    for name in ("tier", "subclass", "persona", "source"):
        if chosen[name]:
            queries = queries.filter(**{name: chosen[name]})
    if chosen["capability"]:
        # JSON list membership by the quoted name, portable across SQLite and PostgreSQL.
        queries = queries.filter(capabilities__icontains=f'"{chosen["capability"]}"')
    if chosen["app"]:
        queries = queries.filter(app_links__app__package=chosen["app"])
    if chosen["run"]:
        queries = queries.filter(generation_run_id=int(chosen["run"]))
    if chosen["q"]:
        queries = queries.filter(Q(text__icontains=chosen["q"]) | Q(key__icontains=chosen["q"]))
    return queries.distinct().order_by("created_at", "pk")


def _gate_badges(gate_results: dict) -> list[dict]:
    badges = []
    for name in GATES:
        result = (gate_results or {}).get(name)
        if not isinstance(result, dict):
            continue
        details = {k: v for k, v in result.items() if k not in ("passed", "reason")}
        title = "; ".join(f"{k}: {v}" for k, v in details.items())
        badges.append({"name": name.replace("gate", "G"), "passed": bool(result.get("passed")),
                       "reason": result.get("reason", ""),
                       "title": " — ".join(part for part in (result.get("reason", ""), title) if part)})
    return badges


def _describe_check(check: dict) -> str:
    kind = check.get("check", "?")
    subject = {"settings": f"{check.get('namespace', 'global')}/{check.get('key', '')}",
               "getprop": check.get("key", ""), "content": check.get("uri", ""), "file": check.get("path", ""),
               "foreground": check.get("package", ""), "screen": ""}.get(kind, "")
    predicates = [f"{name} {check[name]!r}" for name in ("equals", "contains", "not_contains", "matches", "exists")
                  if name in check]
    return " ".join(part for part in (kind, subject, *predicates) if part)


def _verification_summary(verification: dict) -> dict:
    verification = verification or {}
    terminal = [_describe_check(c) for c in verification.get("terminal") or [] if isinstance(c, dict)]
    milestones = [m.get("name") or m.get("text") or m.get("text_contains") or m.get("resource_id") or "?"
                  for m in verification.get("milestones") or [] if isinstance(m, dict)]
    return {"draft": bool(verification.get("draft")), "terminal": terminal, "milestones": milestones}


def row_context(query, note="", error=False) -> dict:
    return {
        "query": query, "version": review.version_of(query), "note": note, "error": error,
        "subclass_label": vocabulary.TIER_SUBCLASSES.get(query.tier, {}).get(query.subclass, query.subclass),
        "persona_label": vocabulary.PERSONAS.get(query.persona, (query.persona,))[0],
        "capability_labels": [vocabulary.CAPABILITIES.get(c, c) for c in query.capabilities or []],
        "apps": [link.app.package for link in query.app_links.all()],
        "functions": [f"{link.function.app.package}:{link.function.path}" for link in query.function_links.all()],
        "gates": _gate_badges(query.gate_results),
        "verification": _verification_summary(query.verification),
        "path_steps": len((query.known_path or {}).get("steps") or []),
        "labels": [(name, query.labels[name]) for name in SHOWN_LABELS if name in (query.labels or {})],
    }


def _with_rows(queries):
    return queries.select_related("generation_run", "reviewed_by").prefetch_related(
        "app_links__app", "function_links__function__app")


@reviewer_required
def query_review(request):
    chosen = _filters(request.GET)
    page = Paginator(_with_rows(filtered_queries(chosen)), PAGE_SIZE).get_page(request.GET.get("page"))
    filter_query = urlencode({k: v for k, v in chosen.items() if v})
    return render(request, "annotation/query_review.html", {
        "page": page, "rows": [row_context(q) for q in page.object_list], "chosen": chosen,
        "filter_query": filter_query, "waiting": Query.objects.filter(status=Query.Status.REVIEW).count(),
        "tiers": Tier.choices, "subclasses": vocabulary.subclass_choices(),
        "personas": vocabulary.persona_choices(), "capabilities": vocabulary.capability_choices(),
        "statuses": [(s.value, s.label) for s in STATUSES], "sources": Source.choices,
        "apps": App.objects.filter(queries__isnull=False).distinct().order_by("package")
                           .values_list("package", flat=True),
        "runs": GenerationRun.objects.order_by("-created_at")[:50],
        "default_reason": review.DEFAULT_REJECT_REASON,
    })


def _render_row(request, query_id, note="", error=False):
    query = get_object_or_404(_with_rows(Query.objects.all()), pk=query_id)
    return render(request, "annotation/query_review_row.html", {"row": row_context(query, note, error)})


def _ids(request) -> list[int]:
    return list(dict.fromkeys(n for n in map(row_id, request.POST.getlist("ids")) if n is not None))


@reviewer_required
@require_POST
def review_action(request):
    """Approve or reject the posted ids ({version_<id>} says what the page showed of each)."""
    action, ids = request.POST.get("action", ""), _ids(request)
    if action not in ("approve", "reject"):
        messages.error(request, "Unknown review action.")
    elif not ids:
        messages.error(request, "Select at least one query first (x selects the current row).")
    else:
        versions = {pk: request.POST.get(f"version_{pk}", "") for pk in ids}
        if action == "approve":
            outcome, verb = review.approve(versions, request.user), "approved"
        else:
            outcome, verb = review.reject(versions, request.user, request.POST.get("reason", "")), "rejected"
        if request.headers.get("HX-Request") and len(ids) == 1:  # one row, swapped in place
            if ids[0] in outcome.changed:
                return _render_row(request, ids[0], note=verb)
            return _render_row(request, ids[0], note=f"Not {verb}: {outcome.conflicts[ids[0]]}.", error=True)
        (messages.warning if outcome.conflicts else messages.success)(request, outcome.summary(verb))
    return redirect(_back_to_list(request.POST.get("back", "")))


def _back_to_list(back: str) -> str:
    """The list with the filters and page the person was on (only those: nothing else travels)."""
    shown = QueryDict(back)
    kept = urlencode({name: shown[name] for name in (*FILTERS, "page") if shown.get(name)})
    return reverse("query-review") + (f"?{kept}" if kept else "")


@reviewer_required
def review_row(request, pk):
    return _render_row(request, pk)


@reviewer_required
@require_http_methods(["GET", "POST"])
def review_edit(request, pk):
    """The inline edit form (htmx swaps the row); saving keeps the query in review."""
    query = get_object_or_404(_with_rows(Query.objects.all()), pk=pk)
    if request.method == "GET":
        form = QueryEditForm(initial={name: getattr(query, name) for name in review.EDITABLE_FIELDS})
        return render(request, "annotation/query_review_edit.html",
                      {"query": query, "form": form, "version": review.version_of(query)})
    form = QueryEditForm(request.POST)
    version = request.POST.get("version", "")
    if not form.is_valid():
        return render(request, "annotation/query_review_edit.html",
                      {"query": query, "form": form, "version": version})
    try:
        review.edit(pk, version, request.user, form.cleaned_data)
    except review.ReviewConflict as conflict:
        return _render_row(request, pk, note=f"Not saved: {conflict}.", error=True)
    except ValueError as problem:  # a race with a vocabulary change; the form checked the rest
        form.add_error(None, str(problem))
        return render(request, "annotation/query_review_edit.html",
                      {"query": query, "form": form, "version": version})
    if not request.headers.get("HX-Request"):
        messages.success(request, f"Query #{pk} saved; it waits for approval.")
        return redirect("query-review")
    return _render_row(request, pk, note="saved; approve it when it reads right")
