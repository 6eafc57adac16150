"""The trajectory page; the project includes these at "trajectories/"."""
from django.urls import path

from flywheel.judging import trajectory_page

urlpatterns = [
    path("<int:trajectory_id>/", trajectory_page.trajectory_page, name="trajectory"),
]
