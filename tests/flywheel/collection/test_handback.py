"""The hand-back channel (§2.3.7) on real screens of the virtual farm: each of the fourteen states is
recognised, the right step is written (call_user, or the tap that closes a skippable page — carried
out here, it closes it), and a collected trajectory that met one gives a sample through SFT intake's
consistency gate that the training export turns into exactly one sample."""
import json
from pathlib import Path

import pytest
from django.utils import timezone

from devices.executor import ActionExecutor
from devices.observation import observe
from devices.phone import PhoneConnection
from devices.reset import reset_phone
from devices.uitree import page_text, parse_hierarchy
from flywheel.blobs import store_blob
from flywheel.collection import handback
from flywheel.models import HandbackSample, LabelGate, SftEntry, Step, Trajectory
from flywheel.rules.consistency import GateStep, check_bidirectional_consistency
from flywheel.rules.handback import BY_KEY, CLASSES, Behaviour, right_step, state_on_screen
from simfarm.farm import Farm
from simfarm.serve import ServerThread
from tests.flywheel.repair.stored import make_query, node
from training.models import DataSnapshot
from training.snapshots import create_snapshot

pytestmark = pytest.mark.django_db
SHOP = "com.sim.shop"
DISMISSED_BY = {"ad_popup": "Close", "update_prompt": "Later", "rating_prompt": "Not now"}


@pytest.fixture(scope="module")
def phone():
    farm = Farm(devices=1, seed=0)
    with ServerThread(farm) as server:
        yield PhoneConnection(f"127.0.0.1:{server.port}", next(iter(farm)).serial)


def shop_home(phone):
    reset_phone(phone, {"force_stop": [SHOP], "home": True}, apps=[SHOP])
    phone.shell(f"am start -n {SHOP}/.MainActivity")
    return observe(phone)


def showing(phone, kind):
    shop_home(phone)
    phone.shell(f"am broadcast -a com.sim.ANOMALY --es kind {kind} --es package {SHOP}")
    return observe(phone)


def test_fourteen_classes_eleven_hand_back_three_skippable():
    assert len(CLASSES) == 14 and len(BY_KEY) == 14
    assert {c.key for c in CLASSES if c.behaviour == Behaviour.BYPASS} == set(DISMISSED_BY)


@pytest.mark.parametrize("key", [c.key for c in CLASSES])
def test_each_state_is_recognised_and_its_right_step_written(phone, key):
    assert state_on_screen(parse_hierarchy(shop_home(phone).hierarchy_xml)) is None   # a plain page
    seen = showing(phone, key)
    try:
        roots = parse_hierarchy(seen.hierarchy_xml)
        found = state_on_screen(roots)
        assert found is not None, page_text(roots)
        klass, marker = found
        assert klass.key == key
        action, cot = right_step(klass, marker, roots)
        # what SFT intake's gate checks: the words describe the action and quote only what is on screen
        gate = GateStep(0, cot, action, page_text(roots), screen=(1080, 2400))
        assert check_bidirectional_consistency([gate]) == []
        if klass.behaviour == Behaviour.HAND_BACK:
            assert action["action"] == "call_user" and action["reason"]
            return
        hit = [n for n in roots[0].walk() if n.clickable and n.contains(*action["point"])]
        assert any(DISMISSED_BY[key] in (n.text, n.desc) for n in hit), (key, action)
        assert ActionExecutor(phone, holder="handback-test").execute(action, hierarchy_xml=seen.hierarchy_xml).ok
        assert state_on_screen(parse_hierarchy(observe(phone).hierarchy_xml)) is None   # closed: the task goes on
    finally:
        phone.shell("am broadcast -a com.sim.ANOMALY --es kind clear")


def test_a_hand_back_state_wins_over_a_skippable_page_beside_it():
    ad = node("", f"{SHOP}:id/ad_close", "android.widget.ImageButton", (900, 100, 1020, 220), True, SHOP, desc="Close")
    captcha = node("Security verification", f"{SHOP}:id/captcha_title", bounds=(60, 300, 1020, 400), package=SHOP)
    screen = f'<?xml version="1.0" ?><hierarchy rotation="0">{node("", "", "android.widget.FrameLayout", (0, 0, 1080, 2400), package=SHOP, children=ad + captcha)}</hierarchy>'
    klass, marker = state_on_screen(parse_hierarchy(screen))
    assert klass.key == "captcha" and marker.text == "Security verification"
    # a skippable page with no control to close it gives no step (a guessed tap teaches nothing)
    bare = f'<?xml version="1.0" ?><hierarchy rotation="0">{node("Rate us", "", package=SHOP, bounds=(0, 0, 1080, 200))}</hierarchy>'
    roots = parse_hierarchy(bare)
    klass, marker = state_on_screen(roots)
    assert klass.key == "rating_prompt" and right_step(klass, marker, roots) is None


def collected(phone, states, line="automatic", query=None):
    """A collected, judged trajectory on the shop: step 0 its home page, then one step per state
    (None: the home page again); each step tapped the middle of the screen (the model's own slip)."""
    query = query or make_query(text="Add the headphones to the cart", package=SHOP, label="ShopMart")
    trajectory = Trajectory.objects.create(query=query, line=line, status="completed", verdict="false",
                                           destination="ecdm", finished_at=timezone.now())
    for index, state in enumerate([None, *states]):
        seen = showing(phone, state) if state else shop_home(phone)
        phone.shell("am broadcast -a com.sim.ANOMALY --es kind clear")
        tap = {"action": "click", "point": [540, 1200], "coords": "pixel"}
        Step.objects.create(trajectory=trajectory, index=index, foreground_package=SHOP, executed_action=tap,
                            proposed_action=tap, screenshot=store_blob(seen.png, "png"),
                            hierarchy=store_blob(seen.hierarchy_xml.encode(), "xml"), timings={"screen": [1080, 2400]},
                            cot={"Observation": "The shop's home page.", "Plan": "Find the headphones.",
                                 "Decision": "Tap the middle of the page.", "Reflection": "", "Memory": ""})
    return trajectory


def test_a_trajectory_that_met_states_gives_one_sample_per_state_through_the_gate(phone):
    source = collected(phone, [None, "captcha", "captcha", "ad_popup"])
    made = handback.gather(source.pk)
    assert sorted((m.state, m.step_index, m.behaviour) for m in made) == [
        ("ad_popup", 4, "bypass"), ("captcha", 2, "hand_back")]      # the first screen of each state
    captcha = HandbackSample.objects.get(source=source, state="captcha").sample
    assert (captcha.line, captcha.verdict, captcha.destination, captcha.derived_from_id) == (
        "handback", "true", "sft", source.pk)
    steps = list(captcha.steps.order_by("index"))
    assert [s.index for s in steps] == [0, 1, 2]
    context, written = steps[:2], steps[2]
    assert all(s.label_masked and s.label_gate == "" for s in context)          # context only, no loss
    assert [s.screenshot.name for s in steps] == [s.screenshot.name for s in source.steps.order_by("index")[:3]]
    assert written.executed_action["action"] == "call_user" and written.label_gate == LabelGate.PASSED
    assert written.edit["handback"]["source_action"] == {"action": "click", "point": [540, 1200], "coords": "pixel"}
    assert SftEntry.objects.get(trajectory=captcha).intake == "handback"
    # once per state: the job again makes nothing, and the source is untouched
    assert handback.gather(source.pk) == [] and HandbackSample.objects.count() == 2
    assert Trajectory.objects.get(pk=source.pk).verdict == "false" and source.steps.count() == 5


def test_benchmark_rollouts_held_out_queries_and_samples_give_none(phone):
    rollout = collected(phone, ["captcha"], line="benchmark")
    held_out = collected(phone, ["captcha"])
    held_out.query.evaluation_only = True
    held_out.query.save(update_fields=["evaluation_only"])
    assert handback.gather(rollout.pk) == [] and handback.gather(held_out.pk) == []
    source = collected(phone, ["login_expired"])
    sample = handback.gather(source.pk)[0].sample
    assert handback.gather(sample.pk) == [] and HandbackSample.objects.count() == 1


def test_the_export_gives_the_written_step_alone(phone, settings, tmp_path):
    settings.TRAINING_ROOT = tmp_path / "training"
    source = collected(phone, [None, "region_wall"])
    handback.gather(source.pk)
    snapshot = create_snapshot(DataSnapshot.Kind.SFT, {"k": 2}, background=False)
    assert snapshot.status == DataSnapshot.Status.READY, snapshot.error
    lines = [json.loads(line) for line in (Path(snapshot.directory) / "data.jsonl").read_text().splitlines()]
    assert [(line["meta"]["source"], line["meta"]["step"]) for line in lines] == [("handback", 2)]
    answer = lines[0]["messages"][-1]["content"]
    assert "call_user" in answer and "region" in answer.lower()
    assert len(lines[0]["images"]) == 2     # the step before as history, the state's own screen


def test_the_page_counts_each_class_against_its_target(phone, client_as, settings):
    settings.HANDBACK_TARGET_PER_CLASS = 2
    empty = client_as("manager").get("/pools/handback/")
    assert empty.status_code == 200 and b"No hand-back sample yet" in empty.content
    handback.gather(collected(phone, ["captcha", "rating_prompt"]).pk)
    handback.gather(collected(phone, ["captcha"]).pk)
    page = client_as("manager").get("/pools/handback/").content.decode()
    assert "3 of 28" in page and "1 of 14 classes reached it" in page
    captcha = page[page.index('data-state="captcha"'):]
    assert "<td>CAPTCHA</td>" in captcha[:200] and "<td>2</td><td>2</td>" in captcha[:400]
    assert "Rating prompt" in page and "Close or bypass" in page
    assert client_as("annotator").get("/pools/handback/").status_code == 403


def test_a_samples_page_says_what_it_is_and_where_it_came_from(phone, client_as):
    source = collected(phone, ["age_verification"])
    sample = handback.gather(source.pk)[0].sample
    page = client_as("manager").get(f"/trajectories/{sample.pk}/").content.decode()
    assert "A hand-back sample: Age verification at step 1 of #" in page
    assert f'href="/trajectories/{source.pk}/"' in page and "Hand-back sample (written by rule)" in page
