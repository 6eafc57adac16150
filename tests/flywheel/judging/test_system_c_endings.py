"""System C reads in the pixels whether the element a task ends on was tapped: a near-miss that landed
on its neighbour, or a pseudo-completion that stopped with it on screen, is False."""
import pytest

from flywheel.judging.system_c import rules_vote
from flywheel.judging.trajectory_view import StepView, TrajectoryView
from tests.flywheel.judging.pixels import frame_png, require_tesseract

PRODUCT = ("Sony WH-1000XM5", "Add to cart", "Buy now")
LINE_Y = {text: 120 + i * 120 + 24 for i, text in enumerate(PRODUCT)}   # as pixels.frame_png draws them
PATH = {"steps": [{"action": "open", "app": "com.sim.shop"},
                  {"action": "click", "target": {"text": "Sony WH-1000XM5"}},
                  {"action": "click", "target": {"resource_id": "com.sim.shop:id/add_to_cart"}},
                  {"action": "terminate", "status": "success"}]}


@pytest.fixture
def ocr():
    require_tesseract()


def step(index, texts, action):
    png = frame_png(*texts, clock=f"12:0{index}")
    return StepView(index=index, hierarchy="", action=action, screenshot=lambda png=png: png)


def tap(y, x=300):
    return {"action": "click", "point": [x, y], "coords": "pixel"}


def view(last_tap_y, after=("In cart", "View cart")):
    steps = [step(0, ("Headphones", "Sony WH-1000XM5"), tap(LINE_Y["Sony WH-1000XM5"] - 120)),
             step(1, PRODUCT, tap(last_tap_y)),
             step(2, after, {"action": "terminate", "status": "success"})]
    return TrajectoryView(goal="Add the Sony headphones to my cart", steps=steps, known_path=PATH,
                          verification={"milestones": []})


def test_the_last_tap_on_the_element_the_path_ends_on_passes(ocr):
    vote = rules_vote(view(LINE_Y["Add to cart"]), {"loop_length": 3, "detour_factor": 3})
    assert vote.vote == "true", vote.rationale


def test_a_near_miss_on_its_neighbour_is_false(ocr):
    vote = rules_vote(view(LINE_Y["Buy now"], after=("Checkout", "Pay $349")), {"loop_length": 3, "detour_factor": 3})
    assert vote.vote == "false" and "landed away from \"add to cart\"" in vote.rationale


def test_stopping_with_the_ending_on_screen_is_false(ocr):
    trajectory = view(LINE_Y["Add to cart"])
    trajectory.steps = [trajectory.steps[0], step(1, PRODUCT, {"action": "terminate", "status": "success"})]
    vote = rules_vote(trajectory, {"loop_length": 3, "detour_factor": 3})
    assert vote.vote == "false" and "never tapped" in vote.rationale


def test_an_ending_the_pixels_cannot_show_is_not_held_against_the_trajectory(ocr):
    trajectory = view(LINE_Y["Buy now"], after=("Checkout",))
    trajectory.known_path = {"steps": PATH["steps"][:2] + [
        {"action": "click", "target": {"content_desc": "Wishlist heart"}}, PATH["steps"][-1]]}
    vote = rules_vote(trajectory, {"loop_length": 3, "detour_factor": 3})
    assert vote.vote == "true", vote.rationale        # an icon: no words to find on screen
