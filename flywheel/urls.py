"""The data engine's pages, by stage of the loop."""
from django.urls import include, path

from flywheel.collection import views as run_views
from flywheel.console import history as history_views
from flywheel.console import views as console_views
from flywheel.policies import views as endpoint_views
from flywheel.pools import badcase_views, handback_views
from flywheel.pools import views as pool_views
from flywheel.queries import views as query_views

urlpatterns = [
    path("", console_views.home, name="home"),
    path("healthz", console_views.healthz, name="healthz"),
    path("metrics", console_views.metrics, name="metrics"),
    path("dashboard/", console_views.dashboard, name="dashboard"),
    path("dashboard/counts/", console_views.dashboard_counts_fragment, name="dashboard-counts"),
    path("console-admin/", console_views.admin_home, name="admin-home"),
    path("history/", history_views.history_page, name="history"),
    path("tasks/", console_views.task_list, name="task-list"),
    path("tasks/ping/", console_views.task_ping, name="task-ping"),
    path("queries/", query_views.query_list, name="query-list"),
    path("queries/import/", query_views.query_import, name="query-import"),
    path("queries/export.jsonl", query_views.query_export, name="query-export"),
    path("ledger/", pool_views.ledger, name="ledger"),
    path("ledger/runs/<int:run_id>/", pool_views.ledger_run, name="ledger-run"),
    path("ledger/unattached/", pool_views.ledger_run, name="ledger-unattached"),
    path("pools/", pool_views.pools, name="pools"),
    path("pools/handback/", handback_views.handback_pool, name="handback-pool"),
    path("pools/rl/badcases/", badcase_views.badcase_upload, name="rl-badcase-upload"),
    path("runs/", run_views.run_list, name="run-list"),
    path("runs/count/", run_views.run_count, name="run-count"),
    path("runs/<int:run_id>/", run_views.run_detail, name="run-detail"),
    path("runs/<int:run_id>/cancel/", run_views.run_cancel, name="run-cancel"),
    path("runs/<int:run_id>/clarify/<int:step_id>/", run_views.run_clarify, name="run-clarify"),
    path("runs/external/", run_views.external_import, name="external-import"),
    path("endpoints/", endpoint_views.endpoint_list, name="endpoint-list"),
    path("endpoints/add/", endpoint_views.endpoint_add, name="endpoint-add"),
    path("endpoints/<int:pk>/check/", endpoint_views.endpoint_check, name="endpoint-check"),
    path("exploration/", include("flywheel.queries.exploration.urls")),
    path("gem/", include("flywheel.queries.gem.urls")),
    path("generation/", include("flywheel.queries.generation.urls")),
    path("trajectories/", include("flywheel.judging.trajectory_urls")),
    path("ecdm/rule-flags/", include("flywheel.repair.rule_flag_urls")),
    path("loops/", include("flywheel.repair.loop_urls")),
    path("ecdm/classes/", include("flywheel.repair.counterfactual_urls")),
    path("calibration/", include("flywheel.judging.calibration_urls")),
    path("judges/", include("flywheel.judging.judge_set_urls")),
]
