"""Pure logic of the coordination package: znode layout, epoch decoding, ACLs, server setup."""

from __future__ import annotations

import pytest
from kazoo.security import Permissions

from tiering.coord.client import job_acls
from tiering.coord.embedded import EmbeddedZooKeeper, zookeeper_classpath
from tiering.coord.epoch import _decode
from tiering.coord.paths import epoch_path, leader_path, owner_path, validate_job
from tiering.errors import ConfigError, CoordinationError

pytestmark = pytest.mark.unit


def test_job_znode_layout():
    assert leader_path("orders") == "/tiering/jobs/orders/leader"
    assert epoch_path("orders") == "/tiering/jobs/orders/epoch"
    assert owner_path("orders") == "/tiering/jobs/orders/owner"


@pytest.mark.parametrize("bad", ["", "a/b", "..", " orders", "x\x00"])
def test_job_names_that_would_escape_their_subtree_are_refused(bad):
    with pytest.raises(ConfigError) as refused:
        validate_job(bad)
    assert repr(bad) in str(refused.value) and "job.name" in str(refused.value)


def test_epoch_znode_contents_are_checked():
    assert _decode("/p", b"17") == 17
    with pytest.raises(CoordinationError, match="epoch znode /p holds b'seven'"):
        _decode("/p", b"seven")
    with pytest.raises(CoordinationError, match="negative epoch -1"):
        _decode("/p", b"-1")


def test_digest_acl_gives_the_job_user_everything_and_others_read():
    assert job_acls(None) is None
    owner, world = job_acls(("tiering", "pw"))
    assert owner.perms == Permissions.ALL and owner.id.scheme == "digest" and owner.id.id.startswith("tiering:")
    assert "pw" not in owner.id.id  # the ACL stores a hash, never the password
    assert world.perms == Permissions.READ and world.id.id == "anyone"


def test_classpath_holds_the_server_and_its_runtime_from_pyspark_jars():
    jars = zookeeper_classpath().split(":")
    names = [j.rsplit("/", 1)[-1] for j in jars]
    assert any(n.startswith("zookeeper-3.") for n in names)
    assert any(n.startswith("zookeeper-jute-") for n in names)
    assert any(n.startswith("metrics-core-") for n in names)


def test_missing_jars_are_named(tmp_path):
    with pytest.raises(CoordinationError, match=f"no zookeeper-.*jar in {tmp_path}"):
        zookeeper_classpath(tmp_path)


def test_an_unstarted_server_has_no_address():
    with pytest.raises(CoordinationError, match="never started"):
        _ = EmbeddedZooKeeper().hosts
