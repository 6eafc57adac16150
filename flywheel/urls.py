from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

import benchmark.api
import devices.api
import flywheel.api
import training.api
from annotation import adjudication_views
from annotation import views as annotation_views
from devices import thumbnail_views
from devices import views as device_views

from . import endpoint_views, pool_views, query_views, run_views, views

router = DefaultRouter()
for api_module in (flywheel.api, devices.api, benchmark.api, training.api):
    api_module.register(router)

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", views.healthz, name="healthz"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("dashboard/counts/", views.dashboard_counts_fragment, name="dashboard-counts"),
    path("console-admin/", views.admin_home, name="admin-home"),
    path("tasks/", views.task_list, name="task-list"),
    path("tasks/ping/", views.task_ping, name="task-ping"),
    path("queries/", query_views.query_list, name="query-list"),
    path("queries/import/", query_views.query_import, name="query-import"),
    path("queries/export.jsonl", query_views.query_export, name="query-export"),
    path("ledger/", pool_views.ledger, name="ledger"),
    path("ledger/runs/<int:run_id>/", pool_views.ledger_run, name="ledger-run"),
    path("ledger/unattached/", pool_views.ledger_run, name="ledger-unattached"),
    path("pools/", pool_views.pools, name="pools"),
    path("runs/", run_views.run_list, name="run-list"),
    path("runs/<int:run_id>/", run_views.run_detail, name="run-detail"),
    path("runs/<int:run_id>/cancel/", run_views.run_cancel, name="run-cancel"),
    path("runs/<int:run_id>/clarify/<int:step_id>/", run_views.run_clarify, name="run-clarify"),
    path("runs/external/", run_views.external_import, name="external-import"),
    path("queue/", annotation_views.my_queue, name="my-queue"),
    path("", include("annotation.urls")),  # the semi-automatic session
    path("endpoints/", endpoint_views.endpoint_list, name="endpoint-list"),
    path("endpoints/add/", endpoint_views.endpoint_add, name="endpoint-add"),
    path("endpoints/<int:pk>/check/", endpoint_views.endpoint_check, name="endpoint-check"),
    path("adjudication/", adjudication_views.adjudication_queue, name="adjudication-queue"),
    path("adjudication/next/", adjudication_views.adjudicate_next, name="adjudicate-next"),
    path("adjudication/<int:trajectory_id>/", adjudication_views.adjudicate, name="adjudicate"),
    path("adjudication/<int:trajectory_id>/decide/", adjudication_views.decide, name="adjudicate-decide"),
    path("adjudication/<int:trajectory_id>/release/", adjudication_views.release_claim,
         name="adjudicate-release"),
    path("devices/", device_views.device_list, name="device-list"),
    path("devices/discover/", device_views.device_discover, name="device-discover"),
    path("devices/<int:device_id>/thumbnail.jpg", thumbnail_views.device_thumbnail, name="device-thumbnail"),
    path("devices/<int:device_id>/", device_views.device_detail, name="device-detail"),
    path("devices/serial/<str:serial>/", device_views.device_by_serial, name="device-by-serial"),
    path("devices/<int:device_id>/take/", device_views.device_take_control, name="device-take"),
    path("devices/<int:device_id>/release/", device_views.device_release_control, name="device-release"),
    path("devices/<int:device_id>/reset/", device_views.device_reset, name="device-reset"),
    path("devices/<int:device_id>/quarantine/", device_views.device_quarantine, name="device-quarantine"),
    path("devices/<int:device_id>/readmit/", device_views.device_readmit, name="device-readmit"),
    path("api/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("admin/", admin.site.urls),
]

if not settings.STORAGES["default"]["BACKEND"].endswith("S3Storage"):
    # Screenshots are only ever shown to signed-in people; media goes through a role check.
    urlpatterns.append(path("media/<path:path>", views.media, name="media"))
