"""The Teacher's context from a stored trajectory (the ECDM's view): real farm frames and dumps
stored as blobs, the prefix as history, the wrong step's action; then the correction."""
import json
from pathlib import Path

import pytest

from devices.executor import ActionExecutor
from devices.observation import observe
from devices.phone import PhoneConnection
from devices.reset import reset_phone
from flywheel.blobs import store_blob
from flywheel.collection.recorder import observation_fields
from flywheel.models import App, Edge, FunctionNode, GemPage, Query, Step, Trajectory
from flywheel.policies.teacher import context_for_step, query_facts
from flywheel.policies.teacher_offline import OfflineTeacher
from flywheel.policies.teacher_path import _resolve, effective_steps, hits_step, visible_nodes
from flywheel.screens.selectors import find_target
from simfarm.farm import Farm
from simfarm.serve import ServerThread

pytestmark = pytest.mark.django_db
TASK = next(row for row in map(json.loads, (Path(__file__).resolve().parents[3] / "simfarm" / "tasks"
                                            / "tasks.jsonl").read_text().splitlines())
            if row["key"] == "notes-create-groceries-l1")   # open → New note → title → body → save → terminate


@pytest.fixture(scope="module")
def phone():
    farm = Farm(devices=1, seed=0)
    with ServerThread(farm) as server:
        yield PhoneConnection(f"127.0.0.1:{server.port}", next(iter(farm)).serial)


def stored_failure(phone, slip_at):
    """The known path run up to `slip_at`, where a wrong tap was made; stored like the engine does."""
    query = Query.objects.create(key=TASK["key"], text=TASK["text"], tier=TASK["tier"], known_path=TASK["known_path"],
                                 verification=TASK["verification"], reset=TASK["reset"])
    query.set_apps([App.objects.get_or_create(package=TASK["apps"][0])[0]])
    trajectory = Trajectory.objects.create(query=query, line="automatic", status="completed")
    reset_phone(phone, TASK["reset"], apps=TASK["apps"])
    executor = ActionExecutor(phone, holder="teacher-stored-test")
    steps = effective_steps(TASK["known_path"], TASK["apps"])
    for index, step in enumerate(steps[:slip_at + 1]):
        seen = observe(phone)
        nodes = visible_nodes(seen.hierarchy_xml)
        if index < slip_at:
            action, _ = _resolve(step, nodes, (seen.width, seen.height))
        else:  # the slip: a tap on something that is not the path's target
            target = find_target(nodes, step["target"])
            other = next(n for n in nodes if n.clickable and not target.contains(*n.center)
                         and not n.contains(*target.center))
            action = {"action": "click", "point": list(other.center), "coords": "pixel"}
        Step.objects.create(trajectory=trajectory, index=index, **observation_fields(seen), proposed_action=action,
                            executed_action=action, cot={"Decision": f"step {index}", "Plan": "go on"})
        if index < slip_at:
            assert executor.execute(action, hierarchy_xml=seen.hierarchy_xml).ok
    return trajectory, steps


def test_the_context_of_a_stored_step(phone):
    trajectory, steps = stored_failure(phone, slip_at=2)      # typing the title went wrong
    ctx = context_for_step(trajectory, 2)
    stored = trajectory.steps.get(index=2)
    assert ctx.goal == TASK["text"] and ctx.step_index == 2 and ctx.apps == ["com.sim.notes"]
    assert [entry.action["action"] for entry in ctx.history] == ["open", "click"]
    assert len(ctx.history_hierarchies) == 2 and all(dump.startswith("<?xml") for dump in ctx.history_hierarchies)
    assert ctx.wrong_action == stored.executed_action and ctx.screenshot.startswith(b"\x89PNG")
    assert ctx.screen_size == (1080, 2400) and ctx.foreground["package"] == "com.sim.notes"
    assert ctx.known_path == TASK["known_path"]
    answer = OfflineTeacher().correct(ctx)
    assert hits_step(answer.action, steps[2], ctx.hierarchy_xml), answer
    assert answer.action["text"] == "Groceries" and answer.confidence >= 0.6


def test_no_frame_or_no_step_gives_no_context(phone):
    trajectory, _ = stored_failure(phone, slip_at=1)
    assert context_for_step(trajectory, 7) is None
    Step.objects.filter(trajectory=trajectory, index=1).update(screenshot="")
    assert context_for_step(trajectory, 1) is None
    Step.objects.filter(trajectory=trajectory, index=0).update(screenshot=store_blob(b"", "png"))
    assert context_for_step(trajectory, 0) is None     # an empty frame is no frame


def test_query_facts_name_the_target_pages():
    app = App.objects.create(package="com.sim.notes")
    home = GemPage.objects.create(app=app, name="Notes")
    editor = GemPage.objects.create(app=app, name="Editor")
    saved = GemPage.objects.create(app=app, name="Saved")
    edge = Edge.objects.create(source=home, target=saved, action={"action": "click", "target": {"text": "x"}},
                               action_key="e")
    query = Query.objects.create(key="facts", text="t", tier="L1", known_path=None, gem_path=[edge.pk])
    query.set_functions([FunctionNode.objects.create(app=app, path="notes/new", page=editor)])
    facts = query_facts(query)
    assert facts == {"known_path": None, "gem_path": [edge.pk], "target_pages": [editor.pk, saved.pk], "apps": []}
