"""The Parquet codec of the lake files the job writes (``lake.compression``), in each writer's terms.

Failure mode this prevents: one setting spelt two ways drifting apart. The bucket rewrites write
with pyarrow, whose names the setting uses as they are; a change-feed MERGE and a compaction are
written by delta-rs, which names the same codecs otherwise: pyarrow's ``lz4`` is Parquet's
LZ4_RAW (delta-rs's ``LZ4`` is the deprecated Hadoop framing), its ``none`` is ``UNCOMPRESSED``.
Without explicit properties delta-rs picks its own codec (snappy for a MERGE, zstd for a
compaction), whatever the setting says. Levels are each library's default (zstd 1 in both).
"""

from __future__ import annotations

from typing import Literal

from deltalake import WriterProperties

__all__ = ["delta_rs_properties"]

_DELTA_RS: dict[str, Literal["ZSTD", "SNAPPY", "LZ4_RAW", "GZIP", "UNCOMPRESSED"]] = {
    "zstd": "ZSTD",
    "snappy": "SNAPPY",
    "lz4": "LZ4_RAW",
    "gzip": "GZIP",
    "none": "UNCOMPRESSED",
}


def delta_rs_properties(compression: str) -> WriterProperties:
    """delta-rs writer properties writing ``compression`` (a ``lake.compression`` value)."""
    return WriterProperties(compression=_DELTA_RS[compression])
