from django.apps import AppConfig


class FlywheelConfig(AppConfig):
    name = "flywheel"
    verbose_name = "Data engine"
    default_auto_field = "django.db.models.BigAutoField"
