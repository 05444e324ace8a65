"""The SVG pictures of a profile set, held to what matplotlib draws: an allowlist of elements and
attributes, and nothing that runs or fetches.

A set's SVG is published as a file: opened on its own, the site's origin runs what it carries. So
a picture may hold shapes, text, styles and references inside itself (`#id`), and nothing else: no
script, no event handler, no foreignObject, no link or image, no reference to another file or
address, no entity of its own. `check_svg` raises BadSvg naming the element or attribute.

Nothing around the elements either: no processing instruction (`<?xml-stylesheet?>` makes the
browser transform or style the picture with another file), no DOCTYPE, and in a style no function
but the few matplotlib writes (`url(#id)`, a transform, a colour), so no `image-set()` or
`@import` fetches. What is published is `clean_svg`'s: the picture written again from the parsed
elements, so that nothing the parser passed over reaches the page.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

SVG = "http://www.w3.org/2000/svg"
XLINK = "http://www.w3.org/1999/xlink"
XML = "http://www.w3.org/XML/1998/namespace"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
CC = "http://creativecommons.org/ns#"
DC = "http://purl.org/dc/elements/1.1/"

ELEMENTS = {  # namespace -> local names; matplotlib's metadata is RDF, Creative Commons, Dublin Core
    SVG: {
        "svg", "g", "defs", "symbol", "use", "path", "rect", "circle", "ellipse", "line",
        "polyline", "polygon", "text", "tspan", "title", "desc", "metadata", "style",
        "clipPath", "mask", "pattern", "marker", "linearGradient", "radialGradient", "stop",
    },
    RDF: {"RDF"},
    CC: {"Work", "Agent"},
    DC: {"type", "format", "creator", "title", "date", "description", "rights"},
}  # fmt: skip
ATTRIBUTES = {
    "id", "class", "style", "transform", "version", "viewBox", "preserveAspectRatio", "type",
    "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "rx", "ry", "fx", "fy", "dx", "dy",
    "width", "height", "d", "points", "rotate", "textLength", "lengthAdjust", "offset",
    "clip-path", "clip-rule", "clipPathUnits", "mask", "maskUnits", "maskContentUnits",
    "patternUnits", "patternContentUnits", "patternTransform", "gradientUnits",
    "gradientTransform", "markerWidth", "markerHeight", "markerUnits", "refX", "refY", "orient",
    "marker-start", "marker-mid", "marker-end", "fill", "fill-opacity", "fill-rule", "stroke",
    "stroke-width", "stroke-opacity", "stroke-linecap", "stroke-linejoin", "stroke-dasharray",
    "stroke-dashoffset", "stroke-miterlimit", "opacity", "color", "stop-color", "stop-opacity",
    "font-family", "font-size", "font-weight", "font-style", "font-stretch", "letter-spacing",
    "text-anchor", "dominant-baseline", "alignment-baseline", "baseline-shift", "visibility",
    "display", "vector-effect", "shape-rendering", "text-rendering", "href", "role",
    "aria-label", f"{{{XLINK}}}href", f"{{{XML}}}space", f"{{{XML}}}lang",
    f"{{{RDF}}}resource", f"{{{RDF}}}about",
}  # fmt: skip
REFERENCES = {"href", f"{{{XLINK}}}href"}  # to an element of the picture: '#id' only
# What a value or a stylesheet may not hold: a url() to anything but '#id', an at-rule (@import),
# an escape, script, or a function matplotlib does not write (image-set(), image(), src() fetch).
FORBIDDEN = re.compile(r"url\s*\(\s*(?!['\"]?#)|@|expression\s*\(|javascript:|\\", re.I)
STANDARD_DOCTYPE = re.compile(  # matplotlib's; written again, the picture holds none
    r'<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1\.1//EN"\s+'
    r'"http://www\.w3\.org/Graphics/SVG/1\.1/DTD/svg11\.dtd">'
)
FUNCTION = re.compile(r"([\w-]+)\s*\(")
FUNCTIONS = {"url", "rgb", "rgba", "matrix", "translate", "scale", "rotate", "skewx", "skewy"}


class BadSvg(ValueError):
    """A picture a page must not publish; the message names the element or attribute."""


def _split(tag: str) -> tuple[str, str]:
    """'{http://www.w3.org/2000/svg}path' -> (its namespace, 'path'); no namespace: ''."""
    namespace, _, local = tag[1:].partition("}") if tag.startswith("{") else ("", "", tag)
    return namespace, local


PREFIXES = {SVG: "", "": "", XLINK: "xlink:", XML: "xml:", RDF: "rdf:", CC: "cc:", DC: "dc:"}


def _name(tag: str) -> str:
    """An element or attribute as a file spells it: 'script', 'xlink:href' ('{ns}x' if unknown)."""
    namespace, local = _split(tag)
    return PREFIXES[namespace] + local if namespace in PREFIXES else tag


class _Builder(ElementTree.TreeBuilder):
    """A tree builder that refuses a processing instruction wherever it is, before the root too
    (TreeBuilder drops those outside an element, and the browser obeys them)."""

    def pi(self, target: str, text: str | None = None) -> None:
        raise BadSvg(f"a processing instruction <?{target} {(text or '')[:80]}?>")


def check_svg(data: bytes) -> ElementTree.Element:
    """The picture's root element; BadSvg unless it holds only allowed elements, attributes and
    values, with no processing instruction and no DOCTYPE but the standard one."""
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadSvg(f"not UTF-8 ({e})") from None
    if "<!ENTITY" in source:
        raise BadSvg("an entity of its own")
    if "<!DOCTYPE" in STANDARD_DOCTYPE.sub("", source, count=1).upper():
        raise BadSvg("a DOCTYPE other than matplotlib's SVG 1.1 one (which clean_svg drops)")
    parser = ElementTree.XMLParser(target=_Builder())
    parser.feed(source)
    root = parser.close()
    if root.tag != f"{{{SVG}}}svg":
        raise BadSvg(f"<{_name(str(root.tag))}> at its root, not <svg>")
    for element in root.iter():
        _check_element(element)
    return root


for _namespace, _prefix in PREFIXES.items():  # written again with the prefixes a file spells
    if _namespace:
        ElementTree.register_namespace(_prefix.rstrip(":"), _namespace)


def clean_svg(data: bytes) -> bytes:
    """The picture written again from what check_svg kept: elements, attributes, text; no
    declaration, comment or instruction that was around them."""
    root = check_svg(data)
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(root, "utf-8")


def _style(value: str) -> str | None:
    """What in a value or a stylesheet could fetch or run, or None."""
    if m := FORBIDDEN.search(value):
        return m[0]
    return next((m[0] for m in FUNCTION.finditer(value) if m[1].lower() not in FUNCTIONS), None)


def _check_element(element: ElementTree.Element) -> None:
    tag = element.tag
    if not isinstance(tag, str):  # ElementTree's marker for a processing instruction
        raise BadSvg(f"a processing instruction <?{element.text}?>")
    namespace, local = _split(tag)
    if local not in ELEMENTS.get(namespace, ()):
        raise BadSvg(f"<{_name(tag)}> is not an element a picture may hold")
    for key, value in element.attrib.items():
        where = f"{_name(key)} on <{_name(tag)}>"
        if key not in ATTRIBUTES:
            raise BadSvg(f"{where} is not an attribute a picture may hold")
        if key in REFERENCES and not value.startswith("#"):
            raise BadSvg(f"{where} is {value[:80]!r}: a picture refers to its own '#id' only")
        if _style(value):
            raise BadSvg(f"{where} is {value[:80]!r}: no url() but '#id', import or script")
    if local == "style" and (found := _style(element.text or "")):
        raise BadSvg(f"<style> holds {found!r}: no url() but '#id', no import, no image-set()")
