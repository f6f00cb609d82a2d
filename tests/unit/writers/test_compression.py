"""``lake.compression`` in delta-rs's terms: a file delta-rs writes (a change-feed MERGE, a
compaction) has the codec a file pyarrow writes (a bucket rewrite) has, for every allowed value."""

from __future__ import annotations

import typing

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from tests.support.lake import codecs
from tiering.conf.model import Compression
from tiering.writers.compression import delta_rs_properties

pytestmark = pytest.mark.unit

ROWS = pa.table({"id": pa.array(range(1000), pa.int64()), "name": [f"n{i % 7}" for i in range(1000)]})


@pytest.mark.parametrize("compression", typing.get_args(Compression))
def test_delta_rs_writes_the_codec_pyarrow_writes(tmp_path, compression):
    pq.write_table(ROWS, tmp_path / "pyarrow.parquet", compression=compression)
    write_deltalake(str(tmp_path / "delta"), ROWS, writer_properties=delta_rs_properties(compression))
    (written,) = (tmp_path / "delta").glob("*.parquet")

    assert codecs(pq.read_metadata(written)) == codecs(pq.read_metadata(tmp_path / "pyarrow.parquet")) != {"UNKNOWN"}
