"""Routes of the semi-automatic session (the queue and adjudication routes are in flywheel/urls.py)."""
from django.urls import path

from . import session_views as views

urlpatterns = [
    path("queue/take-next/", views.take_next, name="take-next"),
    path("session/<int:pk>/", views.session, name="session"),
    path("session/<int:pk>/execute/", views.execute, name="session-execute"),
    path("session/<int:pk>/heartbeat/", views.heartbeat, name="session-heartbeat"),
    path("session/<int:pk>/pause/", views.pause, name="session-pause"),
    path("session/<int:pk>/resume/", views.resume, name="session-resume"),
    path("session/<int:pk>/leave/", views.leave, name="session-leave"),
    path("session/<int:pk>/not-executable/", views.not_executable, name="session-not-executable"),
    path("session/<int:pk>/fix/", views.fix_reasoning, name="session-fix"),
]
