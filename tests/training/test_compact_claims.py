"""Stopping is learned (issue #34): the success claims the judges rejected become the compact head's
negative examples — read only from what training may see, under the ablations' settings — and the
trainer's unlikelihood term lowers them (hand-computed loss, a toy head before and after)."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from flywheel.blobs import store_blob
from flywheel.models import Attribution, FailureClass, Step, Trajectory, Verdict, Vote
from flywheel.policies.compact import CompactHead
from flywheel.policies.compact_features import SCALARS, V1_KINDS, featurize
from tests.training.test_compact import APP, EDITOR, LIST, SCREEN, frame, notes_query, pool  # noqa: F401 (fixture)
from training.compact import train_compact
from training.compact_claims import false_claim_arrays

pytestmark = pytest.mark.django_db
TAP_GIFT = {"action": "click", "point": [100, 250], "coords": "pixel"}
CLAIM = {"action": "terminate", "status": "success"}
GIVE_UP = {"action": "terminate", "status": "failure"}


def ended(query, verdict, last, votes=None, **fields):
    """A judged rollout: a tap on the list, then `last` on the editor (its stop kind as the engine records it)."""
    stop = {"success": "terminate_success", "failure": "terminate_failure"}[last["status"]]
    trajectory = Trajectory.objects.create(query=query, line=fields.pop("line", "rl"), status="completed",
                                           verdict=verdict, stop_kind=stop, **fields)
    for index, (xml, action) in enumerate([(LIST, TAP_GIFT), (EDITOR, last)]):
        Step.objects.create(trajectory=trajectory, index=index, screenshot=store_blob(frame(index), "png"),
                            hierarchy=store_blob(xml.encode(), "xml"), foreground_package=APP,
                            timings={"screen": list(SCREEN)},
                            cot={"Observation": "o", "Reflection": "", "Plan": "p", "Decision": f"d{index}", "Memory": ""},
                            proposed_action=action, executed_action=action)
    Verdict.objects.create(trajectory=trajectory, outcome=verdict)
    for system, vote in (votes or {}).items():
        Vote.objects.create(trajectory=trajectory, system=system, vote=vote)
    return trajectory


@pytest.fixture
def claims(settings, tmp_path):
    settings.TRAINING_ROOT = tmp_path / "training"
    query = notes_query("Open my Gift ideas note and pin it", "claims-1")
    made = {"rejected": ended(query, "false", CLAIM, votes={"A": "false"}),
            "true_claim": ended(query, "true", CLAIM, votes={"A": "false"}),
            "gave_up": ended(query, "false", GIVE_UP),
            "a_said_true": ended(query, "false", CLAIM, votes={"A": "true"})}
    adversarial = notes_query("Pin the Gift ideas note twice", "claims-derived")
    adversarial.failure_class = FailureClass.objects.create(key="step:no-effect:tap", cause="no-effect")
    adversarial.save()
    made["derived"] = ended(adversarial, "false", CLAIM)
    # the ECDM located the first error at the claim itself: still a rejected claim
    made["attributed"] = ended(query, "false", CLAIM)
    Attribution.objects.create(trajectory=made["attributed"], level=3, cause="premature_stop", first_bad_step=1)
    # ... and one earlier: the claim is still wrong (the verdict says so), beside that first error
    made["attributed_earlier"] = ended(query, "false", CLAIM)
    Attribution.objects.create(trajectory=made["attributed_earlier"], level=3, cause="grounding", first_bad_step=0)
    # never read: a benchmark rollout, a held-out query's trajectory, an ECDM replay
    ended(query, "false", CLAIM, destination="benchmark", line="benchmark")
    held_out = notes_query("A held-out task", "claims-held")
    held_out.evaluation_only = True
    held_out.save()
    ended(held_out, "false", CLAIM)
    ended(query, "false", CLAIM, line="ecdm")
    return made


def test_each_rejected_claim_is_its_screen_with_the_terminate_to_push_down(claims):
    arrays, stats = false_claim_arrays()
    # rejected, a_said_true, derived, attributed, attributed_earlier; not the true claim
    assert stats == {"claims_read": 6, "false_claims": 5, "skipped": 0}
    offsets, target = arrays["neg_offsets"], arrays["neg_target"]
    assert len(target) == 5 and offsets[0] == 0 and offsets[-1] == len(arrays["neg_x"]) and (np.diff(offsets) > 5).all()
    # each target is its block's terminate candidate: its kind's one-hot (columns 32-41 of the layout)
    found, features = featurize("Open my Gift ideas note and pin it", "", EDITOR, SCREEN, [APP], APP)
    kind_column = 32 + V1_KINDS.index("terminate")
    assert [c.kind for c in found if c.kind == "terminate"] == ["terminate"]
    assert features[:, kind_column].tolist() == [float(c.kind == "terminate") for c in found]
    for start, end, index in zip(offsets[:-1], offsets[1:], target):
        block = arrays["neg_x"][start:end]
        assert block[index, kind_column] == 1 and (block[:, kind_column] == 1).sum() == 1


def test_the_ablations_read_the_claims_as_their_snapshots_do(claims):
    _, without_derived = false_claim_arrays(counterfactual_queries=False)
    assert without_derived["false_claims"] == 4
    # judge A alone: the HTSC-True claim it calls False is rejected, the False one it calls True is not
    _, single = false_claim_arrays(success_judge="A")
    # rejected and true_claim (A voted False); the others have no vote of A: undecided, no label
    assert single["claims_read"] == 6 and single["false_claims"] == 2
    with pytest.raises(ValueError, match="success_judge"):
        false_claim_arrays(success_judge="Z")


def test_the_unlikelihood_is_minus_log_one_minus_p(torch):
    from training.trainer.compact import unlikelihood

    scores = torch.tensor([[2.0, 0.0, float("-inf")], [0.0, 0.0, 0.0]])
    loss = unlikelihood(scores, torch.tensor([0, 2]))
    p0, p1 = math.exp(2) / (math.exp(2) + 1), 1 / 3
    assert loss.item() == pytest.approx((-math.log(1 - p0) - math.log(1 - p1)) / 2, rel=1e-5)
    alone = unlikelihood(torch.tensor([[5.0, float("-inf")]]), torch.tensor([0]))   # nothing else to rank
    assert math.isfinite(alone.item())


def toy_steps(rng, n, not_done):
    """Steps of two candidates: 0 the terminate (column 0), 1 a tap (column 1); column 2 on the terminate
    is how much of the goal is left. The SFT steps stop with under 0.3 left; the claims were stops with more."""
    x = np.zeros((2 * n, SCALARS), np.float32)
    x[0::2, 0], x[1::2, 1] = 1.0, 1.0
    x[0::2, 2] = rng.uniform(0.7, 1.0, n) if not_done else rng.uniform(0.0, 0.3, n)
    x[:, 3:8] = rng.normal(0, 1, (2 * n, 5))
    return x, np.arange(0, 2 * n + 1, 2)


def test_the_head_learns_not_to_stop_where_the_judges_said_it_was_not_done(torch, tmp_path):
    from training.trainer.compact import FORMAT, train

    rng = np.random.default_rng(0)
    x, offsets = toy_steps(rng, 60, False)
    neg_x, neg_offsets = toy_steps(rng, 20, True)
    negatives = {"neg_x": neg_x, "neg_offsets": neg_offsets, "neg_target": np.zeros(20, np.int64)}
    target = np.zeros(60, np.int64)                              # every SFT step here is a stop

    def claims_kept(weights):
        directory = tmp_path / str(len(list(tmp_path.iterdir())))
        directory.mkdir()
        np.savez(directory / "weights.npz", **weights)
        (directory / "config.json").write_text(json.dumps({"format": FORMAT, "features": SCALARS, "hidden": 64}))
        scores = CompactHead(Path(directory)).scores(neg_x).reshape(-1, 2)
        return float(np.mean(scores.argmax(axis=1) == 0))

    plain, _ = train(x, offsets, target, epochs=200, seed=0)
    taught, curve = train(x, offsets, target, epochs=200, seed=0, negatives=negatives)
    assert claims_kept(plain) == 1.0                              # nothing told it a stop could be wrong
    assert claims_kept(taught) == 0.0 and curve[-1]["train_false_claim"] == 0.0 and curve[-1]["false_claims"] == 20
    assert curve[-1]["train_accuracy"] >= 0.95                    # and it still stops where the pool stopped
    assert np.allclose(taught["mean"], np.concatenate([x, neg_x]).mean(axis=0), atol=1e-5)


def test_train_compact_adds_the_rejected_claims_and_says_how_many(pool, claims, torch):  # noqa: F811
    model = train_compact("compact-claims-r1", epochs=20)
    report = json.loads(Path(model.artifact, "training.json").read_text())
    assert report["false_claims"] == {"claims_read": 6, "false_claims": 5, "skipped": 0}
    assert report["trainer"]["false_claims"] == 5 and report["trainer"]["train_false_claim"] is not None
    with np.load(Path(model.artifact, "features.npz")) as data:
        assert data["neg_target"].tolist() == false_claim_arrays()[0]["neg_target"].tolist()
    alone = train_compact("compact-claims-off", epochs=1, false_claims=False)
    assert "false_claims" not in json.loads(Path(alone.artifact, "training.json").read_text())
