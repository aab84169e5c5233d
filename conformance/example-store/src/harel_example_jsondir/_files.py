"""jsondir's "driver": the directory lock, atomic file replacement and the commit journal.

Guarantees:

* Every operation runs under one :class:`filelock.FileLock` on ``<dir>/.lock``; it excludes
  other processes, other store objects and other threads alike (threads of one process first
  queue on a process-wide lock per directory, which spares them polling the file).
* A file is never written in place: its new text goes to a temporary file in the same folder,
  is flushed and fsynced, then ``os.replace``-d over the old one (and the folder fsynced), so a
  reader or a crash sees the old text or the new text, never a torn mix.
* A write touching several files first replaces ``journal.json`` with the full list of new
  texts (and deletions) — that replace is the commit point — then applies them and removes the
  journal.  A journal left by a crash is re-applied (the writes are idempotent) by the next
  operation before it reads anything.  An error before the journal is in place leaves every
  file as it was; temp files a crash left behind are deleted when a store opens the directory.
* Only the files of the layout are ever written (:func:`~harel_example_jsondir._schema.
  is_store_file`): a journal naming any other path is refused whole, before any of it is
  applied, so a forged journal cannot write outside the directory; a store folder that is a
  symbolic link is refused at open (``os.replace`` and ``unlink`` never follow a file link).
* No ``OSError`` escapes: :mod:`harel_example_jsondir._errors` maps each one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import filelock
from harel.store.author import show
from harel.store.errors import StoreCorrupted, StoreError, StoreUnavailable

from harel_example_jsondir import _schema
from harel_example_jsondir._errors import open_error, os_error
from harel_example_jsondir._plan import Pause, Read, Request, Write

_POLL_SECONDS = 0.002
_log = logging.getLogger(__name__)

FileWrite = tuple[str, str | None]
"""``(relative path, new text)``; a ``None`` text deletes the file."""

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


def _journal_files(text: str) -> list[FileWrite]:
    """The writes of a journal, each checked to be a file of the layout (else ``ValueError``)."""
    data = _schema.check_format(json.loads(text), _schema.JOURNAL, _schema.SAME_FILES)
    files: list[FileWrite] = []
    for path, body in data["files"]:
        if not _schema.is_store_file(path):
            raise ValueError(f"it names {show(path)}, not a file of this store")
        if body is not None and not isinstance(body, str):
            raise ValueError(f"its text for {path} is not a string")
        files.append((path, body))
    return files


class JsonDirectory:
    """One jsondir directory on disk (creates it and its folders when missing)."""

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool, lock_timeout: float) -> None:
        try:
            self.root = Path(root).absolute()
            for folder in (self.root, *(self.root / name for name in _schema.FOLDERS)):
                folder.mkdir(parents=True, exist_ok=True)
                if not folder.is_dir():
                    raise NotADirectoryError(0, "not a directory", str(folder))
        except (OSError, ValueError) as exc:
            raise open_error(exc, os.fspath(root)) from exc
        for name in _schema.FOLDERS:
            if (self.root / name).is_symlink():  # would carry writes outside the directory
                raise StoreCorrupted(
                    f"{self.root / name} is a symbolic link; jsondir writes only inside its "
                    "directory: replace the link by the folder it points to"
                )
        self.fsync = fsync
        self.lock_timeout = lock_timeout
        self._held = False  # only touched by the thread holding the process-wide lock
        self._lock = filelock.FileLock(
            self.root / _schema.LOCK,
            timeout=lock_timeout,
            poll_interval=_POLL_SECONDS,
            preserve_lock_file=True,
        )
        with self.locked():
            self._sweep_temp_files()

    # -- the lock ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the directory's lock (re-applying a crashed commit's journal first)."""
        self._acquire()
        try:
            self.recover()
            yield
        finally:
            if self._held:  # a failed re-acquire (Pause) has released already
                self._release()

    def _acquire(self) -> None:
        thread_lock = _process_lock(self.root)
        if not thread_lock.acquire(timeout=self.lock_timeout):
            raise self._timeout()
        try:
            self._lock.acquire()
        except filelock.Timeout as exc:
            thread_lock.release()
            raise self._timeout() from exc
        except OSError as exc:
            thread_lock.release()
            raise os_error(exc, f"lock {self.root / _schema.LOCK}") from exc
        except BaseException:
            thread_lock.release()
            raise
        self._held = True

    def _release(self) -> None:
        self._held = False
        try:
            self._lock.release()
        finally:
            _process_lock(self.root).release()

    def _timeout(self) -> StoreUnavailable:
        return StoreUnavailable(
            f"the lock on {self.root} was not released within {self.lock_timeout}s; "
            "another process or thread holds it — retry, or raise lock_timeout"
        )

    # -- requests of a plan -----------------------------------------------------------------

    def execute(self, request: Request) -> Any:
        """Carry out one request of a plan (the lock must be held)."""
        if isinstance(request, Read):
            return self.read(request.path)
        if isinstance(request, Write):
            self.transact(request.files)
            return None
        if isinstance(request, Pause):
            self._release()
            self._acquire()
            self.recover()
            return None
        raise TypeError(f"not a jsondir request: {request!r}")

    def read(self, relative: str) -> str | None:
        """A file's text, ``None`` when it does not exist."""
        path = self.root / relative
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as exc:
            raise StoreCorrupted(f"{path} is not UTF-8 text; restore it from a backup") from exc
        except OSError as exc:
            raise os_error(exc, f"read {path}") from exc

    def transact(self, files: Sequence[FileWrite]) -> None:
        """Make every write of ``files`` visible together, or none of them."""
        for relative, _ in files:
            if not _schema.is_store_file(relative):  # a plan bug, never user data
                raise ValueError(f"{relative!r} is not a file of the jsondir layout")
        if len(files) == 1:
            self._apply_one(*files[0])
            return
        journal = json.dumps({"format": _schema.FORMAT, "files": [list(w) for w in files]})
        self._apply_one(_schema.JOURNAL, journal)
        # The journal is in place: the writes are committed.  If applying them fails now, the
        # next operation re-applies the journal, so this one still succeeded.
        try:
            self._apply_journal(files)
        except StoreError as exc:
            _log.warning("jsondir %s: journal left for the next operation: %s", self.root, exc)

    def recover(self) -> None:
        """Finish a write whose journal a crash left behind (no-op without a journal)."""
        text = self.read(_schema.JOURNAL)
        if text is None:
            return
        try:
            files = _journal_files(text)
        except (ValueError, KeyError, TypeError, StoreCorrupted) as exc:
            raise StoreCorrupted(
                f"{self.root / _schema.JOURNAL} cannot be replayed ({str(exc)[:200]}); nothing "
                "of it was applied: restore the directory from a backup, or delete the journal "
                "to drop the write it holds"
            ) from exc
        self._apply_journal(files)

    # -- files ------------------------------------------------------------------------------

    def _apply_journal(self, files: Sequence[FileWrite]) -> None:
        for relative, text in files:
            self._apply_one(relative, text)
        journal = self.root / _schema.JOURNAL
        try:
            journal.unlink()
        except OSError as exc:
            raise os_error(exc, f"remove {journal}") from exc
        self._sync_folder(self.root)

    def _apply_one(self, relative: str, text: str | None) -> None:
        target = self.root / relative
        try:
            if text is None:
                target.unlink(missing_ok=True)
            else:
                self._replace(target, text)
        except OSError as exc:
            raise os_error(exc, f"write {target}") from exc
        self._sync_folder(target.parent)

    def _replace(self, target: Path, text: str) -> None:
        temp = target.with_name(f"{_schema.TEMP_PREFIX}{uuid.uuid4().hex}")
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

    def _sync_folder(self, folder: Path) -> None:
        # Runs after a replace: the new file is already visible, so the write happened and is
        # reported as done; a failing folder sync only weakens its durability, said in the log.
        if not self.fsync:
            return
        try:
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            _log.warning("jsondir: cannot fsync the folder %s: %s", folder, exc)

    def _sweep_temp_files(self) -> None:
        # Under the lock no write is in flight, so a temp file is what a crash left behind.
        # Only the store's own folders: other folders under the root are not ours.
        for folder in (self.root, *(self.root / name for name in _schema.FOLDERS)):
            for stray in folder.glob(f"{_schema.TEMP_PREFIX}*"):
                with contextlib.suppress(OSError):
                    stray.unlink()
