"""A benchmark success the Teacher took over in is not the policy's (issue #35): scored, never a
success in the SR, its breakdown or the AndroidWorld summary."""
import csv
import io

from benchmark.exports import androidworld_summary
from benchmark.metric import score_evaluation
from benchmark.models import EvalResult
from flywheel.models import Trajectory
from tests.benchmark.test_exports import evaluation  # noqa: F401  (the fixture)


def test_a_teacher_assisted_success_is_not_counted_in_the_sr(evaluation):  # noqa: F811
    assert (evaluation.scores["sr"], evaluation.scores["successes"]) == (1.0, 2)
    helped = EvalResult.objects.get(eval_run=evaluation, item__query__key="q-a", superseded=False)
    Trajectory.objects.filter(pk=helped.trajectory_id).update(teacher_assisted=True)
    scores = score_evaluation(evaluation.pk)
    assert (scores["sr"], scores["successes"], scores["scored"], scores["teacher_assisted"]) == (0.5, 1, 2, 1)
    assert sum(cell["successes"] for cell in scores["by_dimension"]["category"].values()) == 1
    rows = {row["task_template"]: row for row in csv.DictReader(io.StringIO(androidworld_summary(evaluation)))}
    assert rows["q-a"]["mean_success_rate"] == "0.0" and rows["q-b"]["mean_success_rate"] == "1.0"
