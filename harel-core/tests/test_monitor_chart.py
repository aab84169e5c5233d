"""The monitor's statechart picture: valid standalone SVG, highlighting, escaping, layout."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from collections.abc import Callable

import pytest
from harel.engine.definition import Definition, Node, NodeKind
from harel.engine.dsl import definition_from_dsl, definition_from_dsl_file
from harel.examples import ORDER_STM
from harel.monitor.chart import LABEL_LIMIT, Box, layout, render_svg

SVG = "{http://www.w3.org/2000/svg}"
Make = Callable[[], Definition]

EDGES = """\
event Go {} event Back {} event Ping {} event Stop {} event Up { n: int } event Deep {}
machine edges {
  initial Idle
  state Idle {}
  state Busy {
    initial Wrap
    state Wrap {}
    state Label {}
    state Inner { initial X  state X {}  state Y {}  from X to Y on Go }
    from Wrap to Label on Go
    from Label to Wrap on Back
    from Label to Busy on Up where n > 3 and n < 10
    from Wrap to Wrap on Ping
    from Wrap to Wrap on Stop
    from Label to Inner
  }
  final Done success {}
  from Idle to Busy on Go
  from Busy to Idle on Stop
  from Idle to Idle on Ping
  from "Busy.Inner.Y" to Done on Deep
}
"""


def order() -> Definition:
    return definition_from_dsl_file(ORDER_STM)


def edges() -> Definition:
    return definition_from_dsl(EDGES)


def wide(states: int = 40) -> Definition:
    """A chart of ``states`` states: composites of five leaves in a chain (rows wrap)."""
    groups = states // 6
    blocks = []
    for g in range(groups):
        leaves = " ".join(f"state L{g}_{i} {{}}" for i in range(5))
        chain = " ".join(f"from L{g}_{i} to L{g}_{i + 1} on Go" for i in range(4))
        blocks.append(f"state G{g} {{ initial L{g}_0 {leaves} {chain} }}")
    links = " ".join(f"from G{g} to G{g + 1} on Next" for g in range(groups - 1))
    return definition_from_dsl(
        "event Go {} event Next {} machine wide { initial G0 " + " ".join(blocks) + f" {links} }}"
    )


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def states(root: ET.Element) -> dict[str, ET.Element]:
    found: dict[str, ET.Element] = {}
    for group in root.iter(f"{SVG}g"):
        path = group.get("data-path")
        if path is not None:
            assert path not in found, f"state {path!r} drawn twice"
            found[path] = group
    return found


def classes(element: ET.Element) -> set[str]:
    return set((element.get("class") or "").split())


def box_of(group: ET.Element) -> Box:
    rect = group.find(f"{SVG}rect[@class='box']")
    assert rect is not None
    return Box(*(float(rect.get(key) or "nan") for key in ("x", "y", "width", "height")))


def arrows(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if "transition" in classes(g)]


def arrow_count(defn: Definition) -> int:
    return sum(
        2 if t.chooser is not None else 1 for node in defn.index.values() for t in node.transitions
    )


@pytest.mark.parametrize("make", [order, edges, wide], ids=["order", "edges", "wide"])
def test_every_state_is_a_group_and_every_transition_an_arrow(make: Make) -> None:
    defn = make()
    root = parse(render_svg(defn, []))
    assert root.tag == f"{SVG}svg"
    assert set(states(root)) == set(defn.index)
    assert len(arrows(root)) == arrow_count(defn)
    for group in arrows(root):
        assert group.find(f"{SVG}path[@class='arrow']") is not None


def test_the_output_is_standalone_no_script_no_external_reference() -> None:
    svg = render_svg(order(), ["Placed"])
    root = parse(svg)
    tags = {element.tag for element in root.iter()}
    assert f"{SVG}script" not in tags and f"{SVG}image" not in tags
    assert f"{SVG}foreignObject" not in tags
    for element in root.iter():
        for name, value in element.attrib.items():
            assert "href" not in name, (element.tag, name)
            assert not name.startswith("on"), (element.tag, name)
            if "url(" in value:
                assert value.startswith("url(#"), value
    assert svg.count("http") == 1  # the xmlns only


@pytest.mark.parametrize(
    ("active", "lit"),
    [
        ([], set()),
        (["Placed"], {"", "Placed"}),
        (
            ["Fulfilment", "Fulfilment.Payment.Charged", "Fulfilment.Warehouse.Picking"],
            {
                "",
                "Fulfilment",
                "Fulfilment.Payment",
                "Fulfilment.Payment.Charged",
                "Fulfilment.Warehouse",
                "Fulfilment.Warehouse.Picking",
            },
        ),
        (["Delivered", "No.Such.State"], {"", "Delivered"}),
    ],
)
def test_active_states_and_their_ancestors_are_highlighted(
    active: list[str], lit: set[str]
) -> None:
    drawn = states(parse(render_svg(order(), active)))
    assert {path for path, group in drawn.items() if "active" in classes(group)} == lit
    for path, group in drawn.items():
        rect = group.find(f"{SVG}rect[@class='box']")
        assert rect is not None
        assert (rect.get("stroke-width") == "2.5") is (path in lit), path
        name = group.find(f"{SVG}text[@class='name']")
        assert name is not None
        assert (name.get("font-weight") == "bold") is (path in lit), path


def test_an_active_state_has_a_fill_of_its_own() -> None:
    quiet = states(parse(render_svg(order(), [])))["Shipping"]
    lit = states(parse(render_svg(order(), ["Shipping"])))["Shipping"]

    def fill(group: ET.Element) -> str | None:
        rect = group.find(f"{SVG}rect[@class='box']")
        assert rect is not None
        return rect.get("fill")

    assert fill(quiet) != fill(lit)


@pytest.mark.parametrize("make", [order, edges], ids=["order", "edges"])
def test_final_states_and_only_they_have_a_double_border(make: Make) -> None:
    defn = make()
    drawn = states(parse(render_svg(defn, [])))
    for path, node in defn.index.items():
        final = node.kind is NodeKind.LEAF and node.outcome is not None
        rings = drawn[path].findall(f"{SVG}rect[@class='final-ring']")
        assert len(rings) == (1 if final else 0), path
        assert ("final" in classes(drawn[path])) is final
    assert {p for p, g in drawn.items() if "final" in classes(g)} >= (
        {"Delivered", "Expired", "Failed"} if defn.id == "order" else {"Done"}
    )


def test_each_compound_marks_its_initial_child_and_regions_are_dashed_apart() -> None:
    defn = order()
    drawn = states(parse(render_svg(defn, [])))
    for path, node in defn.index.items():
        markers = drawn[path].findall(f"{SVG}g[@class='initial']")
        if node.initial is None:
            assert markers == [], path
        else:
            assert [m.get("data-target") for m in markers] == [f"{path}.{node.initial}".lstrip(".")]
            assert markers[0].find(f"{SVG}circle") is not None
    separators = drawn["Fulfilment"].findall(f"{SVG}line[@class='region-separator']")
    assert len(separators) == 1 and separators[0].get("stroke-dasharray")


def test_transition_labels_name_triggers_choosers_and_timeouts() -> None:
    labels = {
        (g.get("data-source"), g.get("data-target")): "".join(
            t.text or "" for t in g.findall(f"{SVG}text")
        )
        for g in arrows(parse(render_svg(order(), [])))
    }
    assert labels[("Placed", "Fulfilment")] == "Confirm"
    assert labels[("Placed", "Expired")] == "Timeout 900 s"
    assert labels[("Fulfilment", "Shipping")] == "join all"
    assert labels[("Fulfilment", "Failed")] == "else"
    assert labels[("Fulfilment.Payment.Charging", "Fulfilment.Payment.Charged")] == "Pay"
    edge_labels = {
        (g.get("data-source"), g.get("data-target"), g.findtext(f"{SVG}text"))
        for g in arrows(parse(render_svg(edges(), [])))
    }
    assert ("Busy.Label", "Busy", "Up [n > 3 and n < 10]") in edge_labels
    assert ("Busy.Label", "Busy.Inner", None) in edge_labels  # automatic: no label


def test_a_self_transition_is_a_loop() -> None:
    loops = [
        g
        for g in arrows(parse(render_svg(edges(), [])))
        if g.get("data-source") == g.get("data-target")
    ]
    assert len(loops) == 3
    for group in loops:
        path = group.find(f"{SVG}path")
        assert path is not None and " C" in (path.get("d") or "")


HOSTILE = "<script>alert('x') & \"quoted\"</script>"


def test_predicate_text_is_escaped_and_round_trips() -> None:
    literal = HOSTILE.replace('"', '\\"')
    defn = definition_from_dsl(
        "event Go { who: string } machine m { initial A  state A {}  final B success {} "
        f'from A to B on Go where who == "{literal}" }}'
    )
    svg = render_svg(defn, ["A"])
    assert "<script>" not in svg
    (arrow,) = arrows(parse(svg))
    assert arrow.findtext(f"{SVG}title") == f'Go [who == "{literal}"]'


def hostile_definition() -> Definition:
    """A definition built by hand: names the DSL would refuse, as a store might still hold."""
    root = Node(name="", path="", kind=NodeKind.COMPOSITE, initial=HOSTILE)
    child = Node(name=HOSTILE, path=HOSTILE, kind=NodeKind.LEAF, parent=root, outcome="a&b")
    root.children.append(child)
    return Definition(id="m<&>\"'", root=root, index={"": root, HOSTILE: child})


def test_state_names_and_ids_are_text_not_markup() -> None:
    svg = render_svg(hostile_definition(), [HOSTILE])
    root = parse(svg)
    assert f"{SVG}script" not in {element.tag for element in root.iter()}
    group = states(root)[HOSTILE]
    assert "active" in classes(group)
    assert group.findtext(f"{SVG}text[@class='name']") == HOSTILE
    assert group.findtext(f"{SVG}text[@class='verdict']") == "a&b"
    assert root.get("data-definition") == "m<&>\"'"


def test_characters_xml_cannot_hold_are_replaced_not_emitted() -> None:
    raw = hostile_definition()
    raw.root.children[0].outcome = "nul\x00 bell\x07"
    group = states(parse(render_svg(raw, [])))[HOSTILE]
    assert group.findtext(f"{SVG}text[@class='verdict']") == "nul\ufffd bell\ufffd"


def test_a_long_label_is_cut_and_kept_whole_in_its_tooltip() -> None:
    values = ", ".join(f'"value{i}"' for i in range(12))
    defn = definition_from_dsl(
        "event Go { who: string } machine m { initial A  state A {}  state B {} "
        f"from A to B on Go where who in [{values}] }}"
    )
    (arrow,) = arrows(parse(render_svg(defn, [])))
    shown = arrow.findtext(f"{SVG}text") or ""
    assert len(shown) == LABEL_LIMIT and shown.endswith("\u2026")
    assert (arrow.findtext(f"{SVG}title") or "").endswith('"value11"]]')


def test_rendering_is_deterministic() -> None:
    active = ["Fulfilment", "Fulfilment.Payment.Charging", "Fulfilment.Warehouse.Packed"]
    first = render_svg(order(), active)
    assert render_svg(order(), list(reversed(active))) == first
    assert render_svg(order(), set(active)) == first
    assert render_svg(order(), []) != first


@pytest.mark.parametrize("make", [order, edges, wide], ids=["order", "edges", "wide"])
def test_no_box_overlaps_a_sibling_and_children_stay_inside(make: Make) -> None:
    defn = make()
    drawn = {path: box_of(group) for path, group in states(parse(render_svg(defn, []))).items()}
    assert drawn == layout(defn)
    for path, node in defn.index.items():
        for child in node.children:
            assert drawn[path].contains(drawn[child.path]), (path, child.path)
        for a, b in itertools.combinations(node.children, 2):
            assert not drawn[a.path].overlaps(drawn[b.path]), (a.path, b.path)


def test_box_overlap_and_containment_rules() -> None:
    outer = Box(0, 0, 100, 100)
    assert outer.contains(Box(10, 10, 20, 20)) and not outer.contains(Box(90, 90, 20, 20))
    assert Box(0, 0, 10, 10).overlaps(Box(5, 5, 10, 10))
    assert not Box(0, 0, 10, 10).overlaps(Box(10, 0, 10, 10))  # touching edges


def test_rows_wrap_and_output_grows_linearly() -> None:
    defn = wide(40)
    boxes = layout(defn)
    tops = {boxes[f"G{g}"].y for g in range(6)}
    assert len(tops) == 2  # six composites: a row of four, then two
    small, large = render_svg(wide(12), []), render_svg(defn, [])
    per_item_small = len(small) / (len(wide(12).index) + arrow_count(wide(12)))
    per_item_large = len(large) / (len(defn.index) + arrow_count(defn))
    assert per_item_large < per_item_small * 1.5
