"""Read-only opens (``open_store(url, create=False)``, ``harel list``) create nothing in
MongoDB: reads of the schema record (and one ``executions`` document), no database, no
collection, no index (issue 19).  Runs on mongomock: the URL's client is the harness's."""

from __future__ import annotations

from typing import Any

import pymongo
import pytest
from harel.cli import main
from harel.registry import open_store
from harel.store.errors import SchemaVersionError
from harel_store_mongo.testing import MongomockHarness

URL = "mongodb://mongomock.invalid/?db=harel_typo&connect_retries=0"


@pytest.fixture
def mock() -> MongomockHarness:
    return MongomockHarness(db="harel_typo")


@pytest.fixture(autouse=True)
def _url_opens_the_mock(mock: MongomockHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    def client(*args: Any, **kwargs: Any) -> Any:
        return mock.sync_client()

    monkeypatch.setattr(pymongo, "MongoClient", client)


def test_list_on_a_fresh_database_says_so_and_creates_nothing(
    mock: MongomockHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["list", "--store", URL])
    err = capsys.readouterr().err
    assert code == 2 and "there is no mongo store at mongodb://" in err
    assert "nothing was created" in err
    assert "harel_typo" not in mock.client.list_database_names()
    assert mock.database().list_collection_names() == []


def test_create_false_opens_the_store_once_created(mock: MongomockHarness) -> None:
    open_store(URL).close()
    assert mock.database().list_collection_names() != []
    store = open_store(URL, create=False)
    try:
        assert store.list_executions().items == []
    finally:
        store.close()


def test_documents_without_a_schema_record_count_as_a_store(mock: MongomockHarness) -> None:
    mock.database().get_collection("executions").insert_one({"_id": "legacy"})
    with pytest.raises(SchemaVersionError, match="no harel schema record"):
        open_store(URL, create=False)  # found, so opened: the open reports the foreign layout
