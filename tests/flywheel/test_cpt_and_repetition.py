import io

from PIL import Image, ImageDraw

from flywheel.cpt_cleaning import DUPLICATE_DISTANCE, cpt_rejection, hash_distance, perceptual_hash
from flywheel.repetition import repetition_mask


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


def click(x, y):
    return {"action": "click", "point": [x, y]}


def test_repetition_to_reflection():
    a, b, back = click(100, 100), click(500, 900), {"action": "system_button", "button": "back"}
    # tap, tap, tap (stalled), then back breaks out: the repeats are masked, the break-out is not
    assert repetition_mask([a, a, a, back]) == [False, True, True, False]
    # a group of two repeated: (a, b) (a, b) (a, b) then something else
    assert repetition_mask([a, b, a, b, a, b, back]) == [False, False, True, True, True, True, False]
    # near-identical points count as the same action
    assert repetition_mask([a, click(110, 95), b]) == [False, True, False]
    assert repetition_mask([a, b, back]) == [False, False, False]
