"""Local files written whole: replaced by a rename, created no-clobber by a link, and a failed write
leaves the target as it was with no temporary file behind."""

from __future__ import annotations

import threading

import pytest

from tiering.atomic_file import create_file, replace_file, replacing

pytestmark = pytest.mark.unit


def test_a_replaced_file_is_a_new_file_and_a_reader_of_the_old_one_reads_it_whole(tmp_path):
    path = tmp_path / "health.json"
    replace_file(path, b"old " * 1000)
    with open(path, "rb") as reader:
        replace_file(path, b"new")
        assert reader.read() == b"old " * 1000, "the old file was written over in place"
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["health.json"]


def test_a_write_that_fails_leaves_the_target_as_it_was_and_no_temporary_file(tmp_path):
    path = tmp_path / "segment.parquet"
    path.write_bytes(b"committed")
    with pytest.raises(OSError, match="disk full"), replacing(path) as tmp:
        tmp.write_bytes(b"half")
        raise OSError("disk full")
    assert path.read_bytes() == b"committed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["segment.parquet"]


def test_of_writers_racing_to_create_a_file_exactly_one_does_and_its_content_stays(tmp_path):
    path = tmp_path / "lease.json"
    created: dict[int, bool] = {}

    def create(i: int) -> None:
        created[i] = create_file(path, f"writer {i}".encode())

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [i for i, won in created.items() if won]
    assert len(winners) == 1
    assert path.read_bytes() == f"writer {winners[0]}".encode()
    assert create_file(path, b"late") is False and path.read_bytes() == f"writer {winners[0]}".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lease.json"]
