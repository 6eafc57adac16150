"""Frames (screenshots) in OpenAI-compatible chat messages, for the policy and the model judges alike.

A frame travels as an `image_url` part holding a base64 PNG data URL, after the text part, exactly
as the policy sends its screenshots. Judges send frames scaled down to FRAME_MAX_SIDE on the long
side: a 1080×2400 phone frame becomes 576×1280, where the screen's text is still legible (about
20 px high) while a VLM spends about a quarter of the image tokens (Qwen2.5-VL: ~940 instead of
~3,300 per frame), which keeps the step judge's eight frames a pass within a judge's context.

Two bad inputs are the judges' to report, never to guess past:
- a frame the store no longer has (or that is not an image) is FrameMissing, naming the step;
- a judge that answers without looking: answers_without_looking() asks again with blank frames of
  the same sizes and the same prompt; the same answer means the pixels did not matter.
"""
from __future__ import annotations

import base64
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

FRAME_MAX_SIDE = 1280
BLANK_COLOUR = (255, 255, 255)
BLANK_PROBE_REASON = "the judge gave the same verdict for a blank image"


class FrameMissing(Exception):
    """A frame the judge needs cannot be read; `step` is the Step.index of the frame."""

    def __init__(self, step: int, why: str = "is missing from the store"):
        self.step, self.why = step, why
        super().__init__(f"frame of step {step} {why}")


@dataclass(frozen=True)
class Frame:
    step: int       # the Step.index whose screenshot this is
    png: bytes      # as sent (scaled down to FRAME_MAX_SIDE)


def png_data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def image_part(png: bytes) -> dict:
    """One frame as an OpenAI-compatible content part."""
    return {"type": "image_url", "image_url": {"url": png_data_url(png)}}


def user_content(text: str, frames: Iterable[bytes]) -> list[dict]:
    """A user message's content: the text, then the frames in order."""
    return [{"type": "text", "text": text}, *(image_part(png) for png in frames)]


def downscaled(png: bytes, max_side: int = FRAME_MAX_SIDE) -> bytes:
    """The frame as PNG with its long side at most `max_side` (unchanged bytes when it already is).
    ValueError when the bytes are not an image."""
    try:
        with Image.open(io.BytesIO(png)) as image:
            image.load()
            if max(image.size) <= max_side:
                return png
            scale = max_side / max(image.size)
            size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
            small = image.convert("RGB").resize(size, Image.Resampling.LANCZOS)
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as error:
        raise ValueError(f"not a readable image: {type(error).__name__}") from None
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return out.getvalue()


def blank_like(png: bytes) -> bytes:
    """A uniform frame of the same size as `png` (which must be an image)."""
    with Image.open(io.BytesIO(png)) as image:
        size = image.size
    out = io.BytesIO()
    Image.new("RGB", size, BLANK_COLOUR).save(out, format="PNG", optimize=True)
    return out.getvalue()


def load_frames(loaders: Iterable[tuple[int, Callable[[], bytes] | None]],
                max_side: int = FRAME_MAX_SIDE) -> list[Frame]:
    """Read each (step index, loader) pair's frame, scaled down; a None loader is a step recorded
    without a screenshot and is left out. FrameMissing names the first frame that cannot be read."""
    frames = []
    for step, loader in loaders:
        if loader is None:
            continue
        try:
            png = loader()
        except OSError:
            raise FrameMissing(step) from None
        if not png:
            raise FrameMissing(step, "is empty in the store")
        try:
            frames.append(Frame(step, downscaled(png, max_side)))
        except ValueError:
            raise FrameMissing(step, "is not a readable image") from None
    return frames


def answers_without_looking(ask: Callable[[list[bytes]], object], frames: list[bytes], answer) -> bool:
    """Ask again, same prompt, with blank frames of the same sizes: True when `ask` gives `answer`
    again (the answer did not depend on the pixels). `ask` maps frames to a comparable answer."""
    return ask([blank_like(png) for png in frames]) == answer
