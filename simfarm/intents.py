"""Resolving `am start` intents and `content` provider URIs against the installed app files."""
import re

from simfarm.app_commands import _matches
from simfarm.context import PageContext
from simfarm.engine import PageInstance, Task
from simfarm.shell import Result
from simfarm.shell_commands import fail, ok


def start_activity(phone, intent) -> str | None:
    engine = phone.engine
    params = dict(intent.get("extras", {}))
    if intent.get("data"):
        params["data"] = intent["data"]
    component = intent.get("component")
    if "-S" in intent.get("switches", []) and component:
        engine.force_stop(component.split("/")[0])
    if component:
        package, _, activity = component.partition("/")
        spec = engine.apps.get(package)
        if spec is None:
            return f"Error: Activity class {{{component}}} does not exist."
        if not activity:
            engine.launch(package, params=params or None)
            return None
        page = spec.page_for_activity(activity)
        if page is None:
            return f"Error: Activity class {{{component}}} does not exist."
        engine.launch(package, page=None if page == spec.start else page, params=params or None)
        return None
    action = intent.get("action")
    if action == "android.intent.action.MAIN" and intent.get("package"):
        return None if engine.launch(intent["package"]) else \
            f"Error: Activity not started, unable to resolve {_describe(intent)}"
    for spec in engine.apps.values():
        if intent.get("package") and spec.package != intent["package"]:
            continue
        for entry in getattr(spec, "intents", None) or []:
            if entry.get("action") != action:
                continue
            prefix = entry.get("data_prefix")
            if prefix and not str(intent.get("data", "")).startswith(prefix):
                continue
            engine.launch(spec.package, page=entry.get("page"), params=params or None)
            return None
    if action == "android.settings.SETTINGS" or (action or "").startswith("android.settings."):
        if "com.android.settings" in engine.apps:
            engine.launch("com.android.settings")
            return None
    return f"Error: Activity not started, unable to resolve {_describe(intent)}"


def _describe(intent):
    parts = [f"act={intent['action']}"] if intent.get("action") else []
    if intent.get("data"):
        parts.append(f"dat={intent['data']}")
    return "Intent { " + " ".join(parts) + " flg=0x10000000 }"


def _app_context(phone, package):
    spec = phone.engine.apps[package]
    task = Task(0, package, [PageInstance(spec.start)])
    return PageContext(phone.engine, task, task.top)


def _provider(phone, uri):
    """(package, provider spec, trailing id) for an app's content URI, or None."""
    match = re.match(r"content://([^/]+)(/.*)?$", uri)
    if not match:
        return None
    for package, spec in phone.engine.apps.items():
        for provider in spec.content:
            base = provider.get("uri", "")
            if uri == base:
                return package, provider, None
            if uri.startswith(base + "/") and "rows" in provider:
                return package, provider, uri[len(base) + 1:]
    return None


def content_rows(phone, uri):
    if uri.startswith("content://settings/"):
        namespace = uri.rsplit("/", 1)[-1]
        if namespace not in ("system", "secure", "global"):
            return None
        return [{"_id": i + 1, "name": k, "value": v} for i, (k, v) in enumerate(sorted(phone.settings.items(namespace)))]
    builtin = {
        "content://sim/clipboard": lambda: [{"text": phone.clipboard}],
        "content://sim/notifications": lambda: [{k: n[k] for k in ("id", "package", "title", "text")} for n in phone.notifications],
        "content://sim/payments": lambda: list(phone.payments),
        "content://sim/permissions": lambda: [{"package": p, "permission": name, "result": r}
                                              for p, perms in sorted(phone.permissions.items()) for name, r in sorted(perms.items())],
        "content://sim/anomalies": lambda: [{"kind": k} for k in phone.engine.anomalies.active()],
        "content://sim/foreground": lambda: [dict(zip(("package", "activity", "task"), phone.engine.resumed()))],
    }
    if uri in builtin:
        return builtin[uri]()
    found = _provider(phone, uri)
    if found is None:
        return None
    package, provider, record_id = found
    ctx = _app_context(phone, package)
    if "rows" in provider:
        records = ctx.get(provider["rows"]) or []
        rows = [dict(r) if isinstance(r, dict) else {"value": r} for r in records]
        if provider.get("columns"):
            rows = [{c: r.get(c) for c in provider["columns"]} for r in rows]
        if record_id is not None:
            rows = [r for r in rows if str(r.get("id")) == record_id]
        return rows
    return [{key: ctx.text(value) for key, value in (provider.get("row") or {}).items()}]


def _bind_values(binds):
    values = {}
    for bind in binds:
        name, _, rest = bind.partition(":")
        kind, _, value = rest.partition(":")
        values[name] = int(value) if kind in ("i", "l") and value.lstrip("-").isdigit() else (
            value.lower() == "true" if kind == "b" else value)
    return values


def content_write(phone, verb, uri, binds, where) -> Result:
    values = _bind_values(binds)
    if uri.startswith("content://settings/"):
        namespace = uri.rsplit("/", 1)[-1]
        if verb in ("insert", "update") and "name" in values:
            phone.put_setting(namespace, values["name"], str(values.get("value", "")))
        elif verb == "delete":
            match = re.search(r"name\s*=\s*'([^']*)'", where or "")
            if match:
                phone.settings.delete(namespace, match.group(1))
        return ok()
    found = _provider(phone, uri)
    if found is None or "rows" not in found[1]:
        return fail(f"java.lang.IllegalArgumentException: Unknown URI {uri}")
    package, provider, _ = found
    ctx = _app_context(phone, package)
    records = list(ctx.get(provider["rows"]) or [])
    if verb == "insert":
        if "id" not in values:
            values["id"] = max([int(r.get("id", 0)) for r in records if str(r.get("id", "0")).isdigit()] + [0]) + 1
        records.append(values)
    elif verb == "update":
        for record in records:
            if _matches(record, where):
                record.update(values)
    elif verb == "delete":
        records = [r for r in records if not _matches(r, where)]
    ctx.assign(provider["rows"], records)
    return ok()
