"""Read-only opens (``open_store(url, create=False)``, ``harel list``) create no DynamoDB
table, even with ``create_table=true`` in the URL: one ``DescribeTable`` (issue 19)."""

from __future__ import annotations

import pytest
from harel.cli import main
from harel.registry import open_store
from harel_store_dynamodb.testing import DynamoDBHarness


def table_exists(harness: DynamoDBHarness) -> bool:
    client = harness._client()
    try:
        client.describe_table(TableName=harness.table)
    except client.exceptions.ResourceNotFoundException:
        return False
    return True


def test_list_on_a_missing_table_says_so_and_creates_no_table(
    harness: DynamoDBHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "create_table=true" in harness.url()
    code = main(["list", "--store", harness.url()])
    err = capsys.readouterr().err
    assert code == 2 and f"there is no dynamodb store at dynamodb://{harness.table}" in err
    assert "nothing was created" in err
    assert not table_exists(harness)


def test_create_false_opens_the_store_once_created(harness: DynamoDBHarness) -> None:
    open_store(harness.url()).close()
    assert table_exists(harness)
    store = open_store(harness.url(), create=False)
    try:
        assert store.list_executions().items == []
    finally:
        store.close()
