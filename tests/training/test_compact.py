"""The compact policy (issue #16): candidates and features, the export it trains from, the torch
trainer in its subprocess, and the trained head acting through the policy interface and protocol."""
import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from flywheel.blobs import store_blob
from flywheel.models import App, ModelVersion, Query, SftEntry, Step, Trajectory
from flywheel.policies import PolicyState, policy_for
from flywheel.policies.base import PolicyError
from flywheel.policies.compact import FORMAT, CompactHead, CompactPolicy
from flywheel.policies.compact_features import (
    SCALARS,
    V1_SCALARS,
    candidates,
    featurize,
    goal_spans,
    prompt_parts,
    target_index,
)
from flywheel.policies.protocol import TAGS, HistoryEntry, history_text, parse_output
from training.compact import CompactTrainingError, featurize_snapshot, loop_trainer, train_compact
from training.models import DataSnapshot
from training.snapshots import create_snapshot, verify_snapshot

pytestmark = pytest.mark.django_db
SCREEN = (540, 1200)
APP = "com.sim.notes"


def node(text="", rid="", cls="android.widget.Button", bounds=(0, 0, 10, 10), clickable=True, **extra):
    attrs = {"text": text, "resource-id": rid, "class": cls, "package": APP, "content-desc": extra.get("desc", ""),
             "clickable": str(clickable).lower(), "enabled": "true", "focused": str(extra.get("focused", False)).lower(),
             "checked": str(extra.get("checked", False)).lower(), "bounds": "[{},{}][{},{}]".format(*bounds)}
    return "<node " + " ".join(f'{k}="{v}"' for k, v in attrs.items()) + " />"


def screen_xml(*nodes) -> str:
    root = (f'<node text="" resource-id="" class="android.widget.FrameLayout" package="{APP}" content-desc="" '
            f'clickable="false" enabled="true" bounds="[0,0][{SCREEN[0]},{SCREEN[1]}]">')
    return f"<hierarchy rotation=\"0\">{root}{''.join(nodes)}</node></hierarchy>"


LIST = screen_xml(node("Shopping list", bounds=(0, 100, 540, 200)), node("Gift ideas", bounds=(0, 200, 540, 300)),
                  node("Meeting notes", bounds=(0, 300, 540, 400)), node("", rid=f"{APP}:id/fab_add", desc="New note",
                                                                         bounds=(440, 1000, 520, 1080)))
EDITOR = screen_xml(node("Title", rid=f"{APP}:id/title", cls="android.widget.EditText", bounds=(0, 100, 540, 200),
                         focused=True),
                    node("Note", rid=f"{APP}:id/body", cls="android.widget.EditText", bounds=(0, 200, 540, 800)),
                    node("Save", rid=f"{APP}:id/save", bounds=(400, 20, 540, 90)))


def frame(seed) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", SCREEN, (seed * 40 % 256, 90, 120)).save(out, format="PNG")
    return out.getvalue()


def thousandths(x, y):
    return [round(x * 1000 / SCREEN[0]), round(y * 1000 / SCREEN[1])]


def test_goal_spans_are_the_text_a_goal_asks_to_enter():
    assert goal_spans("Open Chatter, tap Mom's chat, type 'On my way' and press Send.")[0] == "On my way"
    assert "Groceries" in goal_spans("Open Notes, tap the + button, type Groceries as the title")
    spans = goal_spans("Add Dana White, 5550199, to my Chatter contacts.")
    assert "Dana White" in spans and "5550199" in spans and "Add Dana White" not in spans
    assert goal_spans("") == []


def test_candidates_offer_every_element_and_the_fixed_actions():
    found = candidates(EDITOR, SCREEN, "type 'Groceries' as the title", [APP])
    kinds = [c.kind for c in found]
    assert kinds.count("tap") == 3 and {"type", "swipe_up", "swipe_down", "back", "open", "terminate"} <= set(kinds)
    typed = [c for c in found if c.kind == "type"]
    assert {c.span for c in typed} == {"Groceries"} and len(typed) == 2  # one per editable field
    assert typed[0].action == {"action": "type", "text": "Groceries", "point": thousandths(270, 150),
                               "coords": "thousandths"}
    assert candidates("", SCREEN, "anything", [])[-1].kind == "terminate"  # an empty dump still offers the rest


def test_the_target_of_an_executed_action_is_the_candidate_it_hit():
    found = candidates(LIST, SCREEN, "Open Gift ideas", [APP])
    assert found[target_index(found, {"action": "click", "point": thousandths(100, 250)}, SCREEN)].label == "Gift ideas"
    assert found[target_index(found, {"action": "open", "app": APP}, SCREEN)].kind == "open"
    assert found[target_index(found, {"action": "system_button", "button": "back"}, SCREEN)].kind == "back"
    assert found[target_index(found, {"action": "terminate", "status": "success"}, SCREEN)].kind == "terminate"
    assert target_index(found, {"action": "click", "point": [999, 5]}, SCREEN) is None       # nothing there
    assert target_index(found, {"action": "wait", "seconds": 1}, SCREEN) is None
    assert target_index(found, {"action": "terminate", "status": "failure"}, SCREEN) is None
    assert found[target_index(found, {"action": "call_user", "reason": "pay"}, SCREEN)].kind == "call_user"
    _, features = featurize("Open Gift ideas", "", LIST, SCREEN, [APP], APP)
    assert features.shape == (len(found), SCALARS) and np.isfinite(features).all()


def test_a_stop_is_earned_from_what_the_history_and_the_screen_account_for():
    goal = "Make a note titled 'Groceries'"
    fresh_found, fresh = featurize(goal, "", LIST, SCREEN, [APP], APP)
    done = history_text([HistoryEntry(cot={"Decision": "Tap the New note button"},
                                      action={"action": "click", "point": [480, 1040], "coords": "pixel"}),
                         HistoryEntry(cot={"Decision": "Type Groceries into Title"},
                                      action={"action": "type", "text": "Groceries", "point": [270, 150],
                                              "coords": "pixel"})])
    typed_found, typed = featurize(goal, done, EDITOR.replace('text="Title"', 'text="Groceries"'), SCREEN,
                                   [APP], APP)
    evidence = slice(V1_SCALARS + 1, SCALARS)

    def stop_row(found, rows, kind="terminate"):
        return rows[next(i for i, c in enumerate(found) if c.kind == kind)]

    before, after = stop_row(fresh_found, fresh)[evidence], stop_row(typed_found, typed)[evidence]
    assert before[5] == 1 and after[5] == 0                      # no step yet
    assert before[1] == 0 and after[1] == 1                      # the goal's clauses done, by the history
    assert before[2] == 0 < after[2]                             # the text it asks for: typed or shown
    assert (stop_row(typed_found, typed, "call_user")[evidence] == after).all()
    assert stop_row(typed_found, typed, "call_user")[V1_SCALARS] == 1
    others = [row for c, row in zip(typed_found, typed) if c.kind not in ("terminate", "call_user")]
    assert not np.array(others)[:, V1_SCALARS:].any()           # only an ending candidate carries them
    payment = screen_xml(node("Payment confirmation", clickable=False, bounds=(0, 0, 540, 90)),
                         node("Pay now", bounds=(0, 1000, 540, 1100)))
    found, rows = featurize("Buy the AirPods but don't pay, I'll confirm the payment", done, payment, SCREEN,
                            [APP], APP)
    assert list(stop_row(found, rows)[evidence][6:8]) == [1, 1]  # a screen and a goal about paying


def head_directory(tmp_path, features, w1, mean=None, std=None):
    np.savez(tmp_path / "weights.npz", mean=np.zeros(features) if mean is None else mean,
             std=np.ones(features) if std is None else std, w1=w1, b1=np.zeros(w1.shape[1]),
             w2=np.ones((w1.shape[1], 1)), b2=np.zeros(1))
    (tmp_path / "config.json").write_text(json.dumps({"format": FORMAT, "features": features,
                                                      "hidden": w1.shape[1]}))
    return tmp_path


def test_a_head_trained_on_the_first_64_features_still_scores_them_and_a_wider_one_refuses(tmp_path):
    w1 = np.zeros((V1_SCALARS, 1), dtype=np.float32)
    w1[2, 0] = w1[4, 0] = 1.0                   # the label's share of goal words, the label inside the goal
    old = CompactHead(head_directory(tmp_path, V1_SCALARS, w1))
    found, rows = featurize("Open Gift ideas", "", LIST, SCREEN, [APP], APP)
    assert found[int(np.argmax(old.scores(rows)))].label == "Gift ideas"
    assert not old.knows(next(c for c in found if c.kind == "call_user"))  # never trained with a handback
    state = PolicyState(goal="Open Gift ideas", history=[], screenshots=[frame(0)], hierarchy_xml=LIST,
                        screen_size=SCREEN, foreground={"package": APP}, apps=[APP])
    assert CompactPolicy(str(tmp_path)).propose(state).model_io["candidates"] == len(found) - 1
    (tmp_path / "config.json").write_text(json.dumps({"format": FORMAT, "features": SCALARS + 16, "hidden": 1}))
    np.savez(tmp_path / "weights.npz", mean=np.zeros(SCALARS + 16), std=np.ones(SCALARS + 16),
             w1=np.zeros((SCALARS + 16, 1)), b1=np.zeros(1), w2=np.ones((1, 1)), b2=np.zeros(1))
    with pytest.raises(PolicyError, match=f"reads {SCALARS + 16} features.*computes {SCALARS} — retrain"):
        CompactHead(tmp_path)


def test_every_training_standardises_by_its_own_data_and_a_warm_start_keeps_its_parents_function(tmp_path, torch):
    from training.trainer.compact import train

    rng = np.random.default_rng(0)

    def steps(n, shift, scale):
        x = rng.normal(shift, scale, (n * 6, SCALARS)).astype(np.float32)
        return x, np.arange(0, n * 6 + 1, 6), rng.integers(0, 6, n)

    def write(weights, name):
        directory = tmp_path / name
        directory.mkdir()
        np.savez(directory / "weights.npz", **weights)
        (directory / "config.json").write_text(json.dumps({"format": FORMAT, "features": SCALARS, "hidden": 64}))
        return directory

    # Round 0: no data, the identity standardisation; round 1 warm-starts from it and standardises anyway.
    round0 = write(train(np.zeros((0, SCALARS), np.float32), np.zeros(1, np.int64), np.zeros(0, np.int64),
                         epochs=0)[0], "r0")
    x1, offsets1, target1 = steps(40, 3.0, 2.0)
    round1, _ = train(x1, offsets1, target1, epochs=3, init=round0)
    assert np.allclose(round1["mean"], x1.mean(axis=0), atol=1e-5) and not np.allclose(round1["std"], 1)
    parent = write(round1, "r1")
    # A warm start on other data, before any epoch: the new data's standardisation, the parent's scores.
    x2, offsets2, target2 = steps(30, -1.0, 0.5)
    child, _ = train(x2, offsets2, target2, epochs=0, init=parent)
    assert np.allclose(child["mean"], x2.mean(axis=0), atol=1e-5)
    assert np.allclose(child["std"], x2.std(axis=0) + 1e-3, atol=1e-5)
    scores_before, scores_after = CompactHead(parent).scores(x2), CompactHead(write(child, "r2")).scores(x2)
    assert np.abs(scores_before).max() > 0.1 and np.allclose(scores_after, scores_before, atol=1e-5)
    # A parent from before the stop evidence (64 features) starts the new columns at zero: same scores.
    old = write({**{k: v[:V1_SCALARS] for k, v in round1.items() if k in ("mean", "std", "w1")},
                 **{k: round1[k] for k in ("b1", "w2", "b2")}}, "old")
    (old / "config.json").write_text(json.dumps({"format": FORMAT, "features": V1_SCALARS, "hidden": 64}))
    grown, _ = train(x2, offsets2, target2, epochs=0, init=old)
    assert np.allclose(CompactHead(write(grown, "grown")).scores(x2), CompactHead(old).scores(x2), atol=1e-5)


def notes_query(text, key):
    query = Query.objects.create(key=key, text=text, tier="L1")
    query.set_apps([App.objects.get_or_create(package=APP, defaults={"label": "Notes"})[0]])
    return query


def verified_trajectory(query, steps):
    """An HTSC-True trajectory in the SFT pool: steps = [(hierarchy xml, executed pixel action)]."""
    trajectory = Trajectory.objects.create(query=query, line="schema", status="completed", verdict="true")
    for index, (xml, action) in enumerate(steps):
        Step.objects.create(trajectory=trajectory, index=index, screenshot=store_blob(frame(index), "png"),
                            hierarchy=store_blob(xml.encode(), "xml"), foreground_package=APP,
                            cot={"Observation": "o", "Reflection": "", "Plan": "p", "Decision": "d", "Memory": ""},
                            proposed_action=action, executed_action=action)
    SftEntry.objects.create(trajectory=trajectory, intake=SftEntry.Intake.HTSC_TRUE)
    return trajectory


@pytest.fixture
def pool(settings, tmp_path):
    settings.TRAINING_ROOT = tmp_path / "training"
    for n, (title, row_y) in enumerate([("Gift ideas", 250), ("Meeting notes", 350), ("Shopping list", 150)]):
        verified_trajectory(notes_query(f"Open my {title} note", f"compact-{n}"), [
            (LIST, {"action": "click", "point": [100, row_y], "coords": "pixel"}),
            (EDITOR, {"action": "terminate", "status": "success"}),
        ])
    verified_trajectory(notes_query("Make a note titled 'Groceries'", "compact-type"), [
        (LIST, {"action": "click", "point": [480, 1040], "coords": "pixel"}),
        (EDITOR, {"action": "type", "text": "Groceries", "point": [270, 150], "coords": "pixel"}),
        (EDITOR, {"action": "wait", "seconds": 1}),  # no candidate: counted and skipped
    ])


def test_the_sft_export_carries_each_steps_ui_dump_screen_and_apps(pool):
    snapshot = create_snapshot("sft")
    assert snapshot.status == DataSnapshot.Status.READY and snapshot.stats["hierarchies"] == 2
    records = [json.loads(line) for line in (Path(snapshot.directory) / "data.jsonl").read_text().splitlines()]
    meta = records[0]["meta"]
    assert meta["screen"] == list(SCREEN) and meta["apps"] == [APP]
    assert (Path(snapshot.directory) / meta["hierarchy"]).read_text() == LIST
    goal, history, package = prompt_parts(records[1]["messages"][1]["content"])
    assert goal == "Open my Gift ideas note" and history.startswith("Step 1: ") and package == APP
    assert verify_snapshot(snapshot) == []
    (Path(snapshot.directory) / meta["hierarchy"]).write_text("<hierarchy/>")
    assert any("does not match its sha256" in problem for problem in verify_snapshot(snapshot))


def test_train_then_act_through_the_policy_interface(pool, torch):
    untrained = train_compact("compact-test-r0", epochs=0)
    assert untrained.kind == ModelVersion.Kind.COMPACT and Path(untrained.artifact, "weights.npz").exists()
    model = train_compact("compact-test-r1", parent=untrained, epochs=80)
    assert model.parent == untrained and train_compact("compact-test-r1") == model  # made once
    report = json.loads(Path(model.artifact, "training.json").read_text())
    assert report["used"] == 8 and report["skipped"] == {"no candidate for wait": 1}
    assert report["trainer"]["train_accuracy"] >= 0.99
    snapshot = DataSnapshot.objects.get(pk=report["snapshot"])
    arrays, _ = featurize_snapshot(snapshot)
    assert len(arrays["offsets"]) == 9 and arrays["x"].shape[0] == arrays["offsets"][-1]
    assert report["trainer"]["train_premature_stop"] == 0 and (arrays["target"] == arrays["stop"]).sum() == 3
    with np.load(Path(model.artifact, "weights.npz")) as weights:  # its own data's, not round 0's 0/1
        assert np.allclose(weights["mean"], arrays["x"].mean(axis=0), atol=1e-5)

    policy = policy_for(model)
    state = PolicyState(goal="Open my Gift ideas note", history=[], screenshots=[frame(0)], hierarchy_xml=LIST,
                        screen_size=SCREEN, foreground={"package": APP}, apps=[APP])
    proposal = policy.propose(state)
    assert proposal.action == {"action": "click", "point": thousandths(270, 250), "coords": "thousandths"}
    assert set(proposal.cot) == set(TAGS) and "Gift ideas" in proposal.cot["Decision"]
    assert 0 < proposal.confidence <= 1 and proposal.policy == model.name
    assert parse_output(proposal.model_io["output"], screen=SCREEN).action == proposal.action
    done = PolicyState(goal="Open my Gift ideas note", screenshots=[frame(1)], hierarchy_xml=EDITOR,
                       history=[HistoryEntry(cot=proposal.cot, action={"action": "click", "point": [270, 250],
                                                                        "coords": "pixel"})],
                       screen_size=SCREEN, foreground={"package": APP}, apps=[APP])
    assert history_text(done.history).startswith("Step 1:")
    # RL rollouts sample (a group of G can disagree); everywhere else the policy is greedy.
    assert policy_for(model, line="rl").temperature == 0.7 and policy_for(model, line="benchmark").temperature == 0
    hot = CompactPolicy(model.artifact, temperature=50.0, seed=1)
    assert len({json.dumps(hot.propose(state).action) for _ in range(30)}) > 1
    assert {json.dumps(policy.propose(state).action) for _ in range(5)} == {json.dumps(proposal.action)}
    assert policy.propose(done).action["action"] == "terminate"


def test_a_model_without_files_or_an_empty_pool_says_why(pool, settings):
    broken = ModelVersion.objects.create(name="compact-broken", kind="compact", artifact=str(settings.TRAINING_ROOT))
    state = PolicyState(goal="g", history=[], screenshots=[frame(0)], hierarchy_xml=LIST, screen_size=SCREEN)
    with pytest.raises(Exception, match="compact model files are missing"):
        policy_for(broken).propose(state)
    SftEntry.objects.all().delete()
    with pytest.raises(CompactTrainingError, match="SFT snapshot"):
        train_compact("compact-nothing", epochs=5)
    assert not ModelVersion.objects.filter(name="compact-nothing").exists()


@pytest.fixture
def trainer_in_this_process(monkeypatch, torch):
    """train_compact's trainer command (the same argv, the same printed summary) run by this process
    rather than a new interpreter, which spends seconds importing torch: for tests about what calls
    the trainer. test_train_then_act_through_the_policy_interface runs it as the subprocess it is."""
    import subprocess

    from training.trainer import compact as trainer

    started = subprocess.run

    def run(command, **options):
        if list(command[1:3]) != ["-m", "training.trainer.compact"]:
            return started(command, **options)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            trainer.main(list(command[3:]))
        return subprocess.CompletedProcess(command, 0, printed.getvalue(), "")

    monkeypatch.setattr("subprocess.run", run)


def test_the_loop_trainer_trains_m_t_plus_1_from_a_compact_m_t(pool, django_user_model, trainer_in_this_process):
    from flywheel.models import EvolutionLoop, LoopRound

    m0 = train_compact("compact-loop-m0", epochs=0)
    loop = EvolutionLoop.objects.create(name="l", model_version=m0, config={"rounds": 1})
    loop_round = LoopRound.objects.create(loop=loop, number=1, model_version=m0)
    reply = loop_trainer(loop_round)
    assert reply["status"] == "done" and reply["model_version"].parent == m0
    assert loop_trainer(loop_round)["model_version"] == reply["model_version"]  # keyed by the round


def test_a_goal_only_policy_is_offered_the_phones_apps_and_the_one_the_goal_names_stands_out():
    from flywheel.screens.labels import apps_for_goal, goal_names_app

    apps = ["com.sim.chat", "com.sim.food", "com.sim.notes", "com.sim.shop"]
    labels = {"com.sim.chat": "Chatter", "com.sim.food": "FoodDash", "com.sim.notes": "Notes",
              "com.sim.shop": "ShopMart"}
    goal = "Copy the order number from ShopMart and send it to Dana in Chatter"
    assert apps_for_goal(goal, apps, labels) == ["com.sim.shop", "com.sim.chat"]  # in the order it names them
    assert apps_for_goal("Turn on dark mode", apps, labels) == []                 # nothing named: nothing picked
    assert apps_for_goal("Turn on dark mode", ["com.android.settings"]) == ["com.android.settings"]
    assert goal_names_app("order pad thai on fooddash", "com.sim.food", "FoodDash")
    assert not goal_names_app("take a note", "com.sim.notes", "")  # "note" is not the app "notes"
    found, rows = featurize(goal, "", LIST, SCREEN, apps, APP, app_labels=labels)
    opens = {c.app: i for i, c in enumerate(found) if c.kind == "open"}
    assert set(opens) == set(apps) and found[opens["com.sim.chat"]].label == "Chatter"
    # A feature is 1 for the apps the goal names and 0 for the others (which column is the head's business).
    named = [j for j in range(rows.shape[1])
             if rows[opens["com.sim.shop"], j] == rows[opens["com.sim.chat"], j] == 1.0
             and rows[opens["com.sim.food"], j] == rows[opens["com.sim.notes"], j] == 0.0]
    assert named, "no feature tells the apps the goal names from the others"
