"""What admins did to people's accounts: who did what to whom, and when (the People page's log)."""
from django.conf import settings
from django.db import models


class PeopleEvent(models.Model):
    class Action(models.TextChoices):
        INVITED = "invited", "Invited"
        ROLES_SET = "roles_set", "Roles set"
        DEACTIVATED = "deactivated", "Deactivated"
        REACTIVATED = "reactivated", "Reactivated"
        PASSWORD_LINK = "password_link", "New password link"

    action = models.CharField(max_length=20, choices=Action)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    # The account may be deleted later (Django admin); the name stays in the record.
    target = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    target_username = models.CharField(max_length=150)
    roles = models.JSONField(default=list, blank=True, help_text="the roles after the action")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"{self.actor} {self.get_action_display().lower()} {self.target_username}"
