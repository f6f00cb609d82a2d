"""The name rule (tiering.kvstore.names) and where names meet paths: the store's table
directories and the client's URLs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tiering.kvstore.client import segment
from tiering.kvstore.models import AddColumnRequest, TableInfo, TableSpec
from tiering.kvstore.names import check_column_name, check_table_name, duplicate_names
from tiering.kvstore.server.files import table_dir

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "must not be empty"),
        (".", "is a relative path component"),
        ("..", "is a relative path component"),
        ("../x", "contains the path separator '/'"),
        ("a\\b", "contains the path separator '\\\\'"),
        ("a\x00b", "contains the control character '\\x00'"),
        ("a\nb", "contains the control character '\\n'"),
        (" a", "starts or ends with whitespace"),
        ("a\u3000", "starts or ends with whitespace"),
        ("a" * 256, "is 256 bytes long in UTF-8; at most 255 are allowed"),
        ("€" * 86, "is 258 bytes long in UTF-8"),
    ],
)
def test_unsafe_table_names_are_refused_saying_why(name, why):
    with pytest.raises(ValueError) as refused:
        check_table_name(name)
    assert str(refused.value).startswith(f"table name {name[:80]!r} {why}")


@pytest.mark.parametrize("name", ["it's", "a b", "a.b", "...", "select", "表", "`x`", "a" * 255, "€" * 85, "%2F"])
def test_other_table_names_are_data(name):
    assert check_table_name(name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("__bucket", "is reserved"),
        ("__", "is reserved"),
        ("", "must not be empty"),
        ("a\tb", "control character"),
        ("x" * 256, "at most 255"),
    ],
)
def test_reserved_and_unsafe_column_names_are_refused(name, why):
    with pytest.raises(ValueError, match=why):
        check_column_name(name)


def test_columns_differing_only_by_case_are_duplicates_as_in_spark():
    assert duplicate_names(["id", "Id", "name", "NAME", "x"]) == ["Id", "NAME"]
    with pytest.raises(ValidationError, match="duplicate column names .*\\['ID'\\]"):
        TableSpec(
            name="t",
            schema=[{"name": "id", "type": "int"}, {"name": "ID", "type": "int"}],
            primary_key=["id"],
            num_buckets=1,
        )


def test_only_nullable_columns_can_be_added():
    assert AddColumnRequest(name="x", type="LONG").type == "bigint"
    with pytest.raises(ValidationError, match="only nullable columns can be added"):
        AddColumnRequest(name="x", type="int", nullable=False)


def _info(name: str, table_id: int = 7) -> TableInfo:
    """Unvalidated: the layout must be safe even for a name the rule would refuse."""
    return TableInfo.model_construct(name=name, table_id=table_id)


def test_table_dirs_keep_the_old_layout_for_old_names_and_never_carry_a_nasty_name():
    remote = Path("/data/remote")
    assert table_dir(remote, _info("orders_2024-x")) == remote / "orders_2024-x-7"  # names valid before the rule
    assert table_dir(remote, _info("a" * 200)) == remote / f"{'a' * 200}-7"
    for nasty in ("../../etc", "a b*[c]?", "表", "...", "%2e", "a:b", "€" * 85):
        directory = table_dir(remote, _info(nasty))
        assert directory.parent == remote and len(directory.name.encode()) <= 255
        assert set(directory.name) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"), directory
    assert table_dir(remote, _info("a b", 1)) != table_dir(remote, _info("a_b", 2))  # the id keeps them apart


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("orders", "orders"),
        ("a/b", "a%2Fb"),
        ("..", "%2E%2E"),
        ("a.b", "a%2Eb"),
        ("?x#y", "%3Fx%23y"),
        ("50%", "50%25"),
        ("a b", "a%20b"),
        ("表", "%E8%A1%A8"),
    ],
)
def test_client_sends_a_name_as_one_url_segment(value, encoded):
    assert segment(value) == encoded
