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
        from flywheel.collection import handback, recollection
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
        # Every routed trajectory is read for the states a person must handle (§2.3.7 hand-back samples).
        trajectory_routed.connect(handback.on_trajectory_routed, dispatch_uid="handback-on-routed")
        _track_decisions()


def _track_decisions():
    """The data engine's rows that people's decisions write, in the one history (accounts/history.py):
    verdicts, adjudications, repairs, query reviews and endpoint changes, with the fields that are
    the decision (the machine's bookkeeping on the same rows stays out)."""
    from django.urls import reverse

    from accounts import history
    from flywheel.models import Adjudication, ModelVersion, Query, Repair, Trajectory, Verdict

    history.track(Trajectory, ["verdict", "destination"], on_create=False)
    history.track(Verdict, ["outcome", "safety_vetoed", "rationale"], about="trajectory")
    history.track(Adjudication, ["adjudicator", "decision", "note"], about="trajectory")
    history.track(Repair, ["status", "correction", "repaired_by", "human_fallback", "reason"], about="trajectory")
    history.track(Query, ["text", "tier", "subclass", "persona", "capabilities", "status", "status_reason",
                          "reviewed_by", "evaluation_only", "locked"], on_create=False)
    history.track(ModelVersion, ["endpoint_url", "served_model_name", "kind"])
    history.link(Trajectory, lambda pks: {pk: reverse("trajectory", args=[pk]) for pk in pks})
