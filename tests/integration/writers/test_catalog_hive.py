"""A tiered table registered in a Hive metastore (embedded Derby), in processes of their own
(tests/support/hive_catalog.py): a second process reads what the first registered, re-pointed after
the table was re-created. A module of its own: its processes take minutes, and the Delta lane's
workers take a module at a time.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from tests.support import hive_catalog
from tests.support.delta_spark import jars_configured
from tests.support.store_files import ts
from tests.support.writers import orders_rows
from tiering.delta_log.lake import Lake

pytestmark = pytest.mark.integration


@pytest.mark.delta_jars
def test_on_a_hive_metastore_another_process_reads_the_registered_table_re_pointed_after_a_re_creation(tmp_path):
    if not jars_configured():
        pytest.skip("the Delta jars are not on the classpath (scripts/test_delta.sh puts them there)")
    lake = Lake.at(str(tmp_path / "lake"))

    wrote = hive_catalog.run("write", tmp_path)
    found = hive_catalog.run("read", tmp_path)

    assert wrote["before"].rstrip("/").endswith(str(tmp_path / "elsewhere")), "the entry pointed at the copy"
    assert found["location"].removeprefix("file:").rstrip("/") == lake.path("orders"), "re-pointed in the metastore"
    expected = {
        i: (0, name, Decimal(price), offset, ts(offset)) for i, (name, price, offset) in hive_catalog.RECREATED.items()
    }
    assert orders_rows(lake) == expected
    read = {
        r["id"]: (
            r["__bucket"],
            r["name"],
            Decimal(r["price"]),
            r["__offset"],
            dt.datetime.fromisoformat(r["__timestamp"]),
        )
        for r in found["rows"]
    }
    assert read == expected and len(found["rows"]) == len(expected)
