"""The lease-id file: created once, atomically, reused; corrupt files fail loudly."""

from __future__ import annotations

import json
import multiprocessing
import re

import pytest

from tiering.errors import CheckpointError, ConfigError
from tiering.state.lease_file import (
    job_of_lease,
    lease_file_path,
    load_or_create_lease_id,
    new_lease_id,
    read_lease_id,
)

pytestmark = pytest.mark.unit


def test_created_once_then_reused(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    first = load_or_create_lease_id(ckpt, "orders-tiering")
    assert re.fullmatch(r"orders-tiering-[0-9a-f]{32}", first)
    assert load_or_create_lease_id(ckpt, "orders-tiering") == first
    stored = json.loads((tmp_path / "ckpt" / "tiering" / "lease.json").read_text())
    assert stored == {"lease_id": first, "job": "orders-tiering"}
    assert [p.name for p in (tmp_path / "ckpt" / "tiering").iterdir()] == ["lease.json"]  # no tmp left


def test_different_checkpoints_get_different_ids(tmp_path):
    assert load_or_create_lease_id(str(tmp_path / "a"), "j") != load_or_create_lease_id(str(tmp_path / "b"), "j")


@pytest.mark.parametrize("prefix", ["file:", "file://", "file://localhost"])
def test_file_uris_name_the_same_file(tmp_path, prefix):
    plain = load_or_create_lease_id(str(tmp_path), "j")
    assert load_or_create_lease_id(prefix + str(tmp_path), "j") == plain


def test_checkpoints_neither_local_nor_on_s3_are_refused(tmp_path):
    with pytest.raises(CheckpointError, match="only local paths, file: URIs and s3:// are supported"):
        lease_file_path("hdfs://nn1/ckpt")
    with pytest.raises(CheckpointError, match="no bucket"):
        lease_file_path("s3:///ckpt")
    with pytest.raises(CheckpointError, match="remote host 'nn1'"):
        lease_file_path("file://nn1/ckpt")


@pytest.mark.parametrize("content", ["", "{not json", '{"job": "j"}', '{"lease_id": 5}', "[]"])
def test_corrupt_file_names_the_path_and_is_not_replaced(tmp_path, content):
    path = tmp_path / "tiering" / "lease.json"
    path.parent.mkdir()
    path.write_text(content)
    with pytest.raises(CheckpointError, match=re.escape(str(path))):
        load_or_create_lease_id(str(tmp_path), "j")
    with pytest.raises(CheckpointError, match=re.escape(str(path))):
        read_lease_id(str(tmp_path))
    assert path.read_text() == content


def test_reading_never_creates(tmp_path):
    assert read_lease_id(str(tmp_path)) is None
    assert not (tmp_path / "tiering").exists()
    created = load_or_create_lease_id(str(tmp_path), "j")
    assert read_lease_id(str(tmp_path)) == created


def _create(args: tuple[str, str]) -> str:
    return load_or_create_lease_id(*args)


def test_racing_creators_all_return_the_one_stored_id(tmp_path):
    ckpt = str(tmp_path / "race")
    with multiprocessing.get_context("fork").Pool(4) as pool:
        ids = pool.map(_create, [(ckpt, "job")] * 16)
    stored = json.loads((tmp_path / "race" / "tiering" / "lease.json").read_text())["lease_id"]
    assert set(ids) == {stored}


def _create_or_refusal(args: tuple[str, str]) -> str:
    try:
        return load_or_create_lease_id(*args)
    except ConfigError as e:
        return str(e)


def test_of_jobs_racing_on_one_checkpoint_one_wins_and_the_others_are_refused_naming_it(tmp_path):
    ckpt = str(tmp_path / "race")
    with multiprocessing.get_context("fork").Pool(4) as pool:
        answers = pool.map(_create_or_refusal, [(ckpt, f"job{i}") for i in range(16)])
    stored = json.loads((tmp_path / "race" / "tiering" / "lease.json").read_text())
    assert answers.count(stored["lease_id"]) == 1
    refusals = [a for a in answers if a != stored["lease_id"]]
    assert len(refusals) == 15 and all(f"belongs to job {stored['job']!r}" in a for a in refusals)


@pytest.mark.parametrize(
    "content",
    [
        {"lease_id": f"orders-{'a' * 32}", "job": "orders"},
        {"lease_id": f"orders-{'a' * 32}"},  # a file that names its job only in the id
    ],
    ids=["job", "id only"],
)
def test_a_checkpoint_of_another_job_is_refused_naming_that_job_and_left_as_it_was(tmp_path, content):
    path = tmp_path / "tiering" / "lease.json"
    path.parent.mkdir()
    path.write_text(json.dumps(content))
    with pytest.raises(ConfigError) as refusal:
        load_or_create_lease_id(str(tmp_path), "orders-eu")
    assert refusal.value.problems == [
        f"job.checkpoint: {tmp_path} belongs to job 'orders' (its lease file {path} says so), not to job "
        "'orders-eu': two jobs on one checkpoint share one lease and fence each other; give job 'orders-eu' "
        "a checkpoint of its own"
    ]
    assert json.loads(path.read_text()) == content
    assert load_or_create_lease_id(str(tmp_path), "orders") == content["lease_id"]


def test_a_lease_id_that_names_no_job_is_any_jobs(tmp_path):
    path = tmp_path / "tiering" / "lease.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"lease_id": "hand-made"}))
    assert load_or_create_lease_id(str(tmp_path), "orders") == "hand-made"


def test_empty_job_name_is_refused(tmp_path):
    with pytest.raises(ValueError, match="job name is empty"):
        load_or_create_lease_id(str(tmp_path), "")


def test_a_lease_id_names_its_job_exactly_never_by_prefix():
    """Job ``orders`` must not take job ``orders-eu``'s lease for its own (`leases list`, `drop`)."""
    orders, orders_eu = new_lease_id("orders"), new_lease_id("orders-eu")

    assert (job_of_lease(orders), job_of_lease(orders_eu)) == ("orders", "orders-eu")
    assert job_of_lease(f"orders-{'a' * 31}") is None and job_of_lease("orders") is None
    assert job_of_lease(f"orders-eu-{'0' * 32}-x") is None
    assert new_lease_id("orders") != orders
    with pytest.raises(ValueError, match="job name is empty"):
        new_lease_id("")
