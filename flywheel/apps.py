from django.apps import AppConfig


class FlywheelConfig(AppConfig):
    name = "flywheel"
    verbose_name = "Data engine"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from devices.signals import lease_changed
        from flywheel.console.events import on_lease_changed

        lease_changed.connect(on_lease_changed, dispatch_uid="dashboard-lease-changed")
