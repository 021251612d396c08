"""A small flame graph renderer: collapsed stacks in, one self-contained SVG out.

So that a profile can be looked at with nothing but a browser.  The picture is Brendan
Gregg's: the root at the bottom, each function a box as wide as the time spent in it
(self and callees), its callees stacked on it in name order, colours from a warm palette
chosen by the name (the same function has the same colour everywhere).  Hovering a box
shows its full name and time.  No script: the file is plain SVG with a little CSS.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import zlib
from typing import Iterable, Sequence
from xml.sax.saxutils import escape, quoteattr

WIDTH = 1200
ROW = 17  # height of one level, px
PAD = 10
TOP = 34  # room for the title
FONT = 11  # px; Verdana's average character is about 0.6 em wide
CHAR = 0.6 * FONT
MIN_WIDTH = 0.3  # px: narrower boxes (and everything on them) are left out


class _Frame:
    __slots__ = ("name", "value", "children")

    def __init__(self, name: str) -> None:
        self.name = name
        self.value = 0
        self.children: dict[str, _Frame] = {}


def render(stacks: Iterable[tuple[Sequence[str], int]], title: str, unit: float = 1e6,
           unit_name: str = "ms") -> str:
    """The SVG of ``(frames, weight)`` stacks, root frame first; weights are shown divided
    by ``unit`` (nanoseconds as milliseconds, by default)."""
    root = _Frame("all")
    for frames, weight in stacks:
        node = root
        node.value += weight
        for name in frames:
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = _Frame(name)
            node = child
            node.value += weight
    total = root.value
    boxes: list[tuple[_Frame, float, int, float]] = []  # frame, x, depth, width
    todo = [(root, float(PAD), 0)]
    scale = (WIDTH - 2 * PAD) / total if total else 0.0
    while todo:
        node, x, depth = todo.pop()
        width = node.value * scale
        if width < MIN_WIDTH:
            continue
        boxes.append((node, x, depth, width))
        for name in sorted(node.children):
            child = node.children[name]
            todo.append((child, x, depth + 1))
            x += child.value * scale
    depth = max((d for _, _, d, _ in boxes), default=0)
    height = TOP + (depth + 1) * ROW + PAD
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="Verdana, sans-serif" font-size="{FONT}">',
        "<style>g.f:hover rect { stroke: #000; stroke-width: 0.8; } text { pointer-events: none; }</style>",
        f'<rect width="{WIDTH}" height="{height}" fill="#fdfdf6"/>',
        f'<text x="{WIDTH / 2}" y="22" font-size="15" text-anchor="middle">'
        f'{escape(title)} ({total / unit:.3f} {unit_name})</text>',
    ]
    if not boxes:
        out.append(f'<text x="{WIDTH / 2}" y="{TOP + ROW}" text-anchor="middle">no calls recorded</text>')
    for node, x, level, width in boxes:
        y = height - PAD - (level + 1) * ROW
        tip = f"{node.name} ({node.value / unit:.3f} {unit_name}, {100 * node.value / total:.2f}%)"
        out.append(f'<g class="f"><title>{escape(tip)}</title>'
                   f'<rect x="{x:.2f}" y="{y}" width="{width:.2f}" height="{ROW - 1}" rx="2" '
                   f'fill={quoteattr(_colour(node.name))}/>{_label(node.name, x, y, width)}</g>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _label(name: str, x: float, y: int, width: float) -> str:
    fits = int((width - 6) / CHAR)
    if fits < 3:
        return ""
    text = name if len(name) <= fits else name[: fits - 2] + ".."
    return f'<text x="{x + 3:.2f}" y="{y + ROW - 5}">{escape(text)}</text>'


def _colour(name: str) -> str:
    """flamegraph.pl's "hot" palette, picked by a hash of the name."""
    h = zlib.crc32(name.encode("utf-8", "backslashreplace"))
    red = 205 + (h & 0xFF) * 50 // 255
    green = ((h >> 8) & 0xFF) * 230 // 255
    blue = ((h >> 16) & 0xFF) * 55 // 255
    return f"#{red:02x}{green:02x}{blue:02x}"
