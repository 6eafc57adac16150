"""The farm's stream encoder draws only what changed, and what it draws is what a full render draws."""
import re

from simfarm.farm import Farm
from simfarm.render import render_image
from simfarm.screen_stream import ScreenEncoder, _changed_box


def tap(phone, resource_id):
    pattern = 'resource-id="[^"]*' + re.escape(resource_id) + r'"[^>]*bounds="\[(\d+),(\d+)\]\[(\d+),(\d+)\]"'
    match = re.search(pattern, phone.dump_hierarchy())
    left, top, right, bottom = map(int, match.groups())
    phone.run(f"input tap {(left + right) // 2} {(top + bottom) // 2}")


def test_a_small_change_is_repainted_alone_and_matches_a_full_render():
    phone = Farm(devices=1).phones["sim-0001"]
    phone.run("monkey -p com.sim.chat -c android.intent.category.LAUNCHER 1")
    tap(phone, "action_search")
    tap(phone, "message_search")
    phone.run("input text zq")  # nothing matches: from here on only the field changes
    encoder = ScreenEncoder.for_phone(phone)
    encoder.image((360, 800))
    before = encoder.renders
    sizes = []
    for command in ("input text x", "input text y", "input keyevent 67", "input keyevent 4",
                    "monkey -p com.android.settings -c android.intent.category.LAUNCHER 1"):
        phone.run(command)
        _, scaled = encoder.image((360, 800))
        full = render_image(phone.engine.screen())
        assert scaled.tobytes() == full.reduce(3).tobytes(), command  # the same pixels as a whole render
        sizes.append(scaled.size)
    assert sizes == [(360, 800)] * 5
    assert encoder.partial_renders >= 2 and encoder.renders - before <= 2  # typing repaints a field only


def test_the_changed_rectangle_covers_every_node_drawn_differently():
    old = [("fill", (0, 0, 100, 100)), ("text", (10, 10, 50, 30), "a")]
    new = [("fill", (0, 0, 100, 100)), ("text", (10, 10, 50, 30), "ab")]
    left, top, right, bottom = _changed_box(old, new)
    assert left <= 10 and top <= 10 and right >= 50 and bottom >= 30
    assert _changed_box(old, old) == (0, 0, 0, 0)
    assert _changed_box(old, old + [("scrim", (0, 0, 100, 100))]) is None
