"""How the operator commands draw what they read (tiering.ops.status_view), without services:
a watch refuses an unusable lake root once, before its first refresh."""

from __future__ import annotations

import io
import threading

import pytest
from rich.console import Console

from tiering.conf.loader import load_config
from tiering.errors import ConfigError
from tiering.ops.status_view import watch_status

pytestmark = pytest.mark.unit


def test_a_watch_refuses_an_unusable_lake_root_before_its_first_refresh(tmp_path):
    settings = {
        "job.name": "j",
        "job.checkpoint": str(tmp_path / "ckpt"),
        "kvstore.url": "http://127.0.0.1:1",
        "zookeeper.hosts": "127.0.0.1:1",
        "lake.root": "ftp://lake/tables",
    }
    out, stop = io.StringIO(), threading.Event()
    threading.Timer(3.0, stop.set).start()  # a watch that refreshes instead ends here

    with pytest.raises(ConfigError, match="lake.root: 'ftp://lake/tables'"):
        watch_status(load_config(None, {}, settings), 0.1, Console(file=out), timeout_s=0.5, stop=stop)

    assert out.getvalue() == "", "no refresh was drawn"
    assert not (tmp_path / "ckpt").exists()
