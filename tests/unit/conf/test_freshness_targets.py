"""[tables] freshness targets: the default, per-table overrides by name or glob, refused values."""

from __future__ import annotations

import pytest

from tiering.conf.loader import load_config
from tiering.errors import ConfigError

pytestmark = pytest.mark.unit

BASE = {
    "job.name": "j",
    "job.checkpoint": "/tmp/ckpt",
    "kvstore.url": "http://127.0.0.1:8420",
    "zookeeper.hosts": "127.0.0.1:2181",
    "lake.root": "/tmp/lake",
}


def test_an_exact_name_wins_then_the_first_matching_pattern_then_the_default(tmp_path):
    conf = tmp_path / "tiering.toml"
    conf.write_text(
        '[job]\nname = "j"\ncheckpoint = "/tmp/ckpt"\n[kvstore]\nurl = "http://127.0.0.1:8420"\n'
        '[zookeeper]\nhosts = "127.0.0.1:2181"\n[lake]\nroot = "/tmp/lake"\n'
        "[tables]\nfreshness_target_s = 120\n"
        'freshness_targets = { "audit_*" = 3600, "audit_eu" = 30, "a*" = 7, orders = 60.5 }\n'
    )
    tables = load_config(conf, {}, {}).tables
    assert [tables.freshness_target(t) for t in ("orders", "audit_eu", "audit_us", "accounts", "users")] == [
        60.5,
        30.0,
        3600.0,
        7.0,
        120.0,
    ]


def test_the_default_is_five_minutes_and_the_environment_sets_it():
    assert load_config(None, {}, BASE).tables.freshness_target("orders") == 300.0
    env = {"TIERING_TABLES_FRESHNESS_TARGET_S": "45"}
    assert load_config(None, env, BASE).tables.freshness_target("orders") == 45.0


@pytest.mark.parametrize(
    "targets", [{"orders": 0}, {"orders": -5}, {"orders": "60"}, {"orders": True}, {"": 60}, {"orders": float("inf")}]
)
def test_a_target_that_is_not_a_positive_number_is_refused_naming_the_key(targets):
    with pytest.raises(ConfigError, match=r"tables\.freshness_targets .*seconds > 0"):
        load_config(None, {}, {**BASE, "tables.freshness_targets": targets})


def test_a_zero_default_is_refused():
    with pytest.raises(ConfigError, match=r"tables\.freshness_target_s"):
        load_config(None, {}, {**BASE, "tables.freshness_target_s": 0})
