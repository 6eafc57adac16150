"""Real PNG frames for the pixel-reading judge: words drawn with Pillow, large enough for tesseract."""
import io
import os
import re
import shutil
from html import unescape

import pytest
from PIL import Image, ImageDraw, ImageFont

SIZE = (720, 1280)


def require_tesseract():
    if not shutil.which("tesseract"):
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but Debian's tesseract-ocr is not installed")
        pytest.skip("tesseract is not installed (apt-get install tesseract-ocr)")


def frame_png(*texts, clock="12:00", marks=()) -> bytes:
    """A frame showing `texts` one per line under a status bar with `clock`; `marks`: (x, y) dots
    drawn on it (a small change that is not a word)."""
    image = Image.new("RGB", SIZE, "white")
    draw = ImageDraw.Draw(image)
    draw.text((20, 4), clock, fill="black", font=ImageFont.load_default(size=28))
    font = ImageFont.load_default(size=48)
    for i, text in enumerate(texts):
        draw.text((40, 120 + i * 120), text, fill="black", font=font)
    for x, y in marks:
        draw.ellipse([x - 20, y - 20, x + 20, y + 20], fill="black")
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def texts_of(xml: str) -> list[str]:
    return [unescape(t) for t in re.findall(r' text="([^"]*)"', xml or "") if t]


def pictured(view, **kwargs):
    """The view with every step's screenshot drawn from the texts of its dump (where none is set)."""
    for step in view.steps:
        if step.screenshot is None:
            png = frame_png(*texts_of(step.hierarchy), **kwargs)
            step.screenshot = lambda png=png: png
    return view
