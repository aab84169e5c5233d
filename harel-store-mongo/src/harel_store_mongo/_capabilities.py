"""The MongoDB backend's declared capabilities (no driver import, so the plugin can use them)."""

from __future__ import annotations

from harel.store.contract import Capabilities

CAPABILITIES = Capabilities(
    persistent=True,
    multi_process=True,
    ordered_listing=True,
    exact_pages=True,
)
"""Data lives in the server (how it survives a *server* crash is the write concern's and the
journal's business), any number of processes share it (every commit is one single-document
update with the version CAS in its filter), listing is a keyset over ``_id`` with exact pages.

The test suite here runs on mongomock, an in-process stand-in: its harness declares neither
``persistent`` nor ``multi_process`` (see :mod:`harel_store_mongo.testing`); with
``HAREL_TEST_MONGO_URL`` the kit verifies both claims on a real server."""
