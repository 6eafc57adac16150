"""HTSC's figures against the truth: purity is the share of True that are truly done, recall the share
of truly done that reach True; confusion matrices count each system's vote per truth and screen kind."""
from types import SimpleNamespace

from flywheel.judging.judge_figures import confusion, judge_figures


def case(truth, outcome, kind="ordinary", a="abstain", b="true", c="true"):
    return SimpleNamespace(truth=truth, outcome=outcome, screen_kind=kind,
                           votes={"A": {"vote": a}, "B": {"vote": b}, "C": {"vote": c}})


CASES = [
    case(True, "true", a="true"), case(True, "true"), case(True, "undetermined", "blind", b="abstain"),
    case(False, "true", "trap", b="true", c="true"),            # the toast fooled both: an impurity
    case(False, "false", a="false", b="false", c="false"), case(False, "false", "blind", b="abstain", c="false"),
    case(True, "false", c="false", b="false"),                 # a missed success
]


def test_purity_recall_and_undetermined_rate():
    figures = judge_figures(CASES)
    assert figures["cases"] == 7
    assert figures["sft_purity"] == 2 / 3          # 3 True, one of them not done
    assert figures["true_recall"] == 2 / 4          # 4 truly done, 2 reached True
    assert figures["undetermined_rate"] == 1 / 7
    assert figures["trap_purity"] == 0.0
    assert figures["blind_purity"] is None           # no True on a blind screen: nothing to be pure about


def test_confusion_counts_each_vote_against_the_truth_per_kind():
    assert confusion(CASES, "HTSC") == {
        True: {"true": 2, "false": 1, "env_error": 0, "undetermined": 1},
        False: {"true": 1, "false": 2, "env_error": 0, "undetermined": 0}}
    blind_b = confusion(CASES, "B", "blind")
    assert blind_b[True]["abstain"] == 1 and blind_b[False]["abstain"] == 1
    assert sum(blind_b[True].values()) + sum(blind_b[False].values()) == 2
    assert confusion(CASES, "A")[True]["true"] == 1
