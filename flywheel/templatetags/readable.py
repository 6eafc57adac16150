"""Filters that put stored data in words on pages meant for people.

    {{ package|app_name }}                 com.sim.translator -> Translator (the App's label)
    {{ when|moment }}                      a datetime or an ISO string -> 4 Dec 2026, 14:05 (site time zone)
    {% for label, text in config|settings_items %}   {"max_steps": 25} -> ("Maximum steps", "25")

A run's filter and configuration, an exploration's problems and a step's app are stored as JSON
and ids; a page shows them as words (no dict, no ISO timestamp, no package id). Filters never
raise: a page renders whatever an old row holds.
"""
from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.dateparse import parse_datetime

from flywheel.models import App
from flywheel.rules.app_names import display_name

register = template.Library()

NOTHING = "—"

# Settings whose key alone does not say it well; any other key is its words ("max_depth" -> "Max depth").
LABELS = {
    "apps": "Apps", "tiers": "Tiers", "tags": "Tags", "keys": "Queries", "pool": "Pool", "source": "Source",
    "single_app": "One app only", "limit": "At most", "phones": "Phones", "repeats": "Repeats per query",
    "max_steps": "Maximum steps", "timeout_s": "Timeout per trajectory (s)",
    "anomaly_rates": "Anomaly injection (per step)", "max_seconds": "Time budget (s)",
    "max_pages": "Pages per app at most", "max_depth": "Depth at most", "lr": "Learning rate",
    "learning_rate": "Learning rate", "batch_size": "Batch size", "epochs": "Epochs",
}
APP_KEYS = {"apps", "app", "package", "packages"}


@register.filter
def app_name(package):
    """An app's label for its package id (one indexed read), or a name made from the id."""
    if not isinstance(package, str) or not package:
        return package or ""
    label = App.objects.filter(package=package).values_list("label", flat=True).first()
    return display_name(package, label or "")


@register.filter
def moment(value):
    """A datetime (or an ISO string, as JSON fields keep them) in the site's time zone, as people read it."""
    if isinstance(value, str):
        parsed = parse_datetime(value)
        if parsed is None:
            return value
        value = parsed
    if not isinstance(value, datetime):
        return value if value not in (None, "") else NOTHING
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.utc)
    return date_format(timezone.localtime(value), "j M Y, H:i")


def _label(key) -> str:
    key = str(key)
    if key in LABELS:
        return LABELS[key]
    words = key.replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def _text(value, key="") -> str:
    if value is None or value == "" or value == [] or value == {}:
        return NOTHING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v, key) for v in value)
    if isinstance(value, dict):  # {"popup": 0.1, "crash": 0.05} -> "popup 0.1; crash 0.05"
        return "; ".join(_label(k).lower() + ("" if v in (None, "", [], {}) else f" {_text(v, str(k))}")
                         for k, v in value.items())
    if key in APP_KEYS and isinstance(value, str):
        return app_name(value)
    return str(value)


@register.filter
def settings_items(mapping):
    """[(label, text)] for a settings dict (a run's filter or configuration); [] for anything else."""
    if not isinstance(mapping, dict):
        return []
    return [(_label(key), _text(value, str(key))) for key, value in mapping.items()]


@register.filter
def words(value):
    """Any stored value in words: {"path": "medium", "steps": 7} -> "path medium; steps 7"."""
    return _text(value)


@register.filter
def spaced(identifier):
    """A stored identifier in words: "constraint_violation" -> "constraint violation"."""
    return str(identifier).replace("_", " ") if identifier not in (None, "") else NOTHING
