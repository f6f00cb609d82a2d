"""The config models on their own: defaults, validators, table selection, redaction."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tiering.conf.model import SECTIONS, TablesConfig, TieringConfig

pytestmark = pytest.mark.unit

REQUIRED = {
    "job": {"name": "orders-tiering", "checkpoint": "/data/ckpt"},
    "kvstore": {"url": "http://127.0.0.1:8420"},
    "zookeeper": {"hosts": "127.0.0.1:2181"},
    "lake": {"root": "/data/lake"},
}


def config(**sections: dict) -> TieringConfig:
    merged = {name: {**REQUIRED.get(name, {}), **sections.get(name, {})} for name in {*REQUIRED, *sections}}
    return TieringConfig.model_validate(merged)


def test_defaults_of_every_optional_key() -> None:
    c = config()
    assert c.kvstore.token.get_secret_value() == ""
    assert (c.zookeeper.session_timeout_s, c.zookeeper.auth_user, c.zookeeper.auth_password) == (10.0, None, None)
    assert (c.lake.writer, c.lake.change_data_feed, c.lake.compression) == ("delta-rs", False, "zstd")
    assert (c.tables.include, c.tables.exclude) == (["*"], [])
    assert (c.trigger.available_now, c.trigger.interval_s) == (False, 5.0)
    assert (c.lease.duration_s, c.lease.renew) == (600.0, True)
    assert (c.limits.max_splits_per_trigger, c.limits.max_bytes_per_trigger) == (0, 0)
    assert c.limits.fail_on_data_loss is False
    m = c.maintenance
    assert (m.enabled, m.every_rounds, m.target_file_mb, m.min_files) == (True, 100, 128, 8)
    assert (m.checkpoint_interval, m.log_retention_hours, m.file_retention_hours) == (20, 720, 168)
    assert c.spark == {}


def test_every_field_has_a_description() -> None:
    fields = [(s, k, f) for s, m in SECTIONS.items() for k, f in m.model_fields.items()]
    assert len(fields) == 47
    assert [f"{s}.{k}" for s, k, f in fields if not (f.description or "").strip()] == []
    assert TieringConfig.model_fields["spark"].description


@pytest.mark.parametrize(
    ("include", "exclude", "selected"),
    [
        (["*"], [], {"orders", "users", "tmp_x", "Orders"}),
        (["ord*", "users"], [], {"orders", "users"}),
        (["*"], ["tmp_*"], {"orders", "users", "Orders"}),
        (["orders"], ["orders"], set()),
        (["ORDERS"], [], set()),
        (["[ou]*"], ["*s"], set()),
        (["?rders"], [], {"orders", "Orders"}),
    ],
)
def test_tables_selects_by_glob_exclude_wins_case_sensitive(include, exclude, selected) -> None:
    tables = TablesConfig(include=include, exclude=exclude)
    names = ["orders", "users", "tmp_x", "Orders"]
    assert {n for n in names if tables.selects(n)} == selected


def test_spark_nested_tables_flatten_and_values_become_strings() -> None:
    c = config(
        spark={"spark": {"sql": {"shuffle": {"partitions": 4}}, "ui.enabled": False}, "x.ratio": 0.5, "x.s": "v"}
    )
    assert c.spark == {
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
        "x.ratio": "0.5",
        "x.s": "v",
    }


def test_normalises_url_and_hosts() -> None:
    c = config(kvstore={"url": "https://store.example:8443/"}, zookeeper={"hosts": "zk1:2181, zk2:2181,[::1]:2182"})
    assert c.kvstore.url == "https://store.example:8443"
    assert c.zookeeper.hosts == "zk1:2181,zk2:2181,[::1]:2182"


@pytest.mark.parametrize(
    ("section", "values"),
    [
        ("job", {"name": ".."}),
        ("job", {"name": "a/b"}),
        ("job", {"name": ""}),
        ("kvstore", {"url": "127.0.0.1:8420"}),
        ("kvstore", {"url": "http://"}),
        ("zookeeper", {"hosts": "zk1:2181,zk2"}),
        ("zookeeper", {"hosts": "zk1:70000"}),
        ("zookeeper", {"session_timeout_s": 0}),
        ("zookeeper", {"auth_user": "tiering"}),
        ("zookeeper", {"auth_password": "pw"}),
        ("tables", {"include": []}),
        ("trigger", {"interval_s": -1}),
        ("trigger", {"available_now": "true"}),
        ("lease", {"duration_s": 0}),
        ("limits", {"max_bytes_per_trigger": -1}),
        ("limits", {"max_splits_per_trigger": 2.0}),
    ],
)
def test_rejects_bad_values(section: str, values: dict) -> None:
    with pytest.raises(ValidationError) as e:
        config(**{section: values})
    assert e.value.errors()[0]["loc"][0] == section


def test_accepts_auth_pair() -> None:
    c = config(zookeeper={"hosts": "localhost:2182", "auth_user": "u", "auth_password": "p"})
    assert (c.zookeeper.auth_user, c.zookeeper.auth_password.get_secret_value()) == ("u", "p")


def test_frozen() -> None:
    c = config()
    with pytest.raises(ValidationError):
        c.trigger.interval_s = 1.0


def test_redacted_masks_set_secrets_and_nothing_prints_them() -> None:
    c = config(kvstore={"token": "s3cret-token"}, zookeeper={"auth_user": "u", "auth_password": "pw-hunter2"})
    data = c.redacted()
    assert data["kvstore"] == {
        "kind": "http",
        "url": "http://127.0.0.1:8420",
        "token": "***",
        "bootstrap_servers": None,
        "database": None,
        "client": {},
        "report_lake_progress": False,
    }
    assert (data["zookeeper"]["auth_user"], data["zookeeper"]["auth_password"]) == ("u", "***")
    assert data["job"] == {**REQUIRED["job"], "group": None, "group_members": None, "group_start_wait_s": None}
    for text in (str(data), repr(c), str(c), c.model_dump_json(), str(c.model_dump())):
        assert "s3cret-token" not in text and "pw-hunter2" not in text
    assert c.kvstore.token.get_secret_value() == "s3cret-token"


def test_redacted_shows_an_unset_secret_as_unset() -> None:
    data = config().redacted()
    assert (data["kvstore"]["token"], data["zookeeper"]["auth_password"]) == ("", None)


def test_a_group_is_named_as_a_job_is() -> None:
    assert config(job={"group": "tier-1"}).job.group == "tier-1" and config().job.group is None
    for bad in ("a/b", "..", "", "with space"):
        with pytest.raises(ValidationError, match="job.group|group"):
            config(job={"group": bad})
