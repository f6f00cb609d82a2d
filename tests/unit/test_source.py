"""The Spark source's pure parts, through its public methods: the term context option, partitions
from offsets, the term check on the checkpoint's offsets, the start offset Spark 4.0/4.1 do not
pass, the planning process's logging and exit (its planning rules:
tests/unit/enumerator/test_term_planner.py; the offset it keeps between triggers and the newest
logged one: tests/unit/state)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tiering.conf.loader import load_config
from tiering.context import TermContext
from tiering.enumerator.splits import LogSplit, SnapshotSplit
from tiering.errors import ConfigError, FencedEpochError
from tiering.source import ADMISSION_CONTROL, CONTEXT_OPTION, KvTieringDataSource, KvTieringStreamReader
from tiering.state.offset import TieringOffset

pytestmark = pytest.mark.unit

CONFIG = load_config(
    None,
    {},
    {
        "job.name": "j",
        "job.checkpoint": "/tmp/c",
        "kvstore.url": "http://127.0.0.1:1",
        "kvstore.token": "s3cret",
        "zookeeper.hosts": "127.0.0.1:1",
        "lake.root": "/tmp/l",
        "limits.max_splits_per_trigger": 7,
    },
)
CONTEXT = TermContext(config=CONFIG, epoch=3, lease_id="j-lease")


def reader() -> KvTieringStreamReader:
    return KvTieringDataSource({CONTEXT_OPTION: CONTEXT.to_option()}).streamReader(None)


def test_the_one_option_rebuilds_the_term_context_secrets_included():
    r = reader()
    assert r.context == CONTEXT
    assert r.context.config.kvstore.token.get_secret_value() == "s3cret"
    if ADMISSION_CONTROL:  # Spark >= 4.2; older ones never ask
        assert r.getDefaultReadLimit().max_files == 7
    assert r.initialOffset() == {"v": 2, "lease_id": "j-lease", "epoch": 3, "round": 0, "splits": {}}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "expected exactly the option 'term_context_secret'"),
        ({CONTEXT_OPTION: CONTEXT.to_option(), "epoch": "3"}, r"got \['epoch', 'term_context_secret'\]"),
    ],
)
def test_anything_but_the_context_option_is_refused(options, message):
    with pytest.raises(ConfigError, match=message):
        KvTieringDataSource(options).streamReader(None)


def test_a_malformed_context_fails_the_planning_process_at_its_first_call():
    r = KvTieringDataSource({CONTEXT_OPTION: '{"epoch": 3}'}).streamReader(None)
    with pytest.raises(ConfigError, match="not a term context"):
        r.initialOffset()


def test_the_processes_that_only_build_or_ship_a_reader_import_no_config_models():
    """Spark imports this module and builds a reader in several Python processes of their own
    (the source's creation, each batch's read planning, the executors); only the planning
    process uses the term context, and the pydantic models that parse it cost ~0.2 s of CPU."""
    code = (
        "import pickle, sys\n"
        "from tiering.source import CONTEXT_OPTION, KvTieringDataSource\n"
        "source = KvTieringDataSource({CONTEXT_OPTION: sys.argv[1]})\n"
        "source.schema()\n"
        "pickle.loads(pickle.dumps(source.streamReader(None)))\n"
        "print(sorted(m for m in ('pydantic', 'tiering.context', "
        "'tiering.conf', 'requests', 'deltalake') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, CONTEXT.to_option()], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


#: How the planning process dies when Spark closes its socket (python_streaming_source_runner):
#: the read fails, the error handling writes to the closed socket, and closing it fails too.
RUNNER_DISCONNECT = """
import sys
from tiering.source import CONTEXT_OPTION, KvTieringDataSource
reader = KvTieringDataSource({CONTEXT_OPTION: sys.argv[1]}).streamReader(None)
try:
    try:
        raise EOFError
    finally:
        if sys.argv[2] == "stop":
            reader.stop()
except BaseException:
    try:
        raise BrokenPipeError(32, "Broken pipe")
    finally:
        raise ValueError("I/O operation on closed file")
"""


@pytest.mark.parametrize("stopped", [True, False], ids=["stopped", "not-stopped"])
def test_a_planning_process_disconnected_after_stop_exits_without_a_stack_trace(stopped):
    done = subprocess.run(
        [sys.executable, "-c", RUNNER_DISCONNECT, CONTEXT.to_option(), "stop" if stopped else "-"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert ("Traceback" in done.stderr) is not stopped, done.stderr


def test_after_stop_any_other_error_is_still_printed():
    code = (
        RUNNER_DISCONNECT.replace("raise EOFError", "raise RuntimeError('the planner failed')")
        .replace('raise BrokenPipeError(32, "Broken pipe")', "raise")
        .replace('raise ValueError("I/O operation on closed file")', "pass")
    )
    done = subprocess.run([sys.executable, "-c", code, CONTEXT.to_option(), "stop"], capture_output=True, text=True)
    assert done.returncode == 1
    assert "RuntimeError: the planner failed" in done.stderr and "Traceback" in done.stderr


def test_an_offset_planned_by_a_newer_epoch_fences_this_planner():
    newer = TieringOffset("j-lease", 4, 9).to_dict()
    with pytest.raises(FencedEpochError, match="planned by epoch 4, this term is epoch 3"):
        reader().latestOffset(newer, None)


def test_partitions_depend_only_on_the_end_offset_one_for_the_round():
    splits = (
        SnapshotSplit("b", 0, 2, 5, 10),
        LogSplit("b", 0, 2, 10, 20),
        LogSplit("a", 1, 1, 0, 7),
    )
    end = TieringOffset("lease-1", 3, 9, splits).to_dict()
    r = reader()
    parts = r.partitions({"anything": 1}, json.loads(json.dumps(end)))
    assert [p.rows for p in parts] == [
        (
            ("a", 1, 1, "log", None, 0, 7, 9),
            ("b", 2, 0, "snapshot", 5, None, 10, 9),
            ("b", 2, 0, "log", None, 10, 20, 9),
        )
    ]
    assert list(r.read(parts[0])) == list(parts[0].rows)


def test_the_reader_pickles_without_its_clients_or_its_planning_state():
    r = reader()
    r.planner.fix_targets([], {}, r.context.write_authority())  # an availableNow run's targets
    assert r.store is not None  # made, holding no connection yet
    shipped = pickle.dumps(r)
    copy = pickle.loads(shipped)
    assert b"ReferenceStore" not in shipped and b"TermPlanner" not in shipped
    assert copy.context == r.context and copy.planner.targets is None


def logged(checkpoint, batch_id: int, offset: TieringOffset) -> None:
    """An offsets log entry as Spark writes it: version line, batch metadata, the source's offset."""
    offsets = checkpoint / "offsets"
    offsets.mkdir(parents=True, exist_ok=True)
    (offsets / str(batch_id)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{offset.to_json()}')


def test_without_a_start_offset_the_newest_logged_one_is_used(tmp_path):
    """Spark 4.0 and 4.1 call latestOffset() bare: the start is the newest batch's logged offset
    (the initial offset while there is none: tests/unit/state/test_offset_log.py); a newer term's
    there ends this one before any store call."""
    config = load_config(
        None,
        {},
        {
            "job.name": "j",
            "job.checkpoint": str(tmp_path),
            "kvstore.url": "http://127.0.0.1:1",
            "zookeeper.hosts": "127.0.0.1:1",
            "lake.root": str(tmp_path / "l"),
        },
    )
    r = KvTieringDataSource(
        {CONTEXT_OPTION: TermContext(config=config, epoch=3, lease_id="j-lease").to_option()}
    ).streamReader(None)
    logged(tmp_path, 0, TieringOffset("j-lease", 3, 1))
    logged(tmp_path, 1, TieringOffset("j-lease", 4, 2))
    (tmp_path / "offsets" / ".1.crc").write_text("")
    with pytest.raises(FencedEpochError, match="planned by epoch 4, this term is epoch 3"):
        r.latestOffset()


def test_the_planning_threads_share_one_view_of_the_lake(monkeypatch):
    """The round's planning threads ask for the lake first: one view for all of them, or the
    tables read into the others' views are read afresh every round."""
    from tiering.delta_log import lake

    made = lake.LakeTables.__init__

    def slow(self, *args):
        time.sleep(0.05)  # a thread switch while the view is made
        made(self, *args)

    monkeypatch.setattr(lake.LakeTables, "__init__", slow)
    r = reader()
    _ = r.context  # parsed once, as the planning process does before it plans
    start = threading.Barrier(8)

    def ask(_):
        start.wait()
        return r.lake

    with ThreadPoolExecutor(8) as pool:
        views = list(pool.map(ask, range(8)))

    assert len({id(v) for v in views}) == 1 and views[0] is r.lake
