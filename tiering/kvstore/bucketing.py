"""Which bucket a row lives in: a stable hash of its primary key.

The function is part of the protocol (other writers must place rows identically), so it is
spelled out and never Python's ``hash()``, which is salted per process:

    key   = JSON array of the primary-key values, in primary-key order, compact separators,
            non-ASCII kept, dates/timestamps/decimals as their ISO/str form
    bucket = crc32(utf-8 bytes of key) mod num_buckets

Example: primary key ``(id,)`` with ``id = 42`` -> ``crc32(b"[42]") % num_buckets``.
"""

from __future__ import annotations

import json
import zlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

__all__ = ["key_bytes", "bucket_of", "rows_by_bucket"]


def key_bytes(row: Mapping[str, Any], primary_key: Sequence[str]) -> bytes:
    """The canonical encoding of a row's primary key, used for hashing and as the key identity."""
    return _encoded([row[c] for c in primary_key])


def bucket_of(row: Mapping[str, Any], primary_key: Sequence[str], num_buckets: int) -> int:
    """The bucket a row belongs to (see the module docstring for the function)."""
    return zlib.crc32(key_bytes(row, primary_key)) % num_buckets


def rows_by_bucket(
    data: pa.Table, primary_key: Sequence[str], num_buckets: int
) -> tuple[list[Any], dict[int, list[int]]]:
    """:func:`bucket_of` for every row of ``data`` at once: each row's key identity (the value of
    a one-column key, else the tuple of its values) and the row indices per bucket."""
    columns = [data.column(c) for c in primary_key]
    groups: dict[int, list[int]] = defaultdict(list)
    if len(columns) > 1:
        keys: list[Any] = list(zip(*(c.to_pylist() for c in columns), strict=True))
        for i, k in enumerate(keys):
            groups[zlib.crc32(_encoded(k)) % num_buckets].append(i)
    elif pa.types.is_integer(columns[0].type) and columns[0].null_count == 0:
        # the encoding of one integer is "[<digits>]": formatting it directly skips json.dumps
        # per row, the bulk of an ingest's CPU time, and gives the same buckets
        keys = columns[0].to_pylist()
        for i, k in enumerate(keys):
            groups[zlib.crc32(b"[%d]" % k) % num_buckets].append(i)
    else:
        keys = columns[0].to_pylist()
        for i, k in enumerate(keys):
            groups[zlib.crc32(_encoded([k])) % num_buckets].append(i)
    return keys, groups


def _encoded(values: Sequence[Any]) -> bytes:
    """The key encoding of the module docstring (a tuple encodes as the list it holds)."""
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8")
