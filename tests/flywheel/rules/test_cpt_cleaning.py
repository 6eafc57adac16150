"""CPT cleaning (§2.1.2): blank and duplicate frames by perceptual hash, malformed actions."""
import io

from PIL import Image, ImageDraw

from flywheel.rules.cpt_cleaning import DUPLICATE_DISTANCE, cpt_rejection, hash_distance, perceptual_hash


def frame(label="Settings", color=(255, 255, 255)):
    image = Image.new("RGB", (270, 600), color)
    draw = ImageDraw.Draw(image)
    draw.rectangle([20, 100, 250, 160], fill=(30, 90, 200))
    draw.text((30, 120), label, fill=(255, 255, 255))
    draw.rectangle([20, 300, 120, 360], fill=(200, 60, 30))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


CLICK = {"action": "click", "point": [100, 130]}


def test_cpt_cleaning_rules():
    good = frame()
    reason, phash = cpt_rejection(good, CLICK, (270, 600))
    assert reason == "" and len(phash) == 16
    assert cpt_rejection(good, CLICK, (270, 600), previous_hash=phash)[0] == "duplicate of the previous frame"
    blank = io.BytesIO()
    Image.new("RGB", (270, 600), (0, 0, 0)).save(blank, "PNG")
    assert cpt_rejection(blank.getvalue(), CLICK, (270, 600))[0] == "blank frame"
    assert cpt_rejection(good, {"action": "click"}, (270, 600))[0].startswith("malformed action")
    assert cpt_rejection(good, {"action": "fly"}, (270, 600))[0].startswith("malformed action")
    assert cpt_rejection(None, CLICK, (270, 600))[0] == "no screenshot"


def test_perceptual_hash_ignores_encoding_but_not_content():
    png = frame()
    image = Image.open(io.BytesIO(png))
    jpeg = io.BytesIO()
    image.save(jpeg, "JPEG", quality=70)
    assert hash_distance(perceptual_hash(png), perceptual_hash(jpeg.getvalue())) <= DUPLICATE_DISTANCE
    other = frame(color=(20, 20, 20))
    assert hash_distance(perceptual_hash(png), perceptual_hash(other)) > DUPLICATE_DISTANCE


def test_an_executed_open_keeps_the_package_it_resolved_to_and_is_still_a_sample():
    executed = {"action": "open", "app": "Settings", "package": "com.android.settings"}
    assert cpt_rejection(frame(), executed, (270, 600))[0] == ""


def test_an_executed_directional_swipe_is_still_a_sample():
    """The executor resolves a direction into start and end and keeps the direction beside them."""
    from devices.actions import normalize_action

    executed = normalize_action({"action": "swipe", "direction": "up"}, 270, 600)
    assert executed["start"] and executed["direction"] == "up"
    assert cpt_rejection(frame(), executed, (270, 600))[0] == ""
    bad = {"action": "swipe", "start": [10, 10], "direction": "sideways"}
    assert cpt_rejection(frame(), {**bad, "start": None}, (270, 600))[0].startswith("malformed action")
