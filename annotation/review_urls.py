"""The query review page (/query-review/): generated queries approved, edited or rejected."""
from django.urls import path

from annotation import review_views

urlpatterns = [
    path("", review_views.query_review, name="query-review"),
    path("act/", review_views.review_action, name="query-review-act"),
    path("<int:pk>/row/", review_views.review_row, name="query-review-row"),
    path("<int:pk>/edit/", review_views.review_edit, name="query-review-edit"),
]
