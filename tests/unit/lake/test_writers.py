"""The writer factory refuses what it cannot build before a round starts."""

from __future__ import annotations

import pytest

from tiering.errors import ConfigError
from tiering.lake.writers import make_round_writer

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name, message", [("delta-spark", "not implemented yet"), ("hudi", "unknown writer 'hudi'")])
def test_unavailable_writers_are_config_errors(name, message):
    with pytest.raises(ConfigError, match=message) as err:
        make_round_writer(None, "/tmp/lake", "job", name)
    assert err.value.problems[0].startswith("lake.writer")
