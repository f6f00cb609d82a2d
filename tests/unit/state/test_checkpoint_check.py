"""The checkpoint pre-flight: every part the wrong kind, every log Spark would not write, a
read-only or full disk is a CheckpointError naming the path, what was found and what was
expected; a checkpoint that is fine, or not there yet, passes; nothing is ever changed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.support.mounts import fill, read_only, small_tmpfs
from tiering.enumerator.splits import LogSplit
from tiering.errors import CheckpointError, ConfigError
from tiering.state.checkpoint_check import check_checkpoint
from tiering.state.offset import TieringOffset

pytestmark = pytest.mark.unit

OFFSET = TieringOffset("job-1", 1, 1, (LogSplit("a", 0, 1, 0, 7),))


def offsets_entry(offset: TieringOffset = OFFSET) -> str:
    return 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n' + offset.to_json()


def write_checkpoint(root: Path, offsets: range = range(3), commits: range = range(3)) -> Path:
    """A checkpoint as the job leaves it: Spark's logs with their checksums, our lease and health files."""
    for log, ids, text in (
        ("offsets", offsets, offsets_entry()),
        ("commits", commits, 'v1\n{"nextBatchWatermarkMs":0}'),
    ):
        (root / log).mkdir(parents=True)
        for batch_id in ids:
            (root / log / str(batch_id)).write_text(text)
            (root / log / f".{batch_id}.crc").write_bytes(b"crc\0")
    (root / "metadata").write_text('{"id":"e5c33362-6726-4189-a1d1-b3a93b1dc750"}')
    (root / "tiering").mkdir()
    (root / "tiering" / "lease.json").write_text('{"lease_id": "job-1", "job": "job"}')
    (root / "tiering" / "tables.json").write_text("{}")
    return root


def tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def refused(checkpoint: Path | str, *named: str) -> str:
    with pytest.raises(CheckpointError) as raised:
        check_checkpoint(str(checkpoint))
    message = str(raised.value)
    for text in named:
        assert text in message, message
    return message


def test_a_checkpoint_the_job_wrote_passes_and_is_left_as_it_was(tmp_path):
    root = write_checkpoint(tmp_path / "ckpt")
    before = tree(root)

    check_checkpoint(f"file://{root}")

    assert tree(root) == before


@pytest.mark.parametrize(
    ("offsets", "commits"),
    [(range(0), range(0)), (range(1), range(0)), (range(5, 9), range(4, 8)), (range(5, 9), range(5, 9))],
    ids=["empty logs", "first batch planned", "last batch not committed", "all committed"],
)
def test_the_states_spark_writes_pass(tmp_path, offsets, commits):
    check_checkpoint(str(write_checkpoint(tmp_path / "ckpt", offsets, commits)))


def test_a_checkpoint_not_made_yet_passes_and_is_not_made(tmp_path):
    check_checkpoint(str(tmp_path / "new" / "ckpt"))

    assert not (tmp_path / "new").exists()


def test_a_file_where_the_checkpoint_is_to_be_made_is_named(tmp_path):
    (tmp_path / "data").write_text("")

    refused(tmp_path / "data" / "ckpt", str(tmp_path / "data"), "is a file; expected a directory")


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        ("", "a directory"),
        ("offsets", "a directory"),
        ("commits", "a directory"),
        ("sources", "a directory"),
        ("tiering", "a directory"),
        ("metadata", "a file"),
        ("offsets/2", "a file"),
        ("commits/1", "a file"),
        ("tiering/lease.json", "a file"),
        ("tiering/tables.json", "a file"),
    ],
)
def test_a_part_of_the_wrong_kind_is_named_with_what_was_expected(tmp_path, part, expected):
    root = write_checkpoint(tmp_path / "ckpt")
    (root / "sources").mkdir()
    path = root / part
    if path.is_dir():
        shutil.rmtree(path)
        path.write_text("")
        found = "a file"
    else:
        path.unlink()
        path.mkdir()
        found = "a directory"
    before = tree(tmp_path)

    refused(root, f"{path} (", f"is {found}; expected {expected}")
    assert tree(tmp_path) == before


def test_a_dangling_symlink_is_named(tmp_path):
    root = write_checkpoint(tmp_path / "ckpt")
    shutil.rmtree(root / "commits")
    (root / "commits").symlink_to(tmp_path / "gone")

    refused(root, str(root / "commits"), "is a dangling symlink; expected a directory")


@pytest.mark.parametrize(
    ("log", "lost", "named"),
    [
        ("offsets", [2], "batches 0..5 without 2"),
        ("commits", [1, 4], "batches 0..5 without {1,4}"),
    ],
)
def test_a_log_with_a_missing_batch_is_named(tmp_path, log, lost, named):
    root = write_checkpoint(tmp_path / "ckpt", offsets=range(6), commits=range(6))
    for batch_id in lost:
        (root / log / str(batch_id)).unlink()

    refused(root, str(root / log), named, "expected consecutive batch ids")


def test_a_commit_without_its_planned_batch_is_named_with_the_repair(tmp_path):
    """Spark itself calls this a concurrent update; it is the orphan commits/N to remove."""
    root = write_checkpoint(tmp_path / "ckpt", offsets=range(3), commits=range(4))

    refused(
        root,
        "commits/3 without a planned batch",
        "last planned: 2",
        f"remove the orphan commit entry from {root / 'commits'}",
    )


def test_commits_more_than_one_batch_behind_are_named(tmp_path):
    root = write_checkpoint(tmp_path / "ckpt", offsets=range(6), commits=range(3))

    refused(root, "batches 3..5 are planned", "only 2 committed", "remove offsets/{4..5}")


@pytest.mark.parametrize(
    ("log", "text", "named"),
    [
        ("offsets", "", "is empty"),
        ("offsets", "garbage\n{}\n{}", "starts 'garbage'; expected a version line 'v<n>'"),
        ("offsets", 'v1\n{}\n{"v": 1}', "the source offset does not decode"),
        ("commits", "v1", "expected a version line 'v<n>' and one JSON object"),
        ("commits", "v1\nnot json", "expected a version line 'v<n>' and one JSON object"),
        ("commits", "{}\n{}", "expected a version line 'v<n>' and one JSON object"),
    ],
)
def test_a_log_entry_spark_did_not_write_is_named(tmp_path, log, text, named):
    root = write_checkpoint(tmp_path / "ckpt")
    (root / log / "2").write_text(text)

    refused(root, str(root / log / "2"), named)


def test_an_offsets_entry_of_another_spark_format_is_left_to_spark(tmp_path):
    """The round reads such a batch's splits from its rows (tiering.round.batch_splits)."""
    root = write_checkpoint(tmp_path / "ckpt")
    (root / "offsets" / "2").write_text("v2\n{}\n" + OFFSET.to_json())

    check_checkpoint(str(root))


@pytest.mark.parametrize(
    ("part", "text", "named"),
    [
        ("metadata", "", 'expected a JSON object {"id": "<query id>"}'),
        ("metadata", '{"id": 3}', 'expected a JSON object {"id": "<query id>"}'),
        ("tiering/lease.json", "{not json", "lease file"),
    ],
)
def test_a_malformed_file_is_named(tmp_path, part, text, named):
    root = write_checkpoint(tmp_path / "ckpt")
    (root / part).write_text(text)

    refused(root, str(root / part), named)


def test_a_health_file_that_does_not_parse_passes_it_is_advisory(tmp_path):
    root = write_checkpoint(tmp_path / "ckpt")
    (root / "tiering" / "tables.json").write_text("{half")

    check_checkpoint(str(root))


def test_a_read_only_checkpoint_is_named(tmp_path):
    root = write_checkpoint(tmp_path / "ckpt")
    with read_only(root):
        refused(root, str(root), "does not take writes: Read-only file system")


def test_a_read_only_log_directory_is_named(tmp_path):
    root = write_checkpoint(tmp_path / "ckpt")
    with read_only(root / "commits"):
        refused(root, str(root / "commits"), "does not take writes: Read-only file system")


def test_a_checkpoint_on_a_full_disk_is_named_and_passes_once_there_is_room(tmp_path):
    with small_tmpfs(tmp_path / "disk", size_kib=256) as disk:
        root = write_checkpoint(disk / "ckpt")
        filler = fill(disk)
        before = tree(root)

        refused(root, str(root), "does not take writes: No space left on device")

        assert tree(root) == before
        assert not [name for name in os.listdir(root) if name.startswith(".tiering-probe")]
        filler.unlink()
        check_checkpoint(str(root))


def test_a_checkpoint_of_another_job_is_named_with_its_owner(tmp_path):
    root = write_checkpoint(tmp_path / "ckpt")
    (root / "tiering").mkdir(exist_ok=True)
    (root / "tiering" / "lease.json").write_text(f'{{"lease_id": "orders-{"a" * 32}", "job": "orders"}}')
    check_checkpoint(str(root))
    check_checkpoint(str(root), job="orders")
    with pytest.raises(ConfigError, match=f"job.checkpoint: {root} belongs to job 'orders'"):
        check_checkpoint(str(root), job="orders-eu")
