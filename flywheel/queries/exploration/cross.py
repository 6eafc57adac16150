"""The explorer's steps out of the app (§2.2.5): another app or the share sheet came to the front.
Each target becomes a page of that app and a cross edge; the share sheet's targets are opened once
each. A mixin of explorer.AppExplorer (it uses its act/observe/where/back_to)."""
from __future__ import annotations

from flywheel.queries.exploration import store
from flywheel.queries.exploration.rules import is_share_sheet
from flywheel.screens.page_identity import same_page


class CrossAppSteps:
    def landed_elsewhere(self, page, item, step, observed):
        seen, print_, reading = observed
        if is_share_sheet(reading):
            sheet = store.system_page(self.run_id, observed, "share_sheet", self.thresholds)
            store.record_edge(self.run_id, page, sheet, "tap", step, kind="cross")
            if not self.state.get("shared"):
                self.state["shared"] = True
                self.share_targets(page, item, step, sheet, observed)
            return
        other = store.app_row(reading.package)
        if seen.foreground.get("package") == reading.package:
            target, _ = store.record_page(self.run_id, other, observed, depth=0,
                                          thresholds=store.thresholds(other))
            store.record_edge(self.run_id, page, target, "tap", step, kind="cross")
            self.touched(reading.package)
        else:
            self.problem("unexpected_screen", f"{reading.package} over {self.package} after {step}: "
                                              f"{reading.texts[:3]}")

    def touched(self, package):
        touched = self.state.setdefault("touched", [])
        if package not in touched and package != self.package:
            touched.append(package)

    def share_targets(self, page, item, share_step, sheet, observed):
        """Where the share sheet leads: each target app once (the sheet is opened again for each)."""
        targets = [e for e in observed[2].elements if e["clickable"] and e["text"]]
        for element in targets[: int(self.config.get("max_share_targets", 4))]:
            here = self.where()
            if here is None or not same_page(here, sheet, self.thresholds):
                self.back_to(page, item)
                if not self.act(share_step):
                    return
            step = {"action": "click", "target": element["selector"]}
            if not self.act(step):
                continue
            landed = self.observe()
            if landed is None:
                continue
            package = landed[2].package
            if package and package not in (sheet.app.package, self.package) and "launcher" not in package:
                other = store.app_row(package)
                target, _ = store.record_page(self.run_id, other, landed, depth=0, thresholds=store.thresholds(other))
                store.record_edge(self.run_id, sheet, target, "share", step, kind="cross")
                self.touched(package)
