"""Where the checkpoint lives: local paths and file: URIs as before, s3:// through the lake's
object store with Spark's s3a settings derived from the same options; others refused."""

from __future__ import annotations

import pytest

from tiering.conf.model import TieringConfig
from tiering.errors import CheckpointError
from tiering.state.checkpoint_store import LocalCheckpoint, S3Checkpoint, checkpoint_of, open_checkpoint

pytestmark = pytest.mark.unit

SEAWEED = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:8333",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
    "AWS_ACCESS_KEY_ID": "key",
    "AWS_SECRET_ACCESS_KEY": "secret",
}


def test_local_checkpoints_keep_their_location_for_spark(tmp_path):
    store = open_checkpoint(f"file://{tmp_path}/ckpt")
    assert isinstance(store, LocalCheckpoint) and not store.is_s3
    assert (store.name("tiering/lease.json"), store.spark_location) == (
        f"{tmp_path}/ckpt/tiering/lease.json",
        f"file://{tmp_path}/ckpt",
    )
    assert store.hadoop_conf() == {}
    assert open_checkpoint(store) is store


def test_an_s3_checkpoint_is_given_to_spark_through_s3a_with_settings_from_the_storage_options():
    store = open_checkpoint("s3://bucket/jobs/orders/", SEAWEED)
    assert isinstance(store, S3Checkpoint) and store.is_s3
    assert (store.location, store.spark_location) == ("s3://bucket/jobs/orders", "s3a://bucket/jobs/orders")
    assert store.name("offsets/3") == "s3://bucket/jobs/orders/offsets/3"
    assert store.hadoop_conf() == {
        "fs.s3a.endpoint": "http://127.0.0.1:8333",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.access.key": "key",
        "fs.s3a.secret.key": "secret",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }


def test_without_keys_s3a_keeps_its_own_credential_chain_and_a_session_token_is_passed_on():
    assert open_checkpoint("s3://bucket/ckpt", {"AWS_REGION": "eu-west-1"}).hadoop_conf() == {
        "fs.s3a.path.style.access": "true",
        "fs.s3a.endpoint.region": "eu-west-1",
    }
    with_token = open_checkpoint(
        "s3://bucket/ckpt", {**SEAWEED, "AWS_SESSION_TOKEN": "t", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true"}
    ).hadoop_conf()
    assert with_token["fs.s3a.session.token"] == "t" and with_token["fs.s3a.path.style.access"] == "false"
    assert with_token["fs.s3a.aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")


@pytest.mark.parametrize(
    ("location", "named"),
    [
        ("hdfs://nn1/ckpt", "only local paths, file: URIs and s3:// are supported"),
        ("s3:///ckpt", "no bucket"),
        ("file://nn1/ckpt", "remote host 'nn1'"),
        ("", "empty"),
    ],
)
def test_other_locations_are_refused(location, named):
    with pytest.raises(CheckpointError, match=named):
        open_checkpoint(location)


def test_the_job_checkpoint_on_s3_uses_the_lake_storage_options():
    config = TieringConfig.model_validate(
        {
            "job": {"name": "j", "checkpoint": "s3://bucket/ckpt"},
            "kvstore": {"url": "http://127.0.0.1:8420"},
            "zookeeper": {"hosts": "127.0.0.1:2181"},
            "lake": {"root": "s3://bucket/lake", "storage": SEAWEED},
        }
    )
    assert checkpoint_of(config).hadoop_conf()["fs.s3a.secret.key"] == "secret"


def test_the_config_refuses_an_s3_checkpoint_without_a_bucket():
    with pytest.raises(ValueError, match="no bucket"):
        TieringConfig.model_validate(
            {
                "job": {"name": "j", "checkpoint": "s3:///ckpt"},
                "kvstore": {"url": "http://127.0.0.1:8420"},
                "zookeeper": {"hosts": "127.0.0.1:2181"},
                "lake": {"root": "/lake"},
            }
        )
