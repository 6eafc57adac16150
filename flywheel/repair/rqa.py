"""Retroactive Query Alignment (§2.5.2): "subtract only, never redo".

The trajectory deviated at step t (repair.step_index). Its actions a_1..a_{t−1} are the golden
prefix; the screen of step t is the state they reached. The query Q is rewritten into Q′ that this
terminal state fulfils: offline, from the function node of the reached page (GEM page match →
FunctionNode) and the tier templates of flywheel/queries/generation/grammar.py, narrated from the
prefix itself; through the Teacher LLM when TEACHER_MODEL_VERSION names an endpoint, shown the
terminal frame as an image part (the offline text stays when it fails, and when that frame cannot
be read: provenance's llm_error says why). Q′ becomes a query of source `rqa`, and (Q′, prefix + "terminate:
success" on the reached screen) enters the SFT pool as `ecdm_repaired`.
"""
from __future__ import annotations

import json
import random

from django.conf import settings
from django.db import transaction

from devices.actions import normalize_action
from devices.uitree import all_nodes, node_at, parse_hierarchy
from flywheel.blobs import read_blob
from flywheel.endpoints.frames import FrameMissing, load_frames, user_content
from flywheel.endpoints.safe_http import EndpointCallFailed, request_json
from flywheel.models import App, FunctionNode, GemPage, ModelVersion, Query, Repair, Step
from flywheel.policies.protocol import describe_action
from flywheel.queries.generation.grammar import compose
from flywheel.queries.generation.llm import ReplyRejected, parse_reply
from flywheel.queries.generation.planner import LeafContext
from flywheel.queries.verification_drafts import draft_verification, verification_problems
from flywheel.queries.vocabulary import PERSONAS
from flywheel.repair.samples import kept_steps, make_sample
from flywheel.repair.screens import (
    missing_screenshots,
    no_screenshot_reason,
    screen_heading,
    screen_of,
    stored_hierarchy,
    stored_screenshot,
)
from flywheel.repair.step_correction import fail, to_human
from flywheel.screens.labels import label_of
from flywheel.screens.page_identity import fingerprint, match_page, thresholds_for

# The tier's template for a Q′ that states exactly what the prefix did (no capability clause: RQA
# only subtracts).
TIER_TEMPLATE = {"L1": "plain_narration", "L2": "function_statement", "L3": "incomplete_instruction"}
DONE = {"action": "terminate", "status": "success"}


def reached_page(step: Step) -> GemPage | None:
    """The GEM page the step's screen is, if the app was explored."""
    package = step.foreground_package
    pages = [p for p in GemPage.objects.filter(app__package=package, kind__in=[GemPage.Kind.PAGE, GemPage.Kind.DIALOG]).select_related("app")
             if p.layout_signature or p.phash]
    if not pages:
        return None
    return match_page(fingerprint(stored_screenshot(step), stored_hierarchy(step)), pages,
                      thresholds_for(pages[0].app))


def function_of(page: GemPage | None) -> FunctionNode | None:
    if page is None:
        return None
    return (FunctionNode.objects.filter(page=page, merged_into__isnull=True)
            .exclude(status=FunctionNode.Status.PRUNED).order_by("-is_leaf", "position", "pk").first())


def app_label(package: str) -> str:
    app = App.objects.filter(package=package).first()
    return (app.label if app else "") or package


def narration(prefix: list[Step]) -> list[tuple[str, str]]:
    """The golden prefix as imperative phrases, from what each action hit on its own screen."""
    phrases = []
    for step in prefix:
        action = step.executed_action or {}
        name = action.get("action")
        phrase = None
        if name == "open":
            phrase = ("open", app_label(action.get("package") or action.get("app") or ""))
        elif name in ("click", "double_click", "long_press") and isinstance(action.get("point"), list):
            node = node_at(parse_hierarchy(stored_hierarchy(step)), int(action["point"][0]), int(action["point"][1]))
            label = label_of(node) if node is not None else ""
            phrase = ("tap", label) if label else None
        elif name == "type" and action.get("text"):
            phrase = ("type", str(action["text"]))
        elif name == "system_button":
            phrase = {"back": ("go", "back"), "home": ("press", "Home")}.get(action.get("button"))
        elif name == "swipe" and action.get("direction"):
            phrase = ("swipe", str(action["direction"]))
        if phrase and (not phrases or phrases[-1] != phrase):
            phrases.append(phrase)
    return phrases


def page_titles(steps: list[Step], apps: list[str]) -> list[str]:
    """The pages the prefix went through (its milestones), in order, inside the task's apps."""
    titles = []
    for step in steps:
        if apps and step.foreground_package not in apps:
            continue
        page = reached_page(step)
        title = (page.title if page else "") or screen_heading(stored_hierarchy(step), step.foreground_package)
        if title and title not in titles:
            titles.append(title)
    return titles


def offline_rewrite(original_query: Query, terminal: Step, prefix: list[Step], seed: str) -> tuple[str, dict]:
    """Q′ from the reached page's function node and the tier's template; (text, provenance)."""
    package = terminal.foreground_package or (original_query.app_packages or [""])[0]
    page = reached_page(terminal)
    node = function_of(page)
    heading = screen_heading(stored_hierarchy(terminal), package)
    title = (page.title if page else "") or heading or app_label(package)
    ctx = LeafContext(leaf_id=node.pk if node else None, package=package, app_label=app_label(package),
                      label=(node.label if node else "") or title, page_id=page.pk if page else 0, title=title,
                      activity=page.activity if page else "", narration=narration(prefix))
    subclass = TIER_TEMPLATE.get(original_query.tier, "function_statement")
    if subclass == "plain_narration" and not ctx.narration:
        subclass = "function_statement"
    persona = original_query.persona if original_query.persona in PERSONAS else "novice"
    text = compose(ctx, subclass, persona, [], random.Random(seed))
    return text, {"page": page.pk if page else None, "function": node.pk if node else None, "title": title,
                  "package": package, "activity": ctx.activity, "subclass": subclass, "persona": persona}


def teacher_version() -> ModelVersion | None:
    name = settings.TEACHER_MODEL_VERSION
    return ModelVersion.objects.filter(name=name, kind=ModelVersion.Kind.ENDPOINT).first() if name else None


def terminal_frame_loader(terminal: Step):
    """The terminal step's screenshot loader (None: recorded without one); read_blob raises OSError
    when the store lost it."""
    if not terminal.screenshot:
        return None
    name = terminal.screenshot.name
    return lambda: read_blob(name)


def llm_rewrite(version: ModelVersion, query: Query, prefix: list[Step], terminal: Step, offline: str) -> str:
    """Q′ from the Teacher LLM; raises ReplyRejected (flywheel/queries/generation/llm.py) when unusable."""
    done = [describe_action(step.executed_action or {}) for step in prefix]
    screen = [n.text for n in all_nodes(parse_hierarchy(stored_hierarchy(terminal))) if n.text.strip()][:40]
    system = ("You rewrite a phone task so that it asks for exactly what was already done, no more "
              "(retroactive query alignment): keep the user's wording and style, drop the parts that "
              'were not reached. Answer with JSON only: {"text": "<the rewritten instruction>"}')
    user = "\n".join([f"Original task: {query.text}", f"Tier: {query.tier}",
                      "Actions done, in order: " + json.dumps(done, ensure_ascii=False),
                      "Texts on the final screen: " + json.dumps(screen, ensure_ascii=False),
                      f"A template version, for reference only: {offline}"])
    try:  # the Teacher sees the terminal frame; one the store lost means no Teacher rewrite
        frames = load_frames([(terminal.index, terminal_frame_loader(terminal))])
    except FrameMissing as missing:
        raise ReplyRejected(str(missing)) from None
    if frames:
        user += "\nThe screenshot of the final screen (the state the actions reached) follows."
    body = {"model": version.served_model_name or version.name, "temperature": 0, "max_tokens": 200,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user_content(user, [f.png for f in frames]) if frames else user}]}
    timeout = float((version.sampling or {}).get("timeout_s", 30))
    try:
        reply = request_json("POST", version.endpoint_url.rstrip("/") + "/chat/completions", body, timeout=timeout)
    except EndpointCallFailed as error:
        raise ReplyRejected(f"call failed: {error}") from None
    if reply.status != 200:
        raise ReplyRejected(f"HTTP {reply.status}")
    return parse_reply(reply.data)


def rewrite(query: Query, prefix: list[Step], terminal: Step, seed: str) -> tuple[str, dict]:
    text, provenance = offline_rewrite(query, terminal, prefix, seed)
    provenance["method"] = "offline"
    version = teacher_version()
    if version is not None:
        try:
            provenance.update(offline_text=text, method="llm", model=version.name)
            text = llm_rewrite(version, query, prefix, terminal, text)
        except Exception as error:  # ReplyRejected, a broken endpoint: the offline text is kept
            text = provenance.pop("offline_text")
            provenance.update(method="offline", llm_error=str(error)[:300])
    return text, provenance


def verification_for(query: Query, prefix: list[Step], terminal: Step, found: dict) -> tuple[dict, list]:
    """System A's terminal facts of the reached page; System B's milestones of the prefix's pages."""
    milestones = page_titles([*prefix, terminal], query.app_packages)
    spec = draft_verification(found["package"], found["activity"], found["title"], milestones or [found["title"]])
    spec["draft"] = False  # read off the trajectory that reached it, not guessed from a graph
    problems = verification_problems(spec, query.app_packages or [found["package"]])
    if problems:
        spec = {"terminal": [], "milestones": spec["milestones"], "draft": True}
    return spec, [f"{field}: {message}" for field, message in problems]


def align_query(repair: Repair) -> Repair:
    """Q → Q′ that the golden prefix fulfils, and the (Q′, prefix) sample."""
    original, t = repair.trajectory, repair.step_index
    if t is None:
        return fail(repair, "the attribution did not locate the deviation step")
    if t == 0:
        return fail(repair, "no golden prefix: the trajectory deviated at its first step")
    terminal = original.steps.filter(index=t).first()
    if terminal is None:
        return fail(repair, f"the state after step {t - 1} was never observed (no step {t} stored)")
    prefix = kept_steps(original, t)
    if not prefix:
        return fail(repair, f"no executed step before step {t}: there is no golden prefix")
    missing = missing_screenshots(original, t)
    if missing:
        return to_human(repair, no_screenshot_reason(missing))
    if not stored_hierarchy(terminal):
        return to_human(repair, f"step {t} has no UI dump: the reached page cannot be read")
    query = original.query
    text, found = rewrite(query, prefix, terminal, seed=f"rqa:{original.pk}:{t}")
    spec, problems = verification_for(query, prefix, terminal, found)
    action = normalize_action(DONE, *screen_of(terminal))
    cot = {"Observation": f"The screen shows {found['title']} in {app_label(found['package'])}.",
           "Reflection": "", "Plan": "Everything the task asks for is on screen: finish.",
           "Decision": describe_action(action), "Memory": ""}
    provenance = {**found, "from_query": query.key, "trajectory": original.pk, "step": t,
                  "prefix_steps": len(prefix), **({"verification_problems": problems} if problems else {})}
    with transaction.atomic():
        locked = Repair.objects.select_for_update().get(pk=repair.pk)
        derived = locked.derived_query or Query.objects.filter(key=f"rqa-{original.pk}-s{t}").first()
        if derived is None:
            derived = Query.objects.create(
                key=f"rqa-{original.pk}-s{t}", text=text, tier=query.tier, subclass=found["subclass"],
                persona=found["persona"], capabilities=[], risk=query.risk, prerequisites=query.prerequisites,
                requirements=query.requirements, source="rqa", tags=[*query.tags, "rqa"], reset=query.reset,
                verification=spec, gate_results={"rqa": provenance}, derived_from=original, status="ready",
                labels={"rqa_of": query.key, "target_page": found["title"]})
            derived.set_apps([link.app for link in query.app_links.select_related("app")])
            if found["function"]:
                derived.set_functions([FunctionNode.objects.get(pk=found["function"])])
        make_sample(original, locked, keep_until=t, query=derived,
                    final_step={"index": t, "screenshot": terminal.screenshot.name,
                                "hierarchy": terminal.hierarchy.name, "action": action, "cot": cot,
                                "edit": {"by": "rqa", "query": derived.pk}})
        Repair.objects.filter(pk=repair.pk).update(
            derived_query=derived, correction={"action": action, "cot": cot, "by": "teacher", "query": derived.text},
            teacher_output={"query": derived.text, "source": f"rqa-{found['method']}", **provenance})
    repair.refresh_from_db()
    return repair
