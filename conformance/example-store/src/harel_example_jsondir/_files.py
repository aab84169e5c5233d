"""Disk IO of a jsondir directory: the lock, atomic file replacement and the commit journal.

Guarantees:

* Every operation runs under one :class:`filelock.FileLock` on ``<dir>/.lock``; it excludes
  other processes, other store objects and other threads alike (threads of one process
  first queue on a process-wide lock per directory, which spares them polling the file).
* A file is never written in place: its new text goes to a temporary file in the same folder,
  is flushed and fsynced, then ``os.replace``-d over the old one (and the folder fsynced), so a
  reader or a crash sees the old text or the new text, never a torn mix.
* A write touching several files first replaces ``journal.json`` with the full list of new
  texts — that replace is the commit point — then applies them and removes the journal.  A
  journal left by a crash is re-applied (the writes are idempotent) by the next operation
  before it reads anything.  An exception before the journal is in place leaves every file
  as it was; temp files a crash left behind are deleted when a store opens the directory.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import filelock
from harel.store.errors import StoreError, StoreUnavailable

from harel_example_jsondir import _layout
from harel_example_jsondir._plan import FORMAT, Write

_POLL_SECONDS = 0.002
_log = logging.getLogger(__name__)

_PROCESS_LOCKS: dict[Path, threading.Lock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


def _process_lock(root: Path) -> threading.Lock:
    with _PROCESS_LOCKS_GUARD:
        return _PROCESS_LOCKS.setdefault(root, threading.Lock())


def _forget_process_locks() -> None:
    # A forked child must not inherit a lock some thread of its parent was holding.
    global _PROCESS_LOCKS_GUARD
    _PROCESS_LOCKS_GUARD = threading.Lock()
    _PROCESS_LOCKS.clear()


os.register_at_fork(after_in_child=_forget_process_locks)


class JsonDirectory:
    """One jsondir directory on disk (creates it and its folders when missing)."""

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool, lock_timeout: float) -> None:
        self.root = Path(root).absolute()
        self.fsync = fsync
        self.lock_timeout = lock_timeout
        try:
            for folder in (self.root, self.root / _layout.EXECUTIONS, self.root / _layout.TRACES):
                folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot create the jsondir directory {self.root}: {exc}"
            ) from exc
        self._lock = filelock.FileLock(
            self.root / _layout.LOCK,
            timeout=lock_timeout,
            poll_interval=_POLL_SECONDS,
            preserve_lock_file=True,
        )
        with self.locked():
            self._sweep_temp_files()

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the directory's lock (re-applying a crashed commit's journal first).

        Threads of one process queue on a process-wide lock per directory first, so only one
        of them at a time polls the file lock, which then only arbitrates between processes.
        """
        thread_lock = _process_lock(self.root)
        if not thread_lock.acquire(timeout=self.lock_timeout):
            raise self._timeout()
        try:
            try:
                self._lock.acquire()
            except filelock.Timeout as exc:
                raise self._timeout() from exc
            try:
                self.recover()
                yield
            finally:
                self._lock.release()
        finally:
            thread_lock.release()

    def _timeout(self) -> StoreUnavailable:
        return StoreUnavailable(
            f"the lock on {self.root} was not released within {self.lock_timeout}s; "
            "another process or thread holds it — retry, or raise lock_timeout"
        )

    def path(self, relative: str) -> Path:
        """Absolute path of a file given relative to the directory."""
        return self.root / relative

    def read(self, relative: str) -> str | None:
        """A file's text, ``None`` when it does not exist."""
        try:
            return self.path(relative).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                return None
            raise StoreUnavailable(f"cannot read {self.path(relative)}: {exc}") from exc

    def write_atomic(self, relative: str, text: str) -> None:
        """Replace one file with ``text`` atomically (temp file, fsync, ``os.replace``)."""
        target = self.path(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f"{_layout.TEMP_PREFIX}{uuid.uuid4().hex}")
        try:
            with open(temp, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                if self.fsync:
                    os.fsync(handle.fileno())
            os.replace(temp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
        self._sync_folder(target.parent)

    def transact(self, writes: Sequence[Write]) -> None:
        """Make every write of ``writes`` visible together, or none of them."""
        if len(writes) == 1:
            self.write_atomic(*writes[0])
            return
        journal = json.dumps({"format": FORMAT, "writes": [list(w) for w in writes]})
        self.write_atomic(_layout.JOURNAL, journal)
        # The journal is in place: the writes are committed.  If applying them fails now, the
        # next operation re-applies the journal, so this one still succeeded.
        try:
            self._apply_journal(writes)
        except OSError as exc:
            _log.warning("jsondir %s: journal left for the next operation: %s", self.root, exc)

    def recover(self) -> None:
        """Finish a commit whose journal a crash left behind (no-op without a journal)."""
        text = self.read(_layout.JOURNAL)
        if text is None:
            return
        try:
            data = json.loads(text)
            writes = [(str(path), str(body)) for path, body in data["writes"]]
            if data.get("format") != FORMAT:
                raise ValueError(f"journal format {data.get('format')!r}")
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"{self.path(_layout.JOURNAL)} is not a journal this release can replay ({exc}); "
                "restore the directory from a backup"
            ) from exc
        try:
            self._apply_journal(writes)
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot apply the pending journal of {self.root}: {exc}; "
                "fix the cause (disk space, permissions) and retry"
            ) from exc

    def _sweep_temp_files(self) -> None:
        # Under the lock no write is in flight, so a temp file is what a crash left behind.
        for stray in self.root.rglob(f"{_layout.TEMP_PREFIX}*"):
            with contextlib.suppress(OSError):
                stray.unlink()

    def _apply_journal(self, writes: Sequence[Write]) -> None:
        for relative, text in writes:
            self.write_atomic(relative, text)
        self.path(_layout.JOURNAL).unlink()
        self._sync_folder(self.root)

    def _sync_folder(self, folder: Path) -> None:
        if not self.fsync:
            return
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
