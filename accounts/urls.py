"""People (the console admin's page) and the one-time password links it hands out."""
from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from accounts import views

urlpatterns = [
    path("console-admin/people/", views.people_list, name="people"),
    path("console-admin/people/invite/", views.people_invite, name="people-invite"),
    path("console-admin/people/<int:user_id>/roles/", views.people_roles, name="people-roles"),
    path("console-admin/people/<int:user_id>/active/", views.people_active, name="people-active"),
    path("console-admin/people/<int:user_id>/password/", views.people_password, name="people-password"),
    path("password/<uidb64>/<token>/", auth_views.PasswordResetConfirmView.as_view(
        success_url=reverse_lazy("password_reset_complete")), name="password_reset_confirm"),
    path("password/done/", auth_views.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
]
