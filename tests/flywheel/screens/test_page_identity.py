"""Same page or new page: pHash of the screenshot + layout signature of the hierarchy."""
import io
import time

import pytest
from PIL import Image, ImageDraw

from flywheel.models import App
from flywheel.queries.page_io import describe_io, read_page
from flywheel.screens.page_identity import fingerprint, layout_distance, same_page, thresholds_for


def node(cls, rid="", text="", clickable=False, children="", **extra):
    attrs = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in extra.items())
    return (f'<node text="{text}" resource-id="{rid}" class="android.widget.{cls}" package="com.x" '
            f'content-desc="" clickable="{str(clickable).lower()}" bounds="[0,0][1080,200]"{attrs}>{children}</node>')


def list_page(rows, title="Results", row_id="com.x:id/row"):
    body = "".join(node("LinearLayout", row_id, clickable=True,
                        children=node("TextView", "android:id/title", f"item {i} {title}")) for i in range(rows))
    bar = node("ViewGroup", "com.x:id/toolbar", children=node("TextView", text=title))
    return ('<hierarchy rotation="0">' + node("FrameLayout", children=bar + node(
        "RecyclerView", "com.x:id/list", scrollable="true", children=body)) + "</hierarchy>")


def form_page():
    fields = node("EditText", "com.x:id/search", "Search products", clickable=True)
    buttons = node("Button", "com.x:id/go", "Go", clickable=True) + node("Button", "com.x:id/share", "Share", clickable=True)
    return '<hierarchy rotation="0">' + node("FrameLayout", children=fields + buttons) + "</hierarchy>"


def screen(lines, color=(255, 255, 255)):
    image = Image.new("RGB", (270, 600), color)
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 270, 60), fill=(30, 90, 200))
    for i in range(lines):
        draw.rectangle((10, 80 + i * 60, 250, 120 + i * 60), fill=(60, 60, 60))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def test_same_page_whatever_the_list_length_and_texts():
    three = fingerprint(screen(3), list_page(3, "Headphones"), ".ResultsActivity")
    seven = fingerprint(screen(7), list_page(7, "Phones"), ".ResultsActivity")
    assert three.layout_signature == seven.layout_signature
    assert same_page(three, seven, {"phash_distance": 10, "layout_distance": 0.2})


def test_different_pages_are_different():
    results = fingerprint(screen(3), list_page(3), ".ResultsActivity")
    form = fingerprint(screen(0, (240, 240, 200)), form_page(), ".SearchActivity")
    assert layout_distance(results.layout_shape, form.layout_shape) > 0.5
    assert not same_page(results, form, {"phash_distance": 64, "layout_distance": 0.25})
    # same structure, another activity: another page
    other = fingerprint(screen(3), list_page(3), ".OrdersActivity")
    assert not same_page(results, other, {"phash_distance": 64, "layout_distance": 1.0})
    # a list of other rows (another resource-id) is another page even with the same picture
    rows = fingerprint(screen(3), list_page(3, row_id="com.x:id/order"), "")
    assert not same_page(results.__class__(results.phash, results.layout_signature, results.layout_shape,
                                           results.node_count), rows, {"phash_distance": 0, "layout_distance": 0.1})


@pytest.mark.django_db
def test_thresholds_come_from_settings_and_the_app_overrides_them(settings):
    settings.GEM_PHASH_DISTANCE, settings.GEM_LAYOUT_DISTANCE = 9, 0.3
    plain = App.objects.create(package="com.x.plain")
    strict = App.objects.create(package="com.x.strict", page_identity={"layout_distance": 0.0, "phash_distance": 0})
    assert thresholds_for(plain) == {"phash_distance": 9, "layout_distance": 0.3}
    assert thresholds_for(strict) == {"phash_distance": 0, "layout_distance": 0.0}
    # a small structural change (one more button) is the same page by default, not for the strict app
    base = fingerprint(screen(3), list_page(3), "")
    extra = list_page(3).replace('</node></hierarchy>', node("Button", "com.x:id/more", clickable=True) + "</node></hierarchy>")
    changed = fingerprint(screen(3), extra, "")
    assert base.layout_signature != changed.layout_signature
    assert same_page(base, changed, thresholds_for(plain))
    assert not same_page(base, changed, thresholds_for(strict))


def test_thousands_of_nodes_are_fingerprinted_quickly():
    huge = list_page(5000)
    started = time.monotonic()
    print_ = fingerprint(screen(3), huge, "")
    reading = read_page(huge)
    assert time.monotonic() - started < 3
    assert print_.node_count > 4000 and print_.layout_signature == fingerprint(b"", list_page(4), "").layout_signature
    assert len(reading.elements) <= 150


def test_inputs_and_outputs_are_described_generically():
    reading = read_page(form_page())
    inputs, outputs = describe_io(reading.elements, reading.texts, reading.title)
    assert inputs == ["text: search products"]
    assert "text: shared text" in outputs
    results = read_page(list_page(4, "Headphones"))
    assert results.title == "Headphones"
    _, outputs = describe_io(results.elements, results.texts, results.title)
    assert outputs == ["text: headphones item title"]
    # repeated rows get replayable selectors: unique texts, or the resource-id with an index
    assert [e["selector"] for e in results.elements[:2]] == [{"text": "item 0 Headphones"}, {"text": "item 1 Headphones"}]
