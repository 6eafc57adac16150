from django.urls import path

from flywheel_demo import views

urlpatterns = [
    path("", views.demo_home, name="flywheel-demo"),
    path("start/", views.demo_start, name="flywheel-demo-start"),
    path("<int:demo_id>/", views.demo_detail, name="flywheel-demo-detail"),
    path("<int:demo_id>/live/", views.demo_live, name="flywheel-demo-live"),
    path("<int:demo_id>/cancel/", views.demo_cancel, name="flywheel-demo-cancel"),
    path("reports/<str:name>/", views.demo_report_file, name="flywheel-demo-report"),
]
