"""Loading declarative app files (apps/*.yaml|json) and reading their function trees."""
import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

BUILTIN_APPS_DIR = Path(__file__).parent / "apps"
CATEGORIES = (
    "shopping", "video", "messaging", "social", "food_delivery", "travel", "finance",
    "news_reading", "music_audio", "tools", "lifestyle", "system",
)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class AppFormatError(ValueError):
    pass


@dataclass
class AppSpec:
    package: str
    label: str
    category: str
    pages: dict
    start: str
    version: str = "1.0"
    version_code: int = 1
    system: bool = False
    core: bool = False
    network: bool = True
    icon: dict = field(default_factory=dict)
    theme: dict = field(default_factory=dict)
    state: dict = field(default_factory=dict)
    dialogs: dict = field(default_factory=dict)
    content: list = field(default_factory=list)
    share_target: dict | None = None
    functions: list = field(default_factory=list)
    intents: list = field(default_factory=list)
    files: list = field(default_factory=list)   # [{path, text}]: shared-storage files of the app's data
    render: str = "native"           # how every page is drawn unless a page says otherwise (simfarm/blind.py)
    source: str = ""

    def fresh_state(self) -> dict:
        return copy.deepcopy(self.state)

    def activity_of(self, page_id: str) -> str:
        page = self.pages.get(page_id) or {}
        activity = page.get("activity") or "." + "".join(p.capitalize() for p in page_id.split("_")) + "Activity"
        return activity

    def page_for_activity(self, activity: str) -> str | None:
        """`am start -n pkg/.Act` → the page with that activity (full or short name)."""
        short = activity[len(self.package):] if activity.startswith(self.package + ".") else activity
        for page_id in self.pages:
            if self.activity_of(page_id) in (activity, short):
                return page_id
        return None

    def function_nodes(self) -> list[dict]:
        """All nodes with parents filled in and a `leaf` flag (implicit parents are added)."""
        declared = {node["id"]: dict(node) for node in self.functions}
        for node_id in list(declared):
            parts = node_id.split("/")
            for depth in range(1, len(parts)):
                parent = "/".join(parts[:depth])
                declared.setdefault(parent, {"id": parent, "name": parts[depth - 1].replace("_", " ").title()})
        ids = set(declared)
        nodes = []
        for node_id in sorted(ids):
            node = declared[node_id]
            node["parent"] = node_id.rsplit("/", 1)[0] if "/" in node_id else None
            node["leaf"] = not any(other.startswith(node_id + "/") for other in ids)
            nodes.append(node)
        return nodes

    def function_leaves(self) -> list[dict]:
        return [node for node in self.function_nodes() if node["leaf"]]


def _check(data: dict, source: str) -> None:
    for key in ("package", "label", "category", "pages"):
        if key not in data:
            raise AppFormatError(f"{source}: missing '{key}'")
    if data["category"] not in CATEGORIES:
        raise AppFormatError(f"{source}: unknown category {data['category']!r}")
    if not isinstance(data["pages"], dict) or not data["pages"]:
        raise AppFormatError(f"{source}: 'pages' must be a non-empty mapping")
    start = data.get("start") or next(iter(data["pages"]))
    if start not in data["pages"]:
        raise AppFormatError(f"{source}: start page {start!r} is not defined")
    renders = ("native", "webview", "canvas", "flutter")
    if data.get("render", "native") not in renders:
        raise AppFormatError(f"{source}: render must be one of {', '.join(renders)}")
    for page_id, page in data["pages"].items():
        if page.get("render", "native") not in renders:
            raise AppFormatError(f"{source}: page {page_id}: render must be one of {', '.join(renders)}")
        if page.get("trap") not in (None, "spinner"):
            raise AppFormatError(f"{source}: page {page_id}: trap must be 'spinner'")
        for element in page.get("elements") or []:
            if not isinstance(element, dict) or "type" not in element:
                raise AppFormatError(f"{source}: page {page_id}: every element needs a 'type'")


def load_app(path: Path) -> AppSpec:
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix == ".json" else yaml.load(text, Loader=_Loader)
    if not isinstance(data, dict):
        raise AppFormatError(f"{path}: not a mapping")
    _check(data, str(path))
    known = set(AppSpec.__dataclass_fields__)
    kwargs = {key: value for key, value in data.items() if key in known}
    kwargs.setdefault("start", next(iter(data["pages"])))
    kwargs["version"] = str(kwargs.get("version", "1.0"))
    kwargs["source"] = str(path)
    for key in ("state", "dialogs", "icon", "theme"):
        kwargs[key] = kwargs.get(key) or {}
    for key in ("content", "functions", "intents", "files"):
        kwargs[key] = kwargs.get(key) or []
    return AppSpec(**kwargs)


def app_files(apps_dir=None) -> list[Path]:
    folders = [BUILTIN_APPS_DIR] + ([Path(apps_dir)] if apps_dir else [])
    files = []
    for folder in folders:
        if folder.is_dir():
            files += sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    return files


def load_apps(apps_dir=None) -> dict[str, AppSpec]:
    """Every app file, by package; a later folder's app replaces a built-in one of the same package."""
    apps = {}
    for path in app_files(apps_dir):
        spec = load_app(path)
        apps[spec.package] = spec
    return dict(sorted(apps.items()))


def export_function_trees(apps_dir=None) -> list[dict]:
    """Every app's identity and function tree, as plain data the console can import."""
    return [{"package": spec.package, "label": spec.label, "category": spec.category, "system": spec.system,
             "version": spec.version, "functions": spec.function_nodes()}
            for spec in load_apps(apps_dir).values()]


def lint_app(spec: AppSpec) -> list[str]:
    """Dangling references an engine would only notice at run time: pages, dialogs, function pages."""
    problems = []

    def visit(value, where):
        if isinstance(value, dict):
            for key in ("go", "replace", "reset_to"):
                target = value.get(key)
                if isinstance(target, str) and "{" not in target and target not in spec.pages:
                    problems.append(f"{where}: {key} to unknown page {target!r}")
            target = value.get("dialog")
            if isinstance(target, str) and target not in spec.dialogs:
                problems.append(f"{where}: unknown dialog {target!r}")
            for child in value.values():
                visit(child, where)
        elif isinstance(value, list):
            for child in value:
                visit(child, where)

    for page_id, page in spec.pages.items():
        visit(page, f"page {page_id}")
    for dialog_id, dialog in spec.dialogs.items():
        visit(dialog, f"dialog {dialog_id}")
    ids = {node["id"] for node in spec.function_nodes()}
    for node in spec.functions:
        if node.get("page") and node["page"] not in spec.pages:
            problems.append(f"function {node['id']}: unknown page {node['page']!r}")
        if node.get("reuse_of") and node["reuse_of"] not in ids:
            problems.append(f"function {node['id']}: reuse_of unknown node {node['reuse_of']!r}")
    return problems
