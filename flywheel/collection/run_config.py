"""What a collection run may be launched with: one check for the run form and the API alike.

A launch is planned in one transaction (query × repeat work items), so its numbers are bounded
here, before anything is written.
"""
import math

from django.core.exceptions import ValidationError

from devices.anomaly_injection import KINDS as ANOMALY_KINDS
from flywheel.collection.launch import LINES
from flywheel.models import Source, Tier
from flywheel.rules.takeover import DEFAULT_AFTER, DEFAULT_STEPS, DEFAULT_THRESHOLD

# name: (type, default, lowest, highest)
CONFIG_FIELDS = {
    "phones": (int, 4, 1, 256),
    "repeats": (int, 1, 1, 100),
    "max_steps": (int, 25, 1, 500),
    "timeout_s": (float, 300.0, 10.0, 86400.0),
    # Teacher takeover (Xiaomi-GUI-0 §3.4), the automatic line only: after K low step scores in a
    # row (K = 0: never) the Teacher acts for at most M steps; a score below the threshold is low.
    "teacher_takeover_after": (int, DEFAULT_AFTER, 0, 50),
    "teacher_takeover_steps": (int, DEFAULT_STEPS, 1, 50),
    "teacher_takeover_threshold": (float, DEFAULT_THRESHOLD, 0.0, 1.0),
}
FILTER_LISTS = ("apps", "tiers", "tags", "keys")
MAX_QUERY_LIMIT = 1_000_000


def _number(name, value, kind):
    """int or float from JSON or a form field; booleans and fractional counts are malformed."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValidationError(f"a number is malformed: {name} = {value!r}")
    try:
        number = kind(str(value).strip())
    except ValueError:
        raise ValidationError(f"a number is malformed: {name} = {value!r}")
    if isinstance(number, float) and not math.isfinite(number):
        raise ValidationError(f"a number is malformed: {name} = {value!r}")
    return number


def clean_run_config(raw) -> dict:
    """The run's config with defaults filled in; ValidationError says what is wrong."""
    if not isinstance(raw, dict):
        raise ValidationError("config must be an object")
    unknown = set(raw) - set(CONFIG_FIELDS) - {"anomaly_rates"}
    if unknown:
        raise ValidationError(f"unknown config settings: {', '.join(sorted(map(str, unknown)))}")
    config = {}
    for name, (kind, default, lowest, highest) in CONFIG_FIELDS.items():
        value = raw.get(name)
        config[name] = default if value in (None, "") else _number(name, value, kind)
        if not lowest <= config[name] <= highest:
            raise ValidationError(f"{name} must be {lowest:g}–{highest:g}")
    rates = raw.get("anomaly_rates") or {}
    if not isinstance(rates, dict) or set(rates) - set(ANOMALY_KINDS):
        raise ValidationError(f"anomaly_rates maps kinds ({', '.join(ANOMALY_KINDS)}) to probabilities")
    config["anomaly_rates"] = {kind: _number(kind, rate, float) for kind, rate in rates.items()}
    if any(not 0 <= rate <= 1 for rate in config["anomaly_rates"].values()):
        raise ValidationError("anomaly rates are probabilities between 0 and 1")
    return config


def clean_query_filter(raw) -> dict:
    """Which queries a run takes (see launch.select_queries); unknown or malformed keys are refused."""
    if not isinstance(raw, dict):
        raise ValidationError("query_filter must be an object")
    unknown = set(raw) - {*FILTER_LISTS, "source", "pool", "single_app", "limit"}
    if unknown:
        raise ValidationError(f"unknown query_filter keys: {', '.join(sorted(map(str, unknown)))}")
    query_filter = {}
    for name in FILTER_LISTS:
        values = raw.get(name) or []
        if not isinstance(values, list) or not all(isinstance(v, str) and "\x00" not in v for v in values):
            raise ValidationError(f"query_filter.{name} must be a list of strings")
        if values:
            query_filter[name] = values
    if set(query_filter.get("tiers", [])) - set(Tier.values):
        raise ValidationError(f"query_filter.tiers are among {', '.join(Tier.values)}")
    if raw.get("source") not in (None, "", *Source.values):
        raise ValidationError(f"query_filter.source is one of {', '.join(Source.values)}")
    if raw.get("pool") not in (None, "", "rl"):
        raise ValidationError("query_filter.pool can only be 'rl'")
    if raw.get("limit") not in (None, ""):
        query_filter["limit"] = _number("limit", raw["limit"], int)
        if not 1 <= query_filter["limit"] <= MAX_QUERY_LIMIT:
            raise ValidationError(f"query_filter.limit must be 1–{MAX_QUERY_LIMIT}")
    if not isinstance(raw.get("single_app", False), bool):
        raise ValidationError("query_filter.single_app is true or false")
    query_filter.update({k: raw[k] for k in ("source", "pool", "single_app") if raw.get(k)})
    return query_filter


def clean_launch(line, query_filter, config):
    """(line, query filter, config) as a run may be launched with; ValidationError otherwise."""
    if line not in LINES:
        raise ValidationError(f"unknown line {line!r}: a run is one of {', '.join(LINES)}")
    return line, clean_query_filter(query_filter), clean_run_config(config)
