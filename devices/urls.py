"""Phone pages (mounted under /devices/)."""
from django.urls import path

from devices import thumbnail_views, views

urlpatterns = [
    path("", views.device_list, name="device-list"),
    path("discover/", views.device_discover, name="device-discover"),
    path("<int:device_id>/thumbnail.jpg", thumbnail_views.device_thumbnail, name="device-thumbnail"),
    path("<int:device_id>/", views.device_detail, name="device-detail"),
    path("serial/<str:serial>/", views.device_by_serial, name="device-by-serial"),
    path("<int:device_id>/take/", views.device_take_control, name="device-take"),
    path("<int:device_id>/release/", views.device_release_control, name="device-release"),
    path("<int:device_id>/reset/", views.device_reset, name="device-reset"),
    path("<int:device_id>/quarantine/", views.device_quarantine, name="device-quarantine"),
    path("<int:device_id>/readmit/", views.device_readmit, name="device-readmit"),
]
