"""Environment self-healing: a phone leaves service after repeated Env_ERRORs, not after one."""
from flywheel.rules.environment import ENV_ERRORS_BEFORE_QUARANTINE, quarantine_after_env_errors


def test_three_env_errors_in_a_row_quarantine_the_phone():
    assert ENV_ERRORS_BEFORE_QUARANTINE == 3
    assert quarantine_after_env_errors(["env_error", "env_error", "env_error"])
    assert quarantine_after_env_errors(["env_error", "env_error", "env_error", "true"])  # newest first


def test_fewer_or_interrupted_runs_of_env_errors_only_ask_for_a_check():
    assert not quarantine_after_env_errors([])
    assert not quarantine_after_env_errors(["env_error", "env_error"])
    assert not quarantine_after_env_errors(["env_error", "true", "env_error", "env_error"])
    assert not quarantine_after_env_errors(["false", "env_error", "env_error", "env_error"])
    assert quarantine_after_env_errors(["env_error", "env_error"], limit=2)
