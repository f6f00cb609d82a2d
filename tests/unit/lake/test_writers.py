"""The writer factory refuses what it cannot build before a round starts."""

from __future__ import annotations

import pytest

from tiering.errors import ConfigError
from tiering.lake.writers import make_round_writer

pytestmark = pytest.mark.unit


def test_an_unknown_writer_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown writer 'hudi'") as err:
        make_round_writer(None, "/tmp/lake", "job", "hudi")
    assert err.value.problems[0].startswith("lake.writer")
