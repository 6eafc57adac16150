import os, time, json
import pytest
from flywheel.models import GemPage, Edge
from flywheel.queries.exploration_runs import explore_apps_now
from tests.flywheel.queries.test_exploration import phones
from simfarm.appspec import app_files, load_app

pytestmark = [pytest.mark.django_db(transaction=True)]

def truth(package):
    for path in app_files():
        spec = load_app(path)
        if spec.package == package:
            return {spec.activity_of(p): p for p in spec.pages}

def test_diag(farm_settings):
    apps = os.environ.get("DIAG_APPS", "com.android.settings").split(",")
    devices = phones()
    t = time.monotonic()
    run = explore_apps_now(apps, {"max_seconds": int(os.environ.get("DIAG_S", 400))}, devices=devices[:len(apps)])
    print("elapsed", time.monotonic() - t, run.status)
    for package in apps:
        tr = truth(package)
        explored = set(GemPage.objects.filter(app__package=package).values_list("activity", flat=True))
        reached = {p for a, p in tr.items() if a in explored}
        print(package, f"{len(reached)}/{len(tr)}", "missed", sorted(set(tr.values()) - reached))
        print("report", run.report.get(package))
    for p in run.problems[:60]:
        print("PROBLEM", p)
