from django.apps import AppConfig


class FlywheelConfig(AppConfig):
    name = "flywheel"
    verbose_name = "Data engine"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # The app config is the top floor (README "Layout"): it wires the stages together. Its
        # imports stay here, as modules that define or use models cannot load before the registry.
        from devices.signals import lease_changed
        from flywheel import tasks  # noqa: F401  (registers the engine's tasks by name for flywheel.jobs)
        from flywheel.collection import recollection
        from flywheel.events import on_lease_changed
        from flywheel.queries import coverage
        from flywheel.queries.gem import feedback as gem_feedback
        from flywheel.repair import ecdm
        from flywheel.signals import trajectory_routed

        lease_changed.connect(on_lease_changed, dispatch_uid="dashboard-lease-changed")

        # Listeners of routing run in this order, after commit (after routing checked the phone, and
        # before it metabolises an RL group, which so waits for an Env_ERROR's re-collection).
        trajectory_routed.connect(recollection.on_trajectory_routed, dispatch_uid="recollection-on-routed")
        # Coverage counts a leaf once a successful trajectory exercised it; an Env_ERROR marks the
        # GEM edge it broke on temporarily unreachable (§2.2.5, closed loop with the ECDM).
        trajectory_routed.connect(coverage.on_trajectory_routed, dispatch_uid="coverage-on-routed")
        trajectory_routed.connect(gem_feedback.on_trajectory_routed, dispatch_uid="gem-feedback-on-routed")
        # Every False / Env_ERROR verdict starts the ECDM: attribution, dispatch, repair (§2.5).
        trajectory_routed.connect(ecdm.on_trajectory_routed, dispatch_uid="ecdm-on-routed")
