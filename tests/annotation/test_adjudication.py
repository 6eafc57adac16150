"""Adjudication: claims with expiry, decisions routed, calibration, and the flow in a real browser."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from annotation import adjudication
from flywheel.blobs import store_blob
from flywheel.judging.calibration import consensus_rate_by_day, system_agreement
from flywheel.models import Query, SftEntry, Step, Trajectory, Verdict, Vote
from tests.conftest import PASSWORD

SCREEN = ('<?xml version="1.0" ?><hierarchy rotation="0"><node index="0" text="Bluetooth" '
          'resource-id="com.android.settings:id/bluetooth_switch" class="android.widget.Switch" '
          'package="com.android.settings" content-desc="" clickable="true" bounds="[0,300][1080,450]" />'
          '</hierarchy>')


def png(width=108, height=240, shade=0):
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (shade, 120, 200)).save(buffer, "PNG")
    return buffer.getvalue()


def undetermined_trajectory(steps=2):
    query = Query.objects.create(key=f"q{Query.objects.count()}", text="Turn Bluetooth on", tier="L2",
                                 verification={})
    trajectory = Trajectory.objects.create(query=query, line="automatic", status="completed",
                                           verdict="undetermined", destination="adjudication",
                                           finished_at=timezone.now())
    for i in range(steps):
        Step.objects.create(trajectory=trajectory, index=i, screenshot=store_blob(png(shade=i * 60), "png"),
                            hierarchy=store_blob(SCREEN.encode(), "xml"),
                            executed_action={"action": "click", "point": [540, 375]} if i < steps - 1
                            else {"action": "terminate", "status": "success"},
                            cot={"observation": f"screen {i}", "plan": "tap the switch"})
    for system, vote in (("A", "abstain"), ("B", "true"), ("C", "false")):
        Vote.objects.create(trajectory=trajectory, system=system, vote=vote, rationale=f"{system} says {vote}")
    Verdict.objects.create(trajectory=trajectory, outcome="undetermined")
    return trajectory


def adjudicator(name):
    user = User.objects.create_user(username=name, password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="adjudicator")[0])
    return user


@pytest.mark.django_db
def test_two_people_never_judge_one_trajectory():
    trajectory = undetermined_trajectory()
    alice, bob = adjudicator("alice"), adjudicator("bob")
    assert adjudication.claim(trajectory.pk, alice).adjudicator == alice
    with pytest.raises(adjudication.ClaimRefused, match="alice"):
        adjudication.claim(trajectory.pk, bob)
    assert adjudication.next_for(bob) is None
    # Alice walks away: her claim expires and Bob may take it.
    trajectory.adjudications.update(claimed_until=timezone.now() - timedelta(seconds=1))
    assert adjudication.next_for(bob).trajectory == trajectory
    with pytest.raises(adjudication.ClaimRefused):
        adjudication.decide(trajectory.pk, alice, "correct")


@pytest.mark.django_db
@pytest.mark.parametrize("decision,outcome,destination", [
    ("correct", "true", "sft"), ("wrong", "false", "ecdm"), ("environment", "env_error", "env_healing")])
def test_decisions_route_the_trajectory(decision, outcome, destination):
    trajectory = undetermined_trajectory()
    alice = adjudicator("alice")
    adjudication.decide(trajectory.pk, alice, decision, note="checked step 2")
    trajectory.refresh_from_db()
    assert (trajectory.verdict, trajectory.destination) == (outcome, destination)
    assert SftEntry.objects.filter(trajectory=trajectory, intake="adjudicated").exists() == (decision == "correct")
    assert trajectory.adjudications.get().note == "checked step 2"
    assert adjudication.waiting_for_adjudication().count() == 0


@pytest.mark.django_db
def test_decisions_calibrate_the_systems():
    first, second = undetermined_trajectory(), undetermined_trajectory()
    alice = adjudicator("alice")
    adjudication.decide(first.pk, alice, "correct")
    adjudication.decide(second.pk, alice, "wrong")
    agreement = system_agreement()
    assert agreement["A"] == {"votes": 0, "agreed": 0, "abstained": 2, "rate": None}
    assert agreement["B"]["agreed"] == 1 and agreement["C"]["agreed"] == 1
    assert agreement["B"]["rate"] == 0.5
    Verdict.objects.create(trajectory=first, outcome="true")
    today = consensus_rate_by_day()[-1]
    assert today["verdicts"] == 3 and today["rate"] == round(1 / 3, 3)


@pytest.mark.django_db(transaction=True)
def test_the_adjudication_flow_in_a_real_browser(role_users, asgi_server, browser):
    trajectory = undetermined_trajectory(steps=3)
    user = role_users["adjudicator"]
    page = browser.new_page()
    page.goto(asgi_server + "/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(asgi_server + "/adjudication/")
    page.keyboard.press("n")                               # data-shortcut="n" through shortcuts.js
    page.wait_for_url(f"{asgi_server}/adjudication/{trajectory.pk}/")
    assert "C says false" in page.get_by_test_id("vote-C").inner_text()
    assert page.locator("#step-number").inner_text() == "1"
    assert page.locator(".frame:not([hidden]) img").first.evaluate("img => img.naturalWidth") == 108
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.locator("#step-number").inner_text() == "3"
    page.keyboard.press("ArrowLeft")
    assert page.locator("#step-number").inner_text() == "2"
    assert "screen 1" in page.locator(".frame:not([hidden]) .reasoning").inner_text()
    page.keyboard.press("n")
    assert page.evaluate("document.activeElement.id") == "note"
    page.keyboard.type("switch turned on in the after frame")  # its n and 1-3 keys are typed, not shortcuts
    page.keyboard.press("Escape")                               # leaves the note; does not release
    assert page.evaluate("document.activeElement === document.body")
    page.keyboard.press("1")
    page.wait_for_url(asgi_server + "/adjudication/")
    assert "1 recorded" not in page.content() and "correct recorded" in page.content()
    page.close()
    trajectory.refresh_from_db()
    assert trajectory.destination == "sft" and trajectory.verdict == "true"
    decided = trajectory.adjudications.get()
    assert decided.adjudicator == user and decided.note == "switch turned on in the after frame"
    assert SftEntry.objects.filter(trajectory=trajectory, intake="adjudicated").exists()


@pytest.mark.django_db
def test_opening_a_trajectory_claims_nothing_claiming_is_a_post(client):
    trajectory = undetermined_trajectory()
    alice, bob = adjudicator("alice"), adjudicator("bob")
    client.force_login(alice)
    page = client.get(f"/adjudication/{trajectory.pk}/")
    assert page.status_code == 200 and b'data-testid="claim"' in page.content
    assert b"decision-form" not in page.content and not trajectory.adjudications.exists()
    assert client.post(f"/adjudication/{trajectory.pk}/claim/").status_code == 302
    claim = trajectory.adjudications.get()
    assert claim.adjudicator == alice and claim.decision == ""
    assert b"decision-form" in client.get(f"/adjudication/{trajectory.pk}/").content
    client.force_login(bob)                                # Bob can look, not decide or take it
    page = client.get(f"/adjudication/{trajectory.pk}/").content.decode()
    assert "alice is judging it" in page and "decision-form" not in page
    refused = client.post(f"/adjudication/{trajectory.pk}/claim/", follow=True).content.decode()
    assert "judging it until" in refused and trajectory.adjudications.get().adjudicator == alice
    assert client.post("/adjudication/999999/claim/").status_code == 404


@pytest.mark.django_db
def test_the_step_player_says_each_action_in_words_and_names_the_app(client):
    from flywheel.models import App

    App.objects.create(package="com.sim.translator", label="Translator")
    trajectory = undetermined_trajectory(steps=3)
    steps = list(trajectory.steps.order_by("index"))
    Step.objects.filter(pk=steps[0].pk).update(executed_action={"action": "open", "app": "com.sim.translator"},
                                               foreground_package="com.sim.translator")
    Step.objects.filter(pk=steps[1].pk).update(executed_action={"action": "type", "text": "milk"},
                                               foreground_package="com.sim.translator")
    client.force_login(adjudicator("carol"))
    page = client.get(f"/adjudication/{trajectory.pk}/").content.decode()
    assert "<strong>Action:</strong> Open Translator" in page
    assert "<strong>Action:</strong> Type &quot;milk&quot;" in page
    assert "<strong>Action:</strong> Finish: the task is complete" in page
    assert "in Translator" in page
    assert "com.sim.translator" not in page and "{&#x27;action" not in page
