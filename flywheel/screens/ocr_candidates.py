"""Candidate elements read from pixels, for policies on pages whose UI dump is blind (a web view or a
canvas: one opaque node, or controls with no text, description or id).

Each line of words OCR finds on the frame becomes a synthetic devices.uitree.UiNode: its text is the
line's words, its bounds the line's box (in screen pixels), clickable, of class OCR_CLASS so that
whoever reads it can tell it from a real node. It has no selector (no resource id, nothing a dump
would find again), so a policy acts on it by tapping its center.

`pixel_candidates` decides whether to read at all (only when `hierarchy_is_blind`) and says, as an
outcome code, why it gave no nodes: the page was readable, there was no frame, OCR is not
installed, or OCR failed on this frame (then `detail` is tesseract's reason).
"""
from __future__ import annotations

import enum
import io
import struct
from dataclasses import dataclass, field, replace

import numpy as np
from PIL import Image, UnidentifiedImageError

from devices.uitree import UiNode, all_nodes, parse_hierarchy
from flywheel.screens.blindness import SYSTEM_PACKAGES, hierarchy_is_blind
from flywheel.screens.ocr import OcrFailed, OcrWord, derived_ocr_words, lines_of, ocr_words

OCR_CLASS = "ocr.TextLine"
# The system's status bar (clock, battery) is drawn over every page and is never the page's own
# control; the farm's is 100/1080 of the width tall, a real phone's about 3-4 % of the height.
STATUS_BAR_SHARE = 0.045
# Words further apart than this many line heights are two controls side by side, not one label.
GAP_LINE_HEIGHTS = 1.5
# A line shorter than this (in letters and digits) or lower than this share of the screen's height
# is an icon read as a letter or a speck, not a label a person would tap.
MIN_CHARACTERS = 2
MIN_HEIGHT_SHARE = 0.006
# tesseract binarises a frame globally, so light words on a coloured button (a web page's "Checkout")
# vanish into the fill. A second reading sees each pixel against its neighbourhood's mean (a
# CONTRAST_RADIUS px square): what differs by more than CONTRAST_LEVEL grey levels is ink, whatever
# its polarity. Measured on a 1080x2400 page: white-on-blue read only by this pass, ~0.1 s extra.
CONTRAST_RADIUS = 24
CONTRAST_LEVEL = 90
CONTRAST_READING = f"contrast-r{CONTRAST_RADIUS}-l{CONTRAST_LEVEL}"   # its stored reading's name


class PixelOutcome(enum.StrEnum):
    READ = "read"                  # the dump is blind and OCR gave these nodes (possibly none)
    READABLE = "readable"          # the dump can be read: nothing was OCR'd
    NO_FRAME = "no_frame"          # blind, and there is no screenshot to read
    OCR_MISSING = "ocr_missing"    # blind, and tesseract is not installed
    OCR_FAILED = "ocr_failed"      # blind, and tesseract failed or timed out on this frame


@dataclass(frozen=True)
class PixelCandidates:
    outcome: PixelOutcome
    nodes: list[UiNode] = field(default_factory=list)
    detail: str = ""               # OcrFailed's message when outcome is OCR_FAILED

    @property
    def blind(self) -> bool:
        return self.outcome != PixelOutcome.READABLE

    def why_none(self) -> str:
        """Why a blind page offered no pixel candidates, for a policy's reasoning ("" when it did)."""
        if self.outcome == PixelOutcome.READ:
            return "" if self.nodes else "the UI dump is blind and OCR read no words on the screen"
        return {PixelOutcome.READABLE: "",
                PixelOutcome.NO_FRAME: "the UI dump is blind and there is no screenshot to read",
                PixelOutcome.OCR_MISSING: "the UI dump is blind and OCR is not installed",
                PixelOutcome.OCR_FAILED: f"the UI dump is blind and OCR failed ({self.detail})",
                }[self.outcome]


def is_ocr_node(node: UiNode) -> bool:
    return node.cls == OCR_CLASS


def png_size(png: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG's header, None when it is not a PNG."""
    if len(png) < 24 or png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", png[16:24])


def contrast_frame(png: bytes) -> bytes | None:
    """The frame as dark ink on white wherever something contrasts with its surroundings (light text
    on a dark or coloured fill included); None when it is not an image."""
    try:
        gray = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float32)
    except (UnidentifiedImageError, OSError, ValueError):
        return None
    r, side = CONTRAST_RADIUS, 2 * CONTRAST_RADIUS + 1
    sums = np.pad(gray, r + 1, mode="edge").cumsum(0).cumsum(1)
    h, w = gray.shape
    mean = (sums[side:side + h, side:side + w] - sums[:h, side:side + w] - sums[side:side + h, :w]
            + sums[:h, :w]) / (side * side)
    ink = np.where(np.abs(gray - mean) > CONTRAST_LEVEL, 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(ink).save(out, format="PNG")
    return out.getvalue()


def contrast_words(png: bytes | None) -> list[OcrWord] | None:
    """tesseract's reading of contrast_frame(png), made once per frame ever (stored under the frame's
    digest: a screen recurs across steps and trajectories, and the contrast image costs a full-size
    decode, filter and encode). As ocr_words: None without OCR, OcrFailed when tesseract failed."""
    return derived_ocr_words(png, CONTRAST_READING, contrast_frame)


def _overlaps(a: OcrWord, b: OcrWord) -> bool:
    return (min(a.left + a.width, b.left + b.width) > max(a.left, b.left)
            and min(a.top + a.height, b.top + b.height) > max(a.top, b.top))


def read_words(png: bytes) -> list[OcrWord] | None:
    """The frame's words: tesseract's reading of the frame, plus the words only its contrast reading
    finds (each pass's lines kept apart). None when OCR is not installed; raises OcrFailed."""
    words = ocr_words(png)
    if words is None:
        return None
    words = [replace(w, line=(0, *w.line)) for w in words]
    for word in contrast_words(png) or []:
        if not any(_overlaps(word, seen) for seen in words):
            words.append(replace(word, line=(1, *word.line)))
    return words


def _split_on_gaps(line: list[OcrWord]) -> list[list[OcrWord]]:
    ordered = sorted(line, key=lambda w: w.left)
    groups = [[ordered[0]]]
    for word in ordered[1:]:
        previous = groups[-1][-1]
        height = max(previous.height, word.height, 1)
        if word.left - (previous.left + previous.width) > GAP_LINE_HEIGHTS * height:
            groups.append([word])
        else:
            groups[-1].append(word)
    return groups


def ocr_nodes(words: list[OcrWord], screen: tuple[int, int], frame: tuple[int, int] | None = None,
              package: str = "", status_bar: int | None = None) -> list[UiNode]:
    """OCR words → one synthetic clickable node per line (words further apart split it), in screen
    pixels (`frame` is the screenshot's size when it differs from `screen`), less the status-bar
    band and noise."""
    width, height = screen
    sx, sy = (width / frame[0], height / frame[1]) if frame and frame[0] and frame[1] else (1.0, 1.0)
    band = status_bar if status_bar is not None else round(STATUS_BAR_SHARE * height)
    nodes = []
    for line in lines_of(words):
        for group in _split_on_gaps(line):
            text = " ".join(w.text for w in group)
            x1 = round(min(w.left for w in group) * sx)
            y1 = round(min(w.top for w in group) * sy)
            x2 = round(max(w.left + w.width for w in group) * sx)
            y2 = round(max(w.top + w.height for w in group) * sy)
            if (y1 + y2) // 2 < band or y2 - y1 < MIN_HEIGHT_SHARE * height:
                continue
            if sum(ch.isalnum() for ch in text) < MIN_CHARACTERS:
                continue
            nodes.append(UiNode(text=text, cls=OCR_CLASS, package=package, bounds=(x1, y1, x2, y2),
                                clickable=True, enabled=True, depth=1))
    return nodes


def _page_package(roots) -> str:
    app = [n for n in all_nodes(roots) if n.package and n.package not in SYSTEM_PACKAGES]
    return max(app, key=lambda n: n.area).package if app else ""


def _status_bar(roots, screen) -> int:
    """The status band: the dumped system bar at the top when there is one, else the usual share."""
    tops = [n.bounds[3] for n in all_nodes(roots)
            if n.package in SYSTEM_PACKAGES and n.bounds[1] <= 0 and n.bounds[3] < screen[1] // 4]
    return max([round(STATUS_BAR_SHARE * screen[1]), *tops])


def pixel_candidates(hierarchy_xml: str, png: bytes | None, screen: tuple[int, int]) -> PixelCandidates:
    """The candidates a blind page's frame shows (READABLE and no nodes when the dump can be read).
    Never raises for OCR: a failed reading is an outcome with its reason."""
    if not hierarchy_is_blind(hierarchy_xml):
        return PixelCandidates(PixelOutcome.READABLE)
    if not png:
        return PixelCandidates(PixelOutcome.NO_FRAME)
    try:
        words = read_words(png)
    except OcrFailed as failed:
        return PixelCandidates(PixelOutcome.OCR_FAILED, detail=str(failed))
    if words is None:
        return PixelCandidates(PixelOutcome.OCR_MISSING)
    roots = parse_hierarchy(hierarchy_xml)
    nodes = ocr_nodes(words, screen, png_size(png), _page_package(roots), _status_bar(roots, screen))
    # Words the dump does show (a toolbar's title above the web view) stay the real node's.
    worded = [n for n in all_nodes(roots) if (n.text.strip() or n.desc.strip()) and n.area]
    nodes = [n for n in nodes if not any(real.contains(*n.center) for real in worded)]
    return PixelCandidates(PixelOutcome.READ, nodes)
