"""Semantic extraction of a function tree by a VLM behind an OpenAI-compatible endpoint.

The model sees each explored page (title, texts, tappable elements, and the first screenshots as
data URLs) plus the tree that navigation alone gives, and answers the same JSON tree the offline
builder makes (function_tree.write_tree). The answer is validated with jsonschema; page ids must be
pages of this app. Anything else raises TreeExtractionError, and the caller builds offline.
"""
import base64
import json
import re

import jsonschema

from flywheel.blobs import read_blob
from flywheel.endpoints.safe_http import EndpointCallFailed, request_json
from flywheel.models import GemPage

MAX_PAGES = 60          # pages described in the prompt
MAX_SCREENSHOTS = 8     # of them, with their screenshot
MAX_NODES = 2000

NODE = {"type": "object", "required": ["label"], "properties": {
    "label": {"type": "string", "minLength": 1, "maxLength": 200},
    "page": {"type": ["integer", "null"]},
    "kind": {"enum": ["page", "action"]},
    "reuse": {"type": "boolean"},
    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
TREE_SCHEMA = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
               "required": ["functions"], "$defs": {"node": NODE},
               "properties": {"functions": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/node"}}}}

SYSTEM = """You extract the function tree of a mobile app from the pages an explorer visited.
Answer with ONE JSON object and nothing else: {"functions": [NODE, ...]} where NODE is
{"label": short human name of the function, "page": id of the page where it is done or null,
 "kind": "page" (a screen) or "action" (something done on a page without leaving it: a switch, a
 download button), "reuse": true only for a second path to a page already in the tree,
 "children": [NODE, ...]}.
Sections hold functions; leaves are the functions a user wants done. Use only the page ids given."""


class TreeExtractionError(Exception):
    """The endpoint gave no usable tree (failure, not JSON, wrong shape, unknown pages)."""


def _page_text(page) -> str:
    tappable = [e.get("text") or (e.get("selector") or {}).get("content_desc") or ""
                for e in page.elements or [] if e.get("clickable")]
    return (f"Page {page.pk} (depth {page.depth}{', start' if page.is_start else ''}, {page.kind}): "
            f"title {page.title!r}; texts {json.dumps((page.texts or [])[:15], ensure_ascii=False)}; "
            f"tappable {json.dumps([t for t in tappable if t][:20], ensure_ascii=False)}")


def _screenshot_url(page):
    if not page.screenshot_sha:
        return None
    try:
        return "data:image/png;base64," + base64.b64encode(read_blob(page.screenshot_sha)).decode("ascii")
    except OSError:
        return None


def request_body(app, model_version, pages, draft) -> dict:
    content = [{"type": "text", "text": f"App {app.label or app.package} ({app.package}).\n"
                f"Tree from navigation alone (improve names and grouping):\n"
                f"{json.dumps({'functions': draft}, ensure_ascii=False)[:20000]}\n\nPages:"}]
    for index, page in enumerate(pages):
        content.append({"type": "text", "text": _page_text(page)})
        url = _screenshot_url(page) if index < MAX_SCREENSHOTS else None
        if url:
            content.append({"type": "image_url", "image_url": {"url": url}})
    sampling = {k: v for k, v in (model_version.sampling or {}).items() if k in ("temperature", "top_p", "seed")}
    return {"model": model_version.served_model_name or model_version.name,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": content}],
            "temperature": 0.0, "max_tokens": 4096, **sampling}


def _reply_text(data) -> str:
    try:
        text = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise TreeExtractionError("the answer has no choices[0].message.content") from None
    if isinstance(text, list):
        text = "".join(part.get("text", "") for part in text if isinstance(part, dict))
    return str(text or "")


def parse_tree(text: str, page_ids) -> list[dict]:
    """The validated node list of a model's answer (fences and prose around the JSON allowed)."""
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    candidate = fenced.group(1) if fenced else text[text.find("{"):text.rfind("}") + 1]
    try:
        tree = json.loads(candidate)
    except ValueError:
        raise TreeExtractionError("the answer is not JSON") from None
    try:
        jsonschema.validate(tree, TREE_SCHEMA)
    except jsonschema.ValidationError as error:
        where = "/".join(str(part) for part in error.absolute_path) or "(top)"
        raise TreeExtractionError(f"the answer's tree is malformed at {where}: {error.message}") from None
    count, stack = 0, list(tree["functions"])
    while stack:
        node = stack.pop()
        count += 1
        if node.get("page") is not None and node["page"] not in page_ids:
            raise TreeExtractionError(f"the answer names page {node['page']}, not a page of this app")
        node.setdefault("kind", "page" if node.get("page") else "action")
        stack += node.get("children") or []
    if count > MAX_NODES:
        raise TreeExtractionError(f"the answer has {count} nodes (at most {MAX_NODES})")
    return tree["functions"]


def vlm_spec(app, model_version, draft) -> list[dict]:
    pages = list(GemPage.objects.filter(app=app).exclude(kind__in=(GemPage.Kind.LAUNCHER, GemPage.Kind.RECENTS, GemPage.Kind.SHARE_SHEET))
                 .order_by("depth", "pk")[:MAX_PAGES])
    if not pages:
        raise TreeExtractionError("no explored pages to describe")
    if not model_version.endpoint_url:
        raise TreeExtractionError("the model version has no endpoint URL")
    body = request_body(app, model_version, pages, draft)
    timeout = float((model_version.sampling or {}).get("timeout_s", 120))
    url = model_version.endpoint_url.rstrip("/") + "/chat/completions"
    try:
        reply = request_json("POST", url, body, timeout=timeout)
    except EndpointCallFailed as error:
        raise TreeExtractionError(f"the endpoint call failed: {error}") from None
    if reply.status != 200 or not isinstance(reply.data, dict):
        raise TreeExtractionError(f"the endpoint answered HTTP {reply.status}"
                                  + (" without a JSON object" if reply.status == 200 else ""))
    return parse_tree(_reply_text(reply.data), {page.pk for page in pages})
