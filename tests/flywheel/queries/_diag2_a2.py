import time
import pytest
from devices.phone import PhoneConnection
from devices.reset import reset_phone
from flywheel.models import ExplorationRun, GemPage
from flywheel.queries import exploration, exploration_runs
from tests.flywheel.queries.test_exploration import phones

pytestmark = [pytest.mark.django_db(transaction=True)]

def test_diag(farm_settings):
    devices = phones()
    d = devices[0]
    phone = PhoneConnection.for_device(d)
    reset_phone(phone, None, apps=["com.android.settings"], baseline=d.baseline or None)
    run = ExplorationRun.objects.create(apps=["com.android.settings"], config={})
    config = {**exploration_runs.DEFAULT_CONFIG, "_deadline": time.monotonic() + 200}
    state = {}
    ex = exploration.AppExplorer(run.pk, "com.android.settings", phone, d, None, config, state, should_stop=lambda: False)
    ex.start(); ex.launch()
    seen, fp, reading = ex.observe()
    page = GemPage.objects.get(is_start=True, app__package="com.android.settings")
    print("main elems", [(e["text"], e["selector"], e["repeated"]) for e in reading.elements])
    print("scrollable", reading.scrollable, [e.get("scrollable") for e in reading.elements][:3])
    print("cands", [c[2] for c in ex.candidates(reading)])
    for i in range(3):
        ex.act({"action": "swipe", "direction": "up"})
        seen, fp2, reading2 = ex.observe()
        from flywheel.queries.page_identity import layout_distance, same_page
        print(i, "texts", reading2.texts[:30])
        print(i, "same", same_page(fp2, page, ex.thresholds), "looks", ex.looks_like(fp2, page), "act", fp2.activity, page.activity, "ld", layout_distance(fp2.layout_shape, page.layout_shape))
        print(i, "where looks", ex.looks_like(ex.where(), page))
        print(i, "cands", [c[2] for c in ex.candidates(reading2)])
