"""A group member's weights (tiering.job.group): a table weighs its log's size class."""

from __future__ import annotations

import pytest

from tests.unit.job.catalog import Catalog
from tiering.job.group import log_size_classes

pytestmark = pytest.mark.unit


def test_a_tables_weight_is_its_logs_size_class():
    store = Catalog(ends={"quiet": [0, 0], "small": [2, 1], "big": [1 << 19, 1 << 19]})

    assert log_size_classes(store, ["quiet", "small", "big"]) == {"quiet": 1, "small": 2, "big": 21}
