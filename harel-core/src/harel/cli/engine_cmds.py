"""Engine commands: ``harel run``, ``trace``, ``list``, ``send``, ``worker``, ``dead-letters``.

The store comes from ``--store URL`` or else the environment's (``STM_STORE_URL``, ...;
``harel run`` alone falls back to a throw-away ``memory://`` store when no ``STM_STORE_*``
variable is set).  ``trace``, ``list`` and ``dead-letters`` open an existing store only: a
URL naming no store (a typo'd file name, a schema never created) is an error and nothing is
created.  Every command that runs the machine (``run``, ``send``, ``worker``) records trace
steps, so ``harel trace`` shows every step; ``STM_TRACE=0`` turns that off (a timeline that
ends before the execution's state is then marked incomplete).  ``STM_TRACE_MAX`` and
``STM_DEFINITIONS_DIR`` are read here, never by the runners.

``harel run`` and ``harel send`` apply the same rule to an event kind the machine does not
know (neither declared nor used by a transition): refused before anything is sent (exit 2).

``harel send`` says when nothing happened: an event to a finished execution is not sent
(notice on stderr, exit 1); an event id the execution already processed changes nothing
(notice on stderr, exit 0: re-sending the same event is the safe way to retry).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harel.cli import EXIT_NOTHING_HAPPENED, CommandError
from harel.cli import open_cli_store as _store
from harel.engine.config import ConfigError, EngineConfig
from harel.engine.definition import Definition
from harel.engine.runner import DurableRunner
from harel.engine.timeline import format_timeline
from harel.model import Event, Execution, Status
from harel.store.contract import DEFAULT_LEASE, FINISHED, ExecutionStore

STORE_HELP = "store URL (default: STM_STORE_URL, or STM_STORE_BACKEND and its variables)"


def register(subparsers: Any) -> None:
    """Add ``run``, ``trace``, ``list``, ``send`` and ``worker``."""
    run = subparsers.add_parser(
        "run",
        help="run a machine from a .stm file and print its timeline",
        description="Create an execution of a machine, deliver events, print the trace.",
    )
    run.add_argument("file", type=Path, help="the .stm file")
    run.add_argument("--machine", help="machine name (needed when the file holds several)")
    run.add_argument("--store", help=STORE_HELP + "; memory:// when nothing is configured")
    run.add_argument(
        "-e",
        "--event",
        dest="events",
        action="append",
        default=[],
        metavar="EVENT",
        help="an event to deliver, KIND or KIND:JSON (e.g. -e 'Pay:{\"amount\": 5}'); repeatable",
    )
    run.add_argument("--actions", help="module whose functions bind the machine's action names")
    run.add_argument("--id", dest="execution_id", help="execution id (default: a fresh one)")
    run.set_defaults(handler=cmd_run)

    trace = subparsers.add_parser("trace", help="print an execution's trace timeline")
    trace.add_argument("execution_id", metavar="ID")
    trace.add_argument("--store", help=STORE_HELP)
    trace.add_argument("--json", action="store_true", help="print the steps as JSON")
    trace.set_defaults(handler=cmd_trace)

    listing = subparsers.add_parser("list", help="list executions (every page, or one)")
    listing.add_argument("--store", help=STORE_HELP)
    listing.add_argument(
        "--status",
        action="append",
        choices=[status.value for status in Status],
        help="keep these statuses (repeatable)",
    )
    listing.add_argument("--definition", help="keep this definition id")
    listing.add_argument("--roots", action="store_true", help="only executions without a parent")
    listing.add_argument("--limit", type=int, default=100, help="page size (default 100)")
    listing.add_argument(
        "--cursor",
        nargs="?",
        const="",
        help="print one page only: the first (bare --cursor) or the one at CURSOR; "
        "prints the next cursor",
    )
    listing.set_defaults(handler=cmd_list)

    send = subparsers.add_parser("send", help="deliver one event to an execution")
    send.add_argument("execution_id", metavar="ID")
    send.add_argument("kind", metavar="EVENT", help="the event kind")
    send.add_argument("--data", default="{}", help="the event data as a JSON object")
    send.add_argument("--event-id", help="the event id (reuse it to retry safely)")
    send.add_argument(
        "--enqueue",
        action="store_true",
        help="hand the event to the workers in one write instead of running the step here "
        "(a running `harel worker` delivers it)",
    )
    _runner_options(send)
    send.set_defaults(handler=cmd_send)

    worker = subparsers.add_parser(
        "worker",
        help="relay spawns/events and fire due timers until stopped",
        description=(
            "Loop: claim due work (timers, relayed events, spawn intents, grouped by "
            "execution, under a lease) and do it, over the machines in DIR. Several workers "
            "split the work of one store; a killed worker's leases expire and its work is "
            "taken over. SIGTERM/SIGINT stop it after the current unit, releasing the rest."
        ),
    )
    _runner_options(worker)
    worker.add_argument(
        "--poll", type=float, default=1.0, help="longest idle sleep, seconds (default 1)"
    )
    worker.add_argument("--once", action="store_true", help="drain what is due now and exit")
    worker.add_argument(
        "--lease", type=float, default=DEFAULT_LEASE, help="lease seconds (default 30)"
    )
    worker.add_argument(
        "--batch", type=int, default=10, help="units of work per claim (default 10)"
    )
    worker.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="units in flight: N claim loops on the async store, one event loop (default 1)",
    )
    worker.set_defaults(handler=cmd_worker)

    dead = subparsers.add_parser(
        "dead-letters",
        help="list the relay entries and timers the workers quarantined",
        description=(
            "Print the dead letters: outbox/spawn entries and timers that kept failing and "
            "were set aside (kept in the store as the execution 'harel.dead-letters'). "
            "--requeue REF hands one letter's event back to the workers (same event id, so "
            "a second requeue is harmless) and removes the letter."
        ),
    )
    dead.add_argument("--store", help=STORE_HELP)
    dead.add_argument("--json", action="store_true", help="print the letters as JSON")
    change = dead.add_mutually_exclusive_group()
    change.add_argument("--clear", action="store_true", help="empty the dead-letter record")
    change.add_argument(
        "--requeue",
        metavar="REF",
        help="enqueue the event of the letter REF (e.g. outbox:12) again, then remove it",
    )
    dead.set_defaults(handler=cmd_dead_letters)


def _runner_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", help=STORE_HELP)
    parser.add_argument("--definitions", type=Path, help="directory of .stm files")
    parser.add_argument("--actions", help="module whose functions bind bare action names")


# -- helpers --------------------------------------------------------------------------------


def _actions(module_name: str | None) -> dict[str, Callable[..., Any]] | None:
    if module_name is None:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise CommandError(f"cannot import actions module {module_name!r}: {err}") from None
    return {
        name: value
        for name, value in vars(module).items()
        if callable(value) and not name.startswith("_")
    }


def _config() -> EngineConfig:
    try:
        return EngineConfig.from_env()
    except ConfigError as err:
        raise CommandError(str(err)) from None


def _definitions(args: argparse.Namespace, config: EngineConfig) -> dict[str, Definition]:
    from harel.engine.dsl import definitions_from_dir

    directory = args.definitions or config.definitions_dir
    if directory is None:
        raise CommandError("no definitions: pass --definitions DIR or set STM_DEFINITIONS_DIR")
    found = definitions_from_dir(directory, actions=_actions(args.actions))
    if not found:
        raise CommandError(f"no machines found in {str(directory)!r} (expected *.stm files)")
    return found


def _tracing(config: EngineConfig) -> bool:
    """The CLI traces unless ``STM_TRACE`` is set to something false (``0``, ``off``)."""
    return config.trace or os.environ.get("STM_TRACE") is None


def _runner(
    store: ExecutionStore, definitions: Mapping[str, Definition], config: EngineConfig
) -> DurableRunner:
    trace = _tracing(config)
    return DurableRunner(
        store, definitions, trace=trace, trace_max=config.trace_max if trace else None
    )


def _event(text: str) -> Event:
    kind, sep, payload = text.partition(":")
    return Event(kind=kind.strip(), data=_json_object(payload, f"event {kind!r}") if sep else {})


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise CommandError(f"{what}: data is not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise CommandError(f"{what}: data must be a JSON object, got {text!r}")
    return data


def _state(exe: Execution) -> str:
    verdict = f"/{exe.outcome}" if exe.outcome else ""
    error = f" ({exe.error})" if exe.error else ""
    return f"{exe.status.value}{verdict} at {exe.active_path or '-'}, version {exe.version}{error}"


def _print_timeline(store: ExecutionStore, exe: Execution, title: str) -> None:
    steps = store.read_trace(exe.id)
    print(title)
    if not steps:
        print("  (no trace steps: the execution ran with tracing off, STM_TRACE=0)")
    for line in format_timeline(steps):
        print("  " + line)
    if steps and (steps[-1].get("to_path") or "") != (exe.active_path or ""):
        print(
            f"  (timeline incomplete: it ends at {steps[-1].get('to_path') or '-'}, the "
            f"execution is at {exe.active_path or '-'}; later steps ran with tracing off)"
        )


def _print_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


# -- commands -------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    """Create an execution, deliver the events, print its timeline (and its regions')."""
    from harel.engine.dsl import definition_from_dsl_file, machine_names

    config = _config()
    if args.file.is_dir():
        raise CommandError(
            f"{str(args.file)!r} is a directory: harel run takes one .stm file "
            "(a directory of machines is for harel send/worker --definitions DIR)"
        )
    if not args.file.is_file():
        raise CommandError(f"no such file: {str(args.file)!r}")
    text = args.file.read_text(encoding="utf-8")
    names = machine_names(text, source_name=str(args.file))
    if args.machine is None and len(names) > 1:
        raise CommandError(
            f"{str(args.file)!r} declares several machines ({', '.join(names)}): "
            "choose one with --machine NAME"
        )
    if args.machine is not None and names and args.machine not in names:
        raise CommandError(
            f"{str(args.file)!r} declares no machine {args.machine!r}; "
            f"--machine takes one of: {', '.join(names)}"
        )
    defn = definition_from_dsl_file(args.file, args.machine, actions=_actions(args.actions))
    events = [_event(text) for text in args.events]
    for event in events:
        _check_declared(defn, event.kind, "nothing was run")
    with _store(args.store, fallback="memory://") as store:
        runner = _runner(store, {defn.id: defn}, config)
        exe = runner.create(defn.id, execution_id=args.execution_id)
        for event in events:
            exe = runner.process(exe.id, event)
        _print_timeline(store, exe, f"execution {exe.id} ({defn.id}): {_state(exe)}")
        for child_id in exe.children:
            child = store.load(child_id)
            if child is not None:
                _print_timeline(store, child, f"region {child_id}: {_state(child)}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    """Print the stored trace of one execution."""
    from harel.store.errors import ExecutionNotFound

    with _store(args.store, create=False) as store:
        exe = store.load(args.execution_id)
        if exe is None:
            raise ExecutionNotFound(args.execution_id)
        if args.json:
            json.dump(store.read_trace(exe.id), sys.stdout, indent=2, default=str)
            print()
        else:
            _print_timeline(store, exe, f"execution {exe.id} ({exe.definition_id}): {_state(exe)}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """Print executions page by page (all pages, or the one at ``--cursor``)."""
    if args.limit < 1:
        raise CommandError(f"--limit must be >= 1, got {args.limit}")
    header = ("ID", "DEFINITION", "STATUS", "OUTCOME", "ACTIVE", "VERSION", "PARENT")
    rows: list[tuple[str, ...]] = []
    cursor = args.cursor or None
    with _store(args.store, create=False) as store:
        while True:
            page = store.list_executions(
                status=args.status,
                definition_id=args.definition,
                roots_only=args.roots,
                limit=args.limit,
                cursor=cursor,
            )
            for item in page.items:
                rows.append(
                    (
                        item.id,
                        item.definition_id,
                        item.status.value,
                        item.outcome or "-",
                        item.active_path or "-",
                        str(item.version),
                        item.parent_id or "-",
                    )
                )
            cursor = page.next_cursor
            if cursor is None or args.cursor is not None:
                break
    _print_table(header, rows)
    if args.cursor is not None:
        print(f"next cursor: {cursor or '-'}")
    return 0


def _definition_of(exe: Execution, definitions: Mapping[str, Definition], where: str) -> Definition:
    defn = definitions.get(exe.definition_id)
    if defn is None:
        raise CommandError(
            f"execution {exe.id!r} runs machine {exe.definition_id!r}, which is not among the "
            f"machines in {where} ({', '.join(sorted(definitions)) or 'none'}): add its .stm "
            "file there"
        )
    return defn


def _known_kinds(defn: Definition) -> set[str]:
    """The event kinds the machine knows: declared (``event X {}``) or used by a transition."""
    kinds = set(defn.events)
    for node in [defn.root, *defn.index.values()]:
        for transition in node.transitions:
            if transition.trigger is not None:
                kinds |= transition.trigger.kinds
    return kinds


def _check_declared(defn: Definition, kind: str, consequence: str = "nothing was sent") -> None:
    """The rule of ``run -e`` and ``send``: the machine must know the kind (or it is reserved)."""
    from harel.engine.core import RESERVED_KINDS

    known = _known_kinds(defn)
    if kind in known or kind in RESERVED_KINDS:
        return
    raise CommandError(
        f"machine {defn.id!r} declares no event {kind!r} (it knows: "
        f"{', '.join(sorted(known)) or 'none'}); {consequence}"
    )


def _versions(store: ExecutionStore, exe: Execution) -> tuple[int, tuple[int | None, ...]]:
    children = []
    for child_id in sorted(exe.children):
        child = store.load(child_id)
        children.append(None if child is None else child.version)
    return exe.version, tuple(children)


def _notice(text: str) -> None:
    print(f"harel: nothing happened: {text}", file=sys.stderr)


@dataclass(frozen=True)
class Delivery:
    """What :func:`deliver` did: ``outcome`` is ``"applied"`` (the step ran), ``"duplicate"``
    (the event id was already processed: nothing changed), ``"finished"`` (a finished
    execution: not sent) or ``"enqueued"`` (handed to the workers as outbox entry ``seq``)."""

    execution: Execution
    outcome: str
    seq: int | None = None


def deliver(
    store: ExecutionStore,
    definitions: Mapping[str, Definition],
    config: EngineConfig,
    execution_id: str,
    event: Event,
    *,
    where: str,
    enqueue: bool = False,
) -> Delivery:
    """Deliver ``event`` to ``execution_id`` the way ``harel send`` does (``harel monitor``'s
    send form too): ExecutionNotFound when it is not stored, CommandError when its machine is
    not in ``definitions`` (``where`` names them) or does not know the kind; a finished
    execution is left alone; ``enqueue`` writes one outbox entry instead of running the step."""
    from harel.store.errors import ExecutionNotFound

    exe = store.load(execution_id)
    if exe is None:
        raise ExecutionNotFound(execution_id)
    _check_declared(_definition_of(exe, definitions, where), event.kind)
    if exe.status in FINISHED:
        return Delivery(exe, "finished")
    runner = _runner(store, definitions, config)
    if enqueue:
        return Delivery(exe, "enqueued", runner.enqueue(exe.id, event, priority=exe.priority))
    before = _versions(store, exe)
    exe = runner.process(execution_id, event)
    return Delivery(exe, "duplicate" if _versions(store, exe) == before else "applied")


def cmd_send(args: argparse.Namespace) -> int:
    """Deliver one event durably (a retry with the same ``--event-id`` is a no-op); with
    ``--enqueue`` write it for the workers in one write instead (at the target's priority).

    Says when nothing happened: undeclared kind (refused, exit 2), finished execution (not
    sent, exit 1), event id already processed (exit 0, a safe retry).
    """
    config = _config()
    data = _json_object(args.data, f"event {args.kind!r}")
    event = Event(kind=args.kind, data=data, **({"id": args.event_id} if args.event_id else {}))
    definitions = _definitions(args, config)
    where = repr(str(args.definitions or config.definitions_dir))
    with _store(args.store) as store:
        done = deliver(
            store, definitions, config, args.execution_id, event, where=where, enqueue=args.enqueue
        )
    exe = done.execution
    if done.outcome == "finished":
        print(f"{exe.id}: {_state(exe)}")
        _notice(
            f"execution {exe.id!r} is {exe.status.value}; a finished execution takes no "
            f"more events, so {event.kind!r} was not sent"
        )
        return EXIT_NOTHING_HAPPENED
    if done.outcome == "enqueued":
        print(f"{exe.id}: enqueued {event.kind!r} (event {event.id}, outbox entry {done.seq})")
        print("a running `harel worker` on this store delivers it", file=sys.stderr)
        return 0
    print(f"{exe.id}: {_state(exe)} (event {event.id})")
    if done.outcome == "duplicate":
        _notice(
            f"event id {event.id!r} was already processed by {exe.id!r}; re-sending the "
            "same event is a safe no-op, a new event needs a new --event-id"
        )
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """Run the worker loop until SIGTERM/SIGINT (or one round with ``--once``).

    The signal handlers are installed first, so a SIGTERM during start-up (loading the
    definitions, opening the store) stops the worker cleanly before its first round.
    """
    from harel.engine.worker import StopSignal, Worker, check_knobs

    try:
        check_knobs(args.poll, 0.0, args.lease, args.batch)
    except ValueError as err:
        raise CommandError(f"harel worker: {err}") from None
    if args.concurrency < 1:
        raise CommandError(f"--concurrency must be >= 1, got {args.concurrency}")
    stop = StopSignal()
    stop.install()
    config = _config()
    definitions = _definitions(args, config)
    knobs: dict[str, Any] = {"poll": args.poll, "stop": stop, "lease": args.lease}
    knobs["batch"] = args.batch
    banner = (
        f"harel worker: {len(definitions)} machine(s), lease {args.lease:g}s, "
        f"batch {args.batch}, idle sleep up to {args.poll:g}s"
    )
    if args.concurrency > 1:
        stats = _run_async_worker(args, definitions, config, knobs, banner)
    else:
        with _store(args.store, interactive=False) as store:
            worker = Worker(_runner(store, definitions, config), **knobs)
            print(banner, flush=True)
            stats = worker.run(once=args.once)
    quarantined = f", {stats.quarantined} quarantined" if stats.quarantined else ""
    print(
        f"harel worker: stopped after {stats.rounds} round(s): {stats.relayed} relayed, "
        f"{stats.fired} timer(s) fired{quarantined}, {stats.conflicts} conflict(s), "
        f"{stats.repeats} already done",
        flush=True,
    )
    return 0


def _run_async_worker(
    args: argparse.Namespace,
    definitions: Mapping[str, Definition],
    config: EngineConfig,
    knobs: dict[str, Any],
    banner: str,
) -> Any:
    """``--concurrency N``: the async store, N claim loops in one event loop."""
    import anyio

    from harel.cli import cli_store_url
    from harel.engine.aio import AsyncDurableRunner
    from harel.engine.aio_worker import AsyncWorker
    from harel.registry import open_async_store

    url = cli_store_url(args.store)

    async def main() -> Any:
        store = await open_async_store(url)
        try:
            trace = _tracing(config)
            runner = AsyncDurableRunner(
                store, definitions, trace=trace, trace_max=config.trace_max if trace else None
            )
            worker = AsyncWorker(runner, concurrency=args.concurrency, **knobs)
            print(f"{banner}, {args.concurrency} in flight", flush=True)
            return await worker.run(once=args.once)
        finally:
            await store.close()

    return anyio.run(main)


def cmd_dead_letters(args: argparse.Namespace) -> int:
    """Print (or with ``--clear`` empty) the dead-letter record of the store; with
    ``--requeue REF`` enqueue that letter's event again and remove it (exit 2, saying what
    to do, for an unknown ref or a letter that cannot be requeued)."""
    from harel.engine.deadletters import DEAD_LETTERS_ID, cleared, letters_of
    from harel.engine.requeue import RequeueError, requeue

    with _store(args.store, create=False) as store:
        if args.requeue is not None:
            try:
                print(requeue(store, args.requeue).describe())
            except RequeueError as err:
                raise CommandError(str(err)) from None
            print("a running `harel worker` on this store delivers it", file=sys.stderr)
            return 0
        record = store.load(DEAD_LETTERS_ID)
        letters, total = letters_of(record)
        if args.clear:
            if record is not None and total:
                store.commit(cleared(record), [])
            print(f"cleared {total} dead letter(s)")
            return 0
    if args.json:
        json.dump([letter.as_dict() for letter in letters], sys.stdout, indent=2)
        print()
        return 0
    if not letters:
        print("no dead letters")
        return 0
    header = ("REF", "TARGET", "EVENT", "EVENT ID", "ATTEMPTS", "ERROR")
    rows = [
        (
            letter.ref,
            letter.target_id or "-",
            letter.event_kind or "-",
            letter.event_id or "-",
            str(letter.attempts),
            letter.error,
        )
        for letter in letters
    ]
    _print_table(header, rows)
    if total > len(letters):
        print(f"({total - len(letters)} older dead letter(s) no longer kept)")
    return 0
