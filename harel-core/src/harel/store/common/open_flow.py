"""One open flow for every durable backend: probe, verdict, lock, create or upgrade, record.

A backend subclasses :class:`OpenSteps` with its own requests (each step a sans-IO generator,
driven like its other plans) and :func:`open_flow` runs them in the one shared order:

1. ``probe`` the stored version (:class:`Stored`) and judge it (:meth:`OpenSteps.verdict`: a
   layout this release cannot read raises ``SchemaVersionError`` before anything is written);
   ``"ready"`` ends the open.
2. ``lock`` (default: none, for writes that are conditional or atomic by themselves); under a
   lock, probe and judge again, since another opener may have finished first.
3. ``create`` or ``upgrade``, then ``record`` the version, then ``unlock``.
4. :class:`OpenRaced` from a step (a conditional write lost to another opener; unlocked flows
   only) starts again from the probe, at most :attr:`OpenSteps.rounds` times; any other failure
   after the lock goes to ``recover``, and propagates unless that answers ``True``.
"""

from __future__ import annotations

from collections.abc import Collection, Generator
from typing import Any, NamedTuple, TypeVar

from harel.store.common.schema_version import SchemaVerdict, schema_verdict
from harel.store.errors import StoreUnavailable

T = TypeVar("T")
Step = Generator[Any, Any, T]
"""One step of an open: yields the backend's requests, returns ``T``."""


class Stored(NamedTuple):
    """What a probe found: the stored layout ``version`` (``None``: an empty store) and the
    release that wrote it (``None`` when not recorded)."""

    version: int | None = None
    written_by: str | None = None


class OpenRaced(Exception):
    """A step's conditional write lost to another opener: the flow probes again."""


class OpenSteps:
    """A backend's steps of :func:`open_flow`: it sets the four attributes and provides
    :meth:`probe`, :meth:`create` and :meth:`upgrade`; the other steps default to nothing to do.
    Steps may keep what they learn (a shard count) on the instance."""

    current: int  # the layout version this release reads and writes
    upgrades: Collection[int]  # the older versions it upgrades in place
    distribution: str  # the backend's (the writer, and the ``pip install`` line)
    where: str  # names the store in messages
    rounds: int = 1
    """How many times the flow probes at most (each :class:`OpenRaced` starts over)."""

    def probe(self) -> Step[Stored]:
        """The stored layout version (raising for a foreign or damaged layout)."""
        raise NotImplementedError

    def verdict(self, found: Stored) -> SchemaVerdict:
        """What ``found`` needs (:func:`~harel.store.author.schema_verdict`'s answer)."""
        return schema_verdict(
            found.version,
            current=self.current,
            upgrades=self.upgrades,
            where=self.where,
            distribution=self.distribution,
            written_by=found.written_by,
        )

    def lock(self) -> Step[bool]:
        """Take the backend's lock; whether one was taken (default: none needed)."""
        yield from ()
        return False

    def create(self) -> Step[None]:
        """Create the current layout in an empty store."""
        raise NotImplementedError

    def upgrade(self, version: int) -> Step[None]:
        """Bring a layout of ``version`` (one of :attr:`upgrades`) to :attr:`current`."""
        raise NotImplementedError

    def record(self, found: Stored) -> Step[None]:
        """Record the current version over ``found`` (default: ``create``/``upgrade`` did)."""
        yield from ()

    def unlock(self) -> Step[None]:
        """Release the lock (commit); runs after a create, an upgrade or a second probe."""
        yield from ()

    def recover(self, error: Exception) -> Step[bool]:
        """After ``error`` past the lock: roll back; whether the layout is ready all the same."""
        yield from ()
        return False


def open_flow(steps: OpenSteps) -> Step[SchemaVerdict]:
    """Bring the store to the current layout with ``steps`` (module docstring); the verdict
    acted on (``"ready"``: nothing written)."""
    for _ in range(steps.rounds):
        found = yield from steps.probe()
        verdict = steps.verdict(found)
        if verdict == "ready":
            return verdict
        locked = yield from steps.lock()
        try:
            if locked:
                found = yield from steps.probe()
                verdict = steps.verdict(found)
            if verdict == "create":
                yield from steps.create()
            elif verdict == "upgrade":
                yield from steps.upgrade(int(found.version or 0))
            if verdict != "ready":
                yield from steps.record(found)
            yield from steps.unlock()
        except OpenRaced:
            continue
        except Exception as error:
            if not (yield from steps.recover(error)):
                raise
        return verdict
    raise StoreUnavailable(
        f"{steps.where}: other openers kept changing the layout ({steps.rounds} tries); "
        "open the store again"
    )
