"""HTTP client of the KV store protocol (docs/DESIGN.md §3).

Failure modes: connection errors, timeouts and 5xx/503 raise StoreUnavailableError after the
retry policy (tiering.kvstore.retry.STORE_RETRY) gives up; every 4xx maps to a typed error
from tiering.errors (409 FENCED_EPOCH -> FencedEpochError, 404 on a lease ->
LeaseNotFoundError, 409 OTHER_JOB -> ConflictError with that code, never a fence, 409
TABLE_EPOCH_FENCED -> TableEpochFencedError (a group's table moved to another member), 410 ->
SnapshotUnavailableError, ...) and is never retried. Messages are
the server's message plus the method and path. A batched call (``logs``, ``segments``,
``report_lakes``) returns a table's refusal as the error its own call would raise, beside the
other tables' answers, and raises only what fails the whole call (a fenced epoch). Answers are
read leniently (a field a newer store added is ignored: tiering.kvstore.models), and the client
asks for what an earlier release would not read (``?holders=true``). The client
is pickled into Spark executors: the requests.Session is created lazily and dropped on
pickling, as is the kept list of tables.
"""

from __future__ import annotations

import gc
import json
import os
import re
from collections.abc import Iterable
from typing import Any, TypeVar
from urllib.parse import quote

import pyarrow as pa
import requests
from pydantic import BaseModel
from tenacity import stop_after_delay

from tiering.errors import (
    BadRequestError,
    ConflictError,
    FencedEpochError,
    LeaseNotFoundError,
    NotFoundError,
    SnapshotUnavailableError,
    StoreError,
    StoreUnavailableError,
    TableEpochFencedError,
    TableNotFoundError,
    UnauthorizedError,
    one_line,
)
from tiering.kvstore import retry
from tiering.kvstore.models import (
    LAKE_REPORT_ANSWER,
    AcquireRequest,
    AcquireResult,
    BucketRef,
    ErrorBody,
    LakeReport,
    LakeReportResults,
    LakeReportsRequest,
    Lease,
    LeaseList,
    LogRange,
    LogSegment,
    LogSegments,
    LogsRequest,
    NamedTableLog,
    ReleaseRequest,
    RenewRequest,
    SegmentsRequest,
    Snapshot,
    SnapshotRef,
    TableFailure,
    TableInfo,
    TableLakeReport,
    TableList,
    TableLog,
    TableOwners,
    TableRanges,
    TableSegments,
    TablesLog,
    TableSnapshots,
    TableSpec,
    TablesSegments,
    TablesSegmentsRequest,
    WriteResult,
)

ARROW_STREAM = "application/vnd.apache.arrow.stream"
M = TypeVar("M", bound=BaseModel)
#: ``/v1/logs``'s question for each entry's ``lake_job`` (the job holding the table's lake report).
_HOLDERS = {"holders": "true"}

#: The status a table's own call answers each error code with: inside a batched answer a table's
#: refusal is its envelope alone, and error_for picks the typed error by status.
_STATUS_OF_CODE = {
    "BAD_REQUEST": 400,
    "NOT_FOUND": 404,
    "TABLE_NOT_FOUND": 404,
    "CONFLICT": 409,
    "FENCED_EPOCH": 409,
    "OTHER_JOB": 409,
    "TABLE_EPOCH_FENCED": 409,
    "SNAPSHOT_GONE": 410,
    "LOG_TRUNCATED": 410,
}


def segment(value: str) -> str:
    """``value`` as one URL path segment: names may hold ``/``, ``?``, ``#``, ``%``, spaces, and a
    bare ``.`` or ``..`` would be folded away by URL normalization, so dots are encoded too."""
    return quote(value, safe="").replace(".", "%2E")


def _envelope(body: Any) -> tuple[str, str]:
    """``(code, message)`` of an error answer. The store's envelope is ``{"error": CODE, "message":
    text}``; an answer in any other shape (a gateway's own JSON such as ``{"error": {"code": 503,
    ...}}``, HTML, text, an empty body) has no code, and its message is what it said."""
    if isinstance(body, dict) and isinstance(body.get("error"), str) and isinstance(body.get("message"), str):
        return body["error"], body["message"]
    return "", _foreign(body)


def _foreign(body: Any) -> str:
    """An answer in another shape than the store's, as one short line of what it said."""
    text = body if isinstance(body, str) else json.dumps(body, sort_keys=True, default=str)
    text = one_line(text)
    return (text[:300] + "...") if len(text) > 300 else (text or "an empty body")


def error_for(
    status: int, body: Any, method: str, path: str, *, store: str | None = None, **context: Any
) -> StoreError | FencedEpochError:
    """The typed error for an error response (``body`` is the decoded JSON, or text): the status
    picks the type, the envelope's code refines it. A 5xx says it came from the KV store (at
    ``store``): behind a proxy or in a table's failure, a bare "HTTP 503" names no dependency.
    So does any answer without the store's error envelope: another server may listen where the
    store was (a restart elsewhere, a port taken over), or a gateway in front of it answered in
    its own shape, and "HTTP 404" alone would not say where to look. Whatever the body, the
    answer is an error of the status's type, never a failure to read it."""
    code, server_message = _envelope(body)
    message = f"{server_message or f'HTTP {status}'} ({method} {path})"
    if status >= 500:
        answered = " ".join(part for part in (str(status), code) if part)
        message = f"KV store{f' at {store}' if store else ''} answered {answered}: {message}"
    elif not code and store:
        message = f"{store} answered {status} without the KV store's error envelope: {message}"
    kind: type[StoreError] | type[FencedEpochError]
    if status in (400, 413):  # 413: the body is over the store's limit; resending it cannot help
        kind = BadRequestError
    elif status == 401:
        kind = UnauthorizedError
    elif status == 404:
        if code == "TABLE_NOT_FOUND":
            kind = TableNotFoundError
        elif code == "LEASE_NOT_FOUND" or (not code and path.startswith("/v1/leases/")):
            kind = LeaseNotFoundError
        else:
            kind = NotFoundError
    elif status == 409:
        if code == "FENCED_EPOCH":
            kind = FencedEpochError
        else:
            kind = TableEpochFencedError if code == "TABLE_EPOCH_FENCED" else ConflictError
    elif status == 410:
        kind = SnapshotUnavailableError
    elif status >= 500 or status in (408, 429):  # a gateway's timeout or rate limit passes too
        kind = StoreUnavailableError
    else:
        kind = StoreError
    return kind(message, code=code, status=status, **context)


def _parse(model: type[M], content: bytes) -> M:
    """``model`` from a response's bytes, the cyclic GC paused meanwhile. The objects parsed hold
    no cycles, yet creating 50,000 of them (the logs of 10,000 tables) triggers collections that
    walk them, and the whole heap, again and again: more than the parse itself costs. Paused,
    they are walked once, by the first collection after. Another thread may re-enable the GC
    meanwhile; that parse is then slower, never wrong."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return model.model_validate_json(content)
    finally:
        if paused:
            gc.enable()


def _named_logs(content: bytes) -> dict[str, NamedTableLog]:
    """A ``TablesLog`` answer by name."""
    return {log.name: log for log in _parse(TablesLog, content).tables}


def _refusal(path: str, table: str, error: ErrorBody, **context: Any) -> StoreError:
    """The error ``table``'s own call would raise, for its refusal inside a batched answer; a
    fenced epoch is raised, as the whole call's would be (this driver's term is over)."""
    refusal = error_for(_STATUS_OF_CODE.get(error.error, 0), error.model_dump(), "POST", path, table=table, **context)
    if not isinstance(refusal, StoreError):
        raise refusal
    return refusal


class KvStoreClient:
    def __init__(
        self, url: str, token: str | None = None, timeout_s: float = 30.0, retry_deadline_s: float | None = None
    ) -> None:
        """``retry_deadline_s`` shortens the retries of an unavailable store for callers a person
        waits on (``tiering status``): they report a store that is down rather than wait it out."""
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.retry_deadline_s = retry_deadline_s
        self._session: requests.Session | None = None
        # list_tables()'s last answer and its ETag, replaced as one value: threads share it.
        self._listed: tuple[str, list[TableInfo]] | None = None
        self._logged: tuple[str, dict[str, NamedTableLog]] | None = None  # logs()'s last, the same way

    def with_retry_deadline(self, seconds: float) -> KvStoreClient:
        """The same store, its unavailable calls retried for at most ``seconds`` (a session of its own)."""
        deadline = seconds if self.retry_deadline_s is None else min(seconds, self.retry_deadline_s)
        return KvStoreClient(self.url, self.token, self.timeout_s, retry_deadline_s=deadline)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_session"] = None
        state["_listed"] = None
        state["_logged"] = None
        return state

    def __repr__(self) -> str:
        return f"KvStoreClient({self.url!r})"

    @property
    def session(self) -> requests.Session:
        if self._session is None:
            session = requests.Session()
            # The environment's proxies and CA bundle, read once: with trust_env requests rescans
            # the whole environment on every call (~0.6 ms, a fifth of a call to a local store).
            session.proxies = requests.utils.get_environ_proxies(self.url)
            session.verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
            session.trust_env = False
            if self.token:
                session.headers["Authorization"] = f"Bearer {self.token}"
            self._session = session
        return self._session

    def _send(self, method: str, path: str, context: dict[str, Any], **kwargs: Any) -> requests.Response:
        try:
            response = self.session.request(method, self.url + path, timeout=self.timeout_s, **kwargs)
        except requests.RequestException as e:
            raise StoreUnavailableError(
                f"KV store at {self.url} unreachable: {transport_reason(e)} ({method} {path})", **context
            ) from e
        if response.status_code >= 400:
            try:
                body: Any = response.json()
            except ValueError:
                body = response.text
            raise error_for(response.status_code, body, method, path, store=self.url, **context)
        return response

    def _call(
        self,
        method: str,
        path: str,
        *,
        table: str | None = None,
        lease_id: str | None = None,
        epoch: int | None = None,
        policy: Any = None,
        **kwargs: Any,
    ) -> requests.Response:
        context = {k: v for k, v in (("table", table), ("lease_id", lease_id), ("epoch", epoch)) if v is not None}
        policy = policy or retry.STORE_RETRY
        stop = policy.stop if self.retry_deadline_s is None else policy.stop | stop_after_delay(self.retry_deadline_s)
        return policy.copy(stop=stop)(self._send, method, path, context, **kwargs)

    @staticmethod
    def _body(model: BaseModel, *, omit_none: bool = False) -> dict[str, Any]:
        """``omit_none``: leave out the optional fields that are unset (a group's, a report's
        ``job``), so a store of an earlier release, which refuses fields it does not know, still
        takes the call of a job that uses none of them."""
        # JSON in one pass (pydantic's); json= would dump to Python objects, then those to text.
        data = model.model_dump_json(by_alias=True, exclude_none=omit_none).encode()
        return {"data": data, "headers": {"Content-Type": "application/json"}}

    def health(self) -> bool:
        try:
            return self._call("GET", "/v1/health", policy=retry.NO_RETRY).ok
        except StoreError:
            return False

    def create_table(self, spec: TableSpec) -> TableInfo:
        return TableInfo.model_validate(self._call("POST", "/v1/tables", table=spec.name, **self._body(spec)).json())

    def list_tables(self) -> list[TableInfo]:
        """Every table. The client keeps the last list with its ETag and sends the tag along: while
        no table was created, dropped or changed the store answers 304 without a body and the
        kept list is returned, where 10,000 tables' descriptions would take a second to parse."""
        listed = self._listed
        response = self._call("GET", "/v1/tables", headers={"If-None-Match": listed[0]} if listed else None)
        if listed is not None and response.status_code == 304:
            return list(listed[1])
        tables = _parse(TableList, response.content).tables
        etag = response.headers.get("ETag")
        self._listed = (etag, tables) if etag else None
        return list(tables)

    def get_table(self, name: str) -> TableInfo:
        return TableInfo.model_validate(self._call("GET", f"/v1/tables/{segment(name)}", table=name).json())

    def drop_table(self, name: str) -> None:
        self._call("DELETE", f"/v1/tables/{segment(name)}", table=name)

    def add_column(self, table: str, name: str, type: str) -> TableInfo:
        """Append a nullable column (schema evolution); returns the grown table."""
        response = self._call(
            "POST", f"/v1/tables/{segment(table)}/columns", table=table, json={"name": name, "type": type}
        )
        return TableInfo.model_validate(response.json())

    def upsert(self, table: str, rows: list[dict]) -> WriteResult:
        """Upsert ``rows``; the result names the offsets the write appended per bucket."""
        response = self._call(
            "POST", f"/v1/tables/{segment(table)}/rows", table=table, json={"op": "upsert", "rows": rows}
        )
        return WriteResult.model_validate_json(response.content)

    def delete(self, table: str, keys: list[dict]) -> WriteResult:
        response = self._call(
            "POST", f"/v1/tables/{segment(table)}/rows", table=table, json={"op": "delete", "rows": keys}
        )
        return WriteResult.model_validate_json(response.content)

    def write_arrow(self, table: str, data: pa.Table | pa.RecordBatch, op: str = "upsert") -> WriteResult:
        if op not in ("upsert", "delete"):
            raise ValueError(f"op must be 'upsert' or 'delete', got {op!r}")
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, data.schema) as writer:
            writer.write(data)
        response = self._call(
            "POST",
            f"/v1/tables/{segment(table)}/rows",
            table=table,
            params={"op": op},
            data=sink.getvalue().to_pybytes(),
            headers={"Content-Type": ARROW_STREAM},
        )
        return WriteResult.model_validate_json(response.content)

    def take_snapshots(self, table: str) -> TableSnapshots:
        response = self._call("POST", f"/v1/tables/{segment(table)}/snapshots", table=table)
        return TableSnapshots.model_validate(response.json())

    def latest_snapshots(self, table: str) -> TableSnapshots:
        response = self._call("GET", f"/v1/tables/{segment(table)}/snapshots", table=table)
        return TableSnapshots.model_validate(response.json())

    def get_snapshot(self, table: str, bucket: int, snapshot_id: int) -> Snapshot:
        path = f"/v1/tables/{segment(table)}/buckets/{bucket}/snapshots/{snapshot_id}"
        return Snapshot.model_validate(self._call("GET", path, table=table).json())

    def log_info(self, table: str) -> TableLog:
        return TableLog.model_validate(self._call("GET", f"/v1/tables/{segment(table)}/log", table=table).json())

    def log_segments(self, table: str, bucket: int, from_offset: int, to_offset: int) -> list[LogSegment]:
        response = self._call(
            "GET",
            f"/v1/tables/{segment(table)}/buckets/{bucket}/log",
            table=table,
            params={"from": from_offset, "to": to_offset},
        )
        return LogSegments.model_validate(response.json()).segments

    def table_segments(self, table: str, ranges: list[LogRange]) -> list[list[LogSegment]]:
        """The segments of several buckets' ranges in one call, in the order of ``ranges``."""
        response = self._call(
            "POST",
            f"/v1/tables/{segment(table)}/log/segments",
            table=table,
            **self._body(SegmentsRequest(ranges=ranges)),
        )
        return [b.segments for b in TableSegments.model_validate(response.json()).buckets]

    def logs(self, tables: list[str] | None = None) -> dict[str, NamedTableLog]:
        """``log_info`` of ``tables`` (None: every table) in one call, by name; a name the store does
        not hold (a table dropped meanwhile) is absent, the others answer. The values are
        NamedTableLog: a TableLog that also carries its name, its last lake report's offsets and
        the job that made it (asked for always: the planner and the round need it; a store of an
        earlier release ignores the question and names no job)."""
        if tables is None:
            return self._all_logs()
        if not tables:
            return {}
        response = self._call("POST", "/v1/logs", params=_HOLDERS, **self._body(LogsRequest(tables=tables)))
        return _named_logs(response.content)

    def _all_logs(self) -> dict[str, NamedTableLog]:
        """Every table's log ends. As with :meth:`list_tables`, the last answer is kept with its
        ETag: while no table was created or dropped and no log moved, the store answers 304 and
        an idle job's planner parses nothing (10,000 tables' ends: ~100 ms of parsing)."""
        logged = self._logged
        response = self._call(
            "GET", "/v1/logs", params=_HOLDERS, headers={"If-None-Match": logged[0]} if logged else None
        )
        if logged is not None and response.status_code == 304:
            return dict(logged[1])
        found = _named_logs(response.content)
        etag = response.headers.get("ETag")
        self._logged = (etag, found) if etag else None
        return dict(found)

    def segments(self, requests: dict[str, list[LogRange]]) -> dict[str, list[list[LogSegment]] | StoreError]:
        """``table_segments`` of many tables in one call (one consistent view): per table the segments
        of each range in the order of its ranges, or the error its own call would raise, returned
        (TableNotFoundError for a dropped table, SnapshotUnavailableError for a truncated log)."""
        if not requests:
            return {}
        body = TablesSegmentsRequest(tables=[TableRanges(table=t, ranges=ranges) for t, ranges in requests.items()])
        answers = _parse(TablesSegments, self._call("POST", "/v1/segments", **self._body(body)).content).tables
        return {
            answer.table: _refusal("/v1/segments", answer.table, answer.error)
            if isinstance(answer, TableFailure)
            else [b.segments for b in answer.buckets]
            for answer in answers
        }

    def lake_holders(self, tables: Iterable[str]) -> dict[str, str | None]:
        """The job whose lake report each of ``tables`` holds (None: no report, or one naming no
        job), from one ``logs`` call; a table the store does not hold is absent."""
        return {name: found.lake_job for name, found in self.logs(list(tables)).items()}

    def lake_holder_groups(self, tables: Iterable[str]) -> dict[str, tuple[str | None, str | None]]:
        """``lake_holders`` with each holder's tiering group: ``(job, group)``, None where the
        report names none."""
        return {name: (found.lake_job, found.lake_group) for name, found in self.logs(list(tables)).items()}

    def acquire_lease(
        self,
        lease_id: str,
        epoch: int,
        duration_ms: int,
        snapshots: list[SnapshotRef],
        owners: TableOwners | None = None,
    ) -> AcquireResult:
        """Hold ``snapshots``; ``owners``: a group member's table epochs of their tables (else
        None), refused with TableEpochFencedError when one of them moved to another member."""
        req = AcquireRequest(duration_ms=duration_ms, epoch=epoch, snapshots=snapshots, owners=owners)
        response = self._call(
            "POST",
            f"/v1/leases/{segment(lease_id)}/acquire",
            lease_id=lease_id,
            epoch=epoch,
            **self._body(req, omit_none=True),
        )
        return AcquireResult.model_validate(response.json())

    def renew_lease(self, lease_id: str, epoch: int, duration_ms: int) -> Lease:
        req = RenewRequest(duration_ms=duration_ms, epoch=epoch)
        response = self._call(
            "POST", f"/v1/leases/{segment(lease_id)}/renew", lease_id=lease_id, epoch=epoch, **self._body(req)
        )
        return Lease.model_validate(response.json())

    def release_lease(self, lease_id: str, epoch: int, buckets: list[BucketRef]) -> Lease:
        req = ReleaseRequest(epoch=epoch, buckets=buckets)
        response = self._call(
            "POST", f"/v1/leases/{segment(lease_id)}/release", lease_id=lease_id, epoch=epoch, **self._body(req)
        )
        return Lease.model_validate(response.json())

    def drop_lease(self, lease_id: str, epoch: int) -> None:
        self._call("DELETE", f"/v1/leases/{segment(lease_id)}", lease_id=lease_id, epoch=epoch, params={"epoch": epoch})

    def list_leases(self) -> list[Lease]:
        return LeaseList.model_validate(self._call("GET", "/v1/leases").json()).leases

    def get_lease(self, lease_id: str) -> Lease:
        return Lease.model_validate(self._call("GET", f"/v1/leases/{segment(lease_id)}", lease_id=lease_id).json())

    def report_lake(self, table: str, report: LakeReport) -> None:
        body = self._body(report, omit_none=True)
        self._call("PUT", f"/v1/tables/{segment(table)}/lake", table=table, epoch=report.epoch, **body)

    def report_lakes(self, reports: dict[str, LakeReport]) -> dict[str, StoreError | None]:
        """``report_lake`` of many tables in one call, stored in one transaction: per table None
        (stored) or the error its own call would raise, returned (TableNotFoundError for a dropped
        table). A stale epoch in any report raises FencedEpochError and stores none of them: this
        driver's term is over."""
        if not reports:
            return {}
        epochs = {report.epoch for report in reports.values()}
        body = LakeReportsRequest(reports=[TableLakeReport(table=t, report=report) for t, report in reports.items()])
        response = self._call(
            "POST",
            "/v1/lake-reports",
            epoch=epochs.pop() if len(epochs) == 1 else None,
            **self._body(body, omit_none=True),
        )
        return {
            result.table: None
            if result.error is None
            else _refusal("/v1/lake-reports", result.table, result.error, epoch=reports[result.table].epoch)
            for result in _parse(LakeReportResults, response.content).results
        }

    def drop_lake(self, table: str, report: LakeReport | None = None) -> LakeReport:
        """Forget ``table``'s lake report, so another job's next report holds it (handing the table
        over: stop the job that holds it first); returns the dropped report. NotFoundError when
        there is none. ``report``: drop only that one (its epoch and lake version): ConflictError
        when its job reported since."""
        version = {} if report is None else {"epoch": report.epoch, "lake_version": report.lake_version}
        response = self._call("DELETE", f"/v1/tables/{segment(table)}/lake", table=table, params=version)
        return LAKE_REPORT_ANSWER.validate_json(response.content)

    def get_lake(self, table: str) -> LakeReport | None:
        try:
            response = self._call("GET", f"/v1/tables/{segment(table)}/lake", table=table)
        except TableNotFoundError:
            raise
        except NotFoundError:
            return None
        return LAKE_REPORT_ANSWER.validate_json(response.content)

    def metrics(self) -> str:
        return self._call("GET", "/metrics").text


#: The innermost reason of a requests/urllib3 error, inside ~400 characters of connection-pool repr.
_TRANSPORT_REASON = re.compile(
    r"\[Errno -?\d+\] [^'\")]+|(?:Read|Connect(?:ion)?) timed out\.?(?: \((?:read|connect) timeout=[\d.]+\))?"
)


def transport_reason(error: requests.RequestException) -> str:
    """Why a request got no answer, in a few words ("[Errno 111] Connection refused", "Read timed
    out. (read timeout=5.0)"): an operator's line must name the cause, and urllib3's text buries it
    in a pool repr repeated at every retry."""
    found = _TRANSPORT_REASON.search(str(error))
    return f"{type(error).__name__}: {found[0].strip() if found else one_line(error)[:200]}"
