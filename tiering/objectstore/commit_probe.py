"""Does the object store refuse a second commit of the same Delta version? Asked once at start-up.

Failure mode: an S3-compatible store that ignores ``If-None-Match: *`` lets a stale driver's
commit overwrite a newer driver's commit of the same version — silently, for ever. delta-rs
relies on that condition alone (no lock), so the only proof is to try: two handles of a probe
table loaded at the same version both commit the next one, without retries; the second must fail.
"""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import CommitProperties

__all__ = ["probe_conditional_put"]

_ROWS = pa.table({"probe": pa.array([1], pa.int64())})


def probe_conditional_put(uri: str, storage_options: dict[str, str] | None) -> bool:
    """True when the store refused the second commit of one version (``uri`` is a scratch table
    the caller removes afterwards)."""
    write_deltalake(uri, _ROWS, storage_options=storage_options)
    first = DeltaTable(uri, storage_options=storage_options)
    second = DeltaTable(uri, storage_options=storage_options)
    once = CommitProperties(max_commit_retries=0)
    write_deltalake(first, _ROWS, mode="append", commit_properties=once)
    try:
        write_deltalake(second, _ROWS, mode="append", commit_properties=once)
    except CommitFailedError:
        return True
    return False
