"""The benchmark's pages; the project includes these at "benchmarks/"."""
from django.urls import path

from benchmark import dashboard_views, run_views, views

urlpatterns = [
    path("", views.benchmark_list, name="benchmark-list"),
    path("derive/", views.benchmark_derive, name="benchmark-derive"),
    path("import-farm/", views.benchmark_import_farm, name="benchmark-import-farm"),
    path("<int:benchmark_id>/", views.benchmark_detail, name="benchmark-detail"),
    path("<int:benchmark_id>/generate/", views.benchmark_generate, name="benchmark-generate"),
    path("<int:benchmark_id>/freeze/", views.benchmark_freeze, name="benchmark-freeze"),
    path("<int:benchmark_id>/evaluate/", views.benchmark_evaluate, name="benchmark-evaluate"),
    path("<int:benchmark_id>/items.jsonl", views.benchmark_items_export, name="benchmark-items-export"),
    path("<int:benchmark_id>/review/", views.benchmark_review, name="benchmark-review"),
    path("<int:benchmark_id>/review/<int:item_id>/", views.benchmark_review_item, name="benchmark-review-item"),
    path("runs/", run_views.eval_run_list, name="eval-run-list"),
    path("runs/<int:eval_run_id>/", run_views.eval_run_detail, name="eval-run-detail"),
    path("runs/<int:eval_run_id>/cancel/", run_views.eval_run_cancel, name="eval-run-cancel"),
    path("runs/<int:eval_run_id>/resume/", run_views.eval_run_resume, name="eval-run-resume"),
    path("runs/<int:eval_run_id>/rejudge/", run_views.eval_run_rejudge, name="eval-run-rejudge"),
    path("runs/<int:eval_run_id>/results.jsonl", run_views.eval_run_results_export, name="eval-run-results"),
    path("runs/<int:eval_run_id>/summary.csv", run_views.eval_run_summary_export, name="eval-run-summary"),
    path("expert/", run_views.expert_queue, name="benchmark-expert-queue"),
    path("expert/<int:result_id>/", run_views.expert_verdict, name="benchmark-expert-verdict"),
    path("dashboards/", dashboard_views.dashboards, name="benchmark-dashboards"),
]
