"""``tiering --set section.key=value``: text parsed like the environment's, validated like the file,
over every other layer; a bad key or value is a ConfigError naming the key and ``--set``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.config import write_conf
from tiering.conf.loader import load_config
from tiering.errors import ConfigError

pytestmark = pytest.mark.unit


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    return write_conf(
        tmp_path / "tiering.toml",
        job="orders-tiering",
        store_url="http://127.0.0.1:8420",
        zk_hosts="127.0.0.1:2181",
        trigger={"interval_s": 5.0},
    )


def problems(conf: Path, settings: dict[str, str]) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load_config(conf, env={}, settings=settings)
    return e.value.problems


def test_a_setting_wins_over_file_environment_and_overrides(conf: Path) -> None:
    env = {"TIERING_TRIGGER_INTERVAL_S": "7"}
    assert load_config(conf, env=env, overrides={"trigger.interval_s": 9}).trigger.interval_s == 9.0
    config = load_config(conf, env=env, overrides={"trigger.interval_s": 9}, settings={"trigger.interval_s": "11"})
    assert config.trigger.interval_s == 11.0


def test_settings_are_parsed_by_the_key_type(conf: Path) -> None:
    config = load_config(
        conf,
        env={},
        settings={
            "trigger.available_now": "yes",
            "tables.include": "orders, users",
            "limits.max_splits_per_trigger": "7",
            "spark.spark.sql.shuffle.partitions": "3",
            "lake.merge_max_changes": "10",
        },
    )
    assert config.trigger.available_now is True and config.tables.include == ["orders", "users"]
    assert config.limits.max_splits_per_trigger == 7 and config.spark["spark.sql.shuffle.partitions"] == "3"
    assert (config.lake.driver_max_changes, config.lake.merge_max_rows) == (10, 10), "a renamed key sets its new keys"


def test_an_entry_of_a_table_valued_key_joins_the_file_entries(conf: Path) -> None:
    conf.write_text(conf.read_text() + "\n[tables.freshness_targets]\nusers = 30.0\n")
    config = load_config(
        conf, env={}, settings={"tables.freshness_targets.orders": "60", "lake.storage.AWS_REGION": "eu-west-1"}
    )
    assert config.tables.freshness_targets == {"users": 30.0, "orders": 60.0}
    assert config.lake.storage["AWS_REGION"].get_secret_value() == "eu-west-1"


def test_bad_settings_are_config_errors_naming_each_key(conf: Path) -> None:
    assert problems(
        conf,
        {
            "trigger.intervall_s": "1",
            "trigger.interval_s": "five",
            "tables.freshness_targets.orders": "soon",
            "lake.storag.AWS_REGION": "x",
            "zookeeper.hosts": "nowhere",
        },
    ) == [
        "trigger.intervall_s (--set): unknown key; did you mean 'trigger.interval_s'?",
        "trigger.interval_s (--set): expected number > 0, got 'five'",
        "tables.freshness_targets.orders (--set): expected number, got 'soon'",
        "lake.storag.AWS_REGION (--set): unknown key; did you mean 'lake.storage'?",
        "zookeeper.hosts (--set): expected host:port[,host:port...], got 'nowhere'",
    ]


def test_a_secret_setting_is_never_shown(conf: Path) -> None:
    found = problems(conf, {"zookeeper.auth_password": "hunter2"})
    assert len(found) == 1 and "auth_password" in found[0] and "hunter2" not in found[0]
