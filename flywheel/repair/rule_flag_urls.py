"""Flagged verification rules (§2.5.1 Level 2); the project includes these at "ecdm/rule-flags/"."""
from django.urls import path

from flywheel.repair import rule_flag_views

urlpatterns = [
    path("", rule_flag_views.rule_flags, name="rule-flags"),
    path("<int:flag_id>/resolve/", rule_flag_views.resolve, name="rule-flag-resolve"),
    path("<int:flag_id>/fix-spec/", rule_flag_views.fix_spec, name="rule-flag-fix-spec"),
]
