"""load_config: file < environment < overrides, and every problem reported at once, by key and source."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiering.conf.loader import load_config
from tiering.errors import ConfigError, TieringError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]

MINIMAL = """
[job]
name = "orders-tiering"
checkpoint = "/data/ckpt/orders"
[kvstore]
url = "http://127.0.0.1:8420"
[zookeeper]
hosts = "127.0.0.1:2181"
[lake]
root = "/data/lake"
"""


def write(tmp_path: Path, text: str, name: str = "x.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def problems(path, env=None, overrides=None) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load_config(path, env={} if env is None else env, overrides=overrides)
    assert isinstance(e.value, TieringError)
    assert str(e.value) == "invalid configuration:\n  " + "\n  ".join(e.value.problems)
    return e.value.problems


def test_shipped_default_config_loads() -> None:
    c = load_config(REPO / "conf" / "tiering.toml", env={})
    assert (c.job.name, c.job.checkpoint) == ("kv-tiering-demo", "./data/checkpoint")
    assert (c.kvstore.url, c.zookeeper.hosts, c.lake.root) == ("http://127.0.0.1:8420", "127.0.0.1:2181", "./data/lake")
    assert c.lake.writer == "delta-rs" and c.trigger.available_now is False
    assert c.spark["spark.sql.shuffle.partitions"] == "4"


def test_minimal_file_gets_defaults(tmp_path: Path) -> None:
    c = load_config(write(tmp_path, MINIMAL), env={})
    assert (c.job.name, c.trigger.interval_s, c.lease.duration_s, c.tables.include) == (
        "orders-tiering",
        5.0,
        600.0,
        ["*"],
    )


def test_precedence_file_then_env_then_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "[trigger]\ninterval_s = 5\n")
    env = {
        "TIERING_TRIGGER_INTERVAL_S": "7",
        "TIERING_LAKE_WRITER": "delta-spark",
        "TIERING_LAKE_DELTA_SPARK_SINGLE_DRIVER": "true",
    }
    assert load_config(path, env={}).trigger.interval_s == 5.0
    from_env = load_config(path, env=env)
    assert (from_env.trigger.interval_s, from_env.lake.writer) == (7.0, "delta-spark")
    both = load_config(path, env=env, overrides={"trigger.interval_s": 9, "lake.writer": None})
    assert (both.trigger.interval_s, both.lake.writer) == (9.0, "delta-spark")


def test_env_only_without_a_file() -> None:
    env = {
        "TIERING_JOB_NAME": "j1",
        "TIERING_JOB_CHECKPOINT": "file:///data/ckpt",
        "TIERING_KVSTORE_URL": "http://store:8420",
        "TIERING_KVSTORE_TOKEN": "tok",
        "TIERING_ZOOKEEPER_HOSTS": "zk1:2181,zk2:2181",
        "TIERING_LAKE_ROOT": "/data/lake",
        "TIERING_TABLES_INCLUDE": "orders, users,",
        "TIERING_TABLES_EXCLUDE": "",
        "TIERING_LIMITS_MAX_BYTES_PER_TRIGGER": "1048576",
        "TIERING_ZOOKEEPER_AUTH_USER": "",
        "OTHER_VAR": "ignored",
    }
    c = load_config(None, env=env)
    assert c.tables.include == ["orders", "users"] and c.tables.exclude == []
    assert c.limits.max_bytes_per_trigger == 1048576 and c.zookeeper.auth_user is None
    assert c.kvstore.token.get_secret_value() == "tok"


def test_env_defaults_to_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERING_LEASE_DURATION_S", "30")
    assert load_config(write(tmp_path, MINIMAL)).lease.duration_s == 30.0


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("on", True),
        ("false", False),
        ("0", False),
        ("No", False),
        ("off", False),
    ],
)
def test_env_booleans(tmp_path: Path, text: str, value: bool) -> None:
    c = load_config(write(tmp_path, MINIMAL), env={"TIERING_TRIGGER_AVAILABLE_NOW": text})
    assert c.trigger.available_now is value


def test_overrides_parse_strings_and_pass_spark_keys(tmp_path: Path) -> None:
    c = load_config(
        write(tmp_path, MINIMAL + '[spark]\n"spark.ui.enabled" = true\n'),
        env={},
        overrides={
            "trigger.available_now": True,
            "trigger.interval_s": "2.5",
            "limits.max_splits_per_trigger": "8",
            "tables.exclude": "tmp_*,bak_*",
            "spark.spark.sql.shuffle.partitions": 2,
        },
    )
    assert (c.trigger.available_now, c.trigger.interval_s, c.limits.max_splits_per_trigger) == (True, 2.5, 8)
    assert c.tables.exclude == ["tmp_*", "bak_*"]
    assert c.spark == {"spark.ui.enabled": "true", "spark.sql.shuffle.partitions": "2"}


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace("[zookeeper]", "[zookeeper]\nsesion_timeout_s = 3"))
    assert problems(path) == [f"zookeeper.sesion_timeout_s ({path}): unknown key; did you mean 'session_timeout_s'?"]


def test_unknown_key_without_a_close_one_lists_the_keys(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "[lease]\nflavour = 1\n")
    assert problems(path) == [f"lease.flavour ({path}): unknown key; expected one of 'duration_s', 'renew'"]


def test_table_parallelism_follows_the_lake_unless_set(tmp_path: Path) -> None:
    """An S3 lake waits on round trips: more tables at once, unless the key says otherwise."""
    path = write(tmp_path, MINIMAL)
    assert load_config(path, env={}).lake.table_parallelism == 8
    s3 = {"lake.root": "s3://bucket/lake"}
    assert load_config(path, env={}, overrides=s3).lake.table_parallelism == 32
    assert load_config(path, env={"TIERING_LAKE_TABLE_PARALLELISM": "4"}, overrides=s3).lake.table_parallelism == 4
    assert load_config(path, env={}, overrides={**s3, "lake.table_parallelism": 8}).lake.table_parallelism == 8
    refused = write(
        tmp_path, MINIMAL.replace('root = "/data/lake"', 'root = "s3://bucket/lake"\ntable_parallelism = 0')
    )
    assert problems(refused) == [f"lake.table_parallelism ({refused}): expected integer >= 1, got 0"]


def test_stop_wait_defaults_to_20_s_and_refuses_a_negative_one(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, MINIMAL), env={}).trigger.stop_wait_s == 20.0
    path = write(tmp_path, MINIMAL + "[trigger]\nstop_wait_s = -1\n")
    assert problems(path) == [f"trigger.stop_wait_s ({path}): expected number >= 0, got -1"]
    assert load_config(path, env={}, overrides={"trigger.stop_wait_s": 0}).trigger.stop_wait_s == 0


def test_bad_enum_names_key_source_expected_and_given(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace('root = "/data/lake"', 'root = "/data/lake"\nwriter = "delta"'))
    assert problems(path) == [f"lake.writer ({path}): expected one of 'delta-rs', 'delta-spark', got 'delta'"]


def test_a_codec_outside_the_allowed_ones_is_refused_naming_them(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace('root = "/data/lake"', 'root = "/data/lake"\ncompression = "brotli"'))
    allowed = "'zstd', 'snappy', 'lz4', 'gzip', 'none'"
    assert problems(path) == [f"lake.compression ({path}): expected one of {allowed}, got 'brotli'"]
    assert problems(write(tmp_path, MINIMAL), env={"TIERING_LAKE_COMPRESSION": "ZSTD"}) == [
        f"lake.compression (env TIERING_LAKE_COMPRESSION): expected one of {allowed}, got 'ZSTD'"
    ]
    assert load_config(path, env={}, overrides={"lake.compression": "snappy"}).lake.compression == "snappy"


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ('[trigger]\ninterval_s = "5"', "trigger.interval_s ({p}): expected number > 0, got '5'"),
        ("[trigger]\navailable_now = 1", "trigger.available_now ({p}): expected boolean, got 1"),
        (
            "[limits]\nmax_splits_per_trigger = 1.5",
            "limits.max_splits_per_trigger ({p}): expected integer >= 0, got 1.5",
        ),
        ("[limits]\nmax_bytes_per_trigger = -1", "limits.max_bytes_per_trigger ({p}): expected integer >= 0, got -1"),
        (
            '[tables]\ninclude = "orders"',
            "tables.include ({p}): expected non-empty list of glob patterns, got 'orders'",
        ),
        ('[tables]\nexclude = ["a", 3]', "tables.exclude[1] ({p}): expected string, got 3"),
        (
            '[spark]\n"spark.jars" = ["a.jar"]',
            "spark.spark.jars ({p}): expected string, number or boolean, got ['a.jar']",
        ),
        ("trigger = 5", "trigger ({p}): expected a [trigger] table, got 5"),
        ("[jobs]\nx = 1", "jobs ({p}): unknown section; did you mean 'job'?"),
    ],
)
def test_wrong_types(tmp_path: Path, extra: str, problem: str) -> None:
    path = write(tmp_path, extra + "\n" + MINIMAL)
    assert problems(path) == [problem.format(p=path)]


def test_key_outside_a_section_says_where_it_belongs(tmp_path: Path) -> None:
    path = write(tmp_path, 'writer = "delta-rs"\n' + MINIMAL)
    assert problems(path) == [f"writer ({path}): key outside any section; it belongs under [lake]"]


def test_validator_details_are_kept(tmp_path: Path) -> None:
    path = write(
        tmp_path, MINIMAL.replace('"127.0.0.1:2181"', '"zk1:2181,zk2:99999"').replace('"orders-tiering"', '".."')
    )
    assert problems(path) == [
        f"job.name ({path}): expected name matching [A-Za-z0-9._-]+, got '..' "
        "('.' and '..' are not valid ZooKeeper path segments)",
        f"zookeeper.hosts ({path}): expected host:port[,host:port...], got 'zk1:2181,zk2:99999' "
        "(port 99999 is out of range 1-65535)",
    ]


def test_section_level_rule_names_section_and_source(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace("[zookeeper]", '[zookeeper]\nauth_user = "tiering"'))
    assert problems(path) == [
        f"zookeeper ({path}): auth_user and auth_password go together: expected both or neither, got only auth_user"
    ]


def test_missing_required_keys_each_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path, MINIMAL.replace('url = "http://127.0.0.1:8420"', "").replace('[lake]\nroot = "/data/lake"', "")
    )
    assert problems(path) == ["kvstore.url: required with kind = 'http', missing", "lake.root: required, missing"]


def test_malformed_toml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "[trigger]\ninterval_s = \n")
    assert problems(path) == [f"{path}: invalid TOML: line 12, column 14: Invalid value"]


def test_missing_directory_and_non_utf8_files(tmp_path: Path) -> None:
    assert problems(tmp_path / "nope.toml") == [
        f"{tmp_path / 'nope.toml'}: cannot read config file: No such file or directory"
    ]
    assert problems(tmp_path) == [f"{tmp_path}: cannot read config file: Is a directory"]
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes(b'[job]\nname = "caf\xe9"\n')
    assert problems(latin1) == [f"{latin1}: cannot read config file: not UTF-8 text"]


def test_unreadable_file_still_reports_env_problems(tmp_path: Path) -> None:
    assert problems(tmp_path / "nope.toml", env={"TIERING_KVSTORE_URLL": "x"}) == [
        f"{tmp_path / 'nope.toml'}: cannot read config file: No such file or directory",
        "TIERING_KVSTORE_URLL (env): unknown setting; did you mean 'TIERING_KVSTORE_URL'?",
    ]


def test_bad_environment(tmp_path: Path) -> None:
    env = {
        "TIERING_KVSTORE_URLL": "http://x",
        "TIERING_NOTHING_LIKE_IT": "1",
        "TIERING_SPARK_EXECUTOR_MEMORY": "1g",
        "TIERING_TRIGGER_AVAILABLE_NOW": "maybe",
        "TIERING_LEASE_DURATION_S": "ten",
        "TIERING_LAKE_WRITER": "delta",
    }
    # Variables are read in name order, so the report is the same on every run.
    assert problems(write(tmp_path, MINIMAL), env=env) == [
        "TIERING_KVSTORE_URLL (env): unknown setting; did you mean 'TIERING_KVSTORE_URL'?",
        "lease.duration_s (env TIERING_LEASE_DURATION_S): expected number > 0, got 'ten'",
        "TIERING_NOTHING_LIKE_IT (env): unknown setting; expected TIERING_<SECTION>_<KEY>",
        "TIERING_SPARK_EXECUTOR_MEMORY (env): Spark settings cannot come from the environment (their keys "
        "contain dots); set them under [spark] in the file or as overrides 'spark.<key>'",
        "trigger.available_now (env TIERING_TRIGGER_AVAILABLE_NOW): expected boolean, got 'maybe'",
        "lake.writer (env TIERING_LAKE_WRITER): expected one of 'delta-rs', 'delta-spark', got 'delta'",
    ]


def test_bad_overrides(tmp_path: Path) -> None:
    overrides = {
        "trigger.available": True,
        "trigger": 1,
        "lease.duration_s": "soon",
        "limits.max_splits_per_trigger": -2,
    }
    assert problems(write(tmp_path, MINIMAL), overrides=overrides) == [
        "trigger.available (override): unknown key; did you mean 'trigger.available_now'?",
        "trigger (override): unknown key; expected one of "
        "'trigger.available_now', 'trigger.interval_s', 'trigger.stop_wait_s'",
        "lease.duration_s (override): expected number > 0, got 'soon'",
        "limits.max_splits_per_trigger (override): expected integer >= 0, got -2",
    ]


def test_secrets_never_appear_in_errors(tmp_path: Path) -> None:
    path = write(
        tmp_path, MINIMAL.replace('url = "http://127.0.0.1:8420"', 'url = "http://127.0.0.1:8420"\ntoken = 12345')
    )
    assert problems(path, env={"TIERING_ZOOKEEPER_AUTH_PASSWORD": "pw-hunter2"}) == [
        f"kvstore.token ({path}): expected string (secret), got a value of type int (hidden)",
        f"zookeeper ({path}, env TIERING_ZOOKEEPER_AUTH_PASSWORD): "
        "auth_user and auth_password go together: expected both or neither, got only auth_password",
    ]


def test_one_error_lists_every_problem(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[job]
name = "orders tiering"
[kvstore]
url = "ftp://store"
[zookeeper]
hosts = "127.0.0.1:2181"
sesion_timeout_s = 3
[lake]
root = "/data/lake"
writer = "delta"
[trigger]
interval_s = 0
""",
    )
    found = problems(
        path,
        env={"TIERING_TRIGGER_AVAILABLE_NOW": "maybe", "TIERING_LEAS_RENEW": "true"},
        overrides={"limits.max_split_per_trigger": 3},
    )
    assert found == [
        "TIERING_LEAS_RENEW (env): unknown setting; did you mean 'TIERING_LEASE_RENEW'?",
        "trigger.available_now (env TIERING_TRIGGER_AVAILABLE_NOW): expected boolean, got 'maybe'",
        "limits.max_split_per_trigger (override): unknown key; did you mean 'limits.max_splits_per_trigger'?",
        f"job.name ({path}): expected name matching [A-Za-z0-9._-]+, got 'orders tiering'",
        "job.checkpoint: required, missing",
        f"kvstore.url ({path}): expected http(s) URL, got 'ftp://store' (like 'http://127.0.0.1:8420')",
        f"zookeeper.sesion_timeout_s ({path}): unknown key; did you mean 'session_timeout_s'?",
        f"lake.writer ({path}): expected one of 'delta-rs', 'delta-spark', got 'delta'",
        f"trigger.interval_s ({path}): expected number > 0, got 0",
    ]


def test_file_retention_below_the_safe_minimum_is_refused_naming_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "[maintenance]\nfile_retention_hours = 1\nevery_rounds = 10\n")
    assert problems(path) == [f"maintenance.file_retention_hours ({path}): expected integer >= 24, got 1"]
    assert (
        load_config(path, env={"TIERING_MAINTENANCE_FILE_RETENTION_HOURS": "24"}).maintenance.file_retention_hours == 24
    )


def test_a_group_s_members_and_start_wait_load_and_are_refused_naming_the_key(tmp_path: Path) -> None:
    grouped = MINIMAL.replace("[job]", '[job]\ngroup = "orders"\ngroup_members = 3\ngroup_start_wait_s = 90')
    job = load_config(write(tmp_path, grouped), env={}).job
    assert (job.group_members, job.group_start_wait_s) == (3, 90.0)
    plain = load_config(write(tmp_path, MINIMAL), env={}).job
    assert (plain.group_members, plain.group_start_wait_s) == (None, None)
    path = write(tmp_path, grouped.replace("group_members = 3", "group_members = 0"))
    assert problems(path) == [f"job.group_members ({path}): expected integer >= 1, got 0"]
    path = write(tmp_path, grouped.replace("= 90", "= -1"))
    assert problems(path) == [f"job.group_start_wait_s ({path}): expected number > 0, got -1"]
    path = write(tmp_path, MINIMAL.replace("[job]", "[job]\ngroup_members = 3"))
    assert problems(path) == [
        f"job.group_members ({path}): set without job.group; expected a group name in job.group, or no group_members"
    ]


@pytest.mark.parametrize(
    "lake, message",
    [
        (
            'writer = "delta-spark"\ndelta_spark_single_driver = true\ndelta_spark_write = "replace"',
            'needs lake.delta_spark_write = "merge": "replace" rewrites whole buckets',
        ),
        ("merge_max_rows = 0", "needs lake.merge_max_rows > 0: rounds recorded in the feed are MERGEs"),
    ],
)
def test_the_change_data_feed_refuses_a_writer_that_cannot_record_it(tmp_path, lake, message) -> None:
    path = write(tmp_path, MINIMAL.replace("[lake]", f"[lake]\nchange_data_feed = true\n{lake}"))
    (problem,) = problems(path)
    assert problem.startswith(f"lake ({path}): lake.change_data_feed = true ") and message in problem
    assert (
        load_config(write(tmp_path, MINIMAL.replace("[lake]", f"[lake]\n{lake}")), env={}).lake.change_data_feed
        is False
    )


def test_delta_spark_on_an_s3_lake_is_refused_naming_both_keys(tmp_path) -> None:
    lake = '[lake]\nroot = "s3://bucket/lake"\nwriter = "delta-spark"'
    path = write(tmp_path, MINIMAL.replace('[lake]\nroot = "/data/lake"', lake))
    (problem,) = problems(path)
    assert problem.startswith(
        f"lake ({path}): lake.writer = \"delta-spark\" cannot commit to an S3 lake.root ('s3://bucket/lake'): "
    )
    assert problem.endswith('use lake.writer = "delta-rs" on S3 (every commit a conditional put)')
    assert "local root" not in problem, "a local root is no safer for delta-spark"


def test_delta_spark_on_a_local_lake_is_refused_unless_one_driver_is_declared(tmp_path) -> None:
    path = write(tmp_path, MINIMAL.replace("[lake]", '[lake]\nwriter = "delta-spark"'))
    (problem,) = problems(path)
    assert problem.startswith(
        f"lake ({path}): lake.writer = \"delta-spark\" cannot commit safely to lake.root ('/data/lake') when more "
        "than one driver can reach it: "
    )
    assert "a zombie after a failover, a standby that took over" in problem
    assert problem.endswith(
        'use lake.writer = "delta-rs" (every commit a create that cannot overwrite), or set '
        "lake.delta_spark_single_driver = true if no two drivers of this job ever run at once"
    )
    declared = MINIMAL.replace("[lake]", '[lake]\nwriter = "delta-spark"\ndelta_spark_single_driver = true')
    assert load_config(write(tmp_path, declared), env={}).lake.writer == "delta-spark"
    s3 = '[lake]\nroot = "s3://bucket/lake"\nwriter = "delta-spark"\ndelta_spark_single_driver = true'
    (problem,) = problems(write(tmp_path, MINIMAL.replace('[lake]\nroot = "/data/lake"', s3)))
    assert "cannot commit to an S3 lake.root" in problem, "S3 is refused even with one driver"


def test_the_change_data_feed_with_delta_spark_is_merged_by_default(tmp_path) -> None:
    lake = '[lake]\nchange_data_feed = true\nwriter = "delta-spark"\ndelta_spark_single_driver = true'
    path = write(tmp_path, MINIMAL.replace("[lake]", lake))
    lake = load_config(path, env={}).lake
    assert (lake.change_data_feed, lake.delta_spark_write) == (True, "merge")


@pytest.mark.parametrize("source", ["file", "env", "override"])
def test_the_split_merge_max_changes_still_sets_both_keys_with_a_warning_naming_them(tmp_path, caplog, source) -> None:
    old = {"file": {}, "env": {"TIERING_LAKE_MERGE_MAX_CHANGES": "12"}, "override": {}}[source]
    text = MINIMAL.replace("[lake]", "[lake]\nmerge_max_changes = 12") if source == "file" else MINIMAL
    overrides = {"lake.merge_max_changes": "12"} if source == "override" else None
    with caplog.at_level("WARNING", logger="tiering.conf.loader"):
        lake = load_config(write(tmp_path, text), env=old, overrides=overrides).lake
    assert (lake.driver_max_changes, lake.merge_max_rows) == (12, 12)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "lake.merge_max_changes" in warning and "lake.driver_max_changes and lake.merge_max_rows" in warning


def test_a_new_key_set_beside_the_old_one_wins_and_the_old_one_is_checked_like_it(tmp_path) -> None:
    path = write(tmp_path, MINIMAL.replace("[lake]", "[lake]\nmerge_max_changes = 12\nmerge_max_rows = 5"))
    lake = load_config(path, env={}).lake
    assert (lake.driver_max_changes, lake.merge_max_rows) == (12, 5)
    assert problems(path, env={"TIERING_LAKE_MERGE_MAX_CHANGES": "many"}) == [
        "lake.merge_max_changes (env TIERING_LAKE_MERGE_MAX_CHANGES): expected integer >= 0, got 'many'"
    ]
    bad = write(tmp_path, MINIMAL.replace("[lake]", "[lake]\nmerge_max_changes = -1"), name="bad.toml")
    assert problems(bad) == [
        f"lake.driver_max_changes ({bad}, as lake.merge_max_changes): expected integer >= 0, got -1",
        f"lake.merge_max_rows ({bad}, as lake.merge_max_changes): expected integer >= 0, got -1",
    ]


FLUSS = MINIMAL.replace(
    'url = "http://127.0.0.1:8420"',
    'kind = "fluss"\nbootstrap_servers = "127.0.0.1:9123"\ndatabase = "shop"\n[kvstore.client]\n'
    '"client.request-timeout" = "60s"',
)


def test_a_fluss_store_is_a_database_at_its_servers_with_client_options_passed_through(tmp_path: Path) -> None:
    c = load_config(write(tmp_path, FLUSS), env={}, settings={"kvstore.client.writer.acks": "all"})
    assert (c.kvstore.kind, c.kvstore.bootstrap_servers, c.kvstore.database) == ("fluss", "127.0.0.1:9123", "shop")
    assert c.kvstore.client == {"client.request-timeout": "60s", "writer.acks": "all"}
    assert c.kvstore.url is None and c.kvstore.where == "Fluss database 'shop' at 127.0.0.1:9123"


def test_the_reference_store_stays_the_default_kind(tmp_path: Path) -> None:
    c = load_config(write(tmp_path, MINIMAL), env={})
    assert (c.kvstore.kind, c.kvstore.url, c.kvstore.client) == ("http", "http://127.0.0.1:8420", {})


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (
            'database = "shop"\n',
            "",
            "kvstore.database: required with kind = 'fluss', missing",
        ),
        (
            'kind = "fluss"',
            'kind = "fluss"\nurl = "http://127.0.0.1:8420"',
            "kvstore.url ({path}): not a setting of kind = 'fluss'",
        ),
        ('kind = "fluss"', 'kind = "flus"', "kvstore.kind ({path}): expected one of 'http', 'fluss', got 'flus'"),
        (
            "bootstrap_servers",
            "bootstrap_server",
            "kvstore.bootstrap_server ({path}): unknown key; did you mean 'bootstrap_servers'?",
        ),
        (
            '"127.0.0.1:9123"',
            '"localhost"',
            "kvstore.bootstrap_servers ({path}): expected host:port[,host:port...], got 'localhost'",
        ),
        ('"60s"', "60", "kvstore.client[client.request-timeout] ({path}): expected string, got 60"),
    ],
    ids=["no-database", "an-http-key", "kind-typo", "key-typo", "not-host-port", "not-a-string"],
)
def test_a_bad_fluss_store_names_the_key(tmp_path: Path, old: str, new: str, problem: str) -> None:
    path = write(tmp_path, FLUSS.replace(old, new))
    found = problems(path)
    assert any(p.startswith(problem.format(path=path)) for p in found), found


def test_an_http_store_names_its_missing_url_and_a_fluss_key_it_does_not_take(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace('url = "http://127.0.0.1:8420"', 'database = "shop"'))
    assert problems(path) == ["kvstore.url: required with kind = 'http', missing"]
    path = write(tmp_path, MINIMAL.replace("[zookeeper]", 'database = "shop"\n[zookeeper]'))
    assert problems(path) == [f"kvstore.database ({path}): not a setting of kind = 'http'"]


def test_a_tiering_group_over_fluss_loads(tmp_path: Path) -> None:
    path = write(tmp_path, FLUSS.replace("[job]", '[job]\ngroup = "shop-tiering"'))
    config = load_config(path, env={})
    assert (config.job.group, config.kvstore.kind) == ("shop-tiering", "fluss")


def test_the_delta_spark_writer_over_fluss_is_refused_naming_lake_writer(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        FLUSS.replace(
            'root = "/data/lake"', 'root = "/data/lake"\nwriter = "delta-spark"\ndelta_spark_single_driver = true'
        ),
    )
    (problem,) = problems(path)
    assert problem.startswith("lake.writer: 'delta-spark' reads the store's files and kind = 'fluss' has none"), problem
