"""The client's error mapping, retry policy and pickling — the parts that need no server."""

from __future__ import annotations

import pickle
import time

import pytest

from tiering.errors import (
    BadRequestError,
    ConflictError,
    FencedEpochError,
    LeaseNotFoundError,
    NotFoundError,
    NotLeaderError,
    RetryableError,
    SnapshotUnavailableError,
    StoreUnavailableError,
    TableNotFoundError,
    UnauthorizedError,
)
from tiering.kvstore import retry
from tiering.kvstore.client import KvStoreClient, _refusal, error_for
from tiering.kvstore.models import ErrorBody
from tiering.kvstore.server.process import free_port

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


def test_non_json_error_body_keeps_its_text():
    error = error_for(502, "<html>Bad Gateway</html>", "GET", "/v1/tables")
    assert isinstance(error, StoreUnavailableError)
    assert str(error) == "KV store answered 502: <html>Bad Gateway</html> (GET /v1/tables)"


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
        client.url, "secret", 2, 0.5)
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
