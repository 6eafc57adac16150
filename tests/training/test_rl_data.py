"""The RL data path over real rows: an RL run's rollouts judged (eqs. 3–4), grouped, given advantages
(eq. 5, GiGPO) and written as rollouts.jsonl with the protocol's prompts and the screenshots."""
import io
import json
import math
import statistics

import pyarrow.parquet as pq
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from PIL import Image

from flywheel.blobs import store_blob
from flywheel.models import App, CollectionRun, ModelVersion, Query, Step, Trajectory
from flywheel.policies.protocol import format_output, system_prompt
from tests.flywheel.openai_stub import StubOpenAI
from training.rl_data import build_rollouts, export_verl_agent_loop
from training.rules.advantages import gigpo_advantages
from training.step_judge import Conditions, judge_trajectory

pytestmark = pytest.mark.django_db

SETTINGS_APP, LAUNCHER, NOTES_APP = "com.android.settings", "com.android.launcher3", "com.example.notes"
MILESTONES = {"milestones": [{"name": "settings", "text": "WLAN"}, {"name": "wlan", "text": "Advanced"},
                             {"name": "mac", "text": "MAC address"}]}
SECRET_PATH = {"summary": "KNOWN-PATH-NEVER-IN-A-PROMPT", "steps": [{"action": "click"}] * 3}


def screen(package, *texts):
    nodes = "".join(f'<node index="{i}" text="{t}" resource-id="" class="android.widget.TextView" '
                    f'package="{package}" content-desc="" bounds="[0,{i * 100}][1080,{i * 100 + 100}]" />'
                    for i, t in enumerate(texts))
    clock = ('<node index="9" text="12:0{}" resource-id="com.android.systemui:id/clock" class="android.widget.TextView" '
             'package="com.android.systemui" content-desc="" bounds="[0,0][100,40]" />')
    return f'<?xml version="1.0" ?><hierarchy rotation="0">{nodes}{clock}</hierarchy>'


HOME = (LAUNCHER, "Settings", "Notes")
SETTINGS = (SETTINGS_APP, "WLAN", "Bluetooth")
WLAN = (SETTINGS_APP, "Advanced", "Saved networks")
MAC = (SETTINGS_APP, "MAC address", "02:00:00:44:55:66")
NOTES = (NOTES_APP, "Notes", "New note")


def click(x, y):
    return {"action": "click", "point": [x, y], "coords": "thousandths"}


SUCCESS, FAILURE = ({"action": "terminate", "status": "success"}, {"action": "terminate", "status": "failure"})


def png(seed: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 16), ((seed * 37) % 256, (seed * 91) % 256, (seed * 53) % 256)).save(out, "PNG")
    return out.getvalue()


def make_query(key, verification):
    query = Query.objects.create(key=key, text=f"Show the MAC address ({key})", tier="L2",
                                 verification=verification, known_path=SECRET_PATH)
    query.set_apps([App.objects.get_or_create(package=SETTINGS_APP)[0]])
    return query


def rollout(run, query, verdict, steps, **fields):
    """A finished trajectory: steps are (screen, action) or (screen, action, "blocked")."""
    trajectory = Trajectory.objects.create(query=query, run=run, line="rl", status="completed", verdict=verdict,
                                           **fields)
    for index, (shown, action, *blocked) in enumerate(steps):
        package, *texts = shown
        cot = {"Observation": f"screen {index}", "Plan": "go on", "Decision": f"do step {index}", "Memory": ""}
        Step.objects.create(
            trajectory=trajectory, index=index, hierarchy=store_blob(screen(package, *texts).format(index).encode(), "xml"),
            screenshot=store_blob(png(trajectory.pk * 100 + index), "png"), foreground_package=package, cot=cot,
            proposed_action=action, executed_action=None if blocked else action,
            audit={"blocked": True, "reason": "payment"} if blocked else {"blocked": False})
    return trajectory


@pytest.fixture
def rl_run(db):
    """Query 1 with milestones: A succeeds, B leaves the app and stalls, C is blocked once and declares a
    false success, D0 broke (Env_ERROR) and D1 re-collected it with a detour, E awaits its verdict.
    Query 2 without milestones: both rollouts fail; an earlier run succeeded. Query 3: all succeed."""
    earlier = CollectionRun.objects.create(line="rl", config={"screenshots_k": 2})
    run = CollectionRun.objects.create(line="rl", config={"screenshots_k": 2})
    q1, q2, q3 = make_query("mac", MILESTONES), make_query("nomilestones", {}), make_query("easy", MILESTONES)
    rows = {
        "A": rollout(run, q1, "true", [(HOME, click(1, 1)), (SETTINGS, click(2, 2)), (WLAN, click(3, 3)),
                                       (MAC, SUCCESS)]),
        "B": rollout(run, q1, "false", [(HOME, click(1, 1)), (SETTINGS, click(5, 900)), (NOTES, click(100, 100)),
                                        (NOTES, click(100, 100)), (NOTES, FAILURE)]),
        "C": rollout(run, q1, "false", [(HOME, click(1, 1)), (SETTINGS, click(9, 9), "blocked"),
                                        (SETTINGS, click(2, 2)), (WLAN, SUCCESS)]),
    }
    broken = rollout(run, q1, "env_error", [(HOME, click(1, 1))])
    rows["D"] = rollout(run, q1, "true", [(HOME, click(1, 1)), (SETTINGS, {"action": "swipe", "direction": "up"}),
                                          (SETTINGS, click(2, 2)), (WLAN, click(3, 3)), (MAC, SUCCESS)],
                        recollection_of=broken)
    rows["E"] = rollout(run, q1, "pending", [(HOME, click(1, 1))])
    rows["F"] = rollout(run, q2, "false", [(HOME, click(7, 7)), (NOTES, FAILURE)])
    rows["G"] = rollout(run, q2, "false", [(HOME, click(8, 8)), (NOTES, FAILURE)])
    rows["S"] = rollout(earlier, q2, "true", [(HOME, click(1, 1)), (SETTINGS, SUCCESS)])
    for name in "HI":
        rows[name] = rollout(run, q3, "true", [(HOME, click(1, 1)), (SETTINGS, click(2, 2)), (WLAN, click(3, 3)),
                                               (MAC, SUCCESS)])
    return run, rows, (q1, q2, q3)


def read_rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rewards_follow_eq_3_and_eq_4_from_the_milestones(rl_run):
    _, rows, _ = rl_run
    a, b, c, d = (judge_trajectory(rows[n], judge=None) for n in "ABCD")
    # A: all 3 milestones, 4 steps: 0.5 · 1 + 0.5 · 3/4; each click made one hold, the ending completes
    assert (a.n_nec, a.n_done, a.steps, a.reward, a.step_rewards) == (3, 3, 4, 0.875, [1, 1, 1, 1])
    # B: only WLAN held (after step 0), 5 steps: 0.5 · 1/3 + 0.5 · 3/5. Step 1 opened Notes (off the
    # query's apps), step 2 did a new thing, step 3 repeated it on an unchanged screen, step 4 gave up.
    assert (b.n_done, b.steps, b.step_rewards) == (1, 5, [1, -1, 0, -1, 0])
    assert b.reward == pytest.approx(1 / 6 + 0.3)
    # C: the blocked attempt is a sample (−1); Advanced held after step 2; declaring success on a False
    # trajectory is −1. 2 of 3 milestones in 4 samples: 0.5 · 2/3 + 0.5 · 3/4.
    assert (c.n_done, c.steps, c.step_rewards) == (2, 4, [1, -1, 1, -1])
    assert c.reward == pytest.approx(1 / 3 + 0.375)
    assert [cond["at_step"] for cond in c.conditions] == [0, 2, None]
    # D1: a swipe that did nothing (0) on the way, 5 steps: 0.5 + 0.5 · 3/5
    assert (d.reward, d.step_rewards) == (pytest.approx(0.8), [1, 0, 1, 1, 1])
    assert a.passes == 5 and a.judge == "" and a.source == "milestones"


def test_without_milestones_and_judge_the_verdict_is_the_one_condition(rl_run):
    _, rows, _ = rl_run
    failed, earlier = judge_trajectory(rows["F"], judge=None), judge_trajectory(rows["S"], judge=None)
    # N_nec = 1: F 0 + 0.5 · 1/2 ; S 0.5 + 0.5 · 1/2. F opened Notes from the launcher (−1).
    assert (failed.source, failed.n_nec, failed.n_done, failed.reward, failed.step_rewards) == (
        "verdict", 1, 0, 0.25, [-1, 0])
    assert (earlier.reward, earlier.step_rewards) == (0.75, [0, 1])


def test_build_rollouts_keeps_useful_groups_and_computes_eq_5(rl_run, tmp_path):
    run, rows, (q1, q2, q3) = rl_run
    with CaptureQueriesContext(connection) as queries:
        stats = build_rollouts(run, tmp_path, judge=None)
    assert not [q["sql"] for q in queries.captured_queries
                if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))]  # read-only

    assert stats["groups"] == 3 and stats["groups_kept"] == 2
    assert stats["dropped"] == {str(q3.pk): "every rollout succeeded"}
    assert stats["rollouts_left_out"] == {"verdict pending": 1}    # D0 is replaced by D1, not left out
    assert stats["fallback_trajectories"] == 1 and stats["rows"] == 4 + 5 + 4 + 5 + 2 + 2
    assert stats["judge"] == "rules" and stats["advantage"] == "grpo"

    written = read_rows(tmp_path / "rollouts.jsonl")
    by_trajectory = {}
    for row in written:
        by_trajectory.setdefault(row["trajectory"], []).append(row["advantage"])
    # Query 1: R = [7/8, 7/15, 17/24, 4/5] normalised by their population std; step terms per trajectory:
    # A [1,1,1,1] → 0; B [1,−1,0,−1,0]: mean −0.2, std √0.56; C [1,−1,1,−1] → ±1; D [1,0,1,1,1]: mean 0.8, std 0.4.
    r = [7 / 8, 7 / 15, 17 / 24, 4 / 5]
    mean, std = sum(r) / 4, statistics.pstdev(r)
    e = [(x - mean) / std for x in r]
    s = math.sqrt(0.56)
    assert by_trajectory[rows["A"].pk] == pytest.approx([e[0]] * 4)
    assert by_trajectory[rows["B"].pk] == pytest.approx([e[1] + 1.2 / s, e[1] - 0.8 / s, e[1] + 0.2 / s,
                                                         e[1] - 0.8 / s, e[1] + 0.2 / s])
    assert by_trajectory[rows["C"].pk] == pytest.approx([e[2] + 1, e[2] - 1, e[2] + 1, e[2] - 1])
    assert by_trajectory[rows["D"].pk] == pytest.approx([e[3] + 0.5, e[3] - 2, e[3] + 0.5, e[3] + 0.5, e[3] + 0.5])
    # Query 2: G failed, F kept; the earlier success S replaced the last failure (cap 1).
    # R = [0.25, 0.75] → ∓1; F's steps [−1, 0] → [−1, 1]; S's [0, 1] → [−1, 1].
    assert rows["G"].pk not in by_trajectory
    assert by_trajectory[rows["F"].pk] == pytest.approx([-2.0, 0.0])
    assert by_trajectory[rows["S"].pk] == pytest.approx([0.0, 2.0])
    assert stats["mean_reward"] == pytest.approx((sum(r) + 0.25 + 0.75) / 6, abs=1e-6)


def test_rollout_rows_carry_the_protocol_prompt_and_the_screenshots(rl_run, tmp_path):
    run, rows, (q1, q2, _) = rl_run
    build_rollouts(run, tmp_path, judge=None)
    written = read_rows(tmp_path / "rollouts.jsonl")
    assert all(SECRET_PATH["summary"] not in json.dumps(row) for row in written)  # the goal alone
    for row in written:
        system, user = row["messages"]
        assert system == {"role": "system", "content": system_prompt()}
        assert user["role"] == "user" and user["content"].startswith("Goal: Show the MAC address")
        assert user["content"].count("<image>") == len(row["images"]) <= 2           # K = 2 as collected
        assert all((tmp_path / path).is_file() for path in row["images"])
        assert row["group_size"] == {q1.pk: 4, q2.pk: 2}[row["group"]]
    c_rows = [row for row in written if row["trajectory"] == rows["C"].pk]
    assert [row["steps_in_trajectory"] for row in c_rows] == [4] * 4 and [row["step"] for row in c_rows] == [0, 1, 2, 3]
    blocked, after = c_rows[1], c_rows[2]
    cot = Step.objects.get(trajectory=rows["C"], index=1).cot
    assert blocked["response"] == format_output(cot, click(9, 9))       # the proposal the audit blocked
    assert "Step 1:" in after["messages"][1]["content"] and "Step 2:" not in after["messages"][1]["content"]
    # the window: the last executed step's frame and the step's own, oldest first
    own = Step.objects.get(trajectory=rows["C"], index=2).screenshot.name.split("/")[-1]
    assert after["images"][-1] == f"images/{own}" and len(after["images"]) == 2
    assert [row["fallback"] for row in written if row["trajectory"] == rows["S"].pk] == [True, True]


def test_gigpo_groups_steps_by_anchor_state(rl_run, tmp_path):
    run, rows, (q1, _, _) = rl_run
    build_rollouts(run, tmp_path, advantage="gigpo", judge=None, gamma=0.9)
    written = [row for row in read_rows(tmp_path / "rollouts.jsonl") if row["group"] == q1.pk]
    first_steps = {row["anchor"] for row in written if row["step"] == 0}
    assert len(first_steps) == 1   # every rollout starts on the home screen (the clock differs: ignored)
    members = [rows[n].pk for n in "ABCD"]
    per = {pk: [row for row in written if row["trajectory"] == pk] for pk in members}
    expected = gigpo_advantages([per[pk][0]["reward"] for pk in members],
                                [[row["step_reward"] for row in per[pk]] for pk in members],
                                [[row["anchor"] for row in per[pk]] for pk in members], gamma=0.9)
    assert [[row["advantage"] for row in per[pk]] for pk in members] == [pytest.approx(a) for a in expected]
    # By hand for the home screen: returns (γ = 0.9) A 1+.9+.81+.729 = 3.439, B 1−.9+0−.729+0 = −0.629,
    # C 1−.9+.81−.729 = 0.181, D 1+0+.81+.729+.6561 = 3.1951; its step level is their z-scores.
    home = [3.439, -0.629, 0.181, 3.1951]
    z = [(x - sum(home) / 4) / statistics.pstdev(home) for x in home]
    r = [7 / 8, 7 / 15, 17 / 24, 4 / 5]
    e = [(x - sum(r) / 4) / statistics.pstdev(r) for x in r]
    assert [per[pk][0]["advantage"] for pk in members] == pytest.approx([a + b for a, b in zip(e, z)])


def test_the_useful_range_and_the_cap_are_the_callers(rl_run, tmp_path):
    run, rows, (q1, q2, _) = rl_run
    stats = build_rollouts(run, tmp_path, judge=None, useful=(0.6, 1.0), fallback_cap=0)
    assert stats["groups_kept"] == 0
    assert stats["dropped"][str(q1.pk)] == "success rate 0.5 outside [0.6, 1]"
    assert stats["dropped"][str(q2.pk)].startswith("every rollout failed")
    assert (tmp_path / "rollouts.jsonl").read_text() == ""
    with pytest.raises(ValueError, match="not an RL run"):
        build_rollouts(CollectionRun.objects.create(line="automatic"), tmp_path)


def test_an_llm_judge_rates_each_pass_and_the_majority_decides(rl_run, settings):
    _, rows, _ = rl_run
    passes = [{0: 1, 1: 0, 2: 1, 3: 0, 4: 1}, {0: 1, 1: 0, 2: -1, 3: 0, 4: 1}, {0: 0, 1: 1, 2: 1, 3: -1, 4: 0},
              {0: -1, 1: 0, 2: 1, 3: 0, 4: 1}]
    with StubOpenAI(model="judge-7b") as stub:
        ModelVersion.objects.create(name="judge", kind="endpoint", endpoint_url=stub.url,
                                    served_model_name="judge-7b")
        settings.JUDGE_MODEL_VERSION = "judge"
        blank = {"ratings": [{"step": step, "rating": -1} for step in range(5)]}
        for ratings in passes:   # each answer, then its blank-frame probe (which rates differently)
            answer = {"ratings": [{"step": step, "rating": rating} for step, rating in ratings.items()]}
            stub.replies.append((200, stub.chat_reply("Ratings: " + json.dumps(answer)), 0))
            stub.replies.append((200, stub.chat_reply(json.dumps(blank)), 0))
        stub.replies.append((500, {"error": "overloaded"}, 0))      # pass 5: the rules rate it
        judged = judge_trajectory(rows["B"])
    # Step 0 made a milestone hold: +1 whatever the judge says. The rules' pass is [1, −1, 0, −1, 0].
    # Step 1: 0,0,1,0,−1 → 0; step 2: 1,−1,1,1,0 → 1; step 3: 0,0,−1,0,−1 → 0; step 4: 1,1,0,1,0 → 1.
    assert judged.step_rewards == [1, 0, 1, 0, 1]
    assert judged.judge == "judge" and len(stub.requests) == 9 and "pass 5" in judged.notes[0]
    assert [request["seed"] for request in stub.requests] == [0, 0, 1, 1, 2, 2, 3, 3, 4]
    assert all(request["temperature"] == 0.7 for request in stub.requests)
    user = stub.requests[0]["messages"][1]["content"]
    assert "Show the MAC address" in user[0]["text"] and "the screen after step 4" in user[0]["text"]
    assert [part["type"] for part in user] == ["text"] + ["image_url"] * 5
    assert judged.reward == pytest.approx(1 / 6 + 0.3)   # N_done/N_nec stay frame-bound


def test_the_verl_export_has_one_row_per_step_with_group_and_rewards(rl_run, tmp_path):
    run, rows, (q1, _, _) = rl_run
    stats = export_verl_agent_loop(run, tmp_path / "verl" / "steps.parquet", judge=None)
    table = pq.read_table(str(tmp_path / "verl" / "steps.parquet")).to_pylist()
    assert len(table) == stats["rows"] == stats["verl_rows"] == 22
    b_rows = [row for row in table if row["traj_uid"] == str(rows["B"].pk)]
    assert [row["rewards"] for row in b_rows] == [1.0, -1.0, 0.0, -1.0, 0.0]
    assert {row["uid"] for row in b_rows} == {str(q1.pk)} and [row["step"] for row in b_rows] == list(range(5))
    assert all(row["episode_lengths"] == 5 and row["episode_rewards"] == pytest.approx(1 / 6 + 0.3) for row in b_rows)
    assert b_rows[0]["prompt"][0]["role"] == "system" and b_rows[0]["images"][0]["image"].startswith("images/")
    assert (tmp_path / "verl" / b_rows[0]["images"][0]["image"]).is_file()
    jsonl = export_verl_agent_loop(run, tmp_path / "verl.jsonl", judge=None)
    assert jsonl["verl_rows"] == 22 and len(read_rows(tmp_path / "verl.jsonl")) == 22


def test_a_failing_judge_leaves_the_rules_and_a_dropped_group_costs_no_call(rl_run, tmp_path, settings):
    run, rows, _ = rl_run
    with StubOpenAI(model="judge-7b") as stub:   # no reply prepared: every call answers HTTP 500
        ModelVersion.objects.create(name="judge", kind="endpoint", endpoint_url=stub.url, served_model_name="judge-7b")
        settings.JUDGE_MODEL_VERSION = "judge"
        stats = build_rollouts(run, tmp_path)
        with_rules = build_rollouts(run, tmp_path / "rules", judge=None)
    # query 1: 4 rollouts × 5 passes; query 2: one derivation of its milestones + 2 × 5; query 3: dropped, none
    assert len(stub.requests) == 4 * 5 + 1 + 2 * 5
    assert stats["judge"] == "judge" and stats["rows"] == with_rules["rows"]
    assert read_rows(tmp_path / "rollouts.jsonl") == read_rows(tmp_path / "rules" / "rollouts.jsonl")


def test_rollout_rows_carry_what_the_policy_sampled(rl_run, tmp_path):
    run, rows, _ = rl_run
    sampled = {"temperature": 0.7, "top_p": 1.0, "top_k": 0, "tokens": ["[", "Observ"], "logprobs": [-0.5, -1.25]}
    Step.objects.filter(trajectory=rows["A"], index=1).update(sampled=sampled)
    build_rollouts(run, tmp_path, judge=None)
    written = read_rows(tmp_path / "rollouts.jsonl")
    carried = [row for row in written if "sampled" in row]
    assert [(row["trajectory"], row["step"]) for row in carried] == [(rows["A"].pk, 1)]
    assert carried[0]["sampled"] == sampled
    verl = export_verl_agent_loop(run, tmp_path / "verl.jsonl", judge=None)
    assert verl["verl_rows"] == len(written)
    extra = [row["extra_fields"] for row in read_rows(tmp_path / "verl.jsonl")]
    assert [(e["rollout_log_probs"], e["sampling_temperature"]) for e in extra if e["rollout_log_probs"]] \
        == [([-0.5, -1.25], 0.7)]


def test_a_failed_group_falls_back_on_an_earlier_verified_success_of_any_line_but_the_benchmark(tmp_path):
    """§3.3.3: "when sampling fails we fall back on earlier successful trajectories of the same task" —
    the schema-guided line's verified success counts; a benchmark success is never trained on."""
    query = make_query("fallback-any-line", MILESTONES)
    schema = CollectionRun.objects.create(line="schema", total=1)
    shown = rollout(schema, query, "true", [(HOME, click(100, 50)), (SETTINGS, SUCCESS)])
    Trajectory.objects.filter(pk=shown.pk).update(line="schema")
    bench = CollectionRun.objects.create(line="benchmark", total=1)
    Trajectory.objects.filter(pk=rollout(bench, query, "true", [(HOME, click(100, 50)), (SETTINGS, SUCCESS)]).pk
                              ).update(line="benchmark")
    run = CollectionRun.objects.create(line="rl", total=3, model_version=ModelVersion.objects.create(name="p"))
    for _ in range(3):
        rollout(run, query, "false", [(HOME, click(500, 50)), (NOTES, FAILURE)])
    stats = build_rollouts(run, tmp_path, judge=None, fallback_cap=2)
    assert stats["groups_kept"] == 1 and stats["fallback_trajectories"] == 1
    written = read_rows(tmp_path / "rollouts.jsonl")
    assert {row["trajectory"] for row in written if row["fallback"]} == {shown.pk}
    assert all("KNOWN-PATH" not in json.dumps(row["messages"]) for row in written)  # the goal alone


# -- the cascade reward as the step-reward source (Xiaomi-GUI-0 §4.3) ------------------------------

UNPARSED = "I should open WLAN next, tap it"   # no protocol tags: the policy's output did not parse


def ended_on(trajectory, index, shown, *, unparsed=False, failed_action=None):
    """A last step the policy answered but nothing ran: output that did not parse (POLICY_ERROR) or an
    action the executor could not carry out (ACTION_FAILED); the trajectory stops there, interrupted."""
    package, *texts = shown
    fields = {"model_io": {"parse_error": "no [Decision] tag", "error": "policy error",
                           "response": {"choices": [{"message": {"content": UNPARSED}}]}}} if unparsed else {
        "proposed_action": failed_action, "audit": {"blocked": False, "error": "input injection failed"},
        "cot": {"Observation": "the WLAN page", "Plan": "tap it", "Decision": "tap WLAN", "Memory": ""}}
    Step.objects.create(trajectory=trajectory, index=index, foreground_package=package,
                        hierarchy=store_blob(screen(package, *texts).format(index).encode(), "xml"),
                        screenshot=store_blob(png(trajectory.pk * 100 + index), "png"), **fields)
    Trajectory.objects.filter(pk=trajectory.pk).update(
        status="interrupted", stop_kind="policy_error" if unparsed else "action_failed")
    trajectory.refresh_from_db()
    return trajectory


@pytest.fixture
def cascade_run(db):
    """One query: S succeeds; P taps once, then answers text that does not parse; X taps once, then the
    executor cannot carry out its next tap."""
    run = CollectionRun.objects.create(line="rl", config={"screenshots_k": 2})
    query = make_query("cascade", MILESTONES)
    rows = {"S": rollout(run, query, "true", [(HOME, click(1, 1)), (SETTINGS, click(2, 2)), (WLAN, click(3, 3)),
                                              (MAC, SUCCESS)])}
    rows["P"] = ended_on(rollout(run, query, "false", [(HOME, click(1, 1))]), 1, SETTINGS, unparsed=True)
    rows["X"] = ended_on(rollout(run, query, "false", [(HOME, click(1, 1))]), 1, SETTINGS, failed_action=click(2, 2))
    return run, rows


def test_the_cascade_rewards_what_the_policy_answered_but_never_ran(cascade_run, tmp_path):
    run, rows = cascade_run
    stats = build_rollouts(run, tmp_path, judge=None, step_reward_source="cascade")
    written = read_rows(tmp_path / "rollouts.jsonl")
    by = {name: [row for row in written if row["trajectory"] == rows[name].pk] for name in "SPX"}
    # S: every step passes (no judge: the rules are the last level). P and X: the tap made "settings" hold
    # (1.0); then output that did not parse, or a tap the executor could not run: −1.0.
    assert [row["step_reward"] for row in by["S"]] == [1.0] * 4
    assert [row["step_reward"] for row in by["P"]] == [row["step_reward"] for row in by["X"]] == [1.0, -1.0]
    assert [row["failed_level"] for row in by["P"] + by["X"]] == ["", "parse", "", "execution"]
    assert by["P"][1]["response"] == UNPARSED                              # trained on what it answered
    assert by["X"][1]["response"] == format_output(Step.objects.get(trajectory=rows["X"], index=1).cot, click(2, 2))
    assert {row["step_reward_source"] for row in written} == {"cascade"}
    assert stats["step_reward_source"] == "cascade" and stats["cascade_failures"] == {"parse": 1, "execution": 1}
    # Eq. 3 counts the policy's actions (1 for P and X): 0.5 · 1/3 + 0.5 · min(1, 3/1); S 0.5 + 0.5 · 3/4.
    assert [by[name][0]["reward"] for name in "SPX"] == pytest.approx([0.875, 2 / 3, 2 / 3])
    # R = [7/8, 2/3, 2/3]: one above two equal ones normalises to [√2, −1/√2, −1/√2], every turn inherits
    # its trajectory's; the step term (λ = 1): S [1,1,1,1] → 0, P and X [1, −1] → [+1, −1].
    e = [math.sqrt(2), -1 / math.sqrt(2), -1 / math.sqrt(2)]
    for name, inherited in zip("SPX", e):
        assert [row["trajectory_advantage"] for row in by[name]] == pytest.approx([inherited] * len(by[name]))
    assert [row["advantage"] for row in by["S"]] == pytest.approx([e[0]] * 4)
    assert [row["advantage"] for row in by["P"]] == pytest.approx([e[1] + 1, e[1] - 1])
    assert [row["turn"] for row in by["P"]] == [0, 1] and by["P"][0]["steps_in_trajectory"] == 2


def test_the_majority_source_is_unchanged_and_says_so(cascade_run, tmp_path):
    run, rows = cascade_run
    stats = build_rollouts(run, tmp_path, judge=None)
    written = read_rows(tmp_path / "rollouts.jsonl")
    # eq. 4: the unparsed answer and the failed tap are no samples; P's and X's one tap is +1
    assert len(written) == 4 + 1 + 1 and {row["step_reward_source"] for row in written} == {"majority"}
    assert all("failed_level" not in row for row in written) and "cascade_failures" not in stats
    assert [row["step_reward"] for row in written if row["trajectory"] == rows["P"].pk] == [1]
    verl = export_verl_agent_loop(run, tmp_path / "verl.jsonl", judge=None, step_reward_source="cascade")
    assert verl["verl_rows"] == 8
    assert {row["extra_fields"]["step_reward_source"] for row in read_rows(tmp_path / "verl.jsonl")} == {"cascade"}


def test_the_reward_model_source_needs_its_model_and_an_unknown_source_is_refused(cascade_run, tmp_path):
    run, rows = cascade_run
    with pytest.raises(ValueError, match="needs the trained step reward model version"):
        build_rollouts(run, tmp_path, judge=None, step_reward_source="reward_model")
    with pytest.raises(ValueError, match="unknown step reward source 'vote'"):
        judge_trajectory(rows["S"], judge=None, step_reward_source="vote")


def test_the_cascade_asks_the_judge_only_about_steps_whose_rules_passed(rl_run, settings):
    _, rows, _ = rl_run
    # B: step 0 made a milestone hold (measured: not asked), step 1 left for Notes and step 3 repeated a
    # no-op (the rules fail: not asked); steps 2 and 4 go to the judge, which finds only step 2 necessary.
    with StubOpenAI(model="judge-7b") as stub:
        ModelVersion.objects.create(name="judge", kind="endpoint", endpoint_url=stub.url, served_model_name="judge-7b")
        settings.JUDGE_MODEL_VERSION = "judge"
        answer = {"ratings": [{"step": 2, "rating": 1}, {"step": 4, "rating": 0}]}
        stub.replies.append((200, stub.chat_reply(json.dumps(answer)), 0))
        stub.replies.append((200, stub.chat_reply(json.dumps({"ratings": []})), 0))   # blank frames: no ratings
        judged = judge_trajectory(rows["B"], passes=1, step_reward_source="cascade")
    assert judged.step_rewards == [1.0, -0.5, 1.0, -0.5, -0.5]
    assert judged.failed_levels == ["", "rules", "", "rules", "judge"]
    assert judged.judge == "judge" and len(stub.requests) == 2
    user = stub.requests[0]["messages"][1]["content"]
    assert "Rate steps 2, 4." in user[0]["text"] and [part["type"] for part in user] == ["text"] + ["image_url"] * 2
    assert judged.reward == pytest.approx(1 / 6 + 0.3)    # eq. 3 does not depend on the source


def test_measured_steps_cost_no_judge_call_and_a_silent_judge_leaves_the_rules(rl_run, settings):
    _, rows, _ = rl_run
    with StubOpenAI(model="judge-7b") as stub:   # no reply prepared: every call answers HTTP 500
        ModelVersion.objects.create(name="judge", kind="endpoint", endpoint_url=stub.url, served_model_name="judge-7b")
        settings.JUDGE_MODEL_VERSION = "judge"
        # A: each tap made a milestone hold and the ending completes: nothing is left to ask
        measured = judge_trajectory(rows["A"], passes=3, step_reward_source="cascade")
        assert measured.step_rewards == [1.0] * 4 and measured.judge == "" and not stub.requests
        # F: step 0 opened Notes (the rules fail: not asked); step 1, giving up, is asked and gets no answer
        judged = judge_trajectory(rows["F"], passes=3, step_reward_source="cascade",
                                  conditions=Conditions([], "verdict"))
    assert judged.step_rewards == [-0.5, 1.0] and judged.failed_levels == ["rules", ""]
    assert len(stub.requests) == 3 and all("Rate steps 1." in request["messages"][1]["content"][0]["text"]
                                           for request in stub.requests)
