"""RQA's Teacher rewrite sees the terminal frame of the golden prefix, and makes no rewrite without it."""
import pytest
from django.core.files.storage import default_storage

from flywheel.blobs import store_blob
from flywheel.models import ModelVersion, Step
from flywheel.repair.rqa import align_query, rewrite
from flywheel.repair.samples import kept_steps
from tests.flywheel.judging.pixel_judge import PixelJudge, frame, images_of, text_of
from tests.flywheel.repair.stored import repair_for
from tests.flywheel.repair.test_rqa import OVER_SCOPED, over_scoped

pytestmark = pytest.mark.django_db


@pytest.fixture
def teacher(settings):
    with PixelJudge(model="teacher-72b") as stub:
        ModelVersion.objects.create(name="teacher", kind="endpoint", endpoint_url=stub.url,
                                    served_model_name="teacher-72b", sampling={"retries": 0})
        settings.TEACHER_MODEL_VERSION = "teacher"
        yield stub


def with_terminal_frame(png: bytes):
    """The over-scoped trajectory, its step 2 (the state the golden prefix reached) showing `png`."""
    trajectory = over_scoped()
    Step.objects.filter(trajectory=trajectory, index=2).update(screenshot=store_blob(png, "png"))
    return trajectory


def test_the_rewrite_follows_the_terminal_frames_pixels(teacher):
    marked = align_query(repair_for(with_terminal_frame(frame(True)), path="rqa", step_index=2))
    plain = align_query(repair_for(with_terminal_frame(frame(False)), path="rqa", step_index=2))
    assert marked.derived_query.text == "Show the green done mark"
    assert plain.derived_query.text == "Show a screen without any mark"
    assert [len(images_of(request)) for request in teacher.requests] == [1, 1]
    assert OVER_SCOPED in text_of(teacher.requests[0]) and "screenshot of the final screen" in text_of(teacher.requests[0])


def test_a_terminal_frame_missing_from_the_store_makes_no_teacher_rewrite(teacher):
    trajectory = with_terminal_frame(frame(True, size=(1080, 2401)))
    terminal = trajectory.steps.get(index=2)
    default_storage.delete(terminal.screenshot.name)
    text, provenance = rewrite(trajectory.query, kept_steps(trajectory, 2), terminal, seed="s")
    assert provenance["method"] == "offline" and "offline_text" not in provenance
    assert provenance["llm_error"] == "frame of step 2 is missing from the store"
    repair = align_query(repair_for(trajectory, path="rqa", step_index=2))
    assert repair.status == "needs_human" and "no screenshot stored for step 2" in repair.human_reason
    assert not teacher.requests
