"""System B reads in the dumps whether the element the known path ends on was tapped: a near-miss on
its neighbour, or stopping with it on screen, is False even when every milestone held."""
from flywheel.judging.system_b import system_b_vote, untaken_path_end
from flywheel.judging.trajectory_view import StepView, TrajectoryView


def screen(*texts):
    nodes = "".join(f'<node index="{i}" text="{t}" resource-id="" class="android.widget.Button" package="p" '
                    f'content-desc="" clickable="true" bounds="[0,{i * 100}][1080,{i * 100 + 100}]" />'
                    for i, t in enumerate(texts))
    return f'<?xml version="1.0" ?><hierarchy rotation="0">{nodes}</hierarchy>'


PRODUCT, CART = screen("Sony WH-1000XM5", "Add to cart", "Buy now"), screen("In cart", "View cart")
SPEC = {"milestones": [{"name": "product", "text": "Sony WH-1000XM5"}]}   # a waypoint: says nothing of the end
PATH = {"steps": [{"action": "click", "target": {"text": "Sony WH-1000XM5"}},
                  {"action": "click", "target": {"text": "Add to cart"}}, {"action": "terminate", "status": "success"}]}
DONE = {"action": "terminate", "status": "success"}


def view(*steps):
    return TrajectoryView(goal="Add the Sony headphones to my cart", verification=SPEC, known_path=PATH,
                          steps=[StepView(index=i, hierarchy=h, action=a) for i, (h, a) in enumerate(steps)],
                          final_hierarchy=steps[-1][0])


def tap(y):
    return {"action": "click", "point": [540, y], "coords": "pixel"}


def test_tapping_the_element_the_path_ends_on_is_true():
    assert system_b_vote(view((PRODUCT, tap(150)), (CART, DONE)), None, {}).vote == "true"


def test_a_near_miss_on_the_neighbour_is_false_though_every_milestone_held():
    vote = system_b_vote(view((PRODUCT, tap(250)), (CART, DONE)), None, {})
    assert vote.vote == "false" and 'the last tap hit "Buy now", not "Add to cart"' in vote.rationale


def test_stopping_with_the_ending_on_screen_is_false():
    trajectory = view((screen("Headphones", "Sony WH-1000XM5"), tap(150)), (PRODUCT, DONE))
    assert "is on the final screen and was never tapped" in untaken_path_end(trajectory)
    assert system_b_vote(trajectory, None, {}).vote == "false"


def test_a_blind_screen_cannot_tell():
    blind = ('<?xml version="1.0" ?><hierarchy rotation="0"><node class="android.webkit.WebView" text="" '
             'resource-id="" content-desc="" package="p" bounds="[0,0][1080,2400]" /></hierarchy>')
    assert untaken_path_end(view((blind, tap(250)), (blind, DONE))) == ""


def test_a_tap_on_the_page_around_the_element_is_not_a_tap_on_it():
    """The window holds every element; only a clickable row around the element counts as it."""
    page = PRODUCT.replace('<hierarchy rotation="0">', '<hierarchy rotation="0"><node index="0" text="" resource-id="" '
                           'class="android.widget.FrameLayout" package="p" content-desc="" bounds="[0,0][1080,2400]">'
                           ).replace("</hierarchy>", "</node></hierarchy>")
    vote = system_b_vote(view((page, tap(2000)), (CART, DONE)), None, {})
    assert vote.vote == "false" and 'not "Add to cart"' in vote.rationale
