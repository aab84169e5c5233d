"""Read-only opens (``open_store(url, create=False)``, ``harel list``) make no jsondir
directory: the plugin's ``exists`` hook looks for the format file (issue 19)."""

from __future__ import annotations

from pathlib import Path

import pytest
from harel.cli import main
from harel.registry import get_backend, open_store
from harel.store.errors import StoreNotFound


def test_the_plugin_declares_its_exists_hook() -> None:
    assert get_backend("jsondir").exists == "harel_example_jsondir._exists:store_exists"


def test_list_on_a_missing_directory_says_so_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["list", "--store", f"jsondir://{tmp_path}/typo"])
    err = capsys.readouterr().err
    assert code == 2 and "there is no jsondir store at jsondir://" in err
    assert "nothing was created" in err
    assert list(tmp_path.iterdir()) == []


def test_a_directory_without_the_format_file_is_no_store_and_stays_empty(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreNotFound, match="there is no jsondir store"):
        open_store(f"jsondir://{tmp_path}/empty", create=False)
    assert list((tmp_path / "empty").iterdir()) == []


def test_create_false_opens_the_store_once_created(tmp_path: Path) -> None:
    url = f"jsondir://{tmp_path}/app"
    open_store(url).close()
    assert (tmp_path / "app" / "state.json").is_file()
    store = open_store(url, create=False)
    try:
        assert store.list_executions().items == []
    finally:
        store.close()
