"""With ZooKeeper digest ACLs on (``zookeeper.auth_user``/``auth_password``), a client without
the job's credentials can read its znodes but not create, change, delete or re-ACL any of them.

Failure mode: anyone who can reach the ensemble bumping the epoch (fencing out the real leader),
deleting the leader's lock node (two leaders), or queueing a contender of its own. The test
walks every znode the leader's term created, so a znode added later is covered too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NotEmptyError
from kazoo.security import OPEN_ACL_UNSAFE

from tiering.coord import acquire_leadership
from tiering.coord.paths import job_path
from tiering.errors import CoordinationError

pytestmark = pytest.mark.integration

SESSION_S = 3.0
AUTH = ("tiering", "s3cret")
INTRUDERS = {
    "no credentials": None,
    "wrong password": [("digest", "tiering:wrong")],
    "another user": [("digest", "mallory:s3cret")],
}


@pytest.fixture(params=sorted(INTRUDERS))
def intruder(request, zk_hosts) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zk_hosts, timeout=SESSION_S, auth_data=INTRUDERS[request.param])
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def _tree(zk: KazooClient, path: str) -> dict[str, tuple[bytes, int]]:
    """Every znode below and including ``path`` with its data and data version."""
    data, stat = zk.get(path)
    nodes = {path: (data, stat.version)}
    for child in zk.get_children(path):
        nodes.update(_tree(zk, f"{path}/{child}"))
    return nodes


def test_without_the_credentials_the_jobs_znodes_cannot_be_touched(zk_hosts, unique_job, intruder):
    term = acquire_leadership(zk_hosts, unique_job, SESSION_S, auth=AUTH)
    try:
        term.fenced_set(f"{job_path(unique_job)}/state", b"mine")
        before = _tree(intruder, job_path(unique_job))  # reading stays open (tiering status)
        assert {f"{job_path(unique_job)}/{n}" for n in ("epoch", "owner", "leader", "state")} <= set(before)
        assert any(p.startswith(f"{job_path(unique_job)}/leader/") for p in before), "the lock node is missing"

        for path in before:
            with pytest.raises(NoAuthError):
                intruder.create(f"{path}/intruder", b"x")
            with pytest.raises(NoAuthError):
                intruder.set(path, b"99")
            with pytest.raises(NoAuthError):
                intruder.set_acls(path, OPEN_ACL_UNSAFE)
            if path != job_path(unique_job):
                with pytest.raises(NoAuthError):
                    intruder.delete(path)
        with pytest.raises(NotEmptyError):  # /tiering/jobs is shared and open; the job node is not empty
            intruder.delete(job_path(unique_job))

        assert _tree(intruder, job_path(unique_job)) == before
        term.check()  # still the leader, same epoch
        with pytest.raises(CoordinationError, match="NoAuth"):
            acquire_leadership(zk_hosts, unique_job, SESSION_S, timeout_s=5)  # cannot even queue
        with pytest.raises(CoordinationError, match="NoAuth"):
            acquire_leadership(zk_hosts, unique_job, SESSION_S, auth=("tiering", "wrong"), timeout_s=5)
        assert _tree(intruder, job_path(unique_job)) == before
    finally:
        term.resign()

    again = acquire_leadership(zk_hosts, unique_job, SESSION_S, auth=AUTH)
    assert again.epoch == term.epoch + 1
    again.resign()
