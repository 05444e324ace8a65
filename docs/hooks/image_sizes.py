"""Give every <img> of a page its width and height, so that the browser keeps its room before the
picture loads and the page does not jump as pictures arrive (lazy ones, in tabs and evidence).

The sizes are read from the files' headers: a PNG's IHDR chunk, an SVG root's width and height (pt
and px as matplotlib and our own writer give them) or its viewBox; a data: URL (a notebook's inline
picture) is decoded first. A picture whose size cannot be read is left as it was.
"""

from __future__ import annotations

import base64
import html
import posixpath
import re
import struct
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

IMG = re.compile(r"<img\b[^>]*>", re.I)
SRC = re.compile(r'\ssrc="([^"]*)"', re.I)
SIZED = re.compile(r"\s(width|height)=", re.I)
PNG = b"\x89PNG\r\n\x1a\n"
UNITS = {"": 1.0, "px": 1.0, "pt": 96 / 72, "in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4}
LENGTH = re.compile(r"\s*([\d.]+)\s*([a-z]*)\s*$")


def png_size(data: bytes) -> tuple[int, int] | None:
    """A PNG's width and height in pixels, from its header."""
    if len(data) < 24 or not data.startswith(PNG) or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


def _length(value: str | None) -> float | None:
    m = LENGTH.match(value or "")
    return float(m[1]) * UNITS[m[2]] if m and m[2] in UNITS else None


def svg_size(data: bytes) -> tuple[int, int] | None:
    """An SVG's size in CSS pixels: its width and height, else its viewBox's."""
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError:
        return None
    width, height = _length(root.get("width")), _length(root.get("height"))
    if not (width and height):
        box = (root.get("viewBox") or "").replace(",", " ").split()
        if len(box) != 4:
            return None
        width, height = float(box[2]), float(box[3])
    return (round(width), round(height)) if width > 0 and height > 0 else None


def image_size(data: bytes) -> tuple[int, int] | None:
    return png_size(data) if data.startswith(PNG) else svg_size(data)


def data_url(src: str) -> bytes | None:
    """The bytes of a base64 data: URL (a notebook's inline picture)."""
    head, _, body = src.partition(",")
    return base64.b64decode(body) if head.endswith(";base64") else None


def with_sizes(page_html: str, page_url: str, read: Callable[[str], bytes | None]) -> str:
    """The page with width and height on each <img> that has neither and whose file is readable:
    read(path) gives the bytes of a site path ('profiles/x/viewer.png'), or None."""

    def sized(m: re.Match) -> str:
        tag = m[0]
        src = SRC.search(tag)
        if src is None or SIZED.search(tag):
            return tag
        url = html.unescape(src[1])
        if url.startswith("data:"):
            data = data_url(url)
        elif urlsplit(url).scheme or url.startswith("/"):
            return tag  # not a file of this site (or not one this page names relatively)
        else:
            here = page_url.rpartition("/")[0]  # the page's folder: '' for the home page
            data = read(posixpath.normpath(posixpath.join(here, unquote(urlsplit(url).path))))
        size = data and image_size(data)
        if not size:
            return tag
        end = "/>" if tag.endswith("/>") else ">"
        return f'{tag[: -len(end)].rstrip()} width="{size[0]}" height="{size[1]}"{end}'

    return IMG.sub(sized, page_html)
