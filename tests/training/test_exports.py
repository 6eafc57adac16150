"""Pool snapshots exported for training, read back with the consumers' own loaders (HF datasets,
pyarrow): the protocol exactly, masks honoured, mixtures, reproducible hashes, bad input."""
import base64
import io
import json
import random
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from PIL import Image

from devices.actions import to_pixels
from devices.observation import Observation
from flywheel.blobs import store_blob
from flywheel.collection.recorder import policy_state
from flywheel.models import App, CptEntry, Query, RlQueryEntry, SftEntry, Step, Trajectory
from flywheel.policies.endpoint import EndpointPolicy
from flywheel.policies.protocol import HistoryEntry, build_messages, format_output, parse_output, system_prompt
from flywheel.repair.samples import make_sample
from flywheel.repair.step_correction import apply_correction
from tests.flywheel.repair.stored import repair_for, slipped_trajectory
from training.exports.chat import target_action
from training.models import DataSnapshot
from training.snapshots import create_snapshot, verify_snapshot

pytestmark = pytest.mark.django_db

PACKAGE = "com.android.settings"
KNOWN_PATH = {"mode": "tap", "summary": "SECRET-PATH Settings > Connected devices > Bluetooth",
              "steps": [{"action": "click"}]}
VERIFICATION = {"terminal": [{"check": "foreground", "package": PACKAGE}], "milestones": [{"name": "bt"}]}
KEYS = iter(range(1, 10_000))


@pytest.fixture(autouse=True)
def training_root(settings, tmp_path):
    settings.TRAINING_ROOT = tmp_path / "training"
    return settings.TRAINING_ROOT


def frame(seed) -> bytes:
    rng = random.Random(f"frame-{seed}")
    image = Image.new("RGB", (36, 80), (rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def cot(n):
    return {"Observation": f"screen {n}", "Reflection": "", "Plan": f"plan {n}", "Decision": f"tap {n}",
            "Memory": ""}


def make_query(text="Turn on Bluetooth", evaluation_only=False):
    return Query.objects.create(key=f"q-{next(KEYS)}", text=text, tier="L2", known_path=KNOWN_PATH,
                                verification=VERIFICATION, evaluation_only=evaluation_only)


def make_trajectory(query=None, n_steps=3, line="automatic", masked=(), screenshots=None, seed=None):
    """A completed trajectory whose step i ran a tap and shows its own frame."""
    trajectory = Trajectory.objects.create(query=query or make_query(), line=line, status="completed", verdict="true")
    seed = trajectory.pk if seed is None else seed
    for index in range(n_steps):
        shot = (screenshots or {}).get(index) or store_blob(frame(f"{seed}-{index}"), "png")
        Step.objects.create(trajectory=trajectory, index=index, screenshot=shot, cot=cot(index),
                            executed_action={"action": "click", "point": [10 * index, 20], "coords": "pixel"},
                            label_masked=index in masked, foreground_package=PACKAGE,
                            activity_stack=[f"{PACKAGE}/.Settings", "com.android.launcher/.Home"])
    return trajectory


def sft(trajectory, intake="htsc_true"):
    return SftEntry.objects.create(trajectory=trajectory, intake=intake)


def load_chat(snapshot):
    """The HF datasets json loader over data.jsonl (what LLaMA-Factory and ms-swift use)."""
    return datasets.load_dataset("json", data_files=str(Path(snapshot.directory) / "data.jsonl"), split="train",
                                 cache_dir=str(Path(snapshot.directory).parent / ".hf-cache"))


def user_text(sample):
    return next(m["content"] for m in sample["messages"] if m["role"] == "user")


# -- SFT ---------------------------------------------------------------------------------------------------

def test_an_sft_snapshot_follows_the_protocol_and_loads_with_datasets():
    trajectory = make_trajectory(n_steps=4, masked=(2,), line="schema")
    entry = sft(trajectory)
    snapshot = create_snapshot("sft", {"k": 2, "seed": 3}, name="first")
    assert snapshot.status == "ready", snapshot.error
    assert verify_snapshot(snapshot) == []
    directory = Path(snapshot.directory)
    assert directory == Path(snapshot.directory).parent / str(snapshot.pk)
    rows = load_chat(snapshot)
    assert set(rows.column_names) == {"messages", "images", "meta"}
    # one sample per unmasked executed step: step 2 (repetition-to-reflection mask) has none
    assert [row["meta"]["step"] for row in rows] == [0, 1, 3] == [r["step"] for r in
                                                                  json.loads((directory / "manifest.json").read_text())["rows"]]
    assert snapshot.row_count == 3 and snapshot.row_ids == [entry.pk]
    assert snapshot.stats["masked_steps"] == 1 and snapshot.stats["by_source"] == {"htsc_true": 3}
    steps = list(trajectory.steps.order_by("index"))
    for row in rows:
        system, user, assistant = row["messages"]
        assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
        assert system["content"] == system_prompt()  # no known path even on the schema-guided line
        assert "SECRET-PATH" not in json.dumps(row) and "Known operation path" not in system["content"]
        assert user["content"].count("<image>") == len(row["images"]) and user["content"].endswith("<image>")
        for path in row["images"]:
            assert (directory / path).is_file() and Image.open(directory / path).format == "PNG"
        step = steps[row["meta"]["step"]]
        own_frame = (directory / row["images"][-1]).read_bytes()
        assert assistant["content"] == format_output(step.cot, target_action(step.executed_action, own_frame))
        # the target speaks the system prompt's unit: it parses back to the executed pixels
        width, height = Image.open(directory / row["images"][-1]).size
        emitted = parse_output(assistant["content"], screen=(width, height)).action
        assert emitted["coords"] == "thousandths"
        for name in ("point", "start", "end"):
            if name in step.executed_action:
                pixels = to_pixels(emitted[name], "thousandths", width, height)
                assert all(abs(a - b) <= max(width, height) / 1000 + 1
                           for a, b in zip(pixels, step.executed_action[name]))
        # the compact policy's inputs too: the step's UI dump (none stored here), the screen, the query's apps
        assert row["meta"] == {"trajectory": trajectory.pk, "step": step.index, "source": "htsc_true",
                                    "pool_row": entry.pk, "query": trajectory.query_id, "apps": [],
                                    "app_labels": [], "hierarchy": "", "screen": [width, height],
                                    "step_source": "policy", "error_explanation": {
                                        "text": "", "source": "", "error_class": "", "level": 0,
                                        "original_action": ""}}
    last = rows[2]
    # the masked step's text stays in the history of the step after it; the last K=2 frames, oldest first
    history = [HistoryEntry(cot=s.cot, action=s.executed_action) for s in steps[:3]]
    frames = [(directory / p).read_bytes() for p in last["images"]]
    expected = build_messages("Turn on Bluetooth", history, frames, k=2,
                              context={"package": PACKAGE, "activity": ".Settings"})[1]["content"][0]["text"]
    assert user_text(last) == expected + "<image><image>"
    assert "Step 3: [Observation] screen 2" in user_text(last)
    assert frames == [frame(f"{trajectory.pk}-2"), frame(f"{trajectory.pk}-3")]
    assert len(rows[0]["images"]) == 1 and "No earlier steps." in user_text(rows[0])
    info = json.loads((directory / "dataset_info.json").read_text())
    assert info == {f"flywheel_sft_{snapshot.pk}": {
        "file_name": "data.jsonl", "formatting": "sharegpt", "columns": {"messages": "messages", "images": "images"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
                 "system_tag": "system"}}}


def test_the_exported_prompt_is_the_one_the_live_line_sent():
    """The endpoint policy's request at a live step and the export of that step, after it ran."""
    trajectory = make_trajectory(n_steps=4)
    clarify = trajectory.steps.get(index=1)
    clarify.executed_action = {"action": "clarify", "question": "Which phone?"}
    clarify.edit = {"clarify_answer": "The Pixel", "by": "user"}
    clarify.save()
    current = trajectory.steps.get(index=3)
    current_png = frame(f"{trajectory.pk}-3")
    Step.objects.filter(pk=current.pk).update(executed_action=None)
    observation = Observation(png=current_png, hierarchy_xml="<hierarchy/>", width=1080, height=2400,
                              foreground={"package": PACKAGE, "activity": ".Settings",
                                          "activity_stack": current.activity_stack})
    live = EndpointPolicy("http://127.0.0.1:9/v1", "policy", k=3).request_body(policy_state(trajectory, observation, k=3))
    Step.objects.filter(pk=current.pk).update(executed_action=current.executed_action)
    sft(trajectory)
    snapshot = create_snapshot("sft", {"k": 3})
    exported = load_chat(snapshot)[3]
    live_text = live["messages"][1]["content"][0]["text"]
    assert "The user answered: The Pixel" in live_text
    assert exported["messages"][0]["content"] == live["messages"][0]["content"]
    assert user_text(exported) == live_text + "<image>" * 3
    live_frames = [base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
                   for part in live["messages"][1]["content"][1:]]
    assert [(Path(snapshot.directory) / p).read_bytes() for p in exported["images"]] == live_frames


def test_an_ecdm_repaired_entry_exports_the_repaired_sample():
    original = slipped_trajectory()
    repair = repair_for(original, step_index=1)
    fixed = {"action": "click", "point": [540, 390], "coords": "pixel"}
    corrected = original.steps.get(index=1)
    sample = make_sample(original, repair, keep_until=1, final_step={
        "index": 1, "screenshot": corrected.screenshot.name, "hierarchy": corrected.hierarchy.name,
        "action": fixed, "cot": {"Observation": "Settings", "Plan": "Open Bluetooth", "Decision": "Tap Bluetooth"}})
    snapshot = create_snapshot("sft", {"sources": {"*": 0, "ecdm_repaired": 1}})
    rows = load_chat(snapshot)
    assert {row["meta"]["trajectory"] for row in rows} == {sample.pk}
    # the kept step's [Decision] ("step 0") does not describe its action: SFT intake's consistency
    # gate kept it in the sample but not as a label while its reasoning waits for regeneration
    # (issue #35), so the correction alone is exported
    assert sample.steps.get(index=0).label_gate == "regenerating"
    assert [(row["meta"]["source"], row["meta"]["step"], row["meta"]["step_source"]) for row in rows] == [
        ("ecdm_repaired", 1, "repair")]  # the repair wrote it, not the policy
    frame = (Path(snapshot.directory) / rows[0]["images"][-1]).read_bytes()
    assert json.dumps(target_action(fixed, frame)) in rows[0]["messages"][2]["content"]


def test_a_repaired_steps_error_explanation_is_exported_in_reflection_and_meta(settings):
    """Xiaomi-GUI-0 §3.4: why the original step was wrong is in the assistant's [Reflection], and the
    structured explanation (the original action in the target's unit, the error class) in the meta."""
    settings.ECDM_REPLAY = False
    original = slipped_trajectory()
    wrong = original.steps.get(index=1).executed_action
    repair = apply_correction(repair_for(original, step_index=1), {"action": "click", "point": [540, 590]},
                              {"Observation": "Settings lists Bluetooth.", "Plan": "Open Bluetooth",
                               "Decision": "Tap \"Bluetooth\""}, by="teacher")
    reflection = ('Tap "Display" is the wrong step here: it misreads the "Settings" screen, where the task needs '
                  '"Bluetooth". Tap "Bluetooth" instead.')
    assert repair.correction["explanation"]["text"] == reflection
    snapshot = create_snapshot("sft", {"sources": {"*": 0, "ecdm_repaired": 1}})
    assert snapshot.status == "ready", snapshot.error
    assert [row["meta"]["step"] for row in load_chat(snapshot)] == [1]   # loads with the consumers' loader
    [line] = [json.loads(text) for text in (Path(snapshot.directory) / "data.jsonl").read_text().splitlines()]
    assert f"[Reflection] {reflection}\n" in line["messages"][2]["content"]
    frame = (Path(snapshot.directory) / line["images"][-1]).read_bytes()
    assert line["meta"]["error_explanation"] == {
        "text": reflection, "source": "evidence", "error_class": "perception_drift", "level": 3,
        "original_action": json.dumps(target_action(wrong, frame))}
    assert json.loads(line["meta"]["error_explanation"]["original_action"])["coords"] == "thousandths"


def test_a_large_export_loads_when_later_lines_name_other_apps_and_explain_a_correction(settings):
    """The HF json loader fixes a file's columns and types from its first chunk (10 MB): lines after it —
    other apps' labels, an ECDM correction's explanation — must add no key and change no type."""
    settings.ECDM_REPLAY = False
    for package, label in (("com.sim.shop", "ShopMart"), ("com.sim.chat", "Chat")):
        query = Query.objects.create(key=f"open-{package}", text=f"Open {label}", tier="L1",
                                     verification=VERIFICATION)
        query.set_apps([App.objects.create(package=package, label=label)])
        sft(make_trajectory(query, n_steps=2, line="schema"))
    original = slipped_trajectory()
    apply_correction(repair_for(original, step_index=1), {"action": "click", "point": [540, 590]},
                     {"Observation": "Settings lists Bluetooth.", "Plan": "Open Bluetooth",
                      "Decision": "Tap \"Bluetooth\""}, by="teacher")
    snapshot = create_snapshot("sft", {})
    assert snapshot.status == "ready", snapshot.error
    lines = [json.loads(text) for text in (Path(snapshot.directory) / "data.jsonl").read_text().splitlines()]
    assert len({tuple(line["meta"]) for line in lines}) == 1  # every line the same meta keys
    assert lines[-1]["meta"]["error_explanation"]["text"] and not lines[0]["meta"]["error_explanation"]["text"]
    chunked = datasets.load_dataset("json", data_files=str(Path(snapshot.directory) / "data.jsonl"), split="train",
                                    chunksize=1024, cache_dir=str(Path(snapshot.directory).parent / ".hf-chunked"))
    assert len(chunked) == len(lines) and chunked[-1]["meta"]["error_explanation"]["level"] == 3


def test_the_mixture_ratios_decide_how_many_rows_of_each_source_export():
    for intake, count in (("htsc_true", 2), ("ecdm_repaired", 4), ("semi_auto_verified", 1), ("adjudicated", 1)):
        for _ in range(count):
            sft(make_trajectory(n_steps=1), intake)
    config = {"sources": {"htsc_true": 1.0, "ecdm_repaired": 0.5, "semi_auto_verified": 2.0, "adjudicated": 0},
              "seed": 11}
    snapshot = create_snapshot("sft", config)
    assert snapshot.stats["by_source"] == {"htsc_true": 2, "ecdm_repaired": 2, "semi_auto_verified": 2}
    assert snapshot.stats["pool_rows"] == {"adjudicated": 1, "ecdm_repaired": 4, "htsc_true": 2,
                                           "semi_auto_verified": 1}
    rows = load_chat(snapshot)
    assert len(rows) == snapshot.row_count == 6
    pool_rows = [row["meta"]["pool_row"] for row in rows]
    assert pool_rows == sorted(pool_rows) == snapshot.row_ids  # pool-row order, the repeat beside its copy
    doubled = SftEntry.objects.get(intake="semi_auto_verified").pk
    assert pool_rows.count(doubled) == 2
    again = create_snapshot("sft", config)
    assert again.row_ids == snapshot.row_ids and again.content_hash == snapshot.content_hash


def test_the_same_rows_and_config_give_the_same_hash_and_tampering_is_found():
    sft(make_trajectory(n_steps=3))
    sft(make_trajectory(n_steps=2), "semi_auto_verified")
    first, second = create_snapshot("sft", {"k": 2}), create_snapshot("sft", {"k": 2})
    assert first.pk != second.pk and first.directory != second.directory
    assert len(first.content_hash) == 64 and first.content_hash == second.content_hash
    assert (Path(first.directory) / "data.jsonl").read_bytes() == (Path(second.directory) / "data.jsonl").read_bytes()
    assert create_snapshot("sft", {"k": 1}).content_hash != first.content_hash
    manifest = json.loads((Path(first.directory) / "manifest.json").read_text())
    assert manifest["content_hash"] == first.content_hash and manifest["protocol"] == {"k": 2}
    assert manifest["config"] == {"sources": {}, "k": 2, "seed": 0, "limit": None, "counterfactual_queries": True,
                                  "success_judge": None, "corpora": {}, "high_frequency_cap": 8}
    image = next(iter(manifest["images"]))
    (Path(first.directory) / image).write_bytes(frame("tampered"))
    problems = verify_snapshot(first)
    assert any(image in problem for problem in problems) and any("content hash" in p for p in problems)


def test_a_limit_caps_the_pool_rows_read():
    entries = [sft(make_trajectory(n_steps=1)) for _ in range(3)]
    snapshot = create_snapshot("sft", {"limit": 2})
    assert snapshot.row_ids == [entries[0].pk, entries[1].pk]


def test_an_ablation_leaves_out_the_samples_of_counterfactual_derived_queries():
    """The demo's no_counterfactual arm: rows of adversarial queries (those targeting a failure class) go."""
    from flywheel.models import FailureClass

    kept = sft(make_trajectory(n_steps=1))
    adversarial = make_query("Turn on Bluetooth, then check the pairing list")
    adversarial.failure_class = FailureClass.objects.create(key="step:no-effect:tap", cause="no-effect")
    adversarial.save()
    derived = sft(make_trajectory(query=adversarial, n_steps=1))
    assert create_snapshot("sft", {}).row_ids == [kept.pk, derived.pk]
    without = create_snapshot("sft", {"counterfactual_queries": False})
    assert without.row_ids == [kept.pk] and without.stats["counterfactual_excluded"] == 1


def judged(trajectory, outcome, **votes):
    """HTSC's verdict on the trajectory and each system's vote (a re-judging adds a later vote)."""
    from flywheel.models import Verdict, Vote

    Verdict.objects.create(trajectory=trajectory, outcome=outcome)
    for system, vote in votes.items():
        Vote.objects.create(trajectory=trajectory, system=system, vote=vote)
    return trajectory


def test_a_single_judge_routes_the_judged_trajectories_as_it_alone_would():
    """The demo's single_judge arm: HTSC's admissions that judge A rejects go, what A alone calls a
    success joins (a false success B and C caught), what HTSC never judged stays."""
    agreed = sft(judged(make_trajectory(n_steps=1), "true", A="true", B="true", C="true"))
    outvoted = sft(judged(make_trajectory(n_steps=1), "true", A="false", B="true", C="true"))
    adjudicated = sft(judged(make_trajectory(n_steps=1), "undetermined", A="true", B="false", C="abstain"),
                      "adjudicated")
    repaired = sft(judged(make_trajectory(n_steps=1), "false", A="false", B="false", C="false"), "ecdm_repaired")
    semi_auto = sft(make_trajectory(n_steps=1, line="semi_auto"), "semi_auto_verified")
    caught = judged(make_trajectory(n_steps=2), "false", A="true", B="false", C="false")
    changed_mind = judged(make_trajectory(n_steps=1), "false", A="true", B="false", C="false")
    from flywheel.models import Vote

    Vote.objects.create(trajectory=changed_mind, system="A", vote="false")  # re-judged: the latest vote counts
    # Added trajectories pass the consistency gate as routing would run it: a step whose Decision is not
    # its action gives no sample (and nothing is written on the step).
    gated = judged(make_trajectory(n_steps=2), "false", A="true", B="false", C="false")
    Step.objects.filter(trajectory=gated, index=1).update(cot={**cot(1), "Decision": "Swipe up the list"})
    benchmark = judged(make_trajectory(n_steps=1), "true", A="true", B="true", C="true")
    Trajectory.objects.filter(pk=benchmark.pk).update(destination="benchmark")  # never a pool's
    judged(make_trajectory(query=make_query(evaluation_only=True), n_steps=1), "false", A="true")  # held out
    make_trajectory(n_steps=1)  # never judged
    snapshot = create_snapshot("sft", {"success_judge": "A"})
    assert snapshot.status == "ready", snapshot.error
    assert snapshot.row_ids == [agreed.pk, adjudicated.pk, repaired.pk, semi_auto.pk]
    assert outvoted.pk not in snapshot.row_ids
    assert snapshot.stats["single_judge"] == {"system": "A", "judged_rows_dropped": 1, "added": 2}
    assert snapshot.stats["pool_rows"] == {"adjudicated": 1, "ecdm_repaired": 1, "htsc_true": 1,
                                           "semi_auto_verified": 1, "single_judge_true": 2}
    manifest = json.loads((Path(snapshot.directory) / "manifest.json").read_text())
    added = [row for row in manifest["rows"] if row["source"] == "single_judge_true"]
    assert [(row["trajectory"], row["step"]) for row in added] == [(caught.pk, 0), (caught.pk, 1), (gated.pk, 0)]
    assert {row["pool_row"] for row in added} == {None}
    assert set(Step.objects.filter(trajectory=gated).values_list("label_gate", flat=True)) == {""}
    assert verify_snapshot(snapshot) == []
    assert create_snapshot("sft", {}).row_ids == [agreed.pk, outvoted.pk, adjudicated.pk, repaired.pk, semi_auto.pk]


# -- CPT --------------------------------------------------------------------------------------------------

def test_a_cpt_snapshot_has_one_sample_per_entry_with_the_same_protocol_input():
    trajectory = make_trajectory(n_steps=3, line="semi_auto")
    other = make_trajectory(n_steps=1, line="automatic")
    entries = [CptEntry.objects.create(step=step, screenshot=step.screenshot.name, action=step.executed_action)
               for step in [*trajectory.steps.order_by("index"), *other.steps.all()]]
    snapshot = create_snapshot("cpt", {"k": 2, "sources": {"automatic": 0.0}})
    assert snapshot.status == "ready" and verify_snapshot(snapshot) == []
    rows = load_chat(snapshot)
    assert [row["meta"]["pool_row"] for row in rows] == [entry.pk for entry in entries[:3]]
    assert snapshot.stats["by_source"] == {"semi_auto": 3}
    sft(trajectory)
    sft_rows = load_chat(create_snapshot("sft", {"k": 2}))
    # a CPT sample of a step is the SFT sample of that step: one protocol for both
    assert [row["messages"] for row in rows] == [row["messages"] for row in sft_rows]
    assert json.loads((Path(snapshot.directory) / "dataset_info.json").read_text()).keys() == {
        f"flywheel_cpt_{snapshot.pk}"}


# -- RL ---------------------------------------------------------------------------------------------------

def test_an_rl_snapshot_is_verl_parquet_with_the_goal_alone():
    active = RlQueryEntry.objects.create(query=make_query("Pair the headphones"), state="active",
                                         channel="routing", success_rate=0.5)
    banked = RlQueryEntry.objects.create(query=make_query("Turn on dark mode"), state="banked", channel="phase0")
    RlQueryEntry.objects.create(query=make_query("Retired"), state="retired", channel="routing")
    RlQueryEntry.objects.create(query=make_query("Left"), state="left", channel="routing")
    snapshot = create_snapshot("rl", {"sources": {"phase0": 2}})
    assert snapshot.status == "ready" and verify_snapshot(snapshot) == []
    path = Path(snapshot.directory) / "train.parquet"
    table = pq.read_table(path)
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info", "images"]
    rows = table.to_pylist()
    assert [row["extra_info"]["rl_entry_id"] for row in rows] == [active.pk, banked.pk, banked.pk]
    assert snapshot.row_ids == [active.pk, banked.pk, banked.pk] and snapshot.row_count == 3
    first = rows[0]
    assert first["data_source"] == "flywheel/routing" and first["ability"] == "gui_agent"
    assert first["prompt"] == [{"role": "system", "content": system_prompt()},
                               {"role": "user", "content": "Goal: Pair the headphones"}]
    assert first["reward_model"]["style"] == "rule" and json.loads(first["reward_model"]["ground_truth"]) == VERIFICATION
    assert first["extra_info"] == {"index": 0, "query_id": active.query_id, "rl_entry_id": active.pk,
                                   "split": "train", "success_rate": 0.5}
    assert first["images"] == [] and rows[1]["extra_info"]["success_rate"] is None
    assert not any("SECRET-PATH" in json.dumps(row) for row in rows)
    loaded = datasets.load_dataset("parquet", data_files=str(path), split="train",
                                   cache_dir=str(path.parent.parent / ".hf-cache"))
    assert len(loaded) == 3 and loaded[2]["prompt"][1]["content"] == "Goal: Turn on dark mode"
    assert loaded[0]["reward_model"]["ground_truth"] == first["reward_model"]["ground_truth"]
    assert create_snapshot("rl", {"sources": {"phase0": 2}}).content_hash == snapshot.content_hash


# -- held out, empty, corrupt, failed, refused ---------------------------------------------------------------

def test_held_out_benchmark_queries_are_never_exported_in_any_kind():
    held_out = make_query("HELD-OUT benchmark task", evaluation_only=True)
    kept = make_trajectory(n_steps=1)
    hidden = make_trajectory(held_out, n_steps=2)
    sft(kept)
    sft(hidden)
    for step in Step.objects.all():
        CptEntry.objects.create(step=step, screenshot=step.screenshot.name, action=step.executed_action)
    RlQueryEntry.objects.create(query=held_out, state="active", channel="routing")
    RlQueryEntry.objects.create(query=kept.query, state="active", channel="routing")
    for kind, held in (("sft", 1), ("cpt", 2), ("rl", 1)):
        snapshot = create_snapshot(kind)
        assert snapshot.status == "ready" and snapshot.row_count == 1
        assert snapshot.stats["held_out_excluded"] == held
        files = [p for p in Path(snapshot.directory).iterdir() if p.suffix in (".jsonl", ".parquet", ".json")]
        assert files and not any(b"HELD-OUT" in p.read_bytes() for p in files)
    alone = Query.objects.filter(pk=held_out.pk)
    SftEntry.objects.exclude(trajectory__query__in=alone).delete()
    empty = create_snapshot("sft")
    assert empty.status == "empty" and empty.stats["held_out_excluded"] == 1


@pytest.mark.parametrize("kind, message", [("sft", "the SFT pool has no entries yet: verify trajectories"),
                                           ("cpt", "the CPT pool has no entries yet"),
                                           ("rl", "the RL query pool has no active or banked queries")])
def test_an_empty_pool_gives_an_empty_snapshot_that_says_what_to_do(kind, message, training_root, django_user_model):
    user = django_user_model.objects.create_user("exporter")
    snapshot = create_snapshot(kind, user=user)
    snapshot.refresh_from_db()
    assert snapshot.status == "empty" and message in snapshot.error and snapshot.created_by == user
    assert (snapshot.directory, snapshot.row_count, snapshot.content_hash) == ("", 0, "")
    assert not (training_root / "snapshots" / str(snapshot.pk)).exists()
    assert verify_snapshot(snapshot) == ["the snapshot is empty: it has no files to verify"]


def test_a_mixture_that_keeps_nothing_is_empty_and_says_so():
    sft(make_trajectory(n_steps=1))
    snapshot = create_snapshot("sft", {"sources": {"htsc_true": 0}})
    assert snapshot.status == "empty" and "mixture ratios keep no rows" in snapshot.error


def test_a_corrupt_or_missing_screenshot_skips_its_sample_and_the_rest_exports():
    corrupt = store_blob(b"\x89PNG\r\n\x1a\nthis is not an image", "png")
    broken = sft(make_trajectory(n_steps=3, screenshots={1: corrupt}))
    missing = sft(make_trajectory(n_steps=1, screenshots={0: "blobs/00/does-not-exist.png"}))
    good = sft(make_trajectory(n_steps=2))
    snapshot = create_snapshot("sft", {"k": 1})
    assert snapshot.status == "ready" and verify_snapshot(snapshot) == []
    rows = load_chat(snapshot)
    assert [(row["meta"]["pool_row"], row["meta"]["step"]) for row in rows] == [
        (broken.pk, 0), (broken.pk, 2), (good.pk, 0), (good.pk, 1)]
    skipped = snapshot.stats["skipped"]
    assert [(s["pool_row"], s["step"]) for s in skipped] == [(broken.pk, 1), (missing.pk, 0)]
    assert "cannot be read as an image" in skipped[0]["reason"] and "missing" in skipped[1]["reason"]
    assert snapshot.row_ids == [broken.pk, good.pk]
    # with K=2 the corrupt frame is also in step 2's window: that sample is skipped too
    wider = create_snapshot("sft", {"k": 2})
    assert [(s["pool_row"], s["step"]) for s in wider.stats["skipped"]] == [
        (broken.pk, 1), (broken.pk, 2), (missing.pk, 0)]


def test_every_sample_skipped_is_an_empty_snapshot_with_the_reasons():
    sft(make_trajectory(n_steps=1, screenshots={0: store_blob(b"garbage", "png")}))
    snapshot = create_snapshot("sft")
    assert snapshot.status == "empty" and "1 skipped" in snapshot.error
    assert snapshot.stats["skipped"][0]["reason"].startswith("screenshot blobs/")


def test_any_other_failure_is_recorded_and_leaves_no_files(settings, tmp_path):
    sft(make_trajectory(n_steps=1))
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the snapshots folder should be")
    settings.TRAINING_ROOT = blocked
    snapshot = create_snapshot("sft")
    snapshot.refresh_from_db()
    assert snapshot.status == "failed" and snapshot.error and snapshot.directory == ""
    assert blocked.read_text().startswith("a file")


@pytest.mark.parametrize("kind, config, named", [
    ("sft", {"ratio": 1}, "'ratio'"), ("sft", {"sources": {"htsc_true": -1}}, "negative"),
    ("sft", {"sources": {"htsc_tru": 1}}, "'htsc_tru'"), ("cpt", {"k": 0}, "k must be"),
    ("rl", {"seed": "x"}, "seed must be an integer"), ("sft", {"limit": 0}, "limit"),
    ("dpo", {}, "unknown snapshot kind"), ("sft", [], "JSON object"),
    ("sft", {"counterfactual_queries": "no"}, "counterfactual_queries must be true or false"),
    ("sft", {"success_judge": "D"}, "success_judge is one of A, B, C"),
    ("cpt", {"success_judge": "A"}, "SFT snapshots only")])
def test_a_bad_config_is_refused_with_the_key_named_and_nothing_recorded(kind, config, named):
    with pytest.raises(ValueError, match=named):
        create_snapshot(kind, config)
    assert not DataSnapshot.objects.exists()


def test_a_target_keeps_only_the_protocols_fields():
    """The executor records what it resolved (an open's package, a directional swipe's points):
    a model is never asked to emit those, and the target must parse as the protocol says."""
    png = frame("fields")
    opened = target_action({"action": "open", "app": "com.sim.shop", "package": "com.sim.shop", "coords": "pixel"}, png)
    assert opened == {"action": "open", "app": "com.sim.shop", "coords": "pixel"}
    swiped = target_action({"action": "swipe", "direction": "up", "start": [18, 60], "end": [18, 20],
                            "coords": "pixel"}, png)
    assert swiped == {"action": "swipe", "direction": "up", "coords": "pixel"}
    for target in (opened, swiped):
        assert parse_output(format_output(cot(1), target), screen=(36, 80)).action["action"] == target["action"]



def test_high_frequency_trajectories_are_capped_per_function_and_the_page_says_so(client_as):
    """Xiaomi-GUI-0 §3.1: a function's several entry-point trajectories, at most `high_frequency_cap` of
    them per function in a snapshot (seeded per function); every other query's rows untouched."""
    groups = {"hf-1": [], "hf-2": []}
    for group, paths in (("hf-1", 3), ("hf-2", 1)):
        for path in range(paths):
            query = make_query(f"Open the note ({group} path {path})")
            query.labels = {"high_frequency": {"function": int(group[-1]), "group": group, "path": f"p{path}"}}
            query.save(update_fields=["labels"])
            for _ in range(2):
                groups[group].append(make_trajectory(query, n_steps=1))
    others = [make_trajectory(n_steps=1) for _ in range(3)]
    for trajectory in [*groups["hf-1"], *groups["hf-2"], *others]:
        sft(trajectory)
        step = trajectory.steps.get()
        CptEntry.objects.create(step=step, screenshot=step.screenshot.name, action=step.executed_action)
    snapshot = create_snapshot("sft", {"high_frequency_cap": 4, "seed": 3})
    kept = {row["meta"]["trajectory"] for row in load_chat(snapshot)}
    assert {t.pk for t in others} <= kept and {t.pk for t in groups["hf-2"]} <= kept
    assert len(kept & {t.pk for t in groups["hf-1"]}) == 4 and len(kept) == 3 + 2 + 4
    assert snapshot.stats["high_frequency"] == {
        "cap": 4, "functions": 2, "collected": 8, "kept": 6, "rows_left_out": 2,
        "by_function": [{"group": "hf-1", "function": "", "collected": 6, "kept": 4},
                        {"group": "hf-2", "function": "", "collected": 2, "kept": 2}]}
    again = create_snapshot("sft", {"high_frequency_cap": 4, "seed": 3})
    assert again.content_hash == snapshot.content_hash
    cpt = create_snapshot("cpt", {"high_frequency_cap": 4, "seed": 3})    # a CPT row is a step: capped by trajectory
    assert {row["meta"]["trajectory"] for row in load_chat(cpt)} == kept
    assert create_snapshot("sft", {"high_frequency_cap": None}).row_count == 11   # null: no cap
    assert create_snapshot("sft", {}).row_count == 11                             # the default, 8, is above 6
    with pytest.raises(ValueError, match="high_frequency_cap must be a whole number"):
        create_snapshot("sft", {"high_frequency_cap": 0})
    page = client_as("manager").get(f"/training/snapshots/{snapshot.pk}/").content.decode()
    assert 'data-testid="high-frequency"' in page and "capped at 4 per function" in page and "6 of 8 kept" in page
