from django.apps import AppConfig


class FlywheelConfig(AppConfig):
    name = "flywheel"
    verbose_name = "Data engine"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from devices.signals import lease_changed
        from flywheel.console.events import on_lease_changed

        lease_changed.connect(on_lease_changed, dispatch_uid="dashboard-lease-changed")

        from flywheel.queries import coverage, gem_feedback
        from flywheel.signals import trajectory_routed

        # Coverage counts a leaf once a successful trajectory exercised it; an Env_ERROR marks the
        # GEM edge it broke on temporarily unreachable (§2.2.5, closed loop with the ECDM).
        trajectory_routed.connect(coverage.on_trajectory_routed, dispatch_uid="coverage-on-routed")
        trajectory_routed.connect(gem_feedback.on_trajectory_routed, dispatch_uid="gem-feedback-on-routed")

        from flywheel.repair import ecdm

        # Every False / Env_ERROR verdict starts the ECDM: attribution, dispatch, repair (§2.5).
        trajectory_routed.connect(ecdm.on_trajectory_routed, dispatch_uid="ecdm-on-routed")
