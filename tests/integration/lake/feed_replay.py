"""Reading a lake table's change data feed back, as a downstream consumer of it would."""

from __future__ import annotations

import pyarrow as pa

from tiering.lakestate.lake import Lake

FEED_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def read_feed(lake: Lake, table: str, start: int, end: int | None = None) -> list[dict]:
    """The feed of versions ``[start, end]`` (to the newest without ``end``), read by delta-rs."""
    dt = lake.load(table).dt
    return pa.table(dt.load_cdf(starting_version=start, ending_version=end).read_all()).to_pylist()


def replayed(changes: list[dict], key: str = "id") -> dict[object, dict]:
    """The rows an empty table ends with when ``changes`` are applied version by version; a
    delete or a pre-image must match the row it replaces."""
    rows: dict[object, dict] = {}
    for change in sorted(changes, key=lambda c: (c["_commit_version"], c["_change_type"] != "delete")):
        row = {k: v for k, v in change.items() if k not in FEED_COLUMNS}
        if change["_change_type"] == "delete":
            assert rows.pop(row[key]) == row
        elif change["_change_type"] == "update_preimage":
            assert rows[row[key]] == row
        else:
            rows[row[key]] = row
    return rows
