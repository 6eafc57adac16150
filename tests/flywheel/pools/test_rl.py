import pytest

from flywheel.models import App, Query, RlQueryEntry
from flywheel.pools.rl import admit, bank_phase0, record_rollouts

pytestmark = pytest.mark.django_db


def query(key, tier="L1", apps=("com.a",), steps=2):
    q = Query.objects.create(key=key, text=key, tier=tier, verification={},
                             known_path={"steps": [{"action": "click"}] * steps})
    q.set_apps([App.objects.get_or_create(package=p)[0] for p in apps])
    return q


def test_phase0_banks_queries_by_objective_difficulty():
    easy, hard, cross = query("easy"), query("hard", tier="L3"), query("cross", apps=("com.a", "com.b"))
    deep = query("deep", steps=12)
    assert bank_phase0() == 3
    assert not RlQueryEntry.objects.filter(query=easy).exists()
    assert RlQueryEntry.objects.get(query=hard).phase0_features == {"features": ["tier L3"]}
    assert "cross-app" in RlQueryEntry.objects.get(query=cross).phase0_features["features"]
    assert "depth 12" in RlQueryEntry.objects.get(query=deep).phase0_features["features"]
    assert bank_phase0() == 0  # idempotent


def test_metabolism_after_rollouts():
    entry = RlQueryEntry.objects.create(query=query("q"), state="active")
    assert record_rollouts(entry, None, ["true", "false", "true", "false"]) == "keep"
    assert entry.state == "active" and entry.success_rate == 0.5
    assert record_rollouts(entry, None, ["true"] * 4) == "retire" and entry.state == "retired"
    other = RlQueryEntry.objects.create(query=query("r"), state="active")
    assert record_rollouts(other, None, ["false"] * 4) == "leave" and other.state == "left"
    assert entry.rollouts.count() == 2


def test_the_uniform_gate_admits_only_the_middle_band():
    assert admit(query("mastered"), "badcase", ["true"] * 4) is None
    assert admit(query("hopeless"), "badcase", ["false"] * 4) is None
    entry = admit(query("boundary"), "badcase", ["true", "false", "false"])
    assert entry.state == "active" and entry.channel == "badcase" and entry.success_rate == 0.333
