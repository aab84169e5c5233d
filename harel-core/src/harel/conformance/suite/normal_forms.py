"""Unicode normal forms: text is stored code point for code point, never normalised.

Strings that look alike but differ in their code points (a combining accent and the composed
letter, the angstrom sign and the letter it normalises to, a CJK compatibility ideograph and
its unified twin, a ligature, a fullwidth letter, conjoining jamo and their syllable) are
different ids and different payload keys and values.  A store whose driver, collation, key
encoding or file system folds them (NFC, NFD, NFKC, NFKD, or a collation that compares them
equal) merges two executions into one, loses a payload key, or reads back other text.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Literal

from harel.conformance.suite._base import FAR_FUTURE, Kit, KitBase, drain_listing, new_exe, step
from harel.model import Event, Status
from harel.store.contract import TimerOp

LOOKALIKES: tuple[tuple[str, ...], ...] = (
    ("e\u0301", "\u00e9"),  # e + COMBINING ACUTE ACCENT / LATIN SMALL LETTER E WITH ACUTE
    ("\u212b", "\u00c5", "A\u030a"),  # ANGSTROM SIGN / A WITH RING ABOVE / A + COMBINING RING
    ("\uf900", "\u8c48"),  # CJK COMPATIBILITY IDEOGRAPH-F900 / its unified ideograph
    ("\u2126", "\u03a9"),  # OHM SIGN / GREEK CAPITAL LETTER OMEGA
    ("\ufb01", "fi"),  # LATIN SMALL LIGATURE FI / f i (compatibility forms)
    ("\uff21", "A"),  # FULLWIDTH LATIN CAPITAL LETTER A / A
    ("\u1100\u1161", "\uac00"),  # conjoining jamo / HANGUL SYLLABLE GA
)
"""Groups of distinct strings that one of the four Unicode normal forms makes equal."""

FORMS: tuple[str, ...] = tuple(text for group in LOOKALIKES for text in group)
"""Every string of :data:`LOOKALIKES`, each a different sequence of code points."""


_NFS: tuple[Literal["NFC", "NFD", "NFKC", "NFKD"], ...] = ("NFC", "NFD", "NFKC", "NFKD")


def _folds_together(group: tuple[str, ...]) -> bool:
    """Whether some normal form maps every member of ``group`` to one string."""
    return any(len({unicodedata.normalize(form, t) for t in group}) == 1 for form in _NFS)


assert len(set(FORMS)) == len(FORMS) and all(_folds_together(g) for g in LOOKALIKES)


def code_points(value: Any) -> Any:
    """``value`` with every string (dict keys included) spelled as ``U+XXXX`` code points, so
    an assertion's message shows which code points a store changed."""
    if isinstance(value, str):
        return " ".join(f"U+{ord(ch):04X}" for ch in value)
    if isinstance(value, dict):
        return {code_points(key): code_points(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [code_points(item) for item in value]
    return value


def assert_same(found: Any, expected: Any, what: str) -> None:
    """``found == expected`` exactly (Python compares strings code point by code point)."""
    assert found == expected, f"{what} changed: {code_points(found)} != {code_points(expected)}"


def _payload(tag: str) -> dict[str, Any]:
    """A payload whose keys and values are every lookalike (keys that fold together kept)."""
    return {
        **{text: f"{tag}:{text}" for text in FORMS},
        "values": list(FORMS),
        "nested": {text: [text, {text: text}] for text in FORMS},
    }


class NormalFormTests(KitBase):
    """Ids, payload keys and payload values read back code point for code point."""

    async def test_ids_differing_in_normal_form_are_distinct(self, kit: Kit) -> None:
        """Execution and definition ids, paths and outcomes: one execution per spelling,
        each loaded, listed and filtered under its own code points."""
        store = kit.store
        ids = [f"nf-{text}" for text in FORMS]
        for n, text in enumerate(FORMS):
            exe = new_exe(ids[n], f"kit.nf.{text}", status=Status.DONE)
            exe.outcome, exe.active_path, exe.context = text, f"/{text}", {"n": n}
            await store.save(exe)  # an insert: a store that folds ids finds it taken
        for n, text in enumerate(FORMS):
            loaded = await store.load(ids[n])
            assert loaded is not None, f"execution {code_points(ids[n])} not found"
            assert_same(loaded.id, ids[n], "the execution id")
            assert_same(loaded.definition_id, f"kit.nf.{text}", "the definition id")
            assert_same((loaded.outcome, loaded.active_path), (text, f"/{text}"), "a summary")
            assert loaded.context == {"n": n}, f"{code_points(ids[n])} loaded another's record"
        pages = await drain_listing(store, limit=4)
        assert_same(sorted(i for page in pages for i in page), sorted(ids), "the listed ids")
        page = await store.list_executions(limit=len(FORMS) + 1)
        summaries = {item.id: (item.outcome, item.active_path) for item in page.items}
        assert_same(summaries, {ids[n]: (t, f"/{t}") for n, t in enumerate(FORMS)}, "summaries")
        for n, text in enumerate(FORMS):
            found = await store.list_executions(definition_id=f"kit.nf.{text}")
            assert_same([item.id for item in found.items], [ids[n]], "the definition filter")

    async def test_event_ids_timer_paths_and_targets_keep_their_code_points(self, kit: Kit) -> None:
        """Dedupe marks, timer paths and outbox targets of lookalike spellings stay apart."""
        store = kit.store
        first, *others = FORMS
        exe = new_exe("nf-owner")
        await store.save(exe)
        emits = [
            (f"nf-target-{text}", Event(id=f"nf-emit-{n}", kind="Go"))
            for n, text in enumerate(FORMS)
        ]
        timers = [TimerOp.schedule(f"/t/{text}", 100.0 + n) for n, text in enumerate(FORMS)]
        await store.commit(exe, emits, f"ev-{first}", timers)
        assert await store.is_processed("nf-owner", f"ev-{first}")
        for text in others:
            seen = await store.is_processed("nf-owner", f"ev-{text}")
            assert not seen, f"event id {code_points(f'ev-{text}')} matched {code_points(first)}"
        due = await store.due_timers(FAR_FUTURE)
        expected = [("nf-owner", f"/t/{text}", 100.0 + n) for n, text in enumerate(FORMS)]
        assert_same([tuple(item) for item in due], expected, "the armed timers")
        outbox = await store.pending_outbox()
        assert_same(
            sorted((entry.target_id, entry.event.id) for entry in outbox),
            sorted((target, ev.id) for target, ev in emits),
            "the outbox targets",
        )

    async def test_payload_keys_and_values_keep_their_code_points(self, kit: Kit) -> None:
        """Context, history, deferred and emitted event data, spawn contexts and trace steps."""
        store = kit.store
        exe = new_exe("nf-payload", context=_payload("ctx"))
        exe.history = {f"/{text}": f"/{text}/child" for text in FORMS}
        exe.deferred = [Event(id="nf-deferred", kind="Later", data=_payload("deferred"))]
        await store.save(exe)
        emitted = Event(id="nf-emitted", kind="Go", data=_payload("emit"))
        trace = step("Go", event_data=_payload("trace"), context_out=_payload("out"))
        await store.commit(
            exe,
            [("nf-target", emitted)],
            spawns=[("nf-child", "/r", _payload("spawn"))],
            trace=trace,
        )
        loaded = await store.load("nf-payload")
        assert loaded is not None
        assert_same(loaded.context, _payload("ctx"), "the context")
        assert_same(loaded.history, exe.history, "the history")
        assert_same(loaded.deferred[0].data, _payload("deferred"), "a deferred event's data")
        again, _ = await store.load_for_event("nf-payload", "nf-none")
        assert again is not None
        assert_same(again.context, _payload("ctx"), "the context (load_for_event)")
        outbox = [entry for entry in await store.pending_outbox() if entry.event.id == emitted.id]
        assert len(outbox) == 1
        assert_same(outbox[0].event.data, _payload("emit"), "an emitted event's data")
        spawns = await store.pending_spawns()
        assert_same([entry.context for entry in spawns], [_payload("spawn")], "a spawn context")
        steps = await store.read_trace("nf-payload")
        assert len(steps) == 1
        assert_same(steps[0]["event_data"], _payload("trace"), "a trace step's event data")
        assert_same(steps[0]["context_out"], _payload("out"), "a trace step's context")
