"""Query pages: list, import (JSONL upload or paste) and export."""
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.roles import MANAGER, role_required
from flywheel.models import Query
from flywheel.queries.jsonl import QueryImportError, export_queries, import_queries
from flywheel.queries.uploads import ImportTooLarge, form_import_text


@role_required(MANAGER)
def query_list(request):
    queries = Query.objects.prefetch_related("app_links__app").order_by("key")
    tier = request.GET.get("tier")
    if tier:
        queries = queries.filter(tier=tier)
    page = Paginator(queries, 50).get_page(request.GET.get("page"))
    return render(request, "flywheel/query_list.html", {"page": page, "tier": tier})


@role_required(MANAGER)
@require_http_methods(["GET", "POST"])
def query_import(request):
    context = {}
    if request.method == "POST":
        try:
            result = import_queries(form_import_text(request))
        except ImportTooLarge as error:
            context["problems"] = [str(error)]
        except UnicodeDecodeError:
            context["problems"] = ["the file is not UTF-8 text"]
        except QueryImportError as error:
            context["problems"] = [str(problem) for problem in error.problems]
            context["text"] = request.POST.get("text", "")
        else:
            messages.success(request, f"Imported {result['total']} queries "
                                      f"({result['created']} new, {result['updated']} updated).")
            return redirect("query-list")
    return render(request, "flywheel/query_import.html", context)


@role_required(MANAGER)
def query_export(request):
    response = StreamingHttpResponse(export_queries(Query.objects.all()),
                                     content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="queries.jsonl"'
    return response
