"""The benchmark's vlm: judges (§4.3) see the stored frames: their vote follows the pixels; a frame
the store lost, or a success the judge gives for blank frames too, is an abstention with the reason."""
import pytest
from django.core.files.storage import default_storage

from benchmark import versions
from benchmark.infer import launch_evaluation
from benchmark.judges import run_judges
from benchmark.models import BenchmarkItem, EvalResult
from benchmark.rules.scoring import ABSTAIN, FAILURE, SUCCESS
from flywheel.blobs import store_blob
from flywheel.endpoints.frames import BLANK_PROBE_REASON
from flywheel.models import ModelVersion, Step, Trajectory
from flywheel.policies import default_policy_version
from tests.benchmark.conftest import make_benchmark_query
from tests.flywheel.judging.pixel_judge import PixelJudge, frame, images_of

pytestmark = pytest.mark.django_db
SCREEN = ('<?xml version="1.0" ?><hierarchy rotation="0"><node index="0" text="{}" resource-id="" '
          'class="android.widget.TextView" package="com.android.settings" content-desc="" bounds="[0,0][1080,100]" />'
          '</hierarchy>')


@pytest.fixture
def item(role_users):
    manager = role_users["manager"]
    benchmark = versions.create_version("vlm-bench", "v1", {"size": 1})
    (added,) = versions.add_queries(benchmark, [make_benchmark_query("vlm-frames")], split="held_out")
    versions.review_item(added, manager, note="checked", decision="approve")
    benchmark = versions.freeze(benchmark, manager)
    run = launch_evaluation(benchmark, default_policy_version(), config={"max_steps": 6}, dispatch=False)
    return run, BenchmarkItem.objects.get(benchmark=benchmark)


def result_with(item, frames):
    """A finished rollout whose stored dumps all read 'Bluetooth' (the dump cannot tell them apart)."""
    run, benchmark_item = item
    trajectory = Trajectory.objects.create(query=benchmark_item.query, run=run.collection_run, line="benchmark",
                                           status="done", stop_reason="terminate: success")
    actions = [{"action": "click", "point": [540, 50]}, {"action": "terminate", "status": "success"}]
    for index, (png, action) in enumerate(zip(frames, actions)):
        Step.objects.create(trajectory=trajectory, index=index, executed_action=action,
                            foreground_package="com.android.settings",
                            hierarchy=store_blob(SCREEN.format("Bluetooth").encode(), "xml"),
                            screenshot=store_blob(png, "png"))
    return EvalResult.objects.create(eval_run=run, item=benchmark_item, trajectory=trajectory,
                                     evidence={"stop_kind": "finished"})


def vlm_vote(result, looks=True):
    with PixelJudge(looks=looks) as stub:
        ModelVersion.objects.update_or_create(name="pix", defaults={"kind": "endpoint", "endpoint_url": stub.url,
                                                                    "served_model_name": stub.model})
        (vote,), _ = run_judges(result, [{"name": "vlm:pix", "version": stub.model}])
    return vote, stub.requests


def test_the_vlm_judges_vote_follows_the_final_frame(item):
    done, requests = vlm_vote(result_with(item, [frame(False), frame(True)]))
    assert done["vote"] == SUCCESS and len(images_of(requests[0])) == 2 and len(requests) == 2
    not_done, requests = vlm_vote(result_with(item, [frame(True), frame(False)]))
    assert not_done["vote"] == FAILURE and "no done mark" in not_done["rationale"] and len(requests) == 1


def test_a_vlm_judge_that_answers_without_looking_abstains(item):
    vote, requests = vlm_vote(result_with(item, [frame(False), frame(False)]), looks=False)
    assert vote["vote"] == ABSTAIN and BLANK_PROBE_REASON in vote["rationale"] and len(requests) == 2


def test_a_frame_missing_from_the_store_makes_the_vlm_judge_abstain(item):
    result = result_with(item, [frame(False), frame(True, size=(1080, 2401))])
    default_storage.delete(result.trajectory.steps.get(index=1).screenshot.name)
    vote, requests = vlm_vote(result)
    assert vote["vote"] == ABSTAIN and "frame of step 1 is missing from the store" in vote["rationale"]
    assert not requests
