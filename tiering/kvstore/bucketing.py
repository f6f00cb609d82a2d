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
from collections.abc import Mapping, Sequence
from typing import Any


def key_bytes(row: Mapping[str, Any], primary_key: Sequence[str]) -> bytes:
    """The canonical encoding of a row's primary key, used for hashing and as the key identity."""
    return json.dumps(
        [row[c] for c in primary_key], separators=(",", ":"), ensure_ascii=False, default=str
    ).encode("utf-8")


def bucket_of(row: Mapping[str, Any], primary_key: Sequence[str], num_buckets: int) -> int:
    """The bucket a row belongs to (see the module docstring for the function)."""
    return zlib.crc32(key_bytes(row, primary_key)) % num_buckets
