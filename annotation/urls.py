"""Every human work queue: the annotator's queue and session, the adjudication queue."""
from django.urls import include, path

from annotation import adjudication_views, session_views, views

urlpatterns = [
    path("queue/", views.my_queue, name="my-queue"),
    path("queue/take-next/", session_views.take_next, name="take-next"),
    path("session/<int:pk>/", session_views.session, name="session"),
    path("session/<int:pk>/prepare/", session_views.session_prepare, name="session-prepare"),
    path("session/<int:pk>/execute/", session_views.execute, name="session-execute"),
    path("session/<int:pk>/heartbeat/", session_views.heartbeat, name="session-heartbeat"),
    path("session/<int:pk>/pause/", session_views.pause, name="session-pause"),
    path("session/<int:pk>/resume/", session_views.resume, name="session-resume"),
    path("session/<int:pk>/leave/", session_views.leave, name="session-leave"),
    path("session/<int:pk>/not-executable/", session_views.not_executable, name="session-not-executable"),
    path("session/<int:pk>/fix/", session_views.fix_reasoning, name="session-fix"),
    path("adjudication/", adjudication_views.adjudication_queue, name="adjudication-queue"),
    path("adjudication/next/", adjudication_views.adjudicate_next, name="adjudicate-next"),
    path("adjudication/<int:trajectory_id>/", adjudication_views.adjudicate, name="adjudicate"),
    path("adjudication/<int:trajectory_id>/claim/", adjudication_views.claim_and_judge, name="adjudicate-claim"),
    path("adjudication/<int:trajectory_id>/decide/", adjudication_views.decide, name="adjudicate-decide"),
    path("adjudication/<int:trajectory_id>/release/", adjudication_views.release_claim,
         name="adjudicate-release"),
    path("function-trees/", include("annotation.tree_urls")),
    path("query-review/", include("annotation.review_urls")),
    path("repairs/", include("annotation.repair_urls")),
]
