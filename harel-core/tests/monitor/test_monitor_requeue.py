"""The monitor's requeue button: only with --allow-writes, confirmed, CSRF-checked, and it
goes through the same operation as ``harel dead-letters --requeue``."""

from __future__ import annotations

from collections.abc import Callable

from harel.engine.deadletters import DEAD_LETTERS_ID, DeadLetter, letters_of, with_letter
from harel.engine.runner import DurableRunner
from harel.store.contract import ExecutionStore
from starlette.testclient import TestClient

Runner = Callable[[ExecutionStore], DurableRunner]

NOTE = DeadLetter(
    "outbox:7", "r-1", "Note", "note-7", "ValueError: down", 3, 1.0, {"text": "again"}
)
SPAWN = DeadLetter("spawn:8", "r-1:Split.L:0", "Start", None, "ValueError: x", 3, 1.0, {})


def _set_aside(store: ExecutionStore, runner: DurableRunner) -> None:
    runner.create("notes", execution_id="r-1")
    store.commit(with_letter(with_letter(None, NOTE), SPAWN), [])


def _refs(store: ExecutionStore) -> list[str]:
    return [letter.ref for letter in letters_of(store.load(DEAD_LETTERS_ID))[0]]


def test_requeue_needs_the_flag(
    memory_store: ExecutionStore, runner_for: Runner, client_for: Callable[..., TestClient]
) -> None:
    _set_aside(memory_store, runner_for(memory_store))
    client = client_for(memory_store)
    page = client.get("/dead-letters").text
    assert 'data-testid="requeue-form"' not in page and 'name="csrf"' not in page
    refused = client.post("/actions/requeue", data={"ref": "outbox:7", "confirm": "yes"})
    assert refused.status_code == 403 and "--allow-writes" in refused.text
    assert memory_store.pending_outbox() == [] and _refs(memory_store) == ["outbox:7", "spawn:8"]


def test_requeue_is_confirmed_csrf_checked_and_requeues_once(
    memory_store: ExecutionStore,
    runner_for: Runner,
    client_for: Callable[..., TestClient],
    csrf_of: Callable[[str], str],
    count_rows: Callable[[str, str], int],
) -> None:
    _set_aside(memory_store, runner_for(memory_store))
    client = client_for(memory_store, allow_writes=True)
    page = client.get("/dead-letters").text
    assert count_rows(page, "requeue-form") == 1  # the spawn letter has no button
    assert 'name="ref" value="outbox:7"' in page and 'value="spawn:8"' not in page
    csrf = csrf_of(page)
    form = {"ref": "outbox:7"}
    assert client.post("/actions/requeue", data={**form, "confirm": "yes"}).status_code == 403
    forged = {**form, "confirm": "yes", "csrf": csrf + "x"}
    assert client.post("/actions/requeue", data=forged).status_code == 403
    confirm = client.post("/actions/requeue", data={**form, "csrf": csrf})
    assert confirm.status_code == 200 and 'name="confirm" value="yes"' in confirm.text
    assert 'name="ref" value="outbox:7"' in confirm.text and "note-7" in confirm.text
    assert memory_store.pending_outbox() == []  # nothing done before the confirmation
    done = client.post("/actions/requeue", data={**form, "csrf": csrf, "confirm": "yes"})
    assert done.status_code == 303 and done.headers["location"].startswith("/dead-letters?")
    [entry] = memory_store.pending_outbox()
    assert (entry.target_id, entry.event.kind, entry.event.id) == ("r-1", "Note", "note-7")
    assert entry.event.data == {"text": "again"}
    assert _refs(memory_store) == ["spawn:8"]
    notice = client.get(done.headers["location"]).text
    assert 'data-testid="notice">requeued outbox:7: event &#39;Note&#39;' in notice
    for again in ({**form, "csrf": csrf}, {**form, "csrf": csrf, "confirm": "yes"}):
        gone = client.post("/actions/requeue", data=again)
        assert gone.status_code == 404 and "requeued or cleared meanwhile" in gone.text
    assert len(memory_store.pending_outbox()) == 1


def test_a_letter_that_cannot_be_requeued_is_refused(
    memory_store: ExecutionStore,
    runner_for: Runner,
    client_for: Callable[..., TestClient],
    csrf_of: Callable[[str], str],
) -> None:
    _set_aside(memory_store, runner_for(memory_store))
    client = client_for(memory_store, allow_writes=True)
    csrf = csrf_of(client.get("/dead-letters").text)
    for confirm in ("", "yes"):
        refused = client.post(
            "/actions/requeue", data={"ref": "spawn:8", "csrf": csrf, "confirm": confirm}
        )
        assert refused.status_code == 409 and "harel purge --id r-1 --force" in refused.text
    assert client.post("/actions/requeue", data={"csrf": csrf}).status_code == 400
    assert memory_store.pending_outbox() == [] and _refs(memory_store) == ["outbox:7", "spawn:8"]
