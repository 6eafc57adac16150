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


def pillow_small_gray(png):
    """What the cleaning computed before libspng: Pillow's decode and convert("L"), box-reduced."""
    with Image.open(io.BytesIO(png)) as image:
        gray = image.convert("L")
    factor = max(1, min(gray.size) // 64)
    return gray.reduce(factor) if factor > 1 else gray


def encoded(image, **options):
    buffer = io.BytesIO()
    image.save(buffer, "PNG", **options)
    return buffer.getvalue()


def test_every_kind_of_png_gives_pillows_grey_pixels():
    from flywheel.rules.cpt_cleaning import _small_gray

    rgb = Image.open(io.BytesIO(frame("Wi-Fi")))
    kinds = {"RGB": rgb, "RGBA": rgb.convert("RGBA"), "L": rgb.convert("L"), "LA": rgb.convert("LA"),
             "P": rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=16), "I;16": rgb.convert("I;16")}
    kinds["RGBA half transparent"] = rgb.copy()
    kinds["RGBA half transparent"].putalpha(128)
    for name, image in kinds.items():
        png = encoded(image)
        assert _small_gray(png).tobytes() == pillow_small_gray(png).tobytes(), name
    jpeg = io.BytesIO()
    rgb.save(jpeg, "JPEG")  # not a PNG: Pillow reads it
    assert _small_gray(jpeg.getvalue()).tobytes() == pillow_small_gray(jpeg.getvalue()).tobytes()


def test_the_farms_frames_hash_and_pair_as_before():
    """Issue #38: the same pairs of real-size frames (every app of two device profiles, scrolled and
    not) are judged duplicates as with Pillow's decode, because every hash is the same."""
    import imagehash

    from flywheel.rules.cpt_cleaning import HASH_SIZE
    from simfarm.farm import Farm

    farm = Farm(devices=2, seed=0)
    frames = []
    for phone in sorted(farm.phones.values(), key=lambda p: p.index):
        for package in sorted(phone.engine.apps):
            phone.run(f"monkey -p {package} -c android.intent.category.LAUNCHER 1")
            frames.append(phone.screencap_png())
            phone.run("input swipe 540 1600 540 700 300")
            frames.append(phone.screencap_png())
    before = [str(imagehash.phash(pillow_small_gray(png), hash_size=HASH_SIZE)) for png in frames]
    after = [perceptual_hash(png) for png in frames]
    assert after == before

    def pairs(hashes):
        return {(i, j) for i in range(len(hashes)) for j in range(i + 1, len(hashes))
                if hash_distance(hashes[i], hashes[j]) <= DUPLICATE_DISTANCE}

    assert len(frames) >= 30 and pairs(after) == pairs(before) and pairs(after)
