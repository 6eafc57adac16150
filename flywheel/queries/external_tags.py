"""Post-hoc four-dimensional tagging of external queries (§2.2.6), and its agreement with the
labels MobileGUI-VBench publishes.

Offline the rules of flywheel/rules/external_tagging.py answer; with an endpoint model the LLM is
asked for the same four fields as JSON, which is validated field by field — anything missing or
malformed falls back to the rule's value, and the note says so.
"""
from __future__ import annotations

import json
from pathlib import Path

from flywheel.endpoints.chat import JudgeUnavailable, ask_json
from flywheel.models import ModelVersion
from flywheel.rules.external_tagging import GRADES, tag

AMBIGUITY_TIERS = ("L1", "L2", "L3")
LLM_PROMPT = (
    "You label a phone task for a data pipeline. Answer only JSON: "
    '{"step_depth": minimum number of UI operations (integer 1-60), '
    '"ambiguity": "L1" (steps narrated in order) | "L2" (names the function) | "L3" (vague, intent only), '
    '"risk": "low" | "medium" (sends/posts to others, deletes data) | "high" (payment, order, account or privacy change), '
    '"risk_reasons": [short strings], '
    '"prerequisites": [short phrases: device/account state that must hold before the task, e.g. "bank card bound", '
    '"at least two photos in the album"]}')


def _from_llm(text: str, model_version, offline: dict) -> dict:
    try:
        answer = ask_json(model_version, LLM_PROMPT, f"Task: {text}", timeout=30)
    except JudgeUnavailable as error:
        return {**offline, "tagged_by": "rules", "note": f"LLM tagging failed, rules used: {error}"}
    tags, rejected = dict(offline), []
    depth = answer.get("step_depth")
    if isinstance(depth, int) and not isinstance(depth, bool) and 1 <= depth <= 60:
        tags["step_depth"] = depth
    else:
        rejected.append("step_depth")
    if answer.get("ambiguity") in AMBIGUITY_TIERS:
        tags["ambiguity"] = answer["ambiguity"]
    else:
        rejected.append("ambiguity")
    if answer.get("risk") in GRADES:
        tags["risk"] = answer["risk"]
        reasons = answer.get("risk_reasons")
        tags["risk_reasons"] = [str(r)[:120] for r in reasons[:10]] if isinstance(reasons, list) else []
    else:
        rejected.append("risk")
    prerequisites = answer.get("prerequisites")
    if isinstance(prerequisites, list) and all(isinstance(p, str) for p in prerequisites):
        tags["prerequisites"] = [p.strip()[:200] for p in prerequisites[:20] if p.strip()]
    else:
        rejected.append("prerequisites")
    tags["clarify"] = tags["ambiguity"] == "L3" or tags["risk"] != "low"
    tags["tagged_by"] = "llm" if len(rejected) < 4 else "rules"
    if rejected:
        tags["note"] = "LLM answer unusable for " + ", ".join(rejected) + "; rules used there"
    return tags


def tag_external(text: str, apps=None, model_version=None) -> dict:
    """{"step_depth": int, "ambiguity": L1|L2|L3, "risk": low|medium|high, "risk_reasons": [...],
    "prerequisites": [...], "apps": [names the text mentions], "clarify": bool, "tagged_by": ...}.

    `apps`: more app labels to recognise (a list of labels or a {label: name} dict), e.g. the
    farm's; `model_version`: an endpoint ModelVersion to ask instead of the rules."""
    known = apps if isinstance(apps, dict) else {label: label for label in (apps or []) if label}
    offline = {**tag(text, known), "tagged_by": "rules"}
    if model_version is not None and getattr(model_version, "kind", "") == ModelVersion.Kind.ENDPOINT:
        return _from_llm(text, model_version, offline)
    return offline


# --- agreement with MobileGUI-VBench --------------------------------------------------------------
# How the file's own labels map onto ours (its README describes the fields):
#  - prerequisites: our list is non-empty  <=>  `precondition` is non-empty.
#  - risk: ours is medium or high  <=>  `clarification_requirement` asks for a confirmation or a
#    hand-over *before an irreversible step*: "…前" (发送前, 下单前, 删除前, 点赞前, 叫车前, 支付前),
#    any 接管 (hand control back, e.g. 下单前接管, 到登陆页面请求接管) or a send interception (拦截).
#    "Which one?" clarifications (询问哪个, 澄清哪一个) are about ambiguity, not risk.
#  - multi-app: we name two or more apps  <=>  `involved_apps` contains '、'.
IRREVERSIBLE_GATE_MARKERS = ("发送前", "下单前", "支付前", "付款前", "删除前", "点赞前", "叫车前", "购买前",
                             "接管", "拦截")
WHICH_ONE_MARKERS = ("哪个", "哪一个", "哪一班", "哪里", "几点", "看哪", "播放哪", "候选")


def vbench_rows(path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def vbench_expected(row: dict) -> dict:
    clarification = row.get("clarification_requirement", "")
    return {"prerequisites": bool(row.get("precondition", "").strip(" ;；")),
            "risk": any(marker in clarification for marker in IRREVERSIBLE_GATE_MARKERS),
            "multi_app": "、" in row.get("involved_apps", "")}


def vbench_agreement(path) -> dict:
    """Agreement of the offline tags with the file's own labels, per row and dimension.

    {"rows": n, "per_dimension": {dimension: fraction}, "overall": fraction of rows where every
    compared dimension agrees, "mean": mean of the per-dimension fractions, "disagreements":
    {dimension: [task_id...]}, "distribution": {"step_depth": {...}, "ambiguity": {...}},
    "which_one_vs_L3": fraction (informational: L3 vs a "which one?" clarification)}."""
    rows = vbench_rows(Path(path))
    dimensions = ("prerequisites", "risk", "multi_app")
    agree = dict.fromkeys(dimensions, 0)
    disagreements = {dimension: [] for dimension in dimensions}
    all_agree = which_one_agree = 0
    depths, tiers = {}, {}
    for row in rows:
        tags = tag_external(row["query"])
        ours = {"prerequisites": bool(tags["prerequisites"]), "risk": tags["risk"] != "low",
                "multi_app": len(tags["apps"]) >= 2}
        expected = vbench_expected(row)
        row_ok = True
        for dimension in dimensions:
            if ours[dimension] == expected[dimension]:
                agree[dimension] += 1
            else:
                row_ok = False
                disagreements[dimension].append(row.get("task_id"))
        all_agree += row_ok
        which_one = any(marker in row.get("clarification_requirement", "") for marker in WHICH_ONE_MARKERS)
        which_one_agree += (tags["ambiguity"] == "L3") == which_one
        bucket = "1-5" if tags["step_depth"] <= 5 else "6-10" if tags["step_depth"] <= 10 else ">10"
        depths[bucket] = depths.get(bucket, 0) + 1
        tiers[tags["ambiguity"]] = tiers.get(tags["ambiguity"], 0) + 1
    n = len(rows) or 1
    per_dimension = {dimension: round(agree[dimension] / n, 4) for dimension in dimensions}
    return {"rows": len(rows), "per_dimension": per_dimension, "overall": round(all_agree / n, 4),
            "mean": round(sum(per_dimension.values()) / len(dimensions), 4),
            "disagreements": disagreements,
            "distribution": {"step_depth": depths, "ambiguity": tiers},
            "which_one_vs_L3": round(which_one_agree / n, 4)}
