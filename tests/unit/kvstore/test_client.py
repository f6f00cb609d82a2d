"""The client's error mapping, retry policy, pickling and how it reads answers — the parts that need
no server."""

from __future__ import annotations

import inspect
import json
import pickle
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pyarrow as pa
import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from tiering.errors import (
    BadRequestError,
    ConflictError,
    FencedEpochError,
    LeaseNotFoundError,
    NotFoundError,
    NotLeaderError,
    RetryableError,
    SnapshotUnavailableError,
    StoreError,
    StoreUnavailableError,
    TableEpochFencedError,
    TableNotFoundError,
    UnauthorizedError,
)
from tiering.kvstore import retry
from tiering.kvstore.client import KvStoreClient, _refusal, error_for, transport_reason
from tiering.kvstore.models import BucketRef, ErrorBody, LakeReport, LogRange, SnapshotRef, TableSpec
from tiering.ports import free_port

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("status", "code", "path", "kind"),
    [
        (400, "BAD_REQUEST", "/v1/tables/t/rows", BadRequestError),
        (401, "UNAUTHORIZED", "/v1/tables", UnauthorizedError),
        (404, "TABLE_NOT_FOUND", "/v1/tables/t", TableNotFoundError),
        (404, "LEASE_NOT_FOUND", "/v1/leases/l/renew", LeaseNotFoundError),
        (404, "", "/v1/leases/l", LeaseNotFoundError),  # another protocol implementation without codes
        (404, "NOT_FOUND", "/v1/tables/t/lake", NotFoundError),
        (409, "FENCED_EPOCH", "/v1/leases/l/renew", FencedEpochError),
        (409, "CONFLICT", "/v1/tables", ConflictError),
        (409, "OTHER_JOB", "/v1/tables/t/lake", ConflictError),  # another job's report: not a fence
        (409, "TABLE_EPOCH_FENCED", "/v1/tables/t/lake", TableEpochFencedError),  # a group's moved table
        (410, "SNAPSHOT_GONE", "/v1/tables/t/buckets/0/snapshots/1", SnapshotUnavailableError),
        (500, "INTERNAL", "/v1/tables", StoreUnavailableError),
        (503, "UNAVAILABLE", "/v1/tables", StoreUnavailableError),
    ],
)
def test_error_mapping(status, code, path, kind):
    error = error_for(status, {"error": code, "message": "why"}, "POST", path, lease_id="l", epoch=3)
    assert type(error) is kind
    assert (error.status, error.code, error.lease_id, error.epoch) == (status, code, "l", 3)
    answered = f"KV store answered {status} {code}: " if status >= 500 else ""
    assert str(error) == f"{answered}why (POST {path})"


def test_fence_means_the_term_is_over_and_is_never_retryable():
    error = error_for(409, {"error": "FENCED_EPOCH", "message": "stale"}, "PUT", "/v1/tables/t/lake")
    assert isinstance(error, NotLeaderError) and not isinstance(error, ConflictError)
    assert not isinstance(error, RetryableError)


def test_another_jobs_report_is_a_conflict_inside_a_batch_too_never_a_fence():
    error = _refusal("/v1/lake-reports", "t", ErrorBody(error="OTHER_JOB", message="job 'a' holds it"), epoch=3)
    assert type(error) is ConflictError and (error.code, error.status, error.table) == ("OTHER_JOB", 409, "t")
    assert not isinstance(error, NotLeaderError)


def test_a_moved_table_is_that_tables_answer_inside_a_batch_not_the_terms_end():
    message = "job 'b' of group 'g' owns the table at table epoch 2"
    error = _refusal("/v1/lake-reports", "t", ErrorBody(error="TABLE_EPOCH_FENCED", message=message), epoch=3)
    assert type(error) is TableEpochFencedError and (error.status, error.table) == (409, "t")
    assert not isinstance(error, NotLeaderError) and not isinstance(error, RetryableError)


def test_non_json_error_body_keeps_its_text():
    error = error_for(502, "<html>Bad Gateway</html>", "GET", "/v1/tables")
    assert isinstance(error, StoreUnavailableError)
    assert str(error) == "KV store answered 502: <html>Bad Gateway</html> (GET /v1/tables)"


def test_an_answer_without_the_stores_envelope_names_who_answered():
    """Another server on the store's port (its old one, taken over) answers 404 with no error code."""
    error = error_for(404, {"detail": "Not Found"}, "GET", "/v1/tables", store="http://127.0.0.1:8080")
    assert isinstance(error, NotFoundError)
    assert str(error) == (
        "http://127.0.0.1:8080 answered 404 without the KV store's error envelope: "
        '{"detail": "Not Found"} (GET /v1/tables)'
    )
    enveloped = error_for(404, {"error": "TABLE_NOT_FOUND", "message": "no table t"}, "GET", "/v1/tables/t", store="x")
    assert str(enveloped) == "no table t (GET /v1/tables/t)"


_STATUS_KINDS = {
    400: BadRequestError,
    413: BadRequestError,
    401: UnauthorizedError,
    404: NotFoundError,
    409: ConflictError,
    410: SnapshotUnavailableError,
    408: StoreUnavailableError,
    429: StoreUnavailableError,
}
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_FOREIGN_BODIES = st.one_of(
    _JSON,
    st.fixed_dictionaries({"error": st.fixed_dictionaries({"code": st.integers(400, 599), "message": st.text()})}),
    st.fixed_dictionaries(
        {"error": st.integers() | st.none() | st.just("") | st.lists(st.text())}, optional={"message": _JSON}
    ),
    st.fixed_dictionaries({"error": st.text(min_size=1)}, optional={"message": st.integers() | st.lists(st.text())}),
    st.text(),
    st.just("<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"),
)


@settings(max_examples=400, deadline=None)
@given(
    status=st.integers(400, 599),
    body=_FOREIGN_BODIES,
    path=st.sampled_from(["/v1/leases/job-1/release", "/v1/tables/t/lake", "/v1/logs", "/v1/leases"]),
)
def test_any_answer_in_a_foreign_shape_is_the_typed_error_of_its_status_naming_who_answered(status, body, path):
    """A gateway in front of the store answers in its own shape; whatever it says, the client
    raises the error its status means (never a TypeError from reading it) and names the answerer."""
    error = error_for(status, body, "POST", path, store="http://gw:8443", lease_id="job-1", epoch=4)
    expected = StoreUnavailableError if status >= 500 else _STATUS_KINDS.get(status)
    if status == 404 and path.startswith("/v1/leases/"):
        expected = LeaseNotFoundError
    assert type(error) is (expected or StoreError) and error.status == status
    assert (error.lease_id, error.epoch) == ("job-1", 4)
    assert f"(POST {path})" in str(error) and "http://gw:8443" in str(error)
    assert "\n" not in str(error) and len(str(error)) < 500


def test_a_gateways_503_on_a_release_is_unavailable_naming_it():
    """The shape that killed a job: a TypeError on the first refused release ended the query."""
    body = {"error": {"code": 503, "message": "upstream connect error"}}
    error = error_for(503, body, "POST", "/v1/leases/j-1/release", store="http://gw:8443")
    assert type(error) is StoreUnavailableError and error.code == ""
    assert str(error) == (
        'KV store at http://gw:8443 answered 503: {"error": {"code": 503, "message": "upstream '
        'connect error"}} (POST /v1/leases/j-1/release)'
    )


@pytest.mark.parametrize(("body", "shown"), [("", "an empty body"), (None, "null"), ("x" * 1000, "x" * 300 + "...")])
def test_an_empty_or_long_foreign_body_is_said_in_one_short_line(body, shown):
    error = error_for(502, body, "GET", "/v1/logs", store="http://s")
    assert str(error) == f"KV store at http://s answered 502: {shown} (GET /v1/logs)"


def test_policy_retries_only_unavailable_and_reraises_the_error():
    calls = []

    def flaky(error):
        calls.append(error)
        raise error

    unavailable = StoreUnavailableError("down")
    with pytest.raises(StoreUnavailableError) as raised:
        retry.instant(retry.STORE_RETRY, attempts=4).copy()(flaky, unavailable)
    assert raised.value is unavailable and len(calls) == 4

    calls.clear()
    with pytest.raises(FencedEpochError):
        retry.instant(retry.STORE_RETRY).copy()(flaky, FencedEpochError("stale", code="FENCED_EPOCH", status=409))
    assert len(calls) == 1


def test_unreachable_store_is_unavailable_after_retries(monkeypatch):
    monkeypatch.setattr(retry, "STORE_RETRY", retry.instant(retry.STORE_RETRY, attempts=2))
    client = KvStoreClient(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    with pytest.raises(StoreUnavailableError) as raised:
        client.get_lease("job-1")
    assert "unreachable" in str(raised.value) and "(GET /v1/leases/job-1)" in str(raised.value)
    assert raised.value.lease_id == "job-1"
    assert client.health() is False


def test_a_retry_deadline_reports_a_down_store_within_it():
    """The job waits out a store restart (~30 s); an operator's status call reports it sooner."""
    client = KvStoreClient(f"http://127.0.0.1:{free_port()}", timeout_s=2, retry_deadline_s=0.5)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="unreachable"):
        client.list_tables()
    assert time.monotonic() - started < 5


def test_a_copy_with_a_retry_deadline_keeps_the_store_and_the_shorter_deadline():
    client = KvStoreClient(f"http://127.0.0.1:{free_port()}", "secret", timeout_s=2)
    table_calls = client.with_retry_deadline(0.5)
    assert (table_calls.url, table_calls.token, table_calls.timeout_s, table_calls.retry_deadline_s) == (
        client.url,
        "secret",
        2,
        0.5,
    )
    assert client.retry_deadline_s is None, "the original keeps the full deadline"
    assert KvStoreClient(client.url, retry_deadline_s=0.2).with_retry_deadline(5).retry_deadline_s == 0.2
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="unreachable"):
        table_calls.list_tables()
    assert time.monotonic() - started < 5


def test_pickles_without_its_session():
    client = KvStoreClient("http://127.0.0.1:1/", token="t", timeout_s=5)
    assert client.session.headers["Authorization"] == "Bearer t"
    copy = pickle.loads(pickle.dumps(client))
    assert copy._session is None and (copy.url, copy.token, copy.timeout_s) == ("http://127.0.0.1:1", "t", 5)
    assert copy.session.headers["Authorization"] == "Bearer t"


def test_the_session_takes_proxies_and_ca_bundle_from_the_environment_once(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "direct.example")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/our-ca.pem")

    proxied = KvStoreClient("http://store.example:8080").session
    direct = KvStoreClient("http://direct.example:8080").session
    monkeypatch.setenv("HTTP_PROXY", "http://changed.example:1")

    assert proxied.proxies.get("http") == "http://proxy.example:3128", "read when the session was made"
    assert "http" not in direct.proxies, "NO_PROXY names this store"
    assert proxied.verify == "/etc/ssl/our-ca.pem"
    assert not proxied.trust_env, "requests must not rescan the environment on every call"


# A newer store's answers: every object of every answer the client reads carries a field no model of
# this release knows (the maps of bucket -> offset excepted: their keys are data, not fields).
_MAPS = {"lake", "buckets"}
_TABLE = {
    "name": "t",
    "schema": [{"name": "id", "type": "bigint"}],
    "primary_key": ["id"],
    "num_buckets": 1,
    "table_id": 7,
}
_SNAPSHOT = {"bucket": 0, "snapshot_id": 1, "log_offset": 1, "files": ["f"], "row_count": 1, "size_bytes": 10}
_LOG = {"table_id": 7, "buckets": [{"bucket": 0, "log_start_offset": 0, "log_end_offset": 1}]}
_SEGMENTS = {"bucket": 0, "segments": [{"start_offset": 0, "end_offset": 1, "file": "s"}]}
_REF = {"table_id": 7, "bucket": 0, "snapshot_id": 1}
_LEASE = {"lease_id": "l", "epoch": 1, "expires_at_ms": 5, "snapshots": [_REF]}
_REPORT = {"table_id": 7, "epoch": 1, "lake_version": 0, "buckets": {"0": 1}, "job": "j"}
_REFUSAL = {"error": "OTHER_JOB", "message": "job 'j' holds it"}
_ANSWERS: dict[tuple[str, str], Any] = {
    ("POST", "/v1/tables"): _TABLE,
    ("GET", "/v1/tables"): {"tables": [_TABLE]},
    ("GET", "/v1/tables/t"): _TABLE,
    ("POST", "/v1/tables/t/columns"): _TABLE,
    ("POST", "/v1/tables/t/rows"): {"table_id": 7, "rows": 1, "records": 1, "buckets": {"0": [0, 1]}},
    ("POST", "/v1/tables/t/snapshots"): {"table_id": 7, "buckets": [_SNAPSHOT]},
    ("GET", "/v1/tables/t/snapshots"): {"table_id": 7, "buckets": [_SNAPSHOT]},
    ("GET", "/v1/tables/t/buckets/0/snapshots/1"): _SNAPSHOT,
    ("GET", "/v1/tables/t/log"): _LOG,
    ("GET", "/v1/tables/t/buckets/0/log"): {"segments": _SEGMENTS["segments"]},
    ("POST", "/v1/tables/t/log/segments"): {"buckets": [_SEGMENTS]},
    ("GET", "/v1/logs"): {"tables": [{**_LOG, "name": "t", "lake": {"0": 1}, "lake_job": "j"}], "missing": []},
    ("POST", "/v1/logs"): {"tables": [{**_LOG, "name": "t", "lake": {"0": 1}, "lake_job": "j"}], "missing": ["gone"]},
    ("POST", "/v1/segments"): {"tables": [{"table": "t", "buckets": [_SEGMENTS]}, {"table": "u", "error": _REFUSAL}]},
    ("POST", "/v1/leases/l/acquire"): {**_LEASE, "unavailable": [_REF]},
    ("POST", "/v1/leases/l/renew"): _LEASE,
    ("POST", "/v1/leases/l/release"): _LEASE,
    ("GET", "/v1/leases"): {"leases": [_LEASE]},
    ("GET", "/v1/leases/l"): _LEASE,
    ("POST", "/v1/lake-reports"): {"results": [{"table": "t", "error": None}, {"table": "u", "error": _REFUSAL}]},
    ("GET", "/v1/tables/t/lake"): _REPORT,
    ("DELETE", "/v1/tables/t/lake"): _REPORT,
}
_RANGE = [LogRange(bucket=0, from_offset=0, to_offset=1)]
#: Every client call that reads an answer.
_READS: dict[str, Callable[[KvStoreClient], Any]] = {
    "create_table": lambda c: c.create_table(
        TableSpec(name="t", schema=[{"name": "id", "type": "bigint"}], primary_key=["id"], num_buckets=1)
    ),
    "list_tables": lambda c: c.list_tables(),
    "get_table": lambda c: c.get_table("t"),
    "add_column": lambda c: c.add_column("t", "c", "string"),
    "upsert": lambda c: c.upsert("t", [{"id": 1}]),
    "delete": lambda c: c.delete("t", [{"id": 1}]),
    "write_arrow": lambda c: c.write_arrow("t", pa.table({"id": [1]})),
    "take_snapshots": lambda c: c.take_snapshots("t"),
    "latest_snapshots": lambda c: c.latest_snapshots("t"),
    "get_snapshot": lambda c: c.get_snapshot("t", 0, 1),
    "log_info": lambda c: c.log_info("t"),
    "log_segments": lambda c: c.log_segments("t", 0, 0, 1),
    "table_segments": lambda c: c.table_segments("t", _RANGE),
    "logs": lambda c: (c.logs(), c.logs(["t", "gone"])),
    "segments": lambda c: c.segments({"t": _RANGE, "u": _RANGE}),
    "lake_holders": lambda c: c.lake_holders(["t"]),
    "lake_holder_groups": lambda c: c.lake_holder_groups(["t"]),
    "acquire_lease": lambda c: c.acquire_lease("l", 1, 1000, [SnapshotRef(**_REF)]),
    "renew_lease": lambda c: c.renew_lease("l", 1, 1000),
    "release_lease": lambda c: c.release_lease("l", 1, [BucketRef(table_id=7, bucket=0)]),
    "list_leases": lambda c: c.list_leases(),
    "get_lease": lambda c: c.get_lease("l"),
    "report_lakes": lambda c: c.report_lakes({"t": LakeReport(**_REPORT), "u": LakeReport(**_REPORT)}),
    "drop_lake": lambda c: c.drop_lake("t"),
    "get_lake": lambda c: c.get_lake("t"),
}
#: Client calls that read no answer (or only its status or text).
_NO_ANSWER = {"health", "drop_table", "report_lake", "drop_lease", "metrics", "with_retry_deadline"}


def _newer(value: Any, key: str = "") -> Any:
    """``value`` as a newer store might answer it: one more field in every object."""
    if isinstance(value, list):
        return [_newer(item) for item in value]
    if not isinstance(value, dict) or key in _MAPS:
        return value
    return {**{k: _newer(v, k) for k, v in value.items()}, "added_by_a_newer_store": {"any": ["thing"]}}


class _Canned(requests.adapters.BaseAdapter):
    """Answers each call with its canned JSON (``newer``: as a newer store would); records the URLs."""

    def __init__(self, newer: bool) -> None:
        super().__init__()
        self.newer, self.urls = newer, []

    def send(self, request: requests.PreparedRequest, **_: Any) -> requests.Response:
        self.urls.append(request.url)
        answer = _ANSWERS[(request.method, urlsplit(request.url).path)]
        response = requests.Response()
        response.status_code, response.request, response.url = 200, request, request.url
        response._content = json.dumps(_newer(answer) if self.newer else answer).encode()
        response.headers["Content-Type"] = "application/json"
        return response

    def close(self) -> None:
        pass


def _client(newer: bool) -> tuple[KvStoreClient, _Canned]:
    client, canned = KvStoreClient("http://store.test"), _Canned(newer)
    client.session.mount("http://store.test/", canned)
    return client, canned


def _comparable(value: Any) -> Any:
    """Errors compare by type and message."""
    if isinstance(value, Exception):
        return type(value), str(value)
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    return value


def test_every_call_covered_here():
    public = {
        name for name, member in inspect.getmembers(KvStoreClient, inspect.isfunction) if not name.startswith("_")
    }
    assert public == set(_READS) | _NO_ANSWER, "a new client call: does it read an answer? add it to _READS"


@pytest.mark.parametrize("call", sorted(_READS))
def test_an_answer_with_fields_this_release_does_not_know_reads_as_without_them(call):
    """Forward compatibility: a newer store may add fields to its answers (a rolling upgrade); the
    client ignores them, at every depth, models shared with request bodies included."""
    newer, canned = _client(newer=True)
    plain, _ = _client(newer=False)

    assert _comparable(_READS[call](newer)) == _comparable(_READS[call](plain))
    assert canned.urls


def test_the_client_always_asks_the_logs_for_each_tables_holder():
    client, canned = _client(newer=False)

    assert client.lake_holders(["t"]) == {"t": "j"} and client.logs()["t"].lake_job == "j"
    assert [parse_qs(urlsplit(url).query) for url in canned.urls] == [{"holders": ["true"]}] * 2


def test_a_group_members_report_names_group_job_and_table_epoch_together():
    LakeReport(table_id=1, epoch=1, lake_version=1, buckets={}, job="a", group="g", table_epoch=1)
    for partial in ({"group": "g"}, {"table_epoch": 1, "job": "a"}, {"group": "g", "table_epoch": 1}):
        with pytest.raises(ValueError, match="group and table_epoch come together"):
            LakeReport(table_id=1, epoch=1, lake_version=1, buckets={}, **partial)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            requests.ConnectionError(
                "HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded with url: /v1/leases (Caused by "
                "NewConnectionError(\"HTTPConnection(host='127.0.0.1', port=9): Failed to establish a new "
                'connection: [Errno 111] Connection refused"))'
            ),
            "ConnectionError: [Errno 111] Connection refused",
        ),
        (
            requests.ReadTimeout("HTTPConnectionPool(host='127.0.0.1', port=8420): Read timed out. (read timeout=5.0)"),
            "ReadTimeout: Read timed out. (read timeout=5.0)",
        ),
        (requests.ConnectionError("something\n  else"), "ConnectionError: something else"),
    ],
)
def test_a_request_without_an_answer_is_told_by_its_cause(error, reason):
    assert transport_reason(error) == reason
