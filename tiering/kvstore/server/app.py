"""The HTTP face of the reference store (docs/DESIGN.md §3): routes, the error envelope, the document.

Failure mode: a client that cannot tell *why* a call failed retries what it should not (a
fenced epoch) or gives up on what it should retry. Every failure therefore leaves as
``{"error": CODE, "message": ...}`` with the protocol's status (400/401/404/409/410/413/503), a
bad body names the offending field, and an unexpected exception is a logged 500, never a
hang. Handlers parse bodies themselves (so messages name fields the protocol's way) and run
that parsing, like the store's blocking work, in the thread pool: a large body decoded on the
event loop would stall every other client meanwhile. What each route reads and answers is
declared for ``/openapi.json`` (openapi.py); the token and the body limit are guards.py's.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from fastapi import FastAPI, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from tiering.kvstore.models import (
    INT64_MAX,
    AcquireRequest,
    AcquireResult,
    AddColumnRequest,
    ErrorBody,
    Health,
    LakeReport,
    LakeReportResult,
    LakeReportResults,
    LakeReportsRequest,
    Lease,
    LeaseDropped,
    LeaseList,
    LogSegments,
    LogsRequest,
    NamedTableSegments,
    ReleaseRequest,
    RenewRequest,
    RowsRequest,
    SegmentsRequest,
    Snapshot,
    TableDropped,
    TableFailure,
    TableInfo,
    TableList,
    TableLog,
    TableSegments,
    TablesLog,
    TableSnapshots,
    TableSpec,
    TablesSegments,
    TablesSegmentsRequest,
    WriteResult,
)
from tiering.kvstore.server import lake_reports, rows
from tiering.kvstore.server.errors import (
    BAD_REQUEST,
    INTERNAL,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    UNAVAILABLE,
    ApiError,
    bad_request,
)
from tiering.kvstore.server.guards import BearerAuth, BodyLimit
from tiering.kvstore.server.openapi import ARROW_STREAM, document, errors, json_body
from tiering.kvstore.server.store import Store

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
_ETAG = {
    "description": "the version of the answer (of the list of tables, of every log's ends)",
    "schema": {"type": "string"},
    "required": True,
}
_HOLDERS = (
    "true: each table's entry also names the job whose lake report holds the table (`lake_job`, absent "
    "when that report names none). Off by default: a client of a release before it refuses fields it does "
    "not know."
)
#: The store's contract with clients of other releases, at the head of its document.
_DESCRIPTION = (
    "Request bodies are read strictly: a field the store does not know is refused (400 naming it). "
    "Answers may carry fields a client does not know (a newer store's): clients ignore them. A field an "
    "earlier release's clients would refuse is sent only to a client that asks for it (`holders`)."
)


def _error(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status, headers=headers)


def _loc(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "body"


def describe(error: ValidationError) -> str:
    """Pydantic errors as ``field.path: message`` (the protocol's way of naming fields)."""
    parts = []
    for e in error.errors()[:5]:
        message = e["msg"].removeprefix("Value error, ")
        parts.append(f"{_loc(e['loc'])}: {message}" if e["type"] != "json_invalid" else f"body: {message}")
    return "; ".join(parts)


def _parse(model: type[M], raw: bytes) -> M:
    """Strictly: on the wire an integer is a JSON integer, never ``true``, ``"7"`` or ``7.5``."""
    try:
        return model.model_validate_json(raw or b"null", strict=True)
    except ValidationError as e:
        raise bad_request(describe(e)) from None


async def _body(request: Request, model: type[M]) -> M:
    return await _run(_parse, model, await request.body())


def _json(model: BaseModel, headers: dict[str, str] | None = None) -> Response:
    # Serialized by pydantic in one pass: dumping to Python objects first, then those to JSON, took
    # eight times as long for the list of 10,000 tables.
    return _raw_json(model.model_dump_json(by_alias=True), headers)


def _raw_json(body: str, headers: dict[str, str] | None = None) -> Response:
    return Response(body, media_type="application/json", headers=headers)


def _envelope(refusal: ApiError) -> ErrorBody:
    return ErrorBody(error=refusal.code, message=refusal.message)


def _etag_matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 §13.1.2: ``*`` or any listed tag, compared weakly (a ``W/`` prefix is ignored)."""
    tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in tags or etag in tags


def _tagged(unchanged: str) -> dict[int | str, dict[str, Any]]:
    """The documented answers of a GET that carries an ETag and answers 304 to it."""
    return {
        **errors(),
        200: {"headers": {"ETag": _ETAG}},
        304: {"description": f"If-None-Match holds the current ETag: {unchanged}", "headers": {"ETag": _ETAG}},
    }


async def _unless_unchanged(
    if_none_match: str,
    tag: Callable[[], str],
    tagged: Callable[[], tuple[str, Any]],
    render: Callable[[Any, dict[str, str]], Response],
) -> Response:
    """A 304 without a body when ``If-None-Match`` holds the current tag (one small read), else
    the answer ``tagged`` reads together with its tag."""
    if if_none_match:
        etag = await _run(tag)
        if _etag_matches(if_none_match, etag):
            return Response(status_code=304, headers={"ETag": etag})
    etag, value = await _run(tagged)
    return render(value, {"ETag": etag})


async def _run(fn: Callable[..., Any], *args: Any) -> Any:
    return await run_in_threadpool(fn, *args)


def _allowed_methods(app: FastAPI, path: str) -> str:
    methods: set[str] = set()
    for route in app.routes:
        if isinstance(route, Route) and route.methods and route.path_regex.match(path):
            methods |= route.methods
    return ", ".join(sorted(methods))


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, e: ApiError) -> JSONResponse:
        return _error(e.status, e.code, e.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, e: RequestValidationError) -> JSONResponse:
        parts = [f"{_loc(tuple(err['loc'][1:]))}: {err['msg']}" for err in e.errors()[:5]]
        return _error(400, BAD_REQUEST, "; ".join(parts))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException) -> JSONResponse:
        code = {404: NOT_FOUND, 405: METHOD_NOT_ALLOWED}.get(e.status_code, BAD_REQUEST)
        # Starlette's Allow names the methods of the first route matching the path only.
        headers = {"Allow": _allowed_methods(app, request.url.path)} if e.status_code == 405 else e.headers
        return _error(e.status_code, code, f"{request.method} {request.url.path}: {e.detail}", headers)

    @app.exception_handler(sqlite3.OperationalError)
    @app.exception_handler(OSError)
    async def _unavailable(request: Request, e: Exception) -> JSONResponse:
        log.warning("%s %s: storage unavailable: %s", request.method, request.url.path, e)
        return _error(503, UNAVAILABLE, f"{request.method} {request.url.path}: storage unavailable: {e}")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, e: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return _error(500, INTERNAL, f"{request.method} {request.url.path}: {type(e).__name__}: {e}")


def create_app(store: Store, token: str | None, max_body_bytes: int) -> FastAPI:
    app = FastAPI(
        title="kv-tiering reference KV store", version="1", description=_DESCRIPTION, docs_url=None, redoc_url=None
    )
    _install_error_handlers(app)
    # The last added guard runs first: unauthenticated requests never get their body counted.
    app.add_middleware(BodyLimit, max_body_bytes=max_body_bytes)
    if token:
        app.add_middleware(BearerAuth, token=token)
    built: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not built:
            built.update(document(app, token_required=bool(token)))
        return built

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/v1/health", response_model=Health)
    async def health() -> Response:
        return _json(Health(status="ok"))

    @app.post("/v1/tables", response_model=TableInfo, responses=errors(409, 413), openapi_extra=json_body(TableSpec))
    async def create_table(request: Request) -> Response:
        return _json(await _run(store.create_table, await _body(request, TableSpec)))

    @app.get("/v1/tables", response_model=TableList, responses=_tagged("the list is unchanged"))
    async def list_tables(
        if_none_match: str = Header("", description="the ETag of the list the client holds"),
    ) -> Response:
        return await _unless_unchanged(
            if_none_match,
            store.catalog_tag,
            store.tagged_tables,
            lambda tables, headers: _json(TableList(tables=tables), headers),
        )

    @app.get("/v1/tables/{name}", response_model=TableInfo, responses=errors(404))
    async def get_table(name: str) -> Response:
        return _json(await _run(store.get_table, name))

    @app.delete("/v1/tables/{name}", response_model=TableDropped, responses=errors(404))
    async def drop_table(name: str) -> Response:
        info = await _run(store.drop_table, name)
        return _json(TableDropped(dropped=info.name, table_id=info.table_id))

    @app.post(
        "/v1/tables/{name}/columns",
        response_model=TableInfo,
        responses=errors(404, 413),
        openapi_extra=json_body(AddColumnRequest),
    )
    async def add_column(name: str, request: Request) -> Response:
        return _json(await _run(store.add_column, name, await _body(request, AddColumnRequest)))

    @app.post(
        "/v1/tables/{name}/rows",
        response_model=WriteResult,
        responses=errors(404, 413),
        openapi_extra=json_body(RowsRequest, arrow=True),
    )
    async def write_rows(
        name: str,
        request: Request,
        op: Literal["upsert", "delete"] = Query("upsert", description="the operation of an Arrow IPC body"),
    ) -> Response:
        write_op: str = op
        if request.headers.get("content-type", "").startswith(ARROW_STREAM):
            body = await request.body()
            info = await _run(store.get_table, name)
            data = await _run(rows.from_arrow, info, write_op, body)
        else:
            req = await _body(request, RowsRequest)
            write_op = req.op
            info = await _run(store.get_table, name)
            data = await _run(rows.from_json, info, write_op, req.rows)
        return _json(await _run(store.write_rows, name, write_op, data))

    @app.post("/v1/tables/{name}/snapshots", response_model=TableSnapshots, responses=errors(404))
    async def take_snapshots(name: str) -> Response:
        return _json(await _run(store.take_snapshots, name))

    @app.get("/v1/tables/{name}/snapshots", response_model=TableSnapshots, responses=errors(404))
    async def latest_snapshots(name: str) -> Response:
        return _json(await _run(store.latest_snapshots, name))

    @app.get(
        "/v1/tables/{name}/buckets/{bucket}/snapshots/{snapshot_id}",
        response_model=Snapshot,
        responses=errors(404, 410),
    )
    async def get_snapshot(
        name: str, bucket: int = Path(ge=0, le=INT64_MAX), snapshot_id: int = Path(ge=0, le=INT64_MAX)
    ) -> Response:
        return _json(await _run(store.get_snapshot, name, bucket, snapshot_id))

    @app.get("/v1/tables/{name}/log", response_model=TableLog, responses=errors(404))
    async def log_info(name: str) -> Response:
        return _json(await _run(store.log_info, name))

    @app.get("/v1/tables/{name}/buckets/{bucket}/log", response_model=LogSegments, responses=errors(404, 410))
    async def log_segments(
        name: str,
        bucket: int = Path(ge=0, le=INT64_MAX),
        from_offset: int = Query(0, alias="from", ge=0, le=INT64_MAX),
        to_offset: int = Query(INT64_MAX, alias="to", ge=0, le=INT64_MAX),
    ) -> Response:
        return _json(LogSegments(segments=await _run(store.log_segments, name, bucket, from_offset, to_offset)))

    @app.post(
        "/v1/tables/{name}/log/segments",
        response_model=TableSegments,
        responses=errors(404, 410, 413),
        openapi_extra=json_body(SegmentsRequest),
    )
    async def table_segments(name: str, request: Request) -> Response:
        body = await _body(request, SegmentsRequest)
        return _json(TableSegments(buckets=await _run(store.table_segments, name, list(body.ranges))))

    @app.get("/v1/logs", response_model=TablesLog, responses=_tagged("no table, log or lake report moved"))
    async def all_logs(
        if_none_match: str = Header("", description="the ETag of the answer the client holds"),
        holders: bool = Query(False, description=f"{_HOLDERS} Each of the two answers has ETags of its own."),
    ) -> Response:
        return await _unless_unchanged(
            if_none_match, lambda: store.logs_tag(holders), lambda: store.tagged_logs_json(holders), _raw_json
        )

    @app.post("/v1/logs", response_model=TablesLog, responses=errors(413), openapi_extra=json_body(LogsRequest))
    async def logs(request: Request, holders: bool = Query(False, description=_HOLDERS)) -> Response:
        body = await _body(request, LogsRequest)
        return _raw_json(await _run(store.logs_json, list(body.tables), holders))

    @app.post(
        "/v1/segments",
        response_model=TablesSegments,
        responses=errors(413),
        openapi_extra=json_body(TablesSegmentsRequest),
    )
    async def segments(request: Request) -> Response:
        body = await _body(request, TablesSegmentsRequest)
        found = await _run(store.tables_segments, [(t.table, list(t.ranges)) for t in body.tables])
        return _json(
            TablesSegments(
                tables=[
                    TableFailure(table=t.table, error=_envelope(answer))
                    if isinstance(answer, ApiError)
                    else NamedTableSegments(table=t.table, buckets=answer)
                    for t, answer in zip(body.tables, found, strict=True)
                ]
            )
        )

    @app.post(
        "/v1/leases/{lease_id}/acquire",
        response_model=AcquireResult,
        responses=errors(409, 413),
        openapi_extra=json_body(AcquireRequest),
    )
    async def acquire(lease_id: str, request: Request) -> Response:
        return _json(await _run(store.acquire_lease, lease_id, await _body(request, AcquireRequest)))

    @app.post(
        "/v1/leases/{lease_id}/renew",
        response_model=Lease,
        responses=errors(404, 409, 413),
        openapi_extra=json_body(RenewRequest),
    )
    async def renew(lease_id: str, request: Request) -> Response:
        return _json(await _run(store.renew_lease, lease_id, await _body(request, RenewRequest)))

    @app.post(
        "/v1/leases/{lease_id}/release",
        response_model=Lease,
        responses=errors(404, 409, 413),
        openapi_extra=json_body(ReleaseRequest),
    )
    async def release(lease_id: str, request: Request) -> Response:
        return _json(await _run(store.release_lease, lease_id, await _body(request, ReleaseRequest)))

    @app.delete("/v1/leases/{lease_id}", response_model=LeaseDropped, responses=errors(404, 409))
    async def drop_lease(lease_id: str, epoch: int = Query(..., ge=0, le=INT64_MAX)) -> Response:
        await _run(store.drop_lease, lease_id, epoch)
        return _json(LeaseDropped(dropped=lease_id))

    @app.get("/v1/leases", response_model=LeaseList, responses=errors())
    async def list_leases() -> Response:
        return _json(LeaseList(leases=await _run(store.list_leases)))

    @app.get("/v1/leases/{lease_id}", response_model=Lease, responses=errors(404))
    async def get_lease(lease_id: str) -> Response:
        return _json(await _run(store.get_lease, lease_id))

    @app.put(
        "/v1/tables/{name}/lake",
        response_model=LakeReport,
        responses=errors(404, 409, 413),
        openapi_extra=json_body(LakeReport),
    )
    async def put_lake(name: str, request: Request) -> Response:
        return _raw_json(lake_reports.dump(await _run(store.put_lake, name, await _body(request, LakeReport))))

    @app.get("/v1/tables/{name}/lake", response_model=LakeReport, responses=errors(404))
    async def get_lake(name: str) -> Response:
        return _raw_json(lake_reports.dump(await _run(store.get_lake, name)))

    @app.delete(
        "/v1/tables/{name}/lake",
        response_model=LakeReport,
        responses=errors(400, 404, 409),
        summary="Drop the table's lake report: hand the table over to another job",
    )
    async def drop_lake(
        name: str,
        epoch: int | None = Query(None, ge=0, le=INT64_MAX, description="with lake_version: the report to drop"),
        lake_version: int | None = Query(None, ge=0, le=INT64_MAX, description="with epoch: the report to drop"),
    ) -> Response:
        if (epoch is None) != (lake_version is None):
            raise bad_request("epoch and lake_version: give both (the report to drop) or neither")
        expected = None if epoch is None or lake_version is None else lake_reports.ReportVersion(epoch, lake_version)
        return _raw_json(lake_reports.dump(await _run(store.drop_lake, name, expected)))

    @app.post(
        "/v1/lake-reports",
        response_model=LakeReportResults,
        responses=errors(409, 413),
        openapi_extra=json_body(LakeReportsRequest),
    )
    async def put_lakes(request: Request) -> Response:
        body = await _body(request, LakeReportsRequest)
        answers = await _run(store.put_lakes, [(r.table, r.report) for r in body.reports])
        return _json(
            LakeReportResults(
                results=[
                    LakeReportResult(table=r.table, error=_envelope(answer) if isinstance(answer, ApiError) else None)
                    for r, answer in zip(body.reports, answers, strict=True)
                ]
            )
        )

    @app.get(
        "/metrics",
        response_class=Response,
        responses={
            **errors(),
            200: {"description": "Prometheus text format", "content": {"text/plain": {"schema": {"type": "string"}}}},
        },
    )
    async def metrics() -> Response:
        return Response(await _run(store.metrics.render), media_type=CONTENT_TYPE_LATEST)

    return app
