"""The benchmark's pages; the project includes these at "benchmarks/"."""
from django.urls import path

from benchmark import views, views_dashboards, views_runs

urlpatterns = [
    path("", views.benchmark_list, name="benchmark-list"),
    path("derive/", views.benchmark_derive, name="benchmark-derive"),
    path("<int:benchmark_id>/", views.benchmark_detail, name="benchmark-detail"),
    path("<int:benchmark_id>/generate/", views.benchmark_generate, name="benchmark-generate"),
    path("<int:benchmark_id>/freeze/", views.benchmark_freeze, name="benchmark-freeze"),
    path("<int:benchmark_id>/evaluate/", views.benchmark_evaluate, name="benchmark-evaluate"),
    path("<int:benchmark_id>/items.jsonl", views.benchmark_items_export, name="benchmark-items-export"),
    path("<int:benchmark_id>/review/", views.benchmark_review, name="benchmark-review"),
    path("<int:benchmark_id>/review/<int:item_id>/", views.benchmark_review_item, name="benchmark-review-item"),
    path("runs/", views_runs.eval_run_list, name="eval-run-list"),
    path("runs/<int:eval_run_id>/", views_runs.eval_run_detail, name="eval-run-detail"),
    path("runs/<int:eval_run_id>/cancel/", views_runs.eval_run_cancel, name="eval-run-cancel"),
    path("runs/<int:eval_run_id>/resume/", views_runs.eval_run_resume, name="eval-run-resume"),
    path("runs/<int:eval_run_id>/rejudge/", views_runs.eval_run_rejudge, name="eval-run-rejudge"),
    path("runs/<int:eval_run_id>/results.jsonl", views_runs.eval_run_results_export, name="eval-run-results"),
    path("runs/<int:eval_run_id>/summary.csv", views_runs.eval_run_summary_export, name="eval-run-summary"),
    path("expert/", views_runs.expert_queue, name="benchmark-expert-queue"),
    path("expert/<int:result_id>/", views_runs.expert_verdict, name="benchmark-expert-verdict"),
    path("dashboards/", views_dashboards.dashboards, name="benchmark-dashboards"),
]
