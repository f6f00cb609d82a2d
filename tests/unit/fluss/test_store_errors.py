"""pyfluss's errors as the store seam's: what is retryable, what names a missing table."""

from __future__ import annotations

import pytest

from tiering.errors import StoreError, StoreUnavailableError, TableNotFoundError

fluss = pytest.importorskip("fluss")

from tiering.fluss.store import _store_error as store_error  # noqa: E402  (pyfluss present)


@pytest.mark.parametrize(
    ("message", "code", "kind"),
    [
        ("server 0 is not leader or follower for TableBucket{tableId=2, bucket=2}", 12, StoreUnavailableError),
        # pyfluss 1.0's client says so of a new table's bucket before its leader is known, unflagged
        (
            "Fluss hitting unexpected error No leader found for table bucket: TableBucket(table_id=2, bucket=0).",
            -2,
            StoreUnavailableError,
        ),
        # pyfluss 1.0's client says so of a table whose metadata it lost to a tablet server restart
        ("Table info not found for db.orders", 15, StoreUnavailableError),
        ("Table 'db.orders' does not exist.", 7, TableNotFoundError),
        ("Table db.orders already exists.", 8, StoreError),
    ],
)
def test_a_fluss_error_is_the_seams_error_its_kind_says(message, code, kind):
    error = store_error(fluss.FlussError(message, code), "127.0.0.1:9123", "orders")

    assert type(error) is kind and error.table == "orders"
    assert error.message.startswith("Fluss at 127.0.0.1:9123: ")
