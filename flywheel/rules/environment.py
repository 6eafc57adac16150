"""Environment self-healing (§2.4.2, Env_ERROR branch): when does a phone leave service?"""

from flywheel.rules.htsc import ENV_ERROR

ENV_ERRORS_BEFORE_QUARANTINE = 3


def quarantine_after_env_errors(recent_verdicts: list[str], limit: int = ENV_ERRORS_BEFORE_QUARANTINE) -> bool:
    """The phone's most recent judged trajectories, newest first: `limit` Env_ERRORs in a row mean
    the phone, not the tasks, is broken (one Env_ERROR only asks for a health check)."""
    recent = list(recent_verdicts[:limit])
    return len(recent) == limit and all(verdict == ENV_ERROR for verdict in recent)
