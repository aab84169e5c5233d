"""Operating-system errors of the file layer mapped to ``harel.store.errors``.

No ``OSError`` (nor ``UnicodeError`` from a path) leaves a contract method:

* a problem that may clear up by itself or by an operator's fix while workers back off — disk
  full, quota, I/O error, too many open files, permission denied, read-only file system, a
  busy or timed-out lock — is :class:`~harel.store.errors.StoreUnavailable` (retryable);
* a store folder or file of the wrong kind (a folder where a file belongs, a file where a
  folder belongs) is :class:`~harel.store.errors.StoreCorrupted`;
* a directory that cannot be a store at all (its path names a file, is too long, holds a NUL
  or an unencodable character) is :class:`~harel.store.errors.StoreConfigError`.

Messages say what to do and name the file, never the exception's class.
"""

from __future__ import annotations

import errno
from pathlib import Path

from harel.store.errors import StoreConfigError, StoreCorrupted, StoreError, StoreUnavailable

_ADVICE = {
    errno.ENOSPC: "free disk space and retry",
    errno.EDQUOT: "raise the disk quota or free space and retry",
    errno.EACCES: "give this process read and write access to the directory",
    errno.EPERM: "give this process read and write access to the directory",
    errno.EROFS: "mount the file system read-write",
    errno.EMFILE: "raise the open-file limit or close other files",
    errno.ENFILE: "raise the open-file limit or close other files",
}
_WRONG_KIND = frozenset({errno.ENOTDIR, errno.EISDIR, errno.ELOOP})
_NOT_A_DIRECTORY = frozenset({errno.ENOTDIR, errno.EEXIST, errno.ENAMETOOLONG, None})


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or "operating-system error"


def os_error(exc: OSError, doing: str) -> StoreError:
    """The typed error for ``exc`` raised while ``doing`` (e.g. ``"write state.json in /d"``)."""
    if exc.errno in _WRONG_KIND:
        return StoreCorrupted(
            f"cannot {doing}: {_reason(exc)}; the directory's layout is damaged (a file where "
            "a folder belongs or the reverse): restore it from a backup"
        )
    advice = _ADVICE.get(exc.errno or 0, "check the file system and retry")
    return StoreUnavailable(f"cannot {doing}: {_reason(exc)}; {advice}")


def open_error(exc: OSError | ValueError, root: Path | str) -> StoreError:
    """The typed error for a directory that cannot be created or opened as a store."""
    if isinstance(exc, OSError) and exc.errno not in _NOT_A_DIRECTORY:
        return os_error(exc, f"open the jsondir directory {root}")
    reason = _reason(exc) if isinstance(exc, OSError) else str(exc)
    return StoreConfigError(
        f"{str(root)[:300]!r} cannot be a jsondir directory ({reason}); "
        "name a directory path (or a missing one to create) with jsondir:///abs/dir"
    )
