"""``local=moto``: the endpoint of this process's moto server.

The server is test support and lives in the test-only distribution (``harel_testing.dynamodb``,
``pip install harel-testing[dynamodb]``, which brings ``moto[server]``); without it a store
opened with ``local=moto`` raises :class:`~harel.store.errors.HarelTestingNotInstalled`.
"""

from __future__ import annotations

from harel.store.author import needs_harel_testing


def moto_endpoint() -> str:
    """The endpoint of this process's shared moto server (started on first use); raises
    ``HarelTestingNotInstalled`` naming ``pip install harel-testing[dynamodb]`` without it."""
    with needs_harel_testing("dynamodb"):
        from harel_testing.dynamodb import moto_endpoint as shared
    return shared()
