"""The root URLconf: only the project knows every app, and it only includes their own routes."""
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

import annotation.api
import benchmark.api
import devices.api
import flywheel.api
import training.api

router = DefaultRouter()
for api_module in (flywheel.api, devices.api, annotation.api, benchmark.api, training.api):
    api_module.register(router)


def favicon(request):
    """Browsers ask for /favicon.ico whatever a page links (the API docs, a raw /metrics): the
    console's icon, public like every static file."""
    return redirect(static("favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("accounts.urls")),
    path("", include("flywheel.urls")),
    path("", include("annotation.urls")),
    path("devices/", include("devices.urls")),
    path("benchmarks/", include("benchmark.urls")),
    path("training/", include("training.urls")),
    path("flywheel-demo/", include("flywheel_demo.urls")),
    path("api/env/", include("training.env_urls")),
    path("api/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("admin/", admin.site.urls),
]

if not settings.STORAGES["default"]["BACKEND"].endswith("S3Storage"):
    # Screenshots are only ever shown to signed-in people; media goes through a role check.
    urlpatterns.append(path("", include("flywheel.media_urls")))
