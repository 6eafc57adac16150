"""The trajectory page: steps, votes, verdicts, adjudication, attribution with evidence per level,
repairs, samples and derived queries, a sample's origin; who may open it."""
import io

import pytest
from django.utils import timezone
from PIL import Image

from flywheel.blobs import store_blob
from flywheel.models import (
    Adjudication,
    Attribution,
    Query,
    Repair,
    RuleFlag,
    SftEntry,
    Step,
    Trajectory,
    Verdict,
    Vote,
)

pytestmark = pytest.mark.django_db

SCREEN = ('<?xml version="1.0" ?><hierarchy rotation="0"><node index="0" text="Wi-Fi" '
          'resource-id="com.android.settings:id/wifi" class="android.widget.TextView" '
          'package="com.android.settings" content-desc="" clickable="true" bounds="[0,300][1080,450]" />'
          '<node index="1" text="Bluetooth" resource-id="com.android.settings:id/bt" '
          'class="android.widget.TextView" package="com.android.settings" content-desc="" clickable="true" '
          'bounds="[0,500][1080,650]" /></hierarchy>')


def png(shade=0):
    buffer = io.BytesIO()
    Image.new("RGB", (108, 240), (shade, 120, 200)).save(buffer, "PNG")
    return buffer.getvalue()


def failed_trajectory(**extra):
    query = Query.objects.create(key=f"bt-{Query.objects.count()}", text="Turn Bluetooth on", tier="L2",
                                 verification={"terminal": []})
    fields = {"query": query, "line": "automatic", "status": "completed", "verdict": "false",
              "destination": "ecdm", "finished_at": timezone.now(), **extra}
    trajectory = Trajectory.objects.create(**fields)
    actions = [{"action": "click", "point": [540, 375]}, {"action": "click", "point": [540, 375]},
               {"action": "terminate", "status": "success"}]
    for i, action in enumerate(actions):
        Step.objects.create(trajectory=trajectory, index=i, screenshot=store_blob(png(i * 60), "png"),
                            hierarchy=store_blob(SCREEN.encode(), "xml"), executed_action=action,
                            cot={"observation": f"settings screen {i}", "plan": "open Bluetooth"},
                            score=0.2 + i / 10, takeover=(i == 2), foreground_package="com.android.settings")
    return trajectory


def full_story():
    """A failure with votes, a verdict, an attribution (evidence per level), a Teacher step
    correction that made a sample and replayed its prefix, and an RQA repair with its Q′."""
    trajectory = failed_trajectory()
    for system, vote in (("A", "false"), ("B", "false"), ("C", "true")):
        Vote.objects.create(trajectory=trajectory, system=system, vote=vote, rationale=f"system {system} found it")
    Verdict.objects.create(trajectory=trajectory, outcome="false", rationale="two of three say False")
    attribution = Attribution.objects.create(
        trajectory=trajectory, level=3, cause="perception_drift", first_bad_step=1, owner="ecdm", ecdm_path="step",
        capability="grounding", features={"facts": {"level": 3, "cause": "perception_drift"}},
        evidence=[{"level": 1, "conclusion": "clear", "cause": "", "detail": "no pop-up, network up", "steps": []},
                  {"level": 2, "conclusion": "clear", "cause": "", "detail": "query verifiable, rules agree",
                   "steps": []},
                  {"level": 3, "conclusion": "found", "cause": "perception_drift",
                   "detail": "tapped Wi-Fi instead of Bluetooth", "steps": [1]}])
    sample = Trajectory.objects.create(query=trajectory.query, line="ecdm", status="completed", verdict="true",
                                       destination="sft", derived_from=trajectory)
    continuation = Trajectory.objects.create(query=trajectory.query, line="ecdm", status="completed",
                                             verdict="true", destination="sft", derived_from=trajectory)
    step_repair = Repair.objects.create(
        trajectory=trajectory, attribution=attribution, path="step", step_index=1, status="done",
        teacher_output={"action": {"action": "click", "point": [540, 575]}, "confidence": 0.92,
                        "source": "gem", "rationale": "Bluetooth leads to the target page"},
        confidence=0.92, correction={"action": {"action": "click", "point": [540, 575]}, "by": "teacher",
                                     "cot": {"decision": "Tap Bluetooth"}},
        replay={"status": "replayed", "reason": "prefix matched", "trajectory": continuation.pk},
        sample=sample, finished_at=timezone.now())
    SftEntry.objects.create(trajectory=sample, intake="ecdm_repaired", repair=step_repair)
    q_prime = Query.objects.create(key="bt-rqa", text="Open the settings", tier="L1", source="rqa",
                                   derived_from=trajectory, verification={})
    rqa = Repair.objects.create(trajectory=trajectory, attribution=attribution, path="rqa", step_index=1,
                                status="needs_human", human_fallback=True,
                                human_reason="Teacher confidence 0.3 below 0.6", derived_query=q_prime)
    return trajectory, attribution, sample, continuation, step_repair, rqa


def test_a_manager_sees_every_stage_of_a_failure(client_as):
    trajectory, attribution, sample, continuation, step_repair, rqa = full_story()
    page = client_as("manager").get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert "Turn Bluetooth on" in page
    for system in "ABC":
        assert f'data-testid="vote-{system}"' in page and f"system {system} found it" in page
    assert "two of three say False" in page
    # attribution: every level's conclusion and what it rests on, the first wrong step, the path
    for detail in ("no pop-up, network up", "query verifiable, rules agree", "tapped Wi-Fi instead of Bluetooth"):
        assert detail in page
    for level in (1, 2, 3):
        assert f'data-testid="evidence-{level}"' in page
    assert "perception_drift" in page and "First wrong step" in page and 'href="#step-1"' in page
    assert 'data-testid="ecdm-path">step<' in page and "grounding" in page
    # repairs: Teacher output, correction, replay with its continuation, the sample; RQA's Q′, human reason
    assert "Bluetooth leads to the target page" in page and "0.92" in page
    assert "Correction by teacher" in page and "Tap at (540, 575)" in page
    assert "prefix matched" in page and f'href="/trajectories/{continuation.pk}/"' in page
    assert f'href="/trajectories/{sample.pk}/"' in page
    assert "bt-rqa" in page and "Open the settings" in page and "Teacher confidence 0.3 below 0.6" in page
    # steps: screens, actions, reasoning, scores, takeover, the first wrong step marked, the fix drawn
    assert page.count('class="frame"') == 3 and "settings screen 2" in page
    assert 'data-testid="first-bad"' in page and 'data-testid="takeover"' in page and "score 0.30" in page
    assert 'class="fix"' in page and 'class="tap"' in page and 'class="hit"' in page
    assert "Wi-Fi" in page  # the element the wrong tap hit
    # its path in words, up to where it stands now
    assert "attributed Level 3 · model: perception_drift, first bad step 1" in page
    assert f"Step-level correction repair #{step_repair.pk}: Done → sample #{sample.pk}" in page
    assert "now: Repaired: sample in the SFT pool (ecdm_repaired)" in page


def test_a_sample_shows_where_it_came_from(client_as):
    trajectory, _, sample, continuation, step_repair, _ = full_story()
    client = client_as("manager")
    page = client.get(f"/trajectories/{sample.pk}/").content.decode()
    assert 'data-testid="origin"' in page and f'href="/trajectories/{trajectory.pk}/"' in page
    assert f"repair #{step_repair.pk}, step 1" in page and "ECDM repaired" in page
    assert "ECDM samples are never judged" in page and "ECDM samples are not attributed" in page
    follow_on = client.get(f"/trajectories/{continuation.pk}/").content.decode()
    assert f"the continuation collected after repair #{step_repair.pk}" in follow_on


def test_an_earlier_attribution_and_a_rule_flag_stay_visible(client_as):
    trajectory = failed_trajectory()
    Attribution.objects.create(trajectory=trajectory, level=2, cause="verifier_defect", owner="rule_fix",
                               evidence=[{"level": 1, "conclusion": "clear", "detail": "no anomaly"},
                                         {"level": 2, "conclusion": "found", "cause": "verifier_defect",
                                          "detail": "System A checked the wrong key", "steps": []}])
    RuleFlag.objects.create(query=trajectory.query, trajectory=trajectory, system="A",
                            rule={"check": "settings", "key": "bluetooth_on"}, reason="A alone said False")
    page = client_as("manager").get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert "System A checked the wrong key" in page and "bluetooth_on" in page and "A alone said False" in page
    assert "Verifier defect: rule flagged for fixing" in page


def test_unattributed_and_stepless_trajectories_render(client_as):
    query = Query.objects.create(key="empty", text="Do nothing", tier="L1", verification={})
    trajectory = Trajectory.objects.create(query=query, line="automatic", verdict="env_error",
                                           destination="env_healing", status="interrupted")
    broken = failed_trajectory()
    Step.objects.filter(trajectory=broken, index=0).update(hierarchy="blobs/missing.xml",
                                                           screenshot="blobs/missing.png")
    client = client_as("manager")
    page = client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert 'data-testid="no-steps"' in page and "Not attributed yet" in page and "now: Not yet attributed" in page
    assert client.get(f"/trajectories/{broken.pk}/").status_code == 200
    assert client.get("/trajectories/999999/").status_code == 404


def test_access_follows_object_visibility(client, role_users):
    trajectory, _, sample, _, step_repair, rqa = full_story()
    url = f"/trajectories/{trajectory.pk}/"
    assert client.get(url).status_code == 302  # anonymous: to the login page
    client.force_login(role_users[None])
    assert client.get(url).status_code == 403  # no role
    for role in ("manager", "admin"):
        client.force_login(role_users[role])
        assert client.get(url).status_code == 200 and client.get(f"/trajectories/{sample.pk}/").status_code == 200

    # an annotator: their own sessions, and the failures of the human repair queue
    client.force_login(role_users["annotator"])
    own = failed_trajectory(annotator=role_users["annotator"], line="semi_auto")
    other = failed_trajectory()
    assert client.get(f"/trajectories/{own.pk}/").status_code == 200
    assert client.get(f"/trajectories/{other.pk}/").status_code == 404
    assert client.get(url).status_code == 200  # its RQA repair waits for a person
    assert client.get(f"/trajectories/{sample.pk}/").status_code == 404  # a sample someone else made
    Repair.objects.filter(pk=rqa.pk).update(status="failed")
    assert client.get(url).status_code == 404

    # an adjudicator: the Undetermined queue and what they decided
    client.force_login(role_users["adjudicator"])
    waiting = failed_trajectory(verdict="undetermined", destination="adjudication")
    decided = failed_trajectory()
    Adjudication.objects.create(trajectory=decided, adjudicator=role_users["adjudicator"], decision="wrong",
                                decided_at=timezone.now())
    assert client.get(f"/trajectories/{waiting.pk}/").status_code == 200
    page = client.get(f"/trajectories/{decided.pk}/").content.decode()
    assert "Wrong → ECDM" in page and "adjudicated: Wrong → ECDM" in page
    assert client.get(url).status_code == 404 and client.get(f"/trajectories/{other.pk}/").status_code == 404


def test_links_to_the_trajectory_page(client_as, role_users):
    trajectory = failed_trajectory(verdict="undetermined", destination="adjudication")
    page = client_as("adjudicator").get(f"/adjudication/{trajectory.pk}/").content.decode()
    assert f'href="/trajectories/{trajectory.pk}/"' in page


@pytest.mark.django_db(transaction=True)
def test_the_step_player_in_a_real_browser(role_users, asgi_server, browser):
    from tests.conftest import PASSWORD

    trajectory, *_ = full_story()
    user = role_users["manager"]
    page = browser.new_page()
    page.goto(asgi_server + "/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    page.goto(f"{asgi_server}/trajectories/{trajectory.pk}/")
    assert page.locator("#step-number").inner_text() == "0"
    assert page.get_by_test_id("frame-0").is_visible() and not page.get_by_test_id("frame-1").is_visible()
    page.keyboard.press("ArrowRight")
    assert page.locator("#step-number").inner_text() == "1"
    assert page.get_by_test_id("first-bad").is_visible()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")  # past the end: stays on the last step
    assert page.locator("#step-number").inner_text() == "2" and page.get_by_test_id("takeover").is_visible()
    page.keyboard.press("ArrowLeft")
    assert page.locator("#step-number").inner_text() == "1"
    page.keyboard.press("ArrowLeft")
    page.get_by_test_id("evidence-3").get_by_role("link", name="1").click()  # the evidence names a step
    assert page.locator("#step-number").inner_text() == "1"
    page.get_by_test_id("step-strip").get_by_role("link", name="0").click()
    assert page.locator("#step-number").inner_text() == "0" and page.get_by_test_id("frame-0").is_visible()
    page.goto(f"{asgi_server}/trajectories/{trajectory.pk}/#step-2")
    assert page.locator("#step-number").inner_text() == "2"
