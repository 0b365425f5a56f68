"""A small SVG canvas on `xml.etree.ElementTree` and the colours every picture shares.

ElementTree rather than a drawing library: it escapes text *and* attribute values (kernel names,
messages and source lines are untrusted), serialises attributes in insertion order (the same input
gives the same bytes), and the pictures need only rectangles, text, lines and one hatch pattern.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

SVG_NS = "http://www.w3.org/2000/svg"
FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"

# Okabe-Ito vermillion: the "violating" fill, always drawn with a black hatch over it, so that the
# state reads without colour (greyscale print, colour-blind readers).
VIOLATING = "#d55e00"
CLEAN = "#f4f4f4"
UNDECIDED = "#d0d0d0"  # with grey dots: not enumerated (the violation set is "at least N")
EMPTY = "#ffffff"

# viridis anchors: a sequential palette whose lightness rises monotonically (readable in greyscale)
_VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"]


# What XML 1.0 cannot hold even escaped (C0 controls but tab and newline, lone surrogates such as
# a file name's undecodable bytes, U+FFFE/U+FFFF): ElementTree writes them as they are, and one of
# them in a source line or a file name would make the whole picture ill-formed.
_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """`text` with every character XML cannot hold replaced by U+FFFD (so a hostile source line or
    file name still gives a well-formed picture and page)."""
    return _NOT_XML.sub("\N{REPLACEMENT CHARACTER}", text)


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def sequential(i: int, n: int) -> str:
    """Colour `i` of `n` steps along viridis (so neighbouring values stay tellable apart by lightness)."""
    if n <= 1:
        return _VIRIDIS[4]
    t = (i % n) / (n - 1) * (len(_VIRIDIS) - 1)
    lo = min(int(t), len(_VIRIDIS) - 2)
    a, b = _rgb(_VIRIDIS[lo]), _rgb(_VIRIDIS[lo + 1])
    f = t - lo
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))


def ink(fill: str) -> str:
    """Black or white text, whichever reads on `fill` (relative luminance)."""
    r, g, b = (c / 255 for c in _rgb(fill))
    return "#000000" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "#ffffff"


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.1f}".rstrip("0").rstrip(".")
    return xml_text(str(v))


class Canvas:
    """An SVG document being built; `prefix` keeps element ids unique when several pictures are
    inlined in one HTML page."""

    def __init__(self, prefix: str = "ave") -> None:
        self.prefix = prefix
        self.root = ET.Element("svg", {"xmlns": SVG_NS, "font-family": FONT})
        self._defs = ET.SubElement(self.root, "defs")
        self.width = 0.0
        self.height = 0.0

    @property
    def hatch(self) -> str:
        """url() of the diagonal hatch that marks violating cells (defined on first use)."""
        pid = f"{self.prefix}-hatch"
        if self._defs.find(f"pattern[@id='{pid}']") is None:
            pattern = ET.SubElement(self._defs, "pattern", {"id": pid, "width": "7", "height": "7",
                                                            "patternUnits": "userSpaceOnUse",
                                                            "patternTransform": "rotate(45)"})
            ET.SubElement(pattern, "rect", {"width": "7", "height": "7", "fill": VIOLATING})
            ET.SubElement(pattern, "line", {"x1": "0", "y1": "0", "x2": "0", "y2": "7", "stroke": "#000000",
                                            "stroke-width": "1.6"})
        return f"url(#{pid})"

    @property
    def dots(self) -> str:
        """url() of the grey dots that mark cells nobody decided (an enumeration cut by its budget)."""
        pid = f"{self.prefix}-dots"
        if self._defs.find(f"pattern[@id='{pid}']") is None:
            pattern = ET.SubElement(self._defs, "pattern", {"id": pid, "width": "5", "height": "5",
                                                            "patternUnits": "userSpaceOnUse"})
            ET.SubElement(pattern, "rect", {"width": "5", "height": "5", "fill": UNDECIDED})
            ET.SubElement(pattern, "circle", {"cx": "2.5", "cy": "2.5", "r": "1", "fill": "#555555"})
        return f"url(#{pid})"

    def _grow(self, x: float, y: float) -> None:
        self.width, self.height = max(self.width, x), max(self.height, y)

    def add(self, tag: str, attrs: dict[str, object], parent: ET.Element | None = None,
            text: str | None = None) -> ET.Element:
        el = ET.SubElement(self.root if parent is None else parent, tag, {k: _fmt(v) for k, v in attrs.items()})
        if text is not None:
            el.text = xml_text(text)
        return el

    def rect(self, x: float, y: float, w: float, h: float, fill: str, parent: ET.Element | None = None,
             **attrs: object) -> ET.Element:
        self._grow(x + w, y + h)
        return self.add("rect", {"x": x, "y": y, "width": w, "height": h, "fill": fill, **_attrs(attrs)}, parent)

    def text(self, x: float, y: float, text: str, size: float = 11, parent: ET.Element | None = None,
             anchor: str = "start", **attrs: object) -> ET.Element:
        self._grow(x + (len(text) * size * 0.62 if anchor == "start" else 0), y + size * 0.3)
        return self.add("text", {"x": x, "y": y, "font-size": size, "text-anchor": anchor, **_attrs(attrs)},
                        parent, text)

    def group(self, parent: ET.Element | None = None, **attrs: object) -> ET.Element:
        return self.add("g", _attrs(attrs), parent)

    def title(self, parent: ET.Element, text: str) -> None:
        """A tooltip (an SVG <title> child)."""
        ET.SubElement(parent, "title").text = xml_text(text)

    def element(self, margin: float = 8) -> ET.Element:
        """The finished <svg> element, sized to what was drawn."""
        w, h = self.width + margin, self.height + margin
        self.root.set("width", _fmt(w))
        self.root.set("height", _fmt(h))
        self.root.set("viewBox", f"0 0 {_fmt(w)} {_fmt(h)}")
        if not len(self._defs):
            self.root.remove(self._defs)
        return self.root

    def to_string(self) -> str:
        """The standalone SVG document (UTF-8, one trailing newline)."""
        body = ET.tostring(self.element(), encoding="unicode")
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _attrs(attrs: dict[str, object]) -> dict[str, object]:
    """Python keyword names to SVG attribute names: `class_` -> class, `data_lane` -> data-lane."""
    return {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items() if v is not None}
