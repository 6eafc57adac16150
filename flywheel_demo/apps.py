from django.apps import AppConfig


class FlywheelDemoConfig(AppConfig):
    name = "flywheel_demo"
    verbose_name = "Flywheel demo (issue #16)"
    default_auto_field = "django.db.models.BigAutoField"
