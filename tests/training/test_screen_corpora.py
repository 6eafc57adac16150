"""Screen-understanding corpora (issue #39): grounding, screen QA and element captions derived from stored
frames and their UI dumps, hand-computed on a hand-written page; deduplicated by page identity, weighted
toward thin function-tree nodes, mixed into CPT and SFT snapshots, loaded as the consumers load them."""
import io
import json
from pathlib import Path

import datasets
import pytest
from PIL import Image

from flywheel.blobs import store_blob
from flywheel.models import App, CptEntry, FunctionNode, QueryFunction, Step
from tests.training.test_exports import make_query, make_trajectory, sft
from training.exports.screen_corpora import page_samples, tap_caption
from training.models import DataSnapshot
from training.rules.screen_corpora import corpus_copies, page_node, thin_node_weights, validate_corpora
from training.screen_corpora import screen_corpus_counts
from training.snapshots import create_snapshot, verify_snapshot

SETTINGS_APP = "com.android.settings"
SCREEN = (1000, 2000)  # thousandths: x stays, y halves


def png(colour=(200, 200, 200), size=SCREEN) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, format="PNG")
    return out.getvalue()


def node(cls, bounds, text="", children="", **flags):
    package = flags.pop("package", SETTINGS_APP)
    attrs = " ".join(f'{name.replace("_", "-")}="{str(value).lower()}"' for name, value in flags.items())
    x1, y1, x2, y2 = bounds
    return (f'<node class="android.widget.{cls}" package="{package}" text="{text}" '
            f'bounds="[{x1},{y1}][{x2},{y2}]" {attrs}>{children}</node>')


def row(label, top, checked):
    """A preference row 200 px high: its title and its switch (which has no text of its own)."""
    return node("LinearLayout", (0, top, 1000, top + 200), clickable=True, children=(
        node("TextView", (40, top + 20, 600, top + 100), label)
        + node("Switch", (800, top + 60, 960, top + 140), clickable=True, checkable=True, checked=checked)))


def settings_page(wifi_on=True, tab="Profile"):
    tabs = node("LinearLayout", (0, 1900, 1000, 2000), children=(
        node("TabLayout$TabView", (0, 1900, 500, 2000), "Home", clickable=True, selected=tab == "Home")
        + node("TabLayout$TabView", (500, 1900, 1000, 2000), "Profile", clickable=True, selected=tab == "Profile")))
    content = (node("TextView", (40, 100, 400, 180), "Network") + row("Wi-Fi", 200, wifi_on)
               + row("Bluetooth", 400, False)
               + node("Button", (100, 1700, 300, 1800), "Help", clickable=True)   # twice: ambiguous
               + node("Button", (600, 1700, 800, 1800), "Help", clickable=True) + tabs)
    status_bar = ('<node class="android.widget.FrameLayout" package="com.android.systemui" bounds="[0,0][1000,60]">'
                  '<node class="android.widget.TextView" package="com.android.systemui" text="12:30" '
                  'bounds="[20,0][120,60]"/></node>')
    return (f'<?xml version="1.0"?><hierarchy rotation="0">{node("FrameLayout", (0, 0, 1000, 2000), children=content)}'
            f"{status_bar}</hierarchy>")


def bluetooth_page():
    texts = "".join(node("TextView", (40, 100 + 150 * i, 900, 200 + 150 * i), text)
                    for i, text in enumerate(["Bluetooth", "Pair new device", "Paired devices", "Device name"]))
    return f'<hierarchy>{node("FrameLayout", (0, 0, 1000, 2000), children=texts)}</hierarchy>'


# -- the derivation, by hand ------------------------------------------------------------------------------------

def by_task(samples):
    found = {}
    for sample in samples:
        found.setdefault(sample.task, []).append((sample.question, sample.answer))
    return found


def test_grounding_samples_of_a_hand_written_page():
    samples = page_samples(png(), settings_page())
    assert {s.corpus for s in samples} == {"grounding", "screen_qa"}
    tasks = by_task(samples)
    # reading order; the status bar, the text-less switches and the two "Help" buttons (ambiguous) give none
    assert tasks["element_to_box"] == [
        (f"Give the bounding box of {name} as [x1, y1, x2, y2] in thousandths of the screen.",
         json.dumps({"box": box, "coords": "thousandths"})) for name, box in [
            ('the "Network" text', [40, 50, 400, 90]), ('the "Wi-Fi" item', [0, 100, 1000, 200]),
            ('the "Bluetooth" item', [0, 200, 1000, 300]), ('the "Home" tab', [0, 950, 500, 1000]),
            ('the "Profile" tab', [500, 950, 1000, 1000])]]
    # a text is not tapped: only the tappable elements get the protocol's click at their centre
    assert tasks["element_to_point"] == [
        (f"Tap {name}.", f'<tool_call>{{"action": "click", "point": {point}, "coords": "thousandths"}}</tool_call>')
        for name, point in [('the "Wi-Fi" item', [500, 150]), ('the "Bluetooth" item', [500, 250]),
                            ('the "Home" tab', [250, 975]), ('the "Profile" tab', [750, 975])]]
    assert tasks["point_to_element"] == [
        (f"Which element is at {point} (thousandths of the screen)?", answer) for point, answer in [
            ("[220, 70]", 'the "Network" text'), ("[500, 150]", 'the "Wi-Fi" item (on)'),
            ("[500, 250]", 'the "Bluetooth" item (off)'), ("[250, 975]", 'the "Home" tab'),
            ("[750, 975]", 'the "Profile" tab')]]
    assert "12:30" not in json.dumps([s.__dict__ for s in samples])


def test_screen_qa_of_a_hand_written_page():
    tasks = by_task(page_samples(png(), settings_page(wifi_on=False, tab="Home")))
    assert tasks["page_offers"] == [(
        "What does this screen offer? List the elements you can tap, top to bottom.",
        '- the "Wi-Fi" item (off)\n- the "Bluetooth" item (off)\n- the "Help" button\n- the "Home" tab\n'
        '- the "Profile" tab')]
    assert tasks["toggle_state"] == [('Is the "Wi-Fi" item on or off?', "off"),
                                     ('Is the "Bluetooth" item on or off?', "off")]
    assert tasks["selected_item"] == [('Which of "Home", "Profile" is selected?', '"Home"')]


def test_a_page_with_nothing_to_name_gives_nothing():
    assert page_samples(png(), "") == [] and page_samples(png(), "<hierarchy><broken") == []
    # an element partly off screen has no honest box
    off = f'<hierarchy>{node("Button", (900, 100, 1100, 200), "Next", clickable=True)}</hierarchy>'
    assert page_samples(png(), off) == []


CONTEXT = {"package": SETTINGS_APP, "activity": ".Settings"}


def test_a_caption_says_what_the_recorded_tap_did_and_nothing_more():
    page = settings_page(wifi_on=True)
    tap = {"action": "click", "point": [880, 300], "coords": "pixel"}  # on the Wi-Fi row's bare switch
    sample, element = tap_caption(png(), page, tap, settings_page(wifi_on=False), CONTEXT, CONTEXT)
    assert (sample.corpus, sample.task, sample.question, sample.answer) == (
        "captions", "tap_effect", 'What happens when you tap the "Wi-Fi" item?', 'It turns the "Wi-Fi" item off.')
    assert element.bounds == (0, 200, 1000, 400)
    opened, _ = tap_caption(png(), page, {"action": "click", "point": [500, 250], "coords": "thousandths"},
                            bluetooth_page(), CONTEXT, {"package": SETTINGS_APP, "activity": ".BluetoothSettings"})
    assert (opened.question, opened.answer) == (
        'What happens when you tap the "Bluetooth" item?',
        'It leads to a screen (.BluetoothSettings) that shows "Bluetooth", "Pair new device", "Paired devices".')
    # the records do not say: no change, an ambiguous element, not a tap, no next dump
    assert tap_caption(png(), page, tap | {"point": [500, 500]}, page, CONTEXT, CONTEXT) is None
    assert tap_caption(png(), page, tap | {"point": [200, 1750]}, bluetooth_page(), CONTEXT, CONTEXT) is None
    assert tap_caption(png(), page, {"action": "swipe", "direction": "up"}, bluetooth_page(), CONTEXT, CONTEXT) is None
    assert tap_caption(png(), page, tap, "", CONTEXT, CONTEXT) is None


# -- the rules, by hand ------------------------------------------------------------------------------------------

def test_thin_nodes_weigh_more_within_bounds():
    # median of the held counts (1, 4, 16, 100) is 10: 10/1 → 4 (bound), 10/4, 10/16, 10/100 → 1/4 (bound)
    weights = thin_node_weights({"a": 1, "b": 4, "c": 16, "d": 100}, ["a", "b", "c", "d", "none"])
    assert weights == {"a": 4.0, "b": 2.5, "c": 0.625, "d": 0.25, "none": 4.0}  # no pool sample: the bound
    assert thin_node_weights({"a": 2, "b": 8}, ["a", "b"], max_weight=8) == {"a": 2.5, "b": 0.625}
    assert thin_node_weights({}, ["a"]) == {"a": 1.0}  # nothing to compare with: no steering
    assert page_node(["b", "a", "c"], weights) == ("a", 4.0) and page_node([], weights) == (None, 1.0)
    assert page_node(["a", "none"], weights) == ("a", 4.0)  # a tie goes to the smaller name


def test_corpus_copies_apply_ratio_times_weight_per_node():
    copies = corpus_copies({"thin": 2, "thick": 4, None: 3}, 0.5, {"thin": 4.0, "thick": 0.5}, 7, "grounding")
    assert copies["thin"] == [2, 2] and copies[None] in ([0, 1, 1], [1, 0, 1], [1, 1, 0])  # 0.5 of 3 keeps 2
    assert sorted(copies["thick"]) == [0, 0, 0, 1]  # 0.25 of 4
    assert copies == corpus_copies({"thin": 2, "thick": 4, None: 3}, 0.5, {"thin": 4.0, "thick": 0.5}, 7, "grounding")


@pytest.mark.parametrize("value, named", [
    ({"groundng": 1}, "'groundng' is not a corpus"), ({"grounding": -1}, "negative"),
    ({"screen_qa": "lots"}, "'screen_qa' must be a finite number"), ([0.3], "mapping")])
def test_bad_corpora_are_refused_with_the_key_named(value, named):
    with pytest.raises(ValueError, match=named):
        validate_corpora(value)


def test_corpora_validate_to_their_order_without_zeros():
    assert validate_corpora({"captions": 1, "grounding": 0.5, "screen_qa": 0}) == {"grounding": 0.5, "captions": 1.0}
    assert validate_corpora(None) == {}


# -- snapshots ---------------------------------------------------------------------------------------------------

@pytest.fixture
def training_root(settings, tmp_path):
    settings.TRAINING_ROOT = tmp_path / "training"
    return settings.TRAINING_ROOT


def function(path):
    app, _ = App.objects.get_or_create(package=SETTINGS_APP)
    return FunctionNode.objects.get_or_create(app=app, path=path)[0]


def on_page(trajectory, pages, colour=0):
    """Give the trajectory's steps these UI dumps and 1000×2000 frames (step i shows pages[i])."""
    for step, xml in zip(trajectory.steps.order_by("index"), pages):
        step.hierarchy = store_blob(xml.encode(), "xml")
        step.screenshot = store_blob(png((colour, step.index, 100)), "png")
        step.save()
    return trajectory


def tagged(path, **kwargs):
    query = make_query(**kwargs)
    QueryFunction.objects.create(query=query, function=function(path))
    return query


def load_chat(snapshot):
    return datasets.load_dataset("json", data_files=str(Path(snapshot.directory) / "data.jsonl"), split="train",
                                 cache_dir=str(Path(snapshot.directory).parent / ".hf-cache"))


def corpus_rows(rows):
    return [row for row in rows if row["meta"]["step_source"] == "derived"]


@pytest.mark.django_db
def test_an_sft_snapshot_mixes_in_the_corpora_deduplicated_and_loads_as_llama_factory_reads_it(training_root):
    wifi = tagged("Network/Wi-Fi")
    tapped = make_trajectory(wifi, n_steps=2)
    Step.objects.filter(trajectory=tapped, index=0).update(
        executed_action={"action": "click", "point": [500, 500], "coords": "pixel"})  # the Bluetooth row
    Step.objects.filter(trajectory=tapped, index=1).update(activity_stack=[f"{SETTINGS_APP}/.BluetoothSettings"])
    on_page(tapped, [settings_page(), bluetooth_page()])
    sft(tapped)
    again = on_page(make_trajectory(wifi, n_steps=1), [settings_page()], colour=50)  # the same page, again
    held_out = on_page(make_trajectory(make_query("HELD-OUT", evaluation_only=True), n_steps=1),
                       [bluetooth_page().replace("Device name", "HELD-OUT-TEXT")])
    config = {"corpora": {"grounding": 1, "screen_qa": 1, "captions": 1}}
    snapshot = create_snapshot("sft", config)
    assert snapshot.status == "ready", snapshot.error
    assert verify_snapshot(snapshot) == []
    rows = list(load_chat(snapshot))
    corpus = corpus_rows(rows)
    # the pool's two samples first, then the corpora: each page once (the repeat and the held-out frame none)
    assert [row["meta"]["source"] for row in rows[:2]] == ["htsc_true", "htsc_true"]
    stats = snapshot.stats["corpora"]
    assert (stats["frames"], stats["pages"], stats["duplicate_frames"]) == (3, 2, 1)
    assert {(row["meta"]["trajectory"], row["meta"]["step"]) for row in corpus} == {(tapped.pk, 0), (tapped.pk, 1)}
    assert not {again.pk, held_out.pk} & {row["meta"]["trajectory"] for row in rows}
    assert not any(b"HELD-OUT" in path.read_bytes() for path in Path(snapshot.directory).rglob("*") if path.is_file())
    # the settings page's 14 grounding and 4 QA samples, the Bluetooth page's 8 + 0 (no tappable element), a caption
    assert stats["samples"] == {"grounding": 22, "screen_qa": 4, "captions": 1} == {
        corpus: stats["candidates"][corpus] for corpus in ("grounding", "screen_qa", "captions")}
    assert screen_corpus_counts(snapshot) == stats["samples"]
    assert snapshot.stats["by_source"] == {"captions": 1, "grounding": 22, "htsc_true": 2, "screen_qa": 4}
    caption = next(row for row in corpus if row["meta"]["source"] == "captions")
    assert caption["messages"][1]["content"] == ('It leads to a screen (.BluetoothSettings) that shows "Bluetooth", '
                                                 '"Pair new device", "Paired devices".')
    directory = Path(snapshot.directory)
    for row in corpus:  # the LLaMA-Factory sharegpt shape: one placeholder per image, user then assistant
        assert [m["role"] for m in row["messages"]] == ["user", "assistant"]
        assert row["messages"][0]["content"].count("<image>") == len(row["images"]) == 1
        assert Image.open(directory / row["images"][0]).size == SCREEN
        assert (directory / row["meta"]["hierarchy"]).is_file() and row["meta"]["pool_row"] is None
    # the HF json loader fixes the columns from its first chunk (10 MB): corpus lines after many pool
    # lines must add no meta key, or a large snapshot would not load
    chunked = datasets.load_dataset("json", data_files=str(directory / "data.jsonl"), split="train", chunksize=2048,
                                    cache_dir=str(directory.parent / ".hf-cache-chunked"))
    assert len(chunked) == len(rows) and chunked[-1]["meta"]["source"] in ("grounding", "screen_qa", "captions")
    manifest = json.loads((directory / "manifest.json").read_text())
    assert len(manifest["rows"]) == len(rows) == snapshot.row_count and manifest["config"]["corpora"] == {
        "grounding": 1.0, "screen_qa": 1.0, "captions": 1.0}
    # seeded and deterministic: the same pool and config, the same bytes
    second = create_snapshot("sft", config)
    assert second.content_hash == snapshot.content_hash
    assert (Path(second.directory) / "data.jsonl").read_bytes() == (directory / "data.jsonl").read_bytes()
    assert create_snapshot("sft", {}).row_count == 2  # off unless a ratio names a corpus


@pytest.mark.django_db
def test_samples_of_pages_under_thin_nodes_weigh_more(training_root):
    """Wi-Fi has 1 pool sample, Display 4 (median 2.5): the Wi-Fi page weighs 2.5, the Display page 0.625.
    (Page identity ignores a switch's state: the Display queries show another page.)"""
    thin = on_page(make_trajectory(tagged("Network/Wi-Fi"), n_steps=1), [settings_page()])
    sft(thin)
    display = tagged("Display")
    for colour in range(4):
        sft(on_page(make_trajectory(display, n_steps=1), [bluetooth_page()], colour=colour + 1))
    snapshot = create_snapshot("sft", {"corpora": {"grounding": 1}, "seed": 5})
    assert snapshot.status == "ready" and verify_snapshot(snapshot) == []
    stats = snapshot.stats["corpora"]
    assert stats["node_weights"] == [
        {"node": f"{SETTINGS_APP}:Network/Wi-Fi", "pool_samples": 1, "weight": 2.5, "corpus_samples": 35},
        {"node": f"{SETTINGS_APP}:Display", "pool_samples": 4, "weight": 0.625, "corpus_samples": 5}]
    # 14 grounding samples on the Wi-Fi page: 2.5 → each twice and a seeded 7 thrice (35); 8 on the
    # Display page: 0.625 → a seeded 5
    rows = corpus_rows(load_chat(snapshot))
    assert sum(row["meta"]["trajectory"] == thin.pk for row in rows) == 35 and len(rows) == 40
    assert stats["samples"] == {"grounding": 40} and stats["candidates"] == {"grounding": 22}


@pytest.mark.django_db
def test_a_cpt_snapshot_takes_the_corpora_and_an_rl_one_refuses_them(training_root):
    trajectory = on_page(make_trajectory(n_steps=1, line="semi_auto"), [settings_page()])
    step = trajectory.steps.get()
    CptEntry.objects.create(step=step, screenshot=step.screenshot.name, action=step.executed_action)
    snapshot = create_snapshot("cpt", {"corpora": {"screen_qa": 2}})
    assert snapshot.status == "ready" and verify_snapshot(snapshot) == []
    assert screen_corpus_counts(snapshot) == {"grounding": 0, "screen_qa": 8, "captions": 0}  # 4 QA, each twice
    with pytest.raises(ValueError, match="corpora apply to CPT and SFT snapshots only"):
        create_snapshot("rl", {"corpora": {"grounding": 1}})
    with pytest.raises(ValueError, match="'grounding_qa' is not a corpus"):
        create_snapshot("sft", {"corpora": {"grounding_qa": 1}})
    assert DataSnapshot.objects.count() == 1


@pytest.mark.django_db
def test_a_manager_sets_the_mixture_on_the_form_and_sees_it_on_the_snapshot_page(client_as, training_root):
    sft(on_page(make_trajectory(tagged("Network/Wi-Fi"), n_steps=1), [settings_page()]))
    client = client_as("manager")
    assert 'name="corpus_grounding"' in client.get("/training/").content.decode()
    reply = client.post("/training/snapshots/", {"kind": "sft", "snapshot_config": '{"corpora": {"captions": 1}}',
                                                 "corpus_grounding": "0.5", "corpus_screen_qa": ""})
    snapshot = DataSnapshot.objects.get()
    assert snapshot.config["corpora"] == {"grounding": 0.5, "captions": 1.0} and snapshot.status == "ready"
    page = client.get(reply["Location"]).content.decode()
    assert 'data-testid="corpus-grounding"' in page and "Screen corpora in the mixture" in page
    assert f"{SETTINGS_APP}:Network/Wi-Fi" in page and "{" not in page.split('data-testid="corpora"')[1].split(
        "</section>")[0]  # no Python dict reaches the page
    reply = client.post("/training/snapshots/", {"kind": "sft", "corpus_grounding": "lots"}, follow=True)
    assert "grounding ratio is not a number" in reply.content.decode() and DataSnapshot.objects.count() == 1
    assert client_as("annotator").get(f"/training/snapshots/{snapshot.pk}/").status_code == 403



@pytest.mark.django_db
def test_a_small_pool_over_many_stored_frames_builds_its_corpora_on_a_worker(training_root, settings):
    """The corpora are derived from every stored frame, not only the pool's: a snapshot that would read more
    frames than TRAINING_SNAPSHOT_SYNC_ROWS is built by a training worker, not in the request."""
    settings.TRAINING_SNAPSHOT_SYNC_ROWS = 2
    sft(on_page(make_trajectory(tagged("Network/Wi-Fi"), n_steps=1), [settings_page()]))
    assert create_snapshot("sft", {"corpora": {"grounding": 1}}).status == "ready"   # 1 frame: here and now
    on_page(make_trajectory(n_steps=2, line="automatic"), [settings_page(), bluetooth_page()])   # not in the pool
    assert create_snapshot("sft", {"corpora": {"grounding": 1}}).status == "building"   # 3 frames: a worker's
    assert create_snapshot("sft", {}).status == "ready"                                 # no corpora: the pool decides
