"""PageContext: evaluates an app page's names, templates and actions (apps/FORMAT.md)."""
import copy
import logging

from simfarm import expr, ui

log = logging.getLogger(__name__)
SETTINGS_NAMESPACES = ("global", "system", "secure")


class PageContext:
    """One page instance of one task, as seen by the layout and by the actions it runs."""

    def __init__(self, engine, task, page):
        self.engine = engine
        self.phone = engine.phone
        self.task = task
        self.page = page
        self.app = engine.apps[task.package]
        self.package = task.package
        self.m = engine.metrics
        self.accent = ui.hex_color(self.app.theme.get("primary"), ui.ACCENT)
        self.paste_anchor = None  # (input node, callback) when the input's "Paste" popup is open

    # -- names -------------------------------------------------------------------------------

    @property
    def state(self) -> dict:
        return self.phone.app_state(self.package)

    def resolver(self, item=None):
        def resolve(namespace, name):
            if namespace == "":
                return self.state.get(name)
            if namespace == "page":
                return self.page.params.get(name)
            if namespace == "item":
                return (item or {}).get(name) if isinstance(item, dict) else None
            if namespace in SETTINGS_NAMESPACES:
                return self.phone.settings.get(namespace, name)
            if namespace == "phone":
                return self.phone.fact(name)
            return None
        return resolve

    def text(self, template, item=None) -> str:
        if template is None:
            return ""
        try:
            return expr.as_text(expr.render_template(template, self.resolver(item)))
        except expr.ExpressionError as exc:
            log.warning("%s: %s", self.package, exc)
            return str(template)

    def value(self, template, item=None):
        try:
            return expr.render_template(template, self.resolver(item))
        except expr.ExpressionError as exc:
            log.warning("%s: %s", self.package, exc)
            return template

    def cond(self, source, item=None) -> bool:
        if source is None or source == "":
            return True
        try:
            return expr.truthy(source, self.resolver(item))
        except expr.ExpressionError as exc:
            log.warning("%s: %s", self.package, exc)
            return False

    def get(self, target, item=None):
        if not target:
            return None
        namespace, _, name = target.rpartition(":")
        return self.resolver(item)(namespace, name)

    def assign(self, target, value):
        namespace, _, name = target.rpartition(":")
        if namespace in SETTINGS_NAMESPACES:
            self.phone.settings.put(namespace, name, expr.as_text(value))
        elif namespace == "page":
            self.page.params[name] = value
        elif namespace == "phone":
            self.phone.set_fact(name, value)
        else:
            self.state[name] = value
        self.engine.changed()

    # -- element helpers used by layout.py -------------------------------------------------------

    def _on_off(self, spec):
        bind = spec.get("bind") or ""
        # YAML 1.1 reads an unquoted `on:` key as True and `off:` as False; accept both spellings.
        on = spec.get("on", spec.get(True))
        off = spec.get("off", spec.get(False))
        if bind.rpartition(":")[0] in SETTINGS_NAMESPACES:
            return str("1" if on is None else on), str("0" if off is None else off)
        return (True if on is None else on), (False if off is None else off)

    def is_checked(self, spec, item=None) -> bool:
        if spec.get("checked_if"):
            return self.cond(spec["checked_if"], item)
        value = self.get(spec.get("bind"), item)
        if spec["type"] == "radio":
            return expr.as_text(value) == expr.as_text(self.value(spec.get("value"), item))
        on, _ = self._on_off(spec)
        return expr.as_text(value) == expr.as_text(on)

    def toggle_callback(self, spec, item=None):
        def flip(*_args):
            if spec.get("bind"):
                if spec["type"] == "radio":
                    self.assign(spec["bind"], self.value(spec.get("value"), item))
                else:
                    on, off = self._on_off(spec)
                    self.assign(spec["bind"], off if self.is_checked(spec, item) else on)
            self.run(spec.get("on_change") or spec.get("tap") or [], item)
        return flip

    def set_value(self, spec, value, item=None):
        if spec.get("bind"):
            self.assign(spec["bind"], value)
        self.run(spec.get("on_change") or [], item)

    def is_focused(self, spec) -> bool:
        return self.page.focused is spec

    def focus_callback(self, spec):
        def focus(*_args):
            self.page.focused = spec
            self.engine.changed()
        return focus

    def paste_menu_callback(self, spec):
        def show(*_args):
            self.page.focused = spec
            self.page.paste_menu = spec
            self.engine.changed()
        return show

    def paste_callback(self, spec):
        def paste(*_args):
            self.page.paste_menu = None
            current = self.get(spec.get("bind")) or ""
            self.assign(spec["bind"], str(current) + self.phone.clipboard)
        return paste

    def records(self, spec, item=None) -> list:
        if "source" in spec:
            source = self.get(spec["source"], item) or []
        else:
            source = self.value(spec.get("items") or [], item)
        records = [r if isinstance(r, dict) else {"title": r, "value": r} for r in source]
        if spec.get("filter"):
            records = [r for r in records if self.cond(spec["filter"], r)]
        return records

    def callback(self, actions, item=None):
        return lambda *_args: self.run(actions, item)

    # -- actions ---------------------------------------------------------------------------------

    def run(self, actions, item=None):
        """Run an action list; navigation actions may change which page later actions see."""
        for action in actions or []:
            if isinstance(action, str):
                action = {action: True}
            try:
                self._run_one(action, item)
            except expr.ExpressionError as exc:
                log.warning("%s: action %s failed: %s", self.package, action, exc)

    def _params(self, action, item):
        return {key: self.value(value, item) for key, value in (action.get("with") or {}).items()}

    def _run_one(self, action, item):
        engine = self.engine
        if "go" in action:
            engine.push_page(self.task, self.text(action["go"], item), self._params(action, item))
        elif "replace" in action:
            engine.replace_page(self.task, self.text(action["replace"], item), self._params(action, item))
        elif "reset_to" in action:
            engine.reset_task(self.task, self.text(action["reset_to"], item), self._params(action, item))
        elif "back" in action:  # the app finishes its page (unlike the Back key, which hides the keyboard first)
            self.page.focused = None
            engine.pop_page(self.task)
        elif "home" in action:
            engine.home()
        elif "set" in action:
            for target, value in action["set"].items():
                self.assign(target, self.value(value, item))
        elif "toggle" in action:
            current = self.get(action["toggle"], item)
            if isinstance(current, str):
                self.assign(action["toggle"], "0" if current == "1" else "1")
            else:
                self.assign(action["toggle"], not current)
        elif "inc" in action:
            for target, step in action["inc"].items():
                current = self.get(target, item) or 0
                self.assign(target, expr._to_int(current) + expr._to_int(self.value(step, item)))
        elif "append" in action:
            self._append(action["append"], item)
        elif "remove" in action:
            spec = action["remove"]
            records = self.get(spec["from"], item) or []
            where = self._where(spec, item)
            self.assign(spec["from"], [r for r in records if not self.cond(where, r)])
        elif "update" in action:
            spec = action["update"]
            where = self._where(spec, item)
            for record in self.get(spec["list"], item) or []:
                if self.cond(where, record):
                    for key, value in spec.get("set", {}).items():
                        record[key] = self.value(value, record)
            engine.changed()
        elif "dialog" in action:
            self.page.dialog = (action["dialog"], self._params(action, item))
            self.page.params.update(self._params(action, item))
            engine.changed()
        elif "close_dialog" in action:
            self.page.dialog = None
            engine.changed()
        elif "toast" in action:
            engine.show_toast(self.text(action["toast"], item), trap=bool(action.get("trap")))
        elif "if" in action:
            branch = action.get("then") if self.cond(action["if"], item) else action.get("else")
            self.run(branch or [], item)
        elif "open_app" in action:
            engine.launch(self.text(action["open_app"], item), page=action.get("page"), params=self._params(action, item))
        elif "force_stop" in action:
            engine.force_stop(self.text(action["force_stop"], item))
        elif "clear_data" in action:
            self.phone.clear_app(self.text(action["clear_data"], item))
        elif "hide_keyboard" in action:
            self.task.top.focused = None
            engine.changed()
        elif "focus" in action:
            engine.focus_element(self.task, self.text(action["focus"], item))
        elif "copy" in action:
            self.phone.clipboard = self.text(action["copy"], item)
            engine.show_toast("Copied to clipboard")
        elif "share" in action:
            engine.open_share_sheet(self.text(action["share"], item), self.package)
        elif "write_file" in action:
            spec = action["write_file"]
            self.phone.fs.write(self.text(spec["path"], item), self.text(spec.get("text", ""), item).encode())
        elif "delete_file" in action:
            self.phone.fs.remove(self.text(action["delete_file"], item), recursive=True)
        elif "notify" in action:
            spec = action["notify"]
            self.phone.post_notification(self.package, self.text(spec.get("title"), item),
                                         self.text(spec.get("text"), item))
        elif "anomaly" in action:
            spec = action["anomaly"] if isinstance(action["anomaly"], dict) else {"kind": action["anomaly"]}
            params = {k: self.text(v, item) for k, v in spec.items() if k != "kind"}
            engine.anomalies.inject(spec["kind"], package=self.package, **params)
        else:
            log.warning("%s: unknown action %s", self.package, action)

    def _where(self, spec, item):
        """`where` is an expression over each record; `{...}` parts are filled from the outer item first."""
        where = spec.get("where", "True")
        return self.text(where, item) if "{" in where else where

    def _append(self, spec, item):
        records = list(self.get(spec["to"], item) or [])
        record = {key: self.value(value, item) for key, value in (spec.get("item") or {}).items()}
        if "id" not in record:
            record["id"] = max([expr._to_int(r.get("id")) for r in records if isinstance(r, dict)] + [0]) + 1
        records.append(copy.deepcopy(record))
        self.assign(spec["to"], records)
