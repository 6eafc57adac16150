"""The engine runs a phone's declarative apps: tasks, page stacks, state, input and the screen.

One Engine per phone. Every change bumps `version`; `screen()` lays the screen out once per
version and that single Node tree answers screenshots, uiautomator dumps and taps.
"""
import logging
from dataclasses import dataclass, field

from simfarm import app_window, system_ui, ui, widgets
from simfarm.anomalies import Anomalies
from simfarm.context import PageContext
from simfarm.gestures import Gestures
from simfarm.ui import Node

log = logging.getLogger(__name__)
LAUNCHER = "com.google.android.apps.nexuslauncher"
LAUNCHER_ACTIVITY = ".NexusLauncherActivity"


@dataclass
class PageInstance:
    page_id: str
    params: dict = field(default_factory=dict)
    scroll: int = 0
    focused: dict | None = None      # the focused input's element spec (identity matters)
    dialog: tuple | None = None      # (dialog id, params)
    paste_menu: dict | None = None   # the input whose "Paste" popup is showing (after a long press)


@dataclass
class Task:
    task_id: int
    package: str
    stack: list = field(default_factory=list)
    anomaly: object = None           # an in-app anomaly (ad, login expired, ...) shown over this task

    @property
    def top(self) -> PageInstance:
        return self.stack[-1]


class Engine(Gestures):
    def __init__(self, phone, apps: dict, width: int, height: int):
        self.phone = phone
        self.apps = apps                  # installed AppSpecs by package
        self.metrics = ui.Metrics(width, height)
        self.tasks: list[Task] = []       # most recent last
        self.foreground: Task | None = None
        self.surface = "home"             # home | app | recents
        self.shade_open = False
        self.share_text: str | None = None
        self.toast_text: str | None = None
        self.toast_trap = False
        self.home_page = 0
        self.launcher_menu: str | None = None   # package whose long-press shortcut popup is open
        self.next_task_id = 11
        self.version = 0
        self._screen = None
        self._screen_version = -1
        self.anomalies = Anomalies(self)
        self.keyboard_mode = "letters"
        self._init_touch()

    # -- change tracking -----------------------------------------------------------------------

    def changed(self):
        self.version += 1

    # -- tasks and pages -------------------------------------------------------------------------

    def task_of(self, package):
        return next((t for t in self.tasks if t.package == package), None)

    def launch(self, package, page=None, params=None) -> bool:
        if package not in self.apps:
            return False
        task = self.task_of(package)
        start = self.apps[package].start
        if page not in self.apps[package].pages:
            page = None
        if task is None:
            # The intent's extras reach the first page before its on_open runs (onCreate sees them).
            first = dict(params or {}) if page in (None, start) else {}
            task = Task(self.next_task_id, package, [PageInstance(start, first)])
            self.next_task_id += 1
            self.tasks.append(task)
            self._opened(task)
            self.tasks.remove(task)
            delivered = page in (None, start)
        else:
            self.tasks.remove(task)
            delivered = False
        self.tasks.append(task)
        if page and page != task.top.page_id:
            self.push_page(task, page, params)
        elif params and not delivered:
            # onNewIntent: the page on top gets the extras and handles them as it does when opened.
            task.top.params.update(params)
            self.context(task).run(self.apps[package].pages[task.top.page_id].get("on_open") or [])
        self._bring_to_front(task)
        self.anomalies.on_app_opened(task)
        return True

    def _bring_to_front(self, task):
        self.foreground = task
        self.surface = "app"
        self.shade_open = False
        self.share_text = None
        self.changed()

    def push_page(self, task, page_id, params=None):
        if page_id not in self.apps[task.package].pages:
            log.warning("%s: no page %r", task.package, page_id)
            return
        task.top.focused = None
        task.stack.append(PageInstance(page_id, dict(params or {})))
        self._opened(task)

    def _opened(self, task):
        """A page became the top of its task: run on_open and focus its `focus` input."""
        spec = self.apps[task.package].pages[task.top.page_id]
        self.context(task).run(spec.get("on_open") or [])
        if spec.get("focus"):
            self.focus_element(task, spec["focus"])
        self.changed()

    def focus_element(self, task, element_id):
        def find(elements):
            for element in elements or []:
                if element.get("id") == element_id:
                    return element
                found = find(element.get("elements"))
                if found:
                    return found
            return None
        element = find(self.apps[task.package].pages[task.top.page_id].get("elements"))
        if element is not None:
            task.top.focused = element
            self.changed()

    def replace_page(self, task, page_id, params=None):
        if page_id not in self.apps[task.package].pages:
            log.warning("%s: no page %r", task.package, page_id)
            return
        task.stack[-1] = PageInstance(page_id, dict(params or {}))
        self._opened(task)

    def reset_task(self, task, page_id, params=None):
        if page_id not in self.apps[task.package].pages:
            return
        task.stack = [PageInstance(page_id, dict(params or {}))]
        self._opened(task)

    def force_stop(self, package):
        task = self.task_of(package)
        if task:
            self.tasks.remove(task)
            if self.foreground is task:
                self.foreground = None
                self.surface = "home"
        self.anomalies.on_app_stopped(package)
        self.changed()

    def remove_task(self, task):
        if task in self.tasks:
            self.tasks.remove(task)
        if self.foreground is task:
            self.foreground, self.surface = None, "home"
        self.changed()

    def context(self, task=None, page=None):
        task = task or self.foreground
        return PageContext(self, task, page or task.top)

    # -- keys ------------------------------------------------------------------------------------

    def home(self):
        self.shade_open = False
        self.share_text = None
        self.surface = "home"
        self.foreground = None
        self.home_page = 0
        self.launcher_menu = None
        self.anomalies.on_home()
        self.changed()

    def recents(self):
        if self.surface == "recents":
            if self.tasks:
                self.launch(self.tasks[-1].package)
            return
        self.shade_open = False
        self.share_text = None
        self.surface = "recents"
        self.foreground = None
        self.changed()

    def back(self):
        """Back closes the topmost thing, as Android does: keyboard, overlay, dialog, page."""
        self.changed()
        if self.launcher_menu is not None:
            self.launcher_menu = None
            return
        if self.shade_open:
            self.shade_open = False
            return
        if self.share_text is not None:
            self.share_text = None
            return
        if self.anomalies.handle_back():
            return
        if self.surface == "recents":
            self.surface = "home"
            return
        if self.surface != "app" or self.foreground is None:
            return
        task = self.foreground
        page = task.top
        if page.focused is not None:
            page.focused = None
            return
        if page.dialog is not None:
            dialog = self.apps[task.package].dialogs.get(page.dialog[0], {})
            if dialog.get("cancelable", True):
                page.dialog = None
            return
        page_spec = self.apps[task.package].pages.get(page.page_id, {})
        if page_spec.get("on_back"):
            self.context(task).run(page_spec["on_back"])
            return
        self.pop_page(task)

    def pop_page(self, task):
        if len(task.stack) > 1:
            task.stack.pop()
        else:  # back on a root activity moves the task to the background (Android 12+)
            self.surface, self.foreground = "home", None
        self.changed()

    def show_toast(self, text, trap=False):
        self.toast_text = text
        self.toast_trap = trap      # a "looks done" toast: the action it follows changed nothing
        self.changed()

    def open_share_sheet(self, text, source_package):
        self.share_text = text
        self.share_source = source_package
        self.changed()

    def open_shade(self):
        self.shade_open = True
        self.anomalies.heads_up = None  # a heads-up notification folds into the opened shade
        self.changed()

    # -- typing ----------------------------------------------------------------------------------

    def focused_input(self):
        if self.surface != "app" or self.foreground is None or self.anomalies.covers_app():
            return None, None
        page = self.foreground.top
        return (page.focused, self.context()) if page.focused is not None else (None, None)

    def type_text(self, text):
        spec, ctx = self.focused_input()
        if spec is None:
            return self.anomalies.type_text(text)
        current = ctx.get(spec.get("bind")) or ""
        ctx.assign(spec["bind"], str(current) + text)
        self.anomalies.after_action()

    def delete_char(self):
        spec, ctx = self.focused_input()
        if spec is not None:
            ctx.assign(spec["bind"], str(ctx.get(spec.get("bind")) or "")[:-1])

    def submit(self):
        spec, ctx = self.focused_input()
        if spec is not None and not spec.get("multiline"):
            ctx.page.focused = None
            ctx.run(spec.get("on_submit") or [])
            self.changed()
        elif spec is not None:
            self.type_text("\n")

    def on_keyboard_key(self, key):
        if key == "⌫":
            self.delete_char()
        elif key == "⏎":
            self.submit()
        else:
            self.type_text(" " if key == "␣" else key)

    # -- the screen ------------------------------------------------------------------------------

    def screen(self) -> Node:
        if self._screen is None or self._screen_version != self.version:
            self._screen_version = self.version
            self._screen = self._compose()
        return self._screen

    def _compose(self) -> Node:
        m = self.metrics
        root = Node(bounds=(0, 0, m.width, m.height), window="screen")
        if self.surface == "app" and self.foreground is not None:
            root.add(self._app_window(self.foreground))
        elif self.surface == "recents":
            root.add(system_ui.recents(self))
        else:
            root.add(system_ui.launcher(self))
        if self.surface == "app" and self.foreground is not None:
            dialog = self._app_dialog(self.foreground)
            if dialog is not None:
                root.add(dialog)
            spec, _ = self.focused_input()
            if spec is not None:
                root.add(widgets.keyboard(m, self.on_keyboard_key))
        for window in self.anomalies.windows():
            root.add(window)
        if self.share_text is not None:
            root.add(system_ui.share_sheet(self))
        # System bars sit above app windows and dialogs (they are never dimmed), below the shade.
        root.add(widgets.status_bar(m, self.phone.clock_text(), self.phone.battery_level,
                                    self.phone.wifi_on, self.phone.data_on, self.phone.airplane_on))
        root.add(widgets.nav_bar(m))
        if self.shade_open:
            root.add(system_ui.shade(self))
        for window in self.anomalies.top_windows():
            root.add(window)
        if self.toast_text:
            root.add(widgets.toast(m, self.toast_text))
        return root

    def _app_window(self, task) -> Node:
        return app_window.app_window(self, task)

    def _app_dialog(self, task):
        return app_window.app_dialog(self, task)

    # -- facts for dumpsys -----------------------------------------------------------------------

    def focus(self):
        """(package, activity, window title) of the focused window: the topmost one drawn."""
        if self.shade_open:
            return ("com.android.systemui", "", "NotificationShade")
        if self.share_text is not None:
            return ("com.android.intentresolver", ".ChooserActivity", "")
        overlay = self.anomalies.focus()
        if overlay:
            return overlay
        if self.surface == "app" and self.foreground is not None:
            task = self.foreground
            return (task.package, self.apps[task.package].activity_of(task.top.page_id), "")
        if self.surface == "recents":
            return (LAUNCHER, "com.android.quickstep.RecentsActivity", "")
        return (LAUNCHER, LAUNCHER_ACTIVITY, "")

    def resumed(self):
        """(package, activity, task id) of the resumed activity (the app under any overlay)."""
        if self.surface == "app" and self.foreground is not None:
            task = self.foreground
            return task.package, self.apps[task.package].activity_of(task.top.page_id), task.task_id
        return LAUNCHER, LAUNCHER_ACTIVITY, 1
