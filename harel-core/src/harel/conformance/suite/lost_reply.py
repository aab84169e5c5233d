"""Lost replies: a commit whose request or answer is lost never misreports its outcome.

For a store that talks to a server over TCP (the harness's ``server_address()``), the kit puts
a :class:`~harel.conformance.proxy.FaultProxy` in front of the server and breaks the commit's
request three ways — dropped before it reaches the server, answered but the answer dropped,
cut right after forwarding — each alone and with a rival writer committing in between.  The
store may settle the commit itself (resending; the receipt tells), or raise
:class:`~harel.store.errors.CommitOutcomeUnknown`, after which the test re-sends the same commit
as the contract says; whatever it answers must be the truth:

* success — the step is stored exactly once;
* :class:`~harel.store.errors.StoreConflict` or a plain ``StoreUnavailable`` — the step is not
  stored, and does not appear later.

Stores without a server address skip these tests.
"""

from __future__ import annotations

from typing import Any

import pytest

from harel.conformance.attacks import rival_commit
from harel.conformance.proxy import FAULT_MODES, FaultMode, FaultProxy
from harel.conformance.suite._base import Kit, KitBase, event, new_exe, stored
from harel.model import Execution
from harel.store.contract import AsyncExecutionStore
from harel.store.errors import CommitOutcomeUnknown, StoreConflict, StoreUnavailable

MARKER = "kit-lost-reply-marker"
"""Ends the emitted event id that picks the commit's request out of the traffic."""

RESENDS = 3
"""How many times the test re-sends after ``CommitOutcomeUnknown`` before it gives up."""

FIRED_WAIT = 30.0
"""Seconds to wait for the fault (and the rival) to finish: a store whose request timed out
may have re-sent and answered while the rival was still committing."""


async def _settle(store: AsyncExecutionStore, exe: Execution, args: dict[str, Any]) -> str:
    """Commit, re-sending after ``CommitOutcomeUnknown`` as the contract says; the answer."""
    for _ in range(RESENDS + 1):
        try:
            await store.commit(exe, **args)
        except CommitOutcomeUnknown:
            continue
        except StoreConflict:
            return "conflict"
        except StoreUnavailable:
            return "unavailable"
        return "stored"
    return "unknown"


async def _marked(store: AsyncExecutionStore, event_id: str) -> int:
    """How many outbox entries carry the step's emitted event."""
    return sum(entry.event.id == event_id for entry in await store.pending_outbox())


CASES = tuple((mode, rival) for mode in FAULT_MODES for rival in (False, True))
"""Every fault mode, alone and with a rival commit in between."""


async def _one_case(kit: Kit, address: tuple[str, int], mode: FaultMode, rival: bool) -> None:
    """Break one commit as ``mode`` says and check the store's answer against what is stored."""
    where = f"{mode}, {'with' if rival else 'without'} a rival"
    execution_id = f"kit-lost-{mode}-{'rival' if rival else 'alone'}"
    processed_id = f"{execution_id}-in"
    rival_store = kit.harness.open_sync()
    try:
        with FaultProxy(*address) as proxy:
            store = await kit.open_at(proxy.host, proxy.port)
            exe = await stored(store, new_exe(execution_id, context={"n": 0}))
            proxy.arm(
                mode,
                marker=f"{execution_id}:{MARKER}".encode(),
                between=(lambda: rival_commit(rival_store, execution_id)) if rival else None,
            )
            exe.context = {"n": 1}
            emit = (None, event(f"{execution_id}:{MARKER}"))
            answer = await _settle(
                store, exe, {"emits": [emit], "processed_event_id": processed_id}
            )
            fired = proxy.wait_fired(FIRED_WAIT)
            assert fired, f"{where}: the commit's request never carried its marker"
            assert proxy.between_error is None, (
                f"{where}: the rival failed: {proxy.between_error!r}"
            )
            await kit.close(store)
    finally:
        rival_store.close()
    marked = await _marked(kit.store, f"{execution_id}:{MARKER}")
    processed = await kit.store.is_processed(execution_id, processed_id)
    assert answer != "unknown", f"{where}: still unknown after {RESENDS} re-sends"
    if answer == "stored":
        assert marked == 1 and processed, (
            f"{where}: the store answered success but the step is stored {marked} time(s)"
        )
        assert exe.version == 2
        return
    assert marked == 0 and not processed, (
        f"{where}: the store answered {answer} but the step IS stored "
        "(a caller following the error's advice would apply it twice)"
    )
    assert exe.version == 1
    if rival:
        loaded = await kit.store.load(execution_id)
        assert loaded is not None and loaded.context == {"by": "rival"}


class LostReplyTests(KitBase):
    """Dropped requests, dropped replies and cut connections, with and without a rival."""

    async def test_lost_reply_never_misreports_the_commit(self, kit: Kit) -> None:
        address = kit.harness.server_address()
        if address is None:
            pytest.skip(f"{type(kit.harness).__name__} has no server address (no TCP server)")
        for mode, rival in CASES:
            await _one_case(kit, address, mode, rival)
