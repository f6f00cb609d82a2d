"""Names and transaction versions every lake writer and the position reader agree on."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.support.tables import kv_table
from tiering.delta_log.layout import app_id, epoch_round, lake_directory, lake_schema, txn_version

pytestmark = pytest.mark.unit


def test_txn_version_grows_with_round_and_with_epoch_over_any_round():
    assert txn_version(1, 1) < txn_version(1, 2) < txn_version(2, 0)
    assert txn_version(1, 2**32 - 1) < txn_version(2, 0)
    assert txn_version(7, 42) == 7 * 2**32 + 42


@pytest.mark.parametrize("epoch, round_id", [(0, 0), (1, 5), (3, 2**32 - 1), (2**31 - 1, 9)])
def test_epoch_round_inverts_txn_version(epoch, round_id):
    assert epoch_round(txn_version(epoch, round_id)) == (epoch, round_id)


@pytest.mark.parametrize(
    "epoch, round_id, message", [(-1, 0, "epoch"), (0, -1, "round"), (0, 2**32, "round"), (2**31, 0, "too large")]
)
def test_txn_version_refuses_what_it_cannot_order(epoch, round_id, message):
    with pytest.raises(ValueError, match=message):
        txn_version(epoch, round_id)


def test_app_id():
    assert app_id("job-a", "orders") == "tiering/job-a/orders"


def test_lake_schema_puts_system_columns_after_user_columns():
    table = kv_table({"k": "int", "d": "decimal(5,1)", "at": "timestamp"}, key=("k",), num_buckets=2)
    assert lake_schema(table) == pa.schema(
        [
            ("k", pa.int32()),
            ("d", pa.decimal128(5, 1)),
            ("at", pa.timestamp("us", tz="UTC")),
            ("__bucket", pa.int32()),
            ("__offset", pa.int64()),
            ("__timestamp", pa.timestamp("us", tz="UTC")),
        ]
    )


@pytest.mark.parametrize(
    ("table", "directory"),
    [
        ("orders", "orders"),
        ("with space", "with space"),
        ("ünïcödé", "ünïcödé"),
        ("50%", "50~25"),
        ("%2e%2e", "~252e~252e"),
        ("?query#frag", "~3Fquery~23frag"),
        ("[glob]?", "~5Bglob~5D~3F"),
        ("~user", "~7Euser"),
    ],
)
def test_a_lake_directory_is_the_name_with_url_specials_escaped(table, directory):
    assert lake_directory(table) == directory


def test_lake_directories_of_distinct_names_are_distinct():
    names = ["a~25", "a%", "a~7E25", "~", "%", "a", "a~"]
    assert len({lake_directory(n) for n in names}) == len(names)
