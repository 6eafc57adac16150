"""Post-hoc four-dimensional tagging of external queries, checked against MobileGUI-VBench's own labels.

The file (150 real Chinese tasks, shared/data/mobilegui-vbench) is read as ground truth only; the
mapping from its fields to our dimensions is written down in flywheel/queries/external_tags.py.
"""
from pathlib import Path

import pytest

from flywheel.models import ModelVersion, Query
from flywheel.queries.external import ingest_external
from flywheel.queries.external_tags import tag_external, vbench_agreement, vbench_rows
from tests.flywheel.openai_stub import StubOpenAI

VBENCH = Path(__file__).resolve().parents[4] / "shared" / "data" / "mobilegui-vbench" / "MobileGUI-VBench.jsonl"
needs_vbench = pytest.mark.skipif(not VBENCH.exists(), reason="shared/data/mobilegui-vbench is not laid out here")


@needs_vbench
def test_tags_agree_with_vbench_labels_on_most_rows():
    result = vbench_agreement(VBENCH)
    print("vbench agreement:", {k: v for k, v in result.items() if k != "disagreements"})
    assert result["rows"] == 150
    assert result["overall"] > 0.5
    for dimension, fraction in result["per_dimension"].items():
        assert fraction > 0.75, (dimension, fraction, result["disagreements"][dimension])
    # Not a constant answer: both sides of each dimension occur in our tags.
    tags = [tag_external(row["query"]) for row in vbench_rows(VBENCH)]
    assert 30 < sum(bool(t["prerequisites"]) for t in tags) < 120
    assert 20 < sum(t["risk"] != "low" for t in tags) < 120
    assert 3 < sum(len(t["apps"]) >= 2 for t in tags) < 30
    assert set(result["distribution"]["ambiguity"]) >= {"L2", "L3"}


def test_english_and_chinese_rules():
    stepwise = tag_external("First open Settings, then tap Bluetooth, then turn it on")
    assert stepwise["ambiguity"] == "L1" and stepwise["risk"] == "low" and stepwise["apps"] == ["Settings"]
    buy = tag_external("Buy the cheapest headphones in ShopMart and pay with my bound card", apps=["ShopMart"])
    assert buy["risk"] == "high" and buy["apps"] == ["ShopMart"]
    assert any("bound card" in p for p in buy["prerequisites"])
    send = tag_external("Send the second photo in my Gallery to my friend Bob")
    assert send["risk"] == "medium" and len(send["prerequisites"]) >= 2
    assert tag_external("play something, that one from yesterday")["ambiguity"] == "L3"
    assert tag_external("Check the price of a flight to Paris")["risk"] == "low"
    order = tag_external("去淘宝购物车里把东西都结算了，再发给微信好友看看")
    assert order["risk"] == "high" and order["apps"] == ["淘宝", "微信"]
    assert "own data exists: 购物车" in order["prerequisites"]
    assert tag_external("先打开设置，然后点蓝牙，再把它打开")["ambiguity"] == "L1"
    # A longer task needs more steps than a single one.
    assert tag_external("在京东搜移动硬盘，筛选4T的，按销量排序，然后打开第二个")["step_depth"] > \
        tag_external("打开京东")["step_depth"]


@pytest.mark.django_db
def test_llm_tags_are_validated_and_garbage_falls_back():
    with StubOpenAI(model="tagger") as stub:
        version = ModelVersion.objects.create(name="tagger", kind="endpoint", endpoint_url=stub.url,
                                              served_model_name="tagger")
        stub.replies += [
            (200, stub.chat_reply('{"step_depth": 7, "ambiguity": "L3", "risk": "high", "risk_reasons": ["pays"], '
                                  '"prerequisites": ["bank card bound"]}'), 0),
            (200, stub.chat_reply('{"step_depth": "lots", "ambiguity": "L9", "risk": "catastrophic", '
                                  '"prerequisites": 3}'), 0),
            (200, stub.chat_reply("Sure! I cannot answer in JSON."), 0)]
        tags = tag_external("buy it", model_version=version)
        assert tags["tagged_by"] == "llm" and tags["step_depth"] == 7 and tags["prerequisites"] == ["bank card bound"]
        garbage = tag_external("Send a message to Bob", model_version=version)
        assert garbage["tagged_by"] == "rules" and garbage["risk"] == "medium" and "note" in garbage
        not_json = tag_external("Send a message to Bob", model_version=version)
        assert not_json["tagged_by"] == "rules" and "LLM tagging failed" in not_json["note"]
        assert "Task: buy it" in stub.requests[0]["messages"][1]["content"]


@needs_vbench
@pytest.mark.django_db
def test_vbench_is_ingested_tagged_and_marked_not_executable_here():
    rows = vbench_rows(VBENCH)
    records = [{"text": row["query"], "app_names": row["involved_apps"]} for row in rows]
    summary = ingest_external(records, catalog=({}, []))   # no phone has any of these apps
    assert summary["kept"] == 0
    queries = list(Query.objects.filter(source="external"))
    assert len(queries) == len({r["key"] for r in summary["results"]})
    for query in queries:
        assert query.status == "rejected"
        assert "not executable here: no registered phone has " in query.status_reason, query.status_reason
        assert {"step_depth", "ambiguity"} <= set(query.labels) and query.tier in ("L1", "L2", "L3")
        assert query.risk in ("low", "medium", "high") and isinstance(query.prerequisites, list)
    qq = next(q for q in queries if q.text.startswith("上QQ发个动态"))
    assert qq.status_reason.endswith("no registered phone has QQ, 相册")
    assert qq.risk == "medium" and qq.prerequisites
