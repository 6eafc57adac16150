"""Helpers for the fidelity tests: reading screens and hierarchies the way a client would."""
from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ElementTree

from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")
_WM_SIZE = re.compile(r"Physical size: (\d+)x(\d+)")


def png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG_SIGNATURE), png[:40]
    image = Image.open(io.BytesIO(png))
    image.load()  # decodes every row: a truncated or corrupt PNG raises here
    return image.size


def wm_size(output: str) -> tuple[int, int]:
    match = _WM_SIZE.search(output)
    assert match, output
    return int(match.group(1)), int(match.group(2))


def nodes(xml_text: str) -> list[ElementTree.Element]:
    return list(ElementTree.fromstring(xml_text.encode()).iter("node"))


def centre(node: ElementTree.Element) -> tuple[int, int]:
    left, top, right, bottom = map(int, _BOUNDS.fullmatch(node.get("bounds")).groups())
    return (left + right) // 2, (top + bottom) // 2


def clickable_centres(xml_text: str) -> list[tuple[int, int]]:
    return [centre(node) for node in nodes(xml_text)
            if node.get("clickable") == "true" and _BOUNDS.fullmatch(node.get("bounds", ""))]


def editable_nodes(xml_text: str) -> list[ElementTree.Element]:
    return [node for node in nodes(xml_text) if node.get("class", "").endswith("EditText")]
