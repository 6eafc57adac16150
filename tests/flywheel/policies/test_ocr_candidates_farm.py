"""The offline policy on a page of the virtual farm whose UI dump is blind (issue #33): ShopMart's
flash sale is a web view, its "Grab deal" buttons exist only in pixels. Through the real executor
and safety audit over the ADB protocol; the farm's own cart says whether the deal was taken."""
import os
import shutil

import pytest

from devices.observation import observe
from devices.phone import PhoneConnection
from flywheel.policies import OfflinePolicy
from flywheel.policies.episode import run_episode
from flywheel.screens.blindness import hierarchy_is_blind
from simfarm.farm import Farm
from simfarm.serve import ServerThread

pytestmark = pytest.mark.django_db
SHOP = "com.sim.shop"


@pytest.fixture(scope="module")
def phone():
    farm = Farm(devices=1, seed=0)
    with ServerThread(farm) as server:
        yield PhoneConnection(f"127.0.0.1:{server.port}", next(iter(farm)).serial)


def test_the_offline_policy_takes_a_deal_shown_only_in_a_web_view(phone):
    if not shutil.which("tesseract"):
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but Debian's tesseract-ocr is not installed")
        pytest.skip("tesseract is not installed (apt-get install tesseract-ocr)")
    task = {"key": "flash-grab-deal", "text": "Open ShopMart, tap Flash sale, then tap Grab deal", "apps": [SHOP],
            "reset": {"force_stop": [SHOP], "clear": [SHOP], "home": True}}
    episode = run_episode(phone, task, OfflinePolicy(), max_steps=8)
    taps = [(cot, action) for cot, action, _ in episode.steps if action["action"] == "click"]
    assert episode.outcome == "terminate:success", [(cot["Decision"], action) for cot, action, _ in episode.steps]
    assert [cot["Decision"].split(" at ")[0] for cot, _ in taps] == ['Tap "Flash sale"', 'Tap "Grab deal"']
    assert "read from the screenshot" in taps[1][0]["Observation"]
    assert hierarchy_is_blind(observe(phone).hierarchy_xml)  # it acted from the web view itself
    cart = phone.shell(f"content query --uri content://{SHOP}/cart")
    assert "Sony WH-CH720N Headphones" in cart, cart
