"""The bi-directional consistency gate (§2.3.6) on the report's own example and its violations."""
from flywheel.rules.consistency import GateStep, check_bidirectional_consistency, memory_items

SCREEN = "Taobao\nSearch\nSony XM5\n1,999 CNY\nAdd to cart"


def step(index, action, **cot):
    base = {"Observation": "Taobao search-results page with \"Sony XM5\"", "Reflection": "",
            "Plan": "Tap the search box and type 'Sony XM5'", "Decision": "Tap the search box at (540, 200)",
            "Memory": ""}
    return GateStep(index=index, cot={**base, **cot}, action=action, screen_text=SCREEN)


CLICK = {"action": "click", "point": [540, 200], "coords": "pixel"}


def rules(issues):
    return [(issue.step_index, issue.rule) for issue in issues]


def test_the_reports_example_passes():
    steps = [step(0, CLICK, Memory="the product being compared is the Sony XM5, priced at 1,999 CNY"),
             step(1, {"action": "type", "text": "Sony XM5", "point": [540, 200]},
                  Decision="Type \"Sony XM5\" into the search box", Plan="Compare with the XM5 price noted")]
    assert check_bidirectional_consistency(steps) == []


def test_decision_must_match_the_executed_action():
    moved = {**CLICK, "point": [900, 1800]}
    assert rules(check_bidirectional_consistency([step(0, moved)])) == [(0, "decision_matches_action")]
    swiped = {"action": "swipe", "start": [1, 2], "end": [3, 4], "direction": "up"}
    assert rules(check_bidirectional_consistency([step(0, swiped)])) == [(0, "decision_matches_action")]
    typed = {"action": "type", "text": "headphones"}
    issues = check_bidirectional_consistency([step(0, typed, Decision="Type 'Sony XM5' in the box")])
    assert "'headphones'" in issues[0].message


def test_observation_must_match_the_screen():
    issues = check_bidirectional_consistency([step(0, CLICK, Observation="The \"Checkout\" page")])
    assert rules(issues) == [(0, "observation_matches_screen")] and "'Checkout'" in issues[0].message
    issues = check_bidirectional_consistency([step(0, CLICK, Observation="A weather forecast")])
    assert rules(issues) == [(0, "observation_matches_screen")]
    blank = GateStep(index=0, cot=step(0, CLICK).cot | {"Observation": "Loading"}, action=CLICK, screen_text="")
    assert check_bidirectional_consistency([blank]) == []


def test_memory_items_must_be_referenced_later():
    steps = [step(0, CLICK, Memory="the coupon code is SPRING24"), step(1, CLICK)]
    assert rules(check_bidirectional_consistency(steps)) == [(0, "memory_referenced")]
    steps[1] = step(1, {"action": "type", "text": "SPRING24"}, Decision="Type \"SPRING24\" as the coupon code")
    assert check_bidirectional_consistency(steps) == []
    assert memory_items("none") == [] and memory_items("a price; a name") == ["a price", "a name"]


def test_an_empty_plan_is_flagged():
    assert rules(check_bidirectional_consistency([step(0, CLICK, Plan="")])) == [(0, "plan_present")]


def test_decision_coordinates_are_read_in_the_proposals_units():
    executed = {"action": "click", "point": [540, 1200], "coords": "pixel"}
    cot = {**step(0, executed).cot, "Decision": "Tap the search box at (500, 500)"}
    thousandths = GateStep(index=0, cot=cot, action=executed, screen_text=SCREEN,
                           decision_coords="thousandths", screen=(1080, 2400))
    assert check_bidirectional_consistency([thousandths]) == []
    pixels = GateStep(index=0, cot=cot, action=executed, screen_text=SCREEN)
    assert rules(check_bidirectional_consistency([pixels])) == [(0, "decision_matches_action")]
