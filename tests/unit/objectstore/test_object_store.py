"""Lake roots and their storage options: what is accepted, what is refused and why."""

from __future__ import annotations

import pickle

import pytest

from tiering.errors import ConfigError
from tiering.objectstore.object_store import S3_CLIENT_DEFAULTS, ObjectStore, _pyarrow_s3_options

pytestmark = pytest.mark.unit

S3 = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
    "AWS_ALLOW_HTTP": "true",
    "AWS_REGION": "eu-west-1",
    "AWS_ACCESS_KEY_ID": "ak",
    "AWS_SECRET_ACCESS_KEY": "sk",
}


def test_local_roots_become_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert ObjectStore.of("lake").root == str(tmp_path / "lake")
    assert ObjectStore.of("file:///data/lake").root == "/data/lake"
    local = ObjectStore.of("/data/lake")
    assert (local.is_s3, local.uri("orders"), local.delta_options()) == (False, "/data/lake/orders", None)


def test_an_s3_root_takes_the_config_over_the_environment():
    store = ObjectStore.of(
        "s3://bucket/some/prefix/",
        {"AWS_REGION": "eu-west-1"},
        env={"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "from-env", "HOME": "/root"},
    )
    assert store.root == "s3://bucket/some/prefix" and store.is_s3
    assert store.uri("orders") == "s3://bucket/some/prefix/orders"
    assert store.path(store.uri("orders")) == "bucket/some/prefix/orders"
    assert store.delta_options() == {
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "from-env",
        "aws_conditional_put": "etag",
        **S3_CLIENT_DEFAULTS,
    }


def test_both_clients_take_one_set_of_timeouts_and_retries():
    """delta-rs reads the options as they are; pyarrow gets the same timeouts and retries."""
    store = ObjectStore.of(
        "s3://b/lake", {**S3, "timeout": "1500ms", "CONNECT_TIMEOUT": "2s", "max_retries": "2"}, env={}
    )
    options = store.delta_options()
    assert (options["timeout"], options["CONNECT_TIMEOUT"], options["max_retries"]) == ("1500ms", "2s", "2")
    assert "connect_timeout" not in options, "a key set in [lake.storage] is not set twice"
    kwargs = _pyarrow_s3_options(options)
    assert (kwargs["request_timeout"], kwargs["connect_timeout"], kwargs["allow_delayed_open"]) == (1.5, 2.0, True)
    assert kwargs["retry_strategy"].max_attempts == 3


def test_the_store_pickles_without_its_filesystem():
    store = ObjectStore.of("s3://bucket/lake", S3, env={})
    assert store.filesystem.region == "eu-west-1"
    copy = pickle.loads(pickle.dumps(store))
    assert copy == store and "filesystem" not in copy.__dict__


@pytest.mark.parametrize(
    ("root", "storage", "named"),
    [
        ("hdfs://nn/lake", None, "lake.root: 'hdfs://nn/lake': scheme 'hdfs' is not supported"),
        ("s3:///lake", None, "no bucket"),
        ("file://remote/lake", None, "remote host 'remote'"),
        ("/data/lake", {"AWS_REGION": "x"}, "lake.storage: only used with an s3:// lake.root"),
        (
            "s3://b/lake",
            {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"},
            "lake.storage.AWS_S3_ALLOW_UNSAFE_RENAME: 'true' makes",
        ),
        ("s3://b/lake", {"aws_conditional_put": "disabled"}, "lake.storage.aws_conditional_put: 'disabled' makes"),
        ("s3://b/lake", {"timeout": "soon"}, "lake.storage.timeout: 'soon' is not a duration"),
        ("s3://b/lake", {"max_retries": "-1"}, "lake.storage.max_retries: '-1' is not a whole number"),
    ],
)
def test_unusable_roots_and_unsafe_options_are_config_errors(root, storage, named):
    with pytest.raises(ConfigError) as err:
        ObjectStore.of(root, storage, env={})
    assert named in err.value.problems[0]


@pytest.mark.parametrize("name", ["", "a/b", ".", ".."])
def test_a_table_is_one_path_segment(name):
    with pytest.raises(ValueError, match="cannot be a directory name"):
        ObjectStore.of("/data/lake").uri(name)
