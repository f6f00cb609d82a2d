"""Starting a Fluss cluster without its jars: one line naming the jar and where it comes from."""

from __future__ import annotations

import pytest

from tiering.errors import FlussClusterError
from tiering.fluss.cluster import FlussCluster

pytestmark = pytest.mark.unit


def test_a_jar_folder_without_fluss_server_is_refused_naming_the_jar_and_the_script(tmp_path):
    (tmp_path / "lib").mkdir()

    with pytest.raises(FlussClusterError) as refused:
        FlussCluster(tmp_path / "lib").start(tmp_path / "cluster")

    assert str(refused.value) == (
        f"cannot start Fluss: no fluss-server-*.jar in {tmp_path / 'lib'} (scripts/setup_fluss.sh fetches it)"
    )
    assert not (tmp_path / "cluster").exists()
