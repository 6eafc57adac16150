"""The demo report's figures as people read them: "12.5% (7.1–18.3%)", "+8.2 points", "p = 0.03"."""
from django import template

register = template.Library()


@register.filter
def rate(value) -> str:
    """A fraction as a percentage with one decimal; "—" where there is none."""
    return "—" if not isinstance(value, (int, float)) else f"{100 * value:.1f}%"


@register.filter
def sr_interval(row) -> str:
    """A row's SR with its 95% interval where it has one (an older report has none)."""
    if not isinstance(row, dict) or not isinstance(row.get("sr"), (int, float)):
        return "—"
    interval = row.get("ci95") or [None, None]
    if not all(isinstance(bound, (int, float)) for bound in interval):
        return rate(row["sr"])
    return f"{rate(row['sr'])} ({100 * interval[0]:.1f}–{rate(interval[1])})"


@register.filter
def signed(value) -> str:
    """Points with their sign: "+8.2"."""
    return "—" if not isinstance(value, (int, float)) else f"{value:+.1f}"


@register.filter
def p_value(value) -> str:
    if not isinstance(value, (int, float)):
        return "—"
    return "p < 0.001" if value < 0.001 else f"p = {value:.2g}"
