"""A statechart definition drawn as a standalone SVG, its active states highlighted.

:func:`layout` places every state in a box (a deterministic recursive box layout, no
external tools); :func:`render_svg` draws those boxes, the initial markers and the
transitions.  Every text taken from the definition is user data and is escaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from harel.engine.definition import Definition, Node, NodeKind, Transition

__all__ = ["Box", "layout", "render_svg"]

CHAR_WIDTH = 7.0
"""The width budgeted per character of 12 px sans-serif text."""
PER_ROW = 4
"""A container wraps its children into a new row after this many."""
LABEL_LIMIT = 48
"""Transition labels longer than this are cut (the whole text stays in a tooltip)."""

_LEAF_HEIGHT = 36.0
_VERDICT_LINE = 14.0
_MIN_LEAF_WIDTH = 72.0
_PAD = 14.0
_INITIAL_PAD = 34.0  # a container's left padding, room for the initial dot and its arrow
_HEADER = 26.0  # a container's label band
_GAP_X = 64.0  # room between siblings for arrows and their labels
_GAP_Y = 48.0
_REGION_INSET = 3.0
_MARGIN = 40.0  # around the machine, room for self-transition loops
_PARALLEL_GAP = 14.0  # distance between arrows joining the same two states
_LOOP = 16.0  # size of a self-transition's loop

_INK = "#4a5560"
_ACTIVE_INK = "#b35c00"
_FILL = {"leaf": "#ffffff", "container": "#f5f7fa", "region": "none"}
_ACTIVE_FILL = {"leaf": "#ffd97a", "container": "#fff4d6", "region": "#fff8e6"}
_ARROW_ID = "harel-chart-arrow"

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


@dataclass(frozen=True, slots=True)
class Box:
    """A state's rectangle in chart coordinates (``x``/``y`` its top-left corner)."""

    x: float
    y: float
    w: float
    h: float

    @property
    def centre(self) -> tuple[float, float]:
        """The middle of the box."""
        return self.x + self.w / 2, self.y + self.h / 2

    def overlaps(self, other: Box) -> bool:
        """True when the two boxes share interior area (touching edges do not count)."""
        return (
            self.x < other.x + other.w
            and other.x < self.x + self.w
            and self.y < other.y + other.h
            and other.y < self.y + self.h
        )

    def contains(self, other: Box) -> bool:
        """True when ``other`` lies inside this box (edges may touch)."""
        return (
            self.x <= other.x
            and self.y <= other.y
            and other.x + other.w <= self.x + self.w
            and other.y + other.h <= self.y + self.h
        )


def layout(definition: Definition) -> dict[str, Box]:
    """Every state's box keyed by path (the machine itself at ``""``).

    Children lie inside their parent and never overlap a sibling; the same definition
    always gets the same boxes.
    """
    return _Layout(_label_gaps(_arrows(definition))).boxes(definition.root)


def render_svg(definition: Definition, active: Collection[str]) -> str:
    """A standalone SVG document (no scripts, no external resources) picturing ``definition``.

    ``active`` holds state paths in the engine's syntax (``"Fulfilment.Payment.Charging"``;
    an execution's ``active_path`` and its children's): those states and their ancestors are
    highlighted and their groups carry the class ``active``.  Paths the definition does not
    know are ignored (an execution may run an older version of the machine).  Each state is
    a ``<g>`` with a ``data-path`` attribute; each transition arrow a ``<g class="transition">``.
    """
    arrows = _arrows(definition)
    boxes = _Layout(_label_gaps(arrows)).boxes(definition.root)
    lit = _lit_paths(definition, active)
    root = boxes[""]
    width, height = root.w + 2 * _MARGIN, root.h + 2 * _MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="harel-chart" '
        f'width="{_n(width)}" height="{_n(height)}" viewBox="0 0 {_n(width)} {_n(height)}" '
        f'font-family="sans-serif" font-size="12" data-definition={_attr(definition.id)}>',
        f"<title>{_text(definition.id)}</title>",
        f'<defs><marker id="{_ARROW_ID}" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="8" markerHeight="8" orient="auto-start-reverse">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{_INK}"/></marker></defs>',
    ]
    parts.extend(_state_group(definition.root, definition.id, boxes, lit))
    parts.append('<g class="transitions">')
    parts.extend(_transition_groups(arrows, boxes))
    parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


# -- layout ---------------------------------------------------------------------------------


class _Layout:
    """The recursive box layout: sizes bottom-up, then absolute positions top-down."""

    def __init__(self, gaps: dict[frozenset[str], float]) -> None:
        self.gaps = gaps
        self.sizes: dict[str, tuple[float, float]] = {}
        self.offsets: dict[str, tuple[float, float]] = {}  # relative to the parent's corner

    def boxes(self, root: Node) -> dict[str, Box]:
        """Measure the tree under ``root`` and place it at the chart's margin."""
        self.measure(root)
        found: dict[str, Box] = {}
        self.place(root, _MARGIN, _MARGIN, found)
        return found

    def measure(self, node: Node) -> tuple[float, float]:
        """Record ``node``'s size and its children's offsets."""
        label_width = _text_width(node.name or "machine") + 2 * _PAD
        if node.kind is NodeKind.LEAF:
            height = _LEAF_HEIGHT + (_VERDICT_LINE if node.outcome is not None else 0.0)
            size = (max(_MIN_LEAF_WIDTH, label_width), height)
        elif node.kind is NodeKind.ORTHOGONAL:
            size = self.stack_regions(node, label_width)
        else:
            size = self.rows(node, label_width)
        self.sizes[node.path] = size
        return size

    def rows(self, node: Node, label_width: float) -> tuple[float, float]:
        """Children left to right, initial child first, ``PER_ROW`` a row; the gap between
        two neighbours is wide enough for the labels of the arrows joining them."""
        children = _layout_order(node)
        width, y = label_width, _HEADER
        for start in range(0, len(children), PER_ROW):
            row = children[start : start + PER_ROW]
            row_sizes = [self.measure(child) for child in row]
            row_height = max(h for _, h in row_sizes)
            x = _INITIAL_PAD
            for index, (child, (w, h)) in enumerate(zip(row, row_sizes, strict=True)):
                if index:
                    x += self.gaps.get(frozenset((row[index - 1].path, child.path)), _GAP_X)
                self.offsets[child.path] = (x, y + (row_height - h) / 2)
                x += w
            width = max(width, x + _PAD)
            y += row_height + _GAP_Y
        return width, (y - _GAP_Y + _PAD) if children else y

    def stack_regions(self, node: Node, label_width: float) -> tuple[float, float]:
        """An orthogonal node's regions top to bottom, all stretched to one width."""
        y = _HEADER
        inner = label_width - 2 * _REGION_INSET
        for region in node.children:
            w, h = self.measure(region)
            self.offsets[region.path] = (_REGION_INSET, y)
            inner = max(inner, w)
            y += h
        for region in node.children:
            self.sizes[region.path] = (inner, self.sizes[region.path][1])
        return inner + 2 * _REGION_INSET, y + _REGION_INSET

    def place(self, node: Node, x: float, y: float, found: dict[str, Box]) -> None:
        """Give ``node`` (at ``x``, ``y``) and its descendants their absolute boxes."""
        w, h = self.sizes[node.path]
        found[node.path] = Box(x, y, w, h)
        for child in node.children:
            dx, dy = self.offsets[child.path]
            self.place(child, x + dx, y + dy, found)


def _layout_order(node: Node) -> list[Node]:
    """The initial child first (its marker sits in the left padding), then the others."""
    first = [child for child in node.children if child.name == node.initial]
    return first + [child for child in node.children if child.name != node.initial]


def _label_gaps(arrows: list[_Arrow]) -> dict[frozenset[str], float]:
    """For two sibling states, the room their widest connecting arrow label needs (arrows
    between their descendants count too); pairs that need no more than the default are left
    out."""
    gaps: dict[frozenset[str], float] = {}
    for arrow in arrows:
        heads = _diverging_heads(arrow.source, arrow.target)
        if heads is not None and arrow.label:
            need = _label_width(arrow.label) + 16
            if need > gaps.get(heads, _GAP_X):
                gaps[heads] = need
    return gaps


def _diverging_heads(a: Node, b: Node) -> frozenset[str] | None:
    """The two sibling ancestors-or-selves of ``a`` and ``b`` under their deepest common
    ancestor; ``None`` when one contains the other."""
    chain_a, chain_b = [*reversed(a.ancestors()), a], [*reversed(b.ancestors()), b]
    for left, right in zip(chain_a, chain_b, strict=False):
        if left is not right:
            return frozenset((left.path, right.path))
    return None


# -- states ---------------------------------------------------------------------------------


def _lit_paths(definition: Definition, active: Collection[str]) -> set[str]:
    lit: set[str] = set()
    for path in active:
        node = definition.index.get(path)
        if node is not None:
            lit.add(node.path)
            lit.update(ancestor.path for ancestor in node.ancestors())
    return lit


def _state_group(node: Node, machine: str, boxes: dict[str, Box], lit: set[str]) -> Iterator[str]:
    """One state's ``<g>``: its box, label, markers and (nested) its children's groups."""
    box = boxes[node.path]
    is_active = node.path in lit
    final = node.kind is NodeKind.LEAF and node.outcome is not None
    role = "machine" if node.parent is None else node.kind.value
    classes = " ".join(["state", role] + ["final"] * final + ["active"] * is_active)
    yield f'<g class="{classes}" data-path={_attr(node.path)} data-kind="{node.kind.value}">'
    yield f"<title>{_text(node.path or machine)}</title>"
    tone = node.kind.value if node.kind in (NodeKind.LEAF, NodeKind.REGION) else "container"
    fill = (_ACTIVE_FILL if is_active else _FILL)[tone]
    ink = _ACTIVE_INK if is_active else _INK
    if tone == "region" and not is_active:
        ink = "none"
    stroke_width = "2.5" if is_active else "1"
    yield _rect(box, "box", fill, ink, stroke_width, radius=8.0)
    if final:
        ring = Box(box.x + 3, box.y + 3, box.w - 6, box.h - 6)
        yield _rect(ring, "final-ring", "none", ink, stroke_width, radius=6.0)
    yield from _state_label(node, machine, box, is_active)
    if node.kind is NodeKind.ORTHOGONAL:
        for region in node.children[1:]:
            top = boxes[region.path].y
            yield (
                f'<line class="region-separator" x1="{_n(box.x)}" y1="{_n(top)}" '
                f'x2="{_n(box.x + box.w)}" y2="{_n(top)}" stroke="{_INK}" '
                'stroke-dasharray="6 4"/>'
            )
    for child in node.children:
        yield from _state_group(child, machine, boxes, lit)
    initial = node.child(node.initial) if node.initial else None
    if initial is not None:
        yield _initial_marker(box, boxes[initial.path], initial.path)
    yield "</g>"


def _state_label(node: Node, machine: str, box: Box, is_active: bool) -> Iterator[str]:
    weight = ' font-weight="bold"' if is_active else ""
    cx, cy = box.centre
    if node.kind is NodeKind.LEAF:
        baseline = cy + 4 - (_VERDICT_LINE / 2 if node.outcome is not None else 0)
        yield (
            f'<text class="name" x="{_n(cx)}" y="{_n(baseline)}" text-anchor="middle"{weight}>'
            f"{_text(node.name)}</text>"
        )
        if node.outcome is not None:
            yield (
                f'<text class="verdict" x="{_n(cx)}" y="{_n(baseline + _VERDICT_LINE)}" '
                f'text-anchor="middle" font-size="10" fill="{_INK}">'
                f"{_text(node.outcome)}</text>"
            )
        return
    style = ' font-style="italic"' if node.kind is NodeKind.REGION else ""
    yield (
        f'<text class="name" x="{_n(box.x + 10)}" y="{_n(box.y + 17)}"{weight}{style}>'
        f"{_text(node.name if node.parent is not None else machine)}</text>"
    )


def _initial_marker(parent: Box, child: Box, child_path: str) -> str:
    dot_x, y = parent.x + 10, child.centre[1]
    return (
        f'<g class="initial" data-target={_attr(child_path)}>'
        f'<circle cx="{_n(dot_x)}" cy="{_n(y)}" r="5" fill="{_INK}"/>'
        f'<path d="M{_n(dot_x + 5)},{_n(y)} L{_n(child.x)},{_n(y)}" stroke="{_INK}" '
        f'fill="none" marker-end="url(#{_ARROW_ID})"/></g>'
    )


def _rect(box: Box, role: str, fill: str, ink: str, stroke_width: str, *, radius: float) -> str:
    return (
        f'<rect class="{role}" x="{_n(box.x)}" y="{_n(box.y)}" width="{_n(box.w)}" '
        f'height="{_n(box.h)}" rx="{_n(radius)}" fill="{fill}" stroke="{ink}" '
        f'stroke-width="{stroke_width}"/>'
    )


# -- transitions ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Arrow:
    source: Node
    target: Node
    label: str
    role: str


def _arrows(definition: Definition) -> list[_Arrow]:
    """One arrow per transition, two per chooser (``join all|any`` and ``else``)."""
    arrows: list[_Arrow] = []
    for scope in definition.index.values():
        for transition in scope.transitions:
            if transition.chooser is not None:
                chooser = transition.chooser
                arrows.append(_Arrow(transition.source, chooser.when_true, chooser.label, "join"))
                arrows.append(_Arrow(transition.source, chooser.otherwise, "else", "else"))
            elif transition.target is not None:
                role = "event" if transition.trigger is not None else "automatic"
                arrows.append(
                    _Arrow(transition.source, transition.target, _trigger_label(transition), role)
                )
    return arrows


def _trigger_label(transition: Transition) -> str:
    """``Pay | Refund [amount > 3]``; a Timeout shows its delay; automatic ones show nothing."""
    trigger = transition.trigger
    if trigger is None:
        return ""
    kinds = []
    for kind in sorted(trigger.kinds):
        timeout = transition.source.timeout
        if kind == "Timeout" and isinstance(timeout, tuple):
            kind = f"Timeout (context {timeout[1]})"
        elif kind == "Timeout" and timeout is not None:
            kind = f"Timeout {timeout:g} s"
        kinds.append(kind)
    label = " | ".join(kinds)
    if trigger.predicate_text:
        label += f" [{' '.join(trigger.predicate_text.split())}]"
    return label


def _transition_groups(arrows: list[_Arrow], boxes: dict[str, Box]) -> Iterator[str]:
    pairs: dict[tuple[str, str], list[_Arrow]] = {}
    ranks: list[int] = []
    for arrow in arrows:
        group = pairs.setdefault(_pair(arrow), [])
        ranks.append(len(group))
        group.append(arrow)
    for arrow, rank in zip(arrows, ranks, strict=True):
        key = _pair(arrow)
        group = pairs[key]
        if arrow.source is arrow.target:
            path, (lx, ly) = _loop(boxes[arrow.source.path], rank)
        else:
            shift = (rank - (len(group) - 1) / 2) * _PARALLEL_GAP
            path, (lx, ly) = _line(boxes, arrow, key, shift)
        yield (
            f'<g class="transition {arrow.role}" data-source={_attr(arrow.source.path)} '
            f"data-target={_attr(arrow.target.path)}>"
        )
        yield (
            f'<path class="arrow" d="{path}" fill="none" stroke="{_INK}" stroke-width="1.3" '
            f'marker-end="url(#{_ARROW_ID})"/>'
        )
        if arrow.label:
            yield from _arrow_label(arrow.label, lx, ly)
        yield "</g>"


def _pair(arrow: _Arrow) -> tuple[str, str]:
    """The arrow's two state paths in a fixed order (an arrow and its reverse share it)."""
    a, b = arrow.source.path, arrow.target.path
    return (a, b) if a <= b else (b, a)


def _arrow_label(label: str, x: float, y: float) -> Iterator[str]:
    shown = _shown(label)
    width = _label_width(label)
    yield f"<title>{_text(label)}</title>"
    yield _rect(Box(x - width / 2, y - 9, width, 16), "label-bg", "#ffffff", "none", "0", radius=3)
    yield (
        f'<text class="label" x="{_n(x)}" y="{_n(y + 3)}" text-anchor="middle" font-size="11">'
        f"{_text(shown)}</text>"
    )


def _line(
    boxes: dict[str, Box], arrow: _Arrow, pair: tuple[str, str], shift: float
) -> tuple[str, tuple[float, float]]:
    """A straight arrow from centre to centre, clipped at the borders, moved ``shift`` px
    sideways (relative to the pair's fixed direction, so the reverse arrow lands apart)."""
    source, target = boxes[arrow.source.path], boxes[arrow.target.path]
    (ax, ay), (bx, by) = boxes[pair[0]].centre, boxes[pair[1]].centre
    length = math.hypot(bx - ax, by - ay) or 1.0
    nx, ny = -(by - ay) / length * shift, (bx - ax) / length * shift
    sx, sy = source.centre[0] + nx, source.centre[1] + ny
    tx, ty = target.centre[0] + nx, target.centre[1] + ny
    dx, dy = (tx - sx, ty - sy) if (tx, ty) != (sx, sy) else (0.0, 1.0)
    if target.contains(source):  # leaving for an enclosing state: out to its border
        start = _exit_point(source, sx, sy, dx, dy)
        end = _exit_point(target, sx, sy, dx, dy)
    elif source.contains(target):  # entering a nested state from its enclosing one
        start = _exit_point(source, tx, ty, -dx, -dy)
        end = _exit_point(target, tx, ty, -dx, -dy)
    else:
        start = _exit_point(source, sx, sy, dx, dy)
        end = _exit_point(target, tx, ty, -dx, -dy)
    middle = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
    return f"M{_n(start[0])},{_n(start[1])} L{_n(end[0])},{_n(end[1])}", middle


def _exit_point(box: Box, px: float, py: float, dx: float, dy: float) -> tuple[float, float]:
    """Where the ray from ``(px, py)`` (inside ``box``) along ``(dx, dy)`` crosses its border."""
    steps = []
    if dx:
        steps.append(((box.x + box.w if dx > 0 else box.x) - px) / dx)
    if dy:
        steps.append(((box.y + box.h if dy > 0 else box.y) - py) / dy)
    step = max(0.0, min(steps)) if steps else 0.0
    return px + step * dx, py + step * dy


def _loop(box: Box, rank: int) -> tuple[str, tuple[float, float]]:
    """A self-transition: a loop over the box's top-right corner, each further one larger so
    their labels (just above each loop's apex) stack apart."""
    size = _LOOP * (1 + 2 * rank)
    sx, sy = box.x + box.w - 2 * _LOOP, box.y
    ex, ey = box.x + box.w, box.y + _LOOP
    path = (
        f"M{_n(sx)},{_n(sy)} C{_n(sx)},{_n(sy - size * 1.5)} "
        f"{_n(ex + size * 1.5)},{_n(ey)} {_n(ex)},{_n(ey)}"
    )
    apex_x, apex_y = (sx + ex) / 2 + size * 0.56, (sy + ey) / 2 - size * 0.56
    return path, (apex_x, apex_y - 10)


# -- text -----------------------------------------------------------------------------------


def _text(value: str) -> str:
    """``value`` as XML character data: escaped, characters XML cannot hold replaced."""
    return escape(_NOT_XML.sub("\ufffd", value))


def _attr(value: str) -> str:
    """``value`` as a quoted XML attribute value (quotes included)."""
    return quoteattr(_NOT_XML.sub("\ufffd", value), {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})


def _shown(label: str) -> str:
    """``label`` cut to ``LABEL_LIMIT`` characters."""
    return label if len(label) <= LABEL_LIMIT else label[: LABEL_LIMIT - 1] + "\u2026"


def _label_width(label: str) -> float:
    """The width of an arrow label's background."""
    return _text_width(_shown(label)) + 8 if label else 0.0


def _text_width(value: str) -> float:
    return CHAR_WIDTH * len(value)


def _n(value: float) -> str:
    """A coordinate with at most one decimal, no trailing zeros (stable across runs)."""
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text
