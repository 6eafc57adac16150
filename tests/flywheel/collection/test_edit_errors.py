"""A person's verified action with a point on no screen (Infinity, NaN, 1e400, 1e308 of the width)
is a clean error: measure_edit raises a ValueError, the session page answers 400 with a message,
and the step still waits for verification (nothing ran, nothing was lost)."""
import json
import math

import pytest

from devices.registry import discover_devices
from flywheel.collection import semi_auto
from flywheel.collection.edits import EditError, measure_edit
from tests.flywheel.collection.test_runs import make_query

BAD_POINTS = [
    ([math.inf, 5], "pixel"), ([5, -math.inf], "pixel"), ([math.nan, 5], "pixel"),
    ([1e308, 5], "fraction"), ([10 ** 400, 5], "pixel"), ("centre", "pixel"), ([1, 2, 3], "pixel"),
    ([True, 5], "pixel"),
]


@pytest.mark.parametrize("point, coords", BAD_POINTS)
def test_a_verified_point_on_no_screen_is_a_value_error(point, coords):
    with pytest.raises(EditError, match="point of the verified action") as raised:
        measure_edit({"action": "click", "point": [1, 1]}, {"action": "click", "point": point, "coords": coords},
                     {}, {}, 1080, 2400)
    assert isinstance(raised.value, ValueError)


def test_off_screen_points_are_measured_where_they_would_run_and_a_bad_proposal_is_not_measured():
    edit = measure_edit({"action": "click", "point": [0, 0]}, {"action": "click", "point": [1e308, -1e308]},
                        {}, {}, 1080, 2400)
    assert edit["pixel_distance"] == round(math.dist((0, 0), (1079, 0)), 1)  # clamped, as the executor does
    json.dumps(edit, allow_nan=False)  # storable as strict JSON
    edit = measure_edit({"action": "click", "point": [math.inf, 0]}, {"action": "click", "point": [5, 5]},
                        {}, {}, 1080, 2400)
    assert edit["pixel_distance"] is None  # a model's broken proposal is data, not an error


@pytest.mark.django_db
@pytest.mark.parametrize("point", ["[Infinity, 100]", "[1e400, 100]", "[NaN, 100]"])
def test_the_session_page_answers_400_and_the_step_waits(farm_settings, client_as, role_users, point):
    discover_devices()
    trajectory = semi_auto.start_session(make_query("edit-errors"), role_users["annotator"])
    step = semi_auto.prepare_step(trajectory)
    client = client_as("annotator")
    # Python's json writes and reads Infinity/NaN; a huge literal overflows a float.
    body = f'{{"step": {step.index}, "action": {{"action": "click", "point": {point}}}, "cot": {{}}}}'
    answer = client.post(f"/session/{trajectory.pk}/execute/", body, content_type="application/json")
    assert answer.status_code == 400, answer.content
    assert "point of the verified action" in answer.json()["error"]
    step.refresh_from_db()
    assert step.executed_action is None and step.executing_since is None
    assert semi_auto.pending_step(trajectory) == step
    semi_auto.release_phone(trajectory)
