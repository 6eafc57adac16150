"""The model judges see the frames they judge: one multimodal message format, pixel-dependent verdicts,
and abstentions for a frame the store lost or a judge that answers without looking."""
import io

import pytest
from PIL import Image

from flywheel.endpoints.chat import JudgeUnavailable
from flywheel.endpoints.frames import (
    BLANK_PROBE_REASON,
    FrameMissing,
    answers_without_looking,
    blank_like,
    downscaled,
    image_part,
    load_frames,
    png_data_url,
)
from flywheel.judging.llm_judge import path_frame_loaders, path_vote
from flywheel.judging.trajectory_view import StepView, TrajectoryView
from flywheel.models import ModelVersion
from flywheel.policies.protocol import build_messages
from tests.flywheel.judging.pixel_judge import PixelJudge, frame, images_of, is_uniform, shows_marker, text_of

DONE_FRAME, PLAIN_FRAME = frame(True), frame(False)
DONE = {"action": "terminate", "status": "success"}


def screen(*texts):
    nodes = "".join(f'<node index="{i}" text="{t}" resource-id="" class="android.widget.TextView" package="p" '
                    f'content-desc="" bounds="[0,{i * 100}][1080,{i * 100 + 100}]" />' for i, t in enumerate(texts))
    return f'<?xml version="1.0" ?><hierarchy rotation="0">{nodes}</hierarchy>'


HOME, SETTINGS, WLAN, MAC = (screen("Settings", "Notes"), screen("WLAN", "Bluetooth"),
                             screen("Advanced", "Saved networks"), screen("MAC address", "02:00:00:44:55:66"))


def click(x, y):
    return {"action": "click", "point": [x, y]}


def size_of(png: bytes):
    with Image.open(io.BytesIO(png)) as image:
        return image.size


def lost():
    raise FileNotFoundError("blobs/ab/gone.png")


def pixel_view(last_frame=DONE_FRAME, loaders=None, milestones=None):
    """The same dump text whatever the pixels: only the frames tell the trajectories apart."""
    screens = [(HOME, click(1, 1)), (SETTINGS, click(1, 1)), (WLAN, click(1, 1)), (WLAN, click(1, 1)),
               (MAC, click(1, 1)), (MAC, DONE)]
    frames = [PLAIN_FRAME] * (len(screens) - 1) + [last_frame]
    loaders = loaders or [lambda png=png: png for png in frames]
    return TrajectoryView(goal="show my MAC address", final_hierarchy=MAC,
                          verification={"milestones": milestones or []},
                          steps=[StepView(index=i, hierarchy=h, action=a, screenshot=loaders[i])
                                 for i, (h, a) in enumerate(screens)])


@pytest.fixture
def version(db):
    def register(stub):
        return ModelVersion.objects.get_or_create(name=f"vlm-{id(stub)}", kind="endpoint", endpoint_url=stub.url,
                                                  served_model_name=stub.model)[0]
    return register


# --- the shared encoder and frames --------------------------------------------------------------
def test_the_policy_and_the_judges_send_frames_as_the_same_image_parts():
    messages = build_messages("open settings", [], [DONE_FRAME, PLAIN_FRAME], k=2)
    assert messages[1]["content"][1:] == [image_part(DONE_FRAME), image_part(PLAIN_FRAME)]
    assert image_part(DONE_FRAME) == {"type": "image_url", "image_url": {"url": png_data_url(DONE_FRAME)}}
    assert png_data_url(DONE_FRAME).startswith("data:image/png;base64,iVBOR")


def test_frames_are_scaled_down_and_blank_frames_keep_their_size():
    small = downscaled(DONE_FRAME)
    assert size_of(small) == (576, 1280) and shows_marker(small)
    tiny = frame(True, size=(300, 600))
    assert downscaled(tiny) is tiny
    blank = blank_like(small)
    assert size_of(blank) == (576, 1280) and is_uniform(blank) and not is_uniform(small)
    with pytest.raises(ValueError, match="not a readable image"):
        downscaled(b"<hierarchy/>")


def test_loading_frames_names_the_step_whose_frame_is_lost_or_unreadable():
    frames = load_frames([(3, lambda: DONE_FRAME), (4, None), (5, lambda: PLAIN_FRAME)])
    assert [f.step for f in frames] == [3, 5] and size_of(frames[0].png) == (576, 1280)
    with pytest.raises(FrameMissing, match="frame of step 4 is missing from the store") as missing:
        load_frames([(3, lambda: DONE_FRAME), (4, lost)])
    assert missing.value.step == 4
    with pytest.raises(FrameMissing, match="frame of step 2 is not a readable image"):
        load_frames([(2, lambda: b"not a png")])


def test_the_blank_probe_compares_the_answer_for_blank_frames():
    looking = lambda pngs: [shows_marker(p) for p in pngs]   # noqa: E731
    assert not answers_without_looking(looking, [DONE_FRAME], [True])
    assert answers_without_looking(lambda pngs: "true", [DONE_FRAME], "true")


# --- the HTSC path judge (System C's LLM judge; the benchmark's vlm: judges call the same) ---------
def test_the_path_judges_verdict_follows_the_pixels(version):
    with PixelJudge() as stub:
        judge = version(stub)
        done = path_vote(judge, pixel_view(DONE_FRAME))
        assert len(stub.requests) == 2          # the verdict, then the blank probe
        not_done = path_vote(judge, pixel_view(PLAIN_FRAME))
    assert done.vote == "true" and done.details["frames"] == [3, 4, 5]
    assert not_done.vote == "false" and "no done mark" in not_done.rationale
    assert len(stub.requests) == 3              # a False is not probed: blank frames show no goal either
    first, probe = stub.requests[0], stub.requests[1]
    assert len(images_of(first)) == 3 and all(size_of(p) == (576, 1280) for p in images_of(first))
    assert all(is_uniform(p) for p in images_of(probe)) and text_of(probe) == text_of(first)
    assert "Step 0: screen shows: Settings" in text_of(first) and "Final screen: MAC address" in text_of(first)
    assert "1. the screen of step 3; 2. the screen of step 4; 3. the screen of step 5" in text_of(first)
    assert "Vote true only when the screenshots show the goal state" in first["messages"][0]["content"]


def test_a_judge_that_answers_without_looking_abstains(version):
    with PixelJudge(looks=False) as stub:
        vote = path_vote(version(stub), pixel_view(PLAIN_FRAME))
    assert vote.vote == "abstain" and BLANK_PROBE_REASON in vote.rationale
    assert vote.details["abstain"] == "blank_probe" and len(stub.requests) == 2


def test_a_frame_missing_from_the_store_is_an_abstention_and_no_call(version):
    loaders = [lambda: PLAIN_FRAME] * 4 + [lost, lambda: DONE_FRAME]
    with PixelJudge() as stub:
        vote = path_vote(version(stub), pixel_view(loaders=loaders))
    assert vote.vote == "abstain" and "frame of step 4 is missing from the store" in vote.rationale
    assert vote.details == {"judge": vote.details["judge"], "abstain": "frame_missing", "step": 4}
    assert not stub.requests   # the judge is not asked without the frame: no guess


def test_frames_bound_to_milestones_go_with_the_last_screens(version):
    # "WLAN" first shows on the Settings list (step 1); a milestone never held binds no frame
    milestones = [{"name": "settings", "text": "WLAN"}, {"name": "gone", "text": "Nowhere"}]
    assert [step for step, _ in path_frame_loaders(pixel_view(milestones=milestones))] == [1, 3, 4, 5]
    with PixelJudge() as stub:
        vote = path_vote(version(stub), pixel_view(milestones=milestones))
    assert vote.details["frames"] == [1, 3, 4, 5] and len(images_of(stub.requests[0])) == 4


def test_without_recorded_frames_the_judge_reads_the_text_as_before(version):
    no_frames = TrajectoryView(goal="show my MAC address", final_hierarchy=MAC,
                               steps=[StepView(index=0, hierarchy=HOME, action=click(1, 1)),
                                      StepView(index=1, hierarchy=MAC, action=DONE)])
    with PixelJudge() as stub:          # it refuses a request without an image: the judge is unavailable
        with pytest.raises(JudgeUnavailable, match="HTTP 400"):
            path_vote(version(stub), no_frames)
    assert isinstance(stub.requests[0]["messages"][1]["content"], str)
    assert "Step 1: screen shows: MAC address" in stub.requests[0]["messages"][1]["content"]
