"""The batched calls a round over thousands of tables makes (docs/DESIGN.md §3): ``/v1/logs``,
``/v1/segments``, ``/v1/lake-reports``, and ``GET /v1/tables`` answering 304 to its ETag.

Failure modes looked for: a batched answer that differs from the single-table call's for some
table (a column swapped, a bucket out of order, a name escaped wrongly: compared row by row,
raw JSON against raw JSON); one dropped table failing the whole batch; a zombie's batch of lake
reports storing some of them; a 304 after the list changed, or a client returning its kept list
after a change. The cases that need only an empty store share the module's one
(``emptied_kv_store``); the rest start theirs with the options they need.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from tests.support.store import orders_spec
from tests.support.waiting import STORE_PACE, wait_until
from tiering.errors import (
    BadRequestError,
    ConflictError,
    FencedEpochError,
    NotFoundError,
    SnapshotUnavailableError,
    TableNotFoundError,
)
from tiering.kvstore.client import KvStoreClient, segment
from tiering.kvstore.models import LakeReport, LogRange
from tiering.kvstore.server.process import StoreProcess

pytestmark = pytest.mark.integration

NASTY = 'we"ird ☃ name'  # a JSON escape and non-ASCII through SQLite's JSON
LIVE = sorted(["orders", "users", "empty", NASTY])


def _report(table_id: int, epoch: int, buckets: dict[str, int] | None = None, version: int = 1) -> LakeReport:
    return LakeReport(table_id=table_id, epoch=epoch, lake_version=version, buckets=buckets or {})


def _rows(first: int, count: int) -> list[dict[str, Any]]:
    return [{"id": i, "amount": i / 2, "note": f"n{i}"} for i in range(first, first + count)]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreProcess]:
    """A store whose tables differ in every field a log answer has: ``orders`` (4 buckets, its
    first offsets deleted by GC, so log starts differ from 0 and from the ends), ``users``,
    ``empty`` (nothing written), a name JSON must escape, and ``dropped``."""
    store = StoreProcess.start(tmp_path_factory.mktemp("batched"), num_retained=1, gc_interval_s=0.2)
    client = store.client()
    orders = client.create_table(orders_spec("orders", num_buckets=4))
    client.upsert("orders", _rows(0, 40))
    client.upsert("orders", _rows(20, 40))
    client.take_snapshots("orders")
    tiered = {str(b.bucket): b.log_end_offset for b in client.log_info("orders").buckets}
    client.report_lake("orders", _report(orders.table_id, 1, tiered))
    wait_until(
        lambda: all(b.log_start_offset > 0 for b in client.log_info("orders").buckets if b.log_end_offset),
        "GC to delete the tiered segments of orders",
        **STORE_PACE,
    )
    client.upsert("orders", _rows(50, 30))  # after the report: these stay
    for name, buckets in (("users", 2), ("empty", 1), (NASTY, 3), ("dropped", 2)):
        client.create_table(orders_spec(name, num_buckets=buckets))
        if name != "empty":
            client.upsert(name, _rows(0, 10))
            client.upsert(name, _rows(5, 10))
    client.drop_table("dropped")
    yield store
    store.stop()


def _get(store: StoreProcess, path: str) -> requests.Response:
    return requests.get(store.url + path, timeout=30)


def _post(store: StoreProcess, path: str, body: Any) -> requests.Response:
    return requests.post(store.url + path, json=body, timeout=30)


def _single_log(store: StoreProcess, name: str) -> dict[str, Any]:
    """The table's own log answer, with its own lake report's offsets (None before the first)."""
    response = _get(store, f"/v1/tables/{segment(name)}/log")
    assert response.status_code == 200, response.text
    lake = _get(store, f"/v1/tables/{segment(name)}/lake")
    assert lake.status_code in (200, 404), lake.text
    return {"name": name, **response.json(), "lake": lake.json()["buckets"] if lake.status_code == 200 else None}


def test_logs_answer_every_table_as_its_own_log_call_does(seeded):
    response = _get(seeded, "/v1/logs")

    assert response.status_code == 200, response.text
    assert response.json() == {"tables": [_single_log(seeded, name) for name in LIVE], "missing": []}
    orders = response.json()["tables"][LIVE.index("orders")]
    assert orders["lake"] is not None and [t["lake"] for t in response.json()["tables"]].count(None) == 3
    assert [b["bucket"] for b in orders["buckets"]] == [0, 1, 2, 3]
    assert all(0 < b["log_start_offset"] < b["log_end_offset"] for b in orders["buckets"])


def test_logs_of_named_tables_list_the_names_the_store_does_not_hold(seeded):
    asked = ["users", "nope", NASTY, "dropped", "nope", "orders"]

    response = _post(seeded, "/v1/logs", {"tables": asked})

    assert response.status_code == 200, response.text
    assert response.json() == {
        "tables": [_single_log(seeded, name) for name in sorted(["users", NASTY, "orders"])],
        "missing": ["nope", "dropped"],
    }


def test_client_logs_by_name(seeded):
    client = seeded.client()

    every = client.logs()
    named = client.logs(["users", "dropped", "nope"])

    assert list(every) == LIVE
    for name in LIVE:
        single = client.log_info(name)
        assert (every[name].name, every[name].table_id, every[name].buckets) == (name, single.table_id, single.buckets)
    assert list(named) == ["users"] and named["users"] == every["users"]
    assert client.logs([]) == {}


def _segments_requests(client: KvStoreClient) -> list[dict[str, Any]]:
    """Every way a table's ranges can be answered or refused, ``orders`` twice (a raw request may)."""
    orders = client.log_info("orders").buckets
    readable = [{"bucket": b.bucket, "from": b.log_start_offset, "to": 10**6} for b in orders]
    middle = [{"bucket": 2, "from": orders[2].log_start_offset + 1, "to": orders[2].log_end_offset - 1}]
    return [
        {"table": "orders", "ranges": readable + middle + readable[:1]},
        {"table": "users", "ranges": [{"bucket": 1, "from": 3, "to": 7}, {"bucket": 0, "from": 0, "to": 0}]},
        {"table": "orders", "ranges": [{"bucket": 0, "from": 0, "to": 5}]},  # deleted by GC: 410
        {"table": "users", "ranges": [{"bucket": 9, "from": 0, "to": 1}]},  # no such bucket: 404
        {"table": "users", "ranges": [{"bucket": 0, "from": 5, "to": 4}]},  # inverted: 400
        {"table": "dropped", "ranges": [{"bucket": 0, "from": 0, "to": 1}]},
        {"table": "nope", "ranges": [{"bucket": 0, "from": 0, "to": 1}]},
        {"table": NASTY, "ranges": [{"bucket": 2, "from": 0, "to": 100}]},
        {"table": "empty", "ranges": [{"bucket": 0, "from": 0, "to": 100}]},
    ]


def test_segments_answer_each_table_as_its_own_segments_call_does(seeded):
    asked = _segments_requests(seeded.client())

    response = _post(seeded, "/v1/segments", {"tables": asked})

    assert response.status_code == 200, response.text
    answers = response.json()["tables"]
    assert [a["table"] for a in answers] == [a["table"] for a in asked]
    statuses = []
    for ask, answer in zip(asked, answers, strict=True):
        single = _post(seeded, f"/v1/tables/{segment(ask['table'])}/log/segments", {"ranges": ask["ranges"]})
        statuses.append(single.status_code)
        expected = single.json() if single.ok else {"error": single.json()}
        assert answer == {"table": ask["table"], **expected}, ask
    assert statuses == [200, 200, 410, 404, 400, 404, 404, 200, 200]
    assert sum(len(b["segments"]) for b in answers[0]["buckets"]) > 4  # something was found


def test_client_segments_return_each_tables_error_beside_the_others(seeded):
    client = seeded.client()
    ranges = {
        "orders": [
            LogRange(bucket=b.bucket, from_offset=b.log_start_offset, to_offset=b.log_end_offset)
            for b in reversed(client.log_info("orders").buckets)
        ],
        "users": [LogRange(bucket=0, from_offset=0, to_offset=4)],
        "dropped": [LogRange(bucket=0, from_offset=0, to_offset=1)],
        "empty": [LogRange(bucket=0, from_offset=0, to_offset=0)],
        NASTY: [LogRange(bucket=3, from_offset=0, to_offset=1)],
    }
    truncated = {"orders": [LogRange(bucket=1, from_offset=0, to_offset=1)]}

    found = client.segments(ranges)
    refused = client.segments(truncated)["orders"]

    assert list(found) == list(ranges)
    for table in ("orders", "users", "empty"):
        assert found[table] == client.table_segments(table, ranges[table])
    assert [s[0].start_offset for s in found["orders"]] == [
        b.log_start_offset for b in reversed(client.log_info("orders").buckets)
    ]
    assert isinstance(found["dropped"], TableNotFoundError) and found["dropped"].table == "dropped"
    assert "table 'dropped' does not exist" in str(found["dropped"])
    assert type(found[NASTY]) is NotFoundError and found[NASTY].code == "NOT_FOUND"
    assert isinstance(refused, SnapshotUnavailableError) and refused.code == "LOG_TRUNCATED"
    assert client.segments({}) == {}


@pytest.fixture
def reported(emptied_kv_store: StoreProcess) -> tuple[StoreProcess, dict[str, int]]:
    """The module's store with tables a, b, c (2 buckets, 5 offsets each) and d, e; ``c`` was dropped."""
    store = emptied_kv_store
    client = store.client()
    ids = {}
    for name in "abcde":
        ids[name] = client.create_table(orders_spec(name, num_buckets=2)).table_id
        client.upsert(name, _rows(0, 10))
    client.drop_table("c")
    return store, ids


def test_lake_reports_land_as_puts_would_and_a_dropped_table_is_its_own_error(reported):
    store, ids = reported
    client = store.client()
    sent = [
        ("a", _report(ids["a"], 3, {"0": 5, "1": 2})),
        ("c", _report(ids["c"], 3, {"0": 1})),  # dropped
        ("b", _report(ids["b"], 3, {"1": 5}, version=7)),
        ("d", _report(ids["d"] + 100, 3)),  # names another incarnation: 409 CONFLICT
        ("e", _report(ids["e"], 3, {"0": 99})),  # past the log's end: 400
        ("nope", _report(1, 3)),
    ]

    response = _post(store, "/v1/lake-reports", {"reports": [{"table": t, "report": r.model_dump()} for t, r in sent]})

    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["table"] for r in results] == [t for t, _ in sent]
    assert results[0]["error"] is None and results[2]["error"] is None
    assert client.get_lake("a") == sent[0][1] and client.get_lake("b") == sent[2][1]
    assert [client.get_lake(t) for t in "de"] == [None, None]
    for (table, report), result in zip(sent, results, strict=True):
        if result["error"] is not None:  # a refused PUT changes nothing: the same refusal again
            single = requests.put(f"{store.url}/v1/tables/{table}/lake", json=report.model_dump(), timeout=10)
            assert result["error"] == single.json(), table
    assert [results[i]["error"]["error"] for i in (1, 3, 4, 5)] == [
        "TABLE_NOT_FOUND",
        "CONFLICT",
        "BAD_REQUEST",
        "TABLE_NOT_FOUND",
    ]


def test_client_report_lakes_returns_each_tables_error(reported):
    store, ids = reported
    client = store.client()
    reports = {
        "b": _report(ids["b"], 2, {"0": 5}),
        "c": _report(ids["c"], 2),
        "d": _report(ids["d"] + 1, 2),
        "e": _report(ids["e"], 2, {"7": 0}),
    }

    results = client.report_lakes(reports)

    assert list(results) == list(reports) and results["b"] is None
    assert isinstance(results["c"], TableNotFoundError) and results["c"].epoch == 2
    assert isinstance(results["d"], ConflictError) and results["d"].status == 409
    assert isinstance(results["e"], BadRequestError) and "buckets.7: not a bucket of table 'e'" in str(results["e"])
    assert client.get_lake("b") == reports["b"]
    assert client.report_lakes({}) == {}


def test_a_stale_epoch_in_one_report_refuses_the_batch_and_stores_none(reported):
    store, ids = reported
    client = store.client()
    client.report_lake("b", _report(ids["b"], 5, {"0": 1}))
    stale = [
        ("a", _report(ids["a"], 5, {"0": 4})),
        ("c", _report(ids["c"], 5)),
        ("b", _report(ids["b"], 4, {"0": 3})),
        ("d", _report(ids["d"], 6, {"1": 2})),
    ]

    response = _post(store, "/v1/lake-reports", {"reports": [{"table": t, "report": r.model_dump()} for t, r in stale]})
    single = requests.put(f"{store.url}/v1/tables/b/lake", json=stale[2][1].model_dump(), timeout=10)
    with pytest.raises(FencedEpochError) as fenced:
        client.report_lakes(dict(stale))
    twice = {
        "reports": [  # a table's second report sees its first one's epoch
            {"table": "a", "report": _report(ids["a"], 9).model_dump()},
            {"table": "a", "report": _report(ids["a"], 8).model_dump()},
        ]
    }
    twice_response = _post(store, "/v1/lake-reports", twice)

    assert response.status_code == 409 and single.status_code == 409
    assert response.json() == single.json() and response.json()["error"] == "FENCED_EPOCH"
    assert fenced.value.status == 409 and fenced.value.epoch is None  # the reports' epochs differ
    assert twice_response.status_code == 409, twice_response.text
    assert client.get_lake("b") == _report(ids["b"], 5, {"0": 1})
    assert [client.get_lake(t) for t in "ade"] == [None, None, None]


def _tag(response: requests.Response) -> str:
    return response.headers["ETag"]


def test_the_list_of_tables_answers_304_until_it_changes(emptied_kv_store):
    client = emptied_kv_store.client()
    client.create_table(orders_spec("a"))
    first = _get(emptied_kv_store, "/v1/tables")

    def unchanged(tag: str) -> bool:
        response = requests.get(f"{emptied_kv_store.url}/v1/tables", headers={"If-None-Match": tag}, timeout=10)
        assert response.headers["ETag"] == _tag(first)
        return response.status_code == 304 and response.content == b""

    assert first.status_code == 200 and [t["name"] for t in first.json()["tables"]] == ["a"]
    assert unchanged(_tag(first)) and unchanged(f'"x", W/{_tag(first)}') and unchanged("*")
    client.upsert("a", _rows(0, 3))  # rows, snapshots, lake reports: the list stays
    client.take_snapshots("a")
    client.report_lake("a", _report(first.json()["tables"][0]["table_id"], 1, {"0": 3}))
    assert unchanged(_tag(first))
    assert not unchanged('"x"')

    tags = [_tag(first)]
    for change in (
        lambda: client.create_table(orders_spec("b")),
        lambda: client.add_column("a", "c", "string"),
        lambda: client.drop_table("b"),
    ):
        change()
        response = requests.get(f"{emptied_kv_store.url}/v1/tables", headers={"If-None-Match": tags[-1]}, timeout=10)
        assert response.status_code == 200, response.text
        assert response.json() == {"tables": [t.model_dump(mode="json", by_alias=True) for t in client.list_tables()]}
        tags.append(_tag(response))
    assert len(set(tags)) == 4


def test_every_logs_ends_answer_304_until_a_log_or_a_report_or_the_list_moves(emptied_kv_store):
    client = emptied_kv_store.client()
    info = client.create_table(orders_spec("a"))
    tags = [_tag(_get(emptied_kv_store, "/v1/logs"))]

    def after(change) -> requests.Response:
        """The answer to the last tag after ``change``: a 200 with a new tag, or the 304."""
        change()
        response = requests.get(f"{emptied_kv_store.url}/v1/logs", headers={"If-None-Match": tags[-1]}, timeout=10)
        assert response.headers["ETag"]
        tags.append(_tag(response))
        return response

    assert after(lambda: None).status_code == 304
    assert after(lambda: client.take_snapshots("a")).status_code == 304, "a snapshot moves no log"
    for change in (
        lambda: client.upsert("a", _rows(0, 3)),
        lambda: client.report_lake("a", _report(info.table_id, 1, {"0": 1})),
        lambda: client.create_table(orders_spec("b")),
        lambda: client.drop_table("b"),
    ):
        response = after(change)
        assert response.status_code == 200, response.text
        assert response.json()["tables"] == [_single_log(emptied_kv_store, name) for name in client.logs()]
    assert len(set(tags)) == 5
    assert client.logs()["a"].lake == {"0": 1}, "the client's kept answer is the store's latest"


def test_every_logs_ends_follow_what_gc_deletes_and_what_is_written(store_factory):
    """The store keeps each table's log answer between calls: a log start GC moves, a write, a
    lake report each make that table's next answer new, and only that table's."""
    store = store_factory(num_retained=1, gc_interval_s=0.2)
    client = store.client()
    ids = {name: client.create_table(orders_spec(name, num_buckets=2)).table_id for name in ("a", "b")}
    for name in ids:
        client.upsert(name, _rows(0, 10))
    tiered = {str(b.bucket): b.log_end_offset for b in client.log_info("a").buckets}
    client.report_lake("a", _report(ids["a"], 1, tiered))
    before = _get(store, "/v1/logs").json()  # kept by the store from here on

    client.take_snapshots("a")  # now GC may delete what the lake holds: a's log starts move
    wait_until(
        lambda: all(b.log_start_offset > 0 for b in client.log_info("a").buckets if b.log_end_offset),
        "GC to delete a's tiered segments",
        **STORE_PACE,
    )
    after_gc = _get(store, "/v1/logs").json()
    client.upsert("b", _rows(100, 5))
    after_write = _get(store, "/v1/logs").json()

    assert before["tables"][0]["buckets"] != after_gc["tables"][0]["buckets"]
    assert after_gc == {"tables": [_single_log(store, "a"), before["tables"][1]], "missing": []}
    assert after_write == {"tables": [after_gc["tables"][0], _single_log(store, "b")], "missing": []}
    assert after_write["tables"][1] != before["tables"][1]


def test_the_etag_survives_a_restart_and_no_other_store_shares_it(store_factory):
    one, other = store_factory(), store_factory()
    for store in (one, other):
        store.client().create_table(orders_spec("a"))
    tag = _tag(_get(one, "/v1/tables"))

    one.restart()

    assert requests.get(f"{one.url}/v1/tables", headers={"If-None-Match": tag}, timeout=10).status_code == 304
    assert requests.get(f"{other.url}/v1/tables", headers={"If-None-Match": tag}, timeout=10).status_code == 200


def test_client_list_tables_keeps_the_list_until_it_changes_from_threads(emptied_kv_store):
    client, other = emptied_kv_store.client(), emptied_kv_store.client()
    statuses: list[int] = []
    client.session.hooks["response"].append(lambda response, **_: statuses.append(response.status_code))

    with ThreadPoolExecutor(4) as pool:
        for i in range(4):
            other.create_table(orders_spec(f"t{i}"))
            lists = list(pool.map(lambda _: [t.name for t in client.list_tables()], range(12)))
            assert lists == [[f"t{j}" for j in range(i + 1)]] * 12
    other.add_column("t0", "extra", "bigint")

    assert [c.name for c in client.list_tables()[0].columns][-1] == "extra"
    assert statuses.count(304) >= 4 and statuses.count(200) >= 5, statuses


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/v1/logs", {"tables": []}, "tables: List should have at least 1 item"),
        ("/v1/logs", {"tables": ["t"] * 10_001}, "tables: List should have at most 10000 items"),
        ("/v1/logs", {"tables": ["ok", "a/b"]}, "tables[1]: table name 'a/b' contains the path separator"),
        ("/v1/logs", {"tables": [1]}, "tables[0]: Input should be a valid string"),
        (
            "/v1/segments",
            {"tables": [{"table": "users", "ranges": []}]},
            "tables[0].ranges: List should have at least 1",
        ),
        (
            "/v1/segments",
            {"tables": [{"table": "users", "ranges": [{"bucket": 0, "from": "1", "to": 2}]}]},
            "tables[0].ranges[0].from: Input should be a valid integer",
        ),
        (
            "/v1/segments",
            {"tables": [{"table": "users", "ranges": [{"bucket": 0, "from": 0, "to": 1}]}] * 10_001},
            "tables: List should have at most 10000 items",
        ),
        ("/v1/lake-reports", {"reports": []}, "reports: List should have at least 1 item"),
        (
            "/v1/lake-reports",
            {
                "reports": [{"table": "users", "report": {"table_id": 1, "epoch": 1, "lake_version": 1, "buckets": {}}}]
                * 10_001
            },
            "reports: List should have at most 10000 items",
        ),
        (
            "/v1/lake-reports",
            {"reports": [{"table": "users", "report": {"table_id": 1, "epoch": -1, "lake_version": 1, "buckets": {}}}]},
            "reports[0].report.epoch: Input should be greater than or equal to 0",
        ),
    ],
)
def test_bad_batches_are_refused_naming_the_field(seeded, path, body, message):
    response = _post(seeded, path, body)

    assert response.status_code == 400, response.text
    assert response.json()["error"] == "BAD_REQUEST" and message in response.json()["message"], response.json()
    assert seeded.client().get_lake("users") is None


def test_a_batch_over_the_body_limit_is_413(store_factory):
    store = store_factory(max_body_bytes=4096)

    response = _post(store, "/v1/logs", {"tables": [f"t{i}" for i in range(1000)]})

    assert response.status_code == 413 and response.json()["error"] == "PAYLOAD_TOO_LARGE", response.text
    with pytest.raises(BadRequestError):
        store.client().logs([f"t{i}" for i in range(1000)])
