"""Fixtures of the SQLite backend's tests: the conformance harness, store factories and the
SQL family's shared suite's ``sql_backend`` (see :mod:`harel.store.common.sql.testing`)."""

from harel.store.common.sql.testing import file_fixtures
from harel_store_sqlite.testing import FILE_BACKEND

anyio_backend, harel_harness, db_path, store, astore, sql_backend = file_fixtures(FILE_BACKEND)
