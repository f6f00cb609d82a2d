"""The HTTP face of the reference store (DESIGN §3): routes, auth and the error envelope.

Failure mode: a client that cannot tell *why* a call failed retries what it should not (a
fenced epoch) or gives up on what it should retry. Every failure therefore leaves as
``{"error": CODE, "message": ...}`` with the protocol's status (400/401/404/409/410/503), a
bad body names the offending field, and an unexpected exception is a logged 500, never a
hang. Handlers parse bodies themselves (so messages name fields the protocol's way) and run
the store's blocking work in the thread pool.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from tiering.kvstore.models import (
    AcquireRequest,
    LakeReport,
    LeaseList,
    LogSegments,
    ReleaseRequest,
    RenewRequest,
    RowsRequest,
    TableList,
    TableSpec,
)
from tiering.kvstore.server import rows
from tiering.kvstore.server.errors import (
    BAD_REQUEST,
    INTERNAL,
    NOT_FOUND,
    UNAUTHORIZED,
    UNAVAILABLE,
    ApiError,
    bad_request,
)
from tiering.kvstore.server.store import Store

log = logging.getLogger(__name__)
ARROW_STREAM = "application/vnd.apache.arrow.stream"
M = TypeVar("M", bound=BaseModel)


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status)


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


async def _body(request: Request, model: type[M]) -> M:
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"null")
    except ValidationError as e:
        raise bad_request(describe(e)) from None


def _json(model: BaseModel | dict[str, Any]) -> JSONResponse:
    content = model.model_dump(mode="json", by_alias=True) if isinstance(model, BaseModel) else model
    return JSONResponse(content)


async def _run(fn: Callable[..., Any], *args: Any) -> Any:
    return await run_in_threadpool(fn, *args)


def create_app(store: Store, token: str | None = None) -> FastAPI:
    app = FastAPI(title="kv-tiering reference KV store", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, e: ApiError) -> JSONResponse:
        return _error(e.status, e.code, e.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, e: RequestValidationError) -> JSONResponse:
        parts = [f"{_loc(tuple(err['loc'][1:]))}: {err['msg']}" for err in e.errors()[:5]]
        return _error(400, BAD_REQUEST, "; ".join(parts))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException) -> JSONResponse:
        code = NOT_FOUND if e.status_code == 404 else BAD_REQUEST
        return _error(e.status_code, code, f"{request.method} {request.url.path}: {e.detail}")

    @app.exception_handler(sqlite3.OperationalError)
    @app.exception_handler(OSError)
    async def _unavailable(request: Request, e: Exception) -> JSONResponse:
        log.warning("%s %s: storage unavailable: %s", request.method, request.url.path, e)
        return _error(503, UNAVAILABLE, f"{request.method} {request.url.path}: storage unavailable: {e}")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, e: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return _error(500, INTERNAL, f"{request.method} {request.url.path}: {type(e).__name__}: {e}")

    if token:
        expected = f"Bearer {token}".encode()

        @app.middleware("http")
        async def _auth(request: Request, call_next: Callable[..., Any]) -> Response:
            given = request.headers.get("authorization", "").encode()
            if request.url.path != "/v1/health" and not secrets.compare_digest(given, expected):
                return _error(401, UNAUTHORIZED, "missing or wrong bearer token (Authorization: Bearer <token>)")
            return await call_next(request)

    @app.get("/v1/health")
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @app.post("/v1/tables")
    async def create_table(request: Request) -> JSONResponse:
        return _json(await _run(store.create_table, await _body(request, TableSpec)))

    @app.get("/v1/tables")
    async def list_tables() -> JSONResponse:
        return _json(TableList(tables=await _run(store.list_tables)))

    @app.get("/v1/tables/{name}")
    async def get_table(name: str) -> JSONResponse:
        return _json(await _run(store.get_table, name))

    @app.delete("/v1/tables/{name}")
    async def drop_table(name: str) -> JSONResponse:
        info = await _run(store.drop_table, name)
        return JSONResponse({"dropped": info.name, "table_id": info.table_id})

    @app.post("/v1/tables/{name}/rows")
    async def write_rows(name: str, request: Request, op: str = Query("upsert")) -> JSONResponse:
        if request.headers.get("content-type", "").startswith(ARROW_STREAM):
            if op not in ("upsert", "delete"):
                raise bad_request(f"op: expected 'upsert' or 'delete', got {op!r}")
            body = await request.body()
            info = await _run(store.get_table, name)
            data = await _run(rows.from_arrow, info, op, body)
        else:
            req = await _body(request, RowsRequest)
            op = req.op
            info = await _run(store.get_table, name)
            data = await _run(rows.from_json, info, op, req.rows)
        return _json(await _run(store.write_rows, name, op, data))

    @app.post("/v1/tables/{name}/snapshots")
    async def take_snapshots(name: str) -> JSONResponse:
        return _json(await _run(store.take_snapshots, name))

    @app.get("/v1/tables/{name}/snapshots")
    async def latest_snapshots(name: str) -> JSONResponse:
        return _json(await _run(store.latest_snapshots, name))

    @app.get("/v1/tables/{name}/buckets/{bucket}/snapshots/{snapshot_id}")
    async def get_snapshot(name: str, bucket: int, snapshot_id: int) -> JSONResponse:
        return _json(await _run(store.get_snapshot, name, bucket, snapshot_id))

    @app.get("/v1/tables/{name}/log")
    async def log_info(name: str) -> JSONResponse:
        return _json(await _run(store.log_info, name))

    @app.get("/v1/tables/{name}/buckets/{bucket}/log")
    async def log_segments(
        name: str, bucket: int, from_offset: int = Query(0, alias="from"), to_offset: int = Query(2**62, alias="to")
    ) -> JSONResponse:
        return _json(LogSegments(segments=await _run(store.log_segments, name, bucket, from_offset, to_offset)))

    @app.post("/v1/leases/{lease_id}/acquire")
    async def acquire(lease_id: str, request: Request) -> JSONResponse:
        return _json(await _run(store.acquire_lease, lease_id, await _body(request, AcquireRequest)))

    @app.post("/v1/leases/{lease_id}/renew")
    async def renew(lease_id: str, request: Request) -> JSONResponse:
        return _json(await _run(store.renew_lease, lease_id, await _body(request, RenewRequest)))

    @app.post("/v1/leases/{lease_id}/release")
    async def release(lease_id: str, request: Request) -> JSONResponse:
        return _json(await _run(store.release_lease, lease_id, await _body(request, ReleaseRequest)))

    @app.delete("/v1/leases/{lease_id}")
    async def drop_lease(lease_id: str, epoch: int = Query(..., ge=0)) -> JSONResponse:
        await _run(store.drop_lease, lease_id, epoch)
        return JSONResponse({"dropped": lease_id})

    @app.get("/v1/leases")
    async def list_leases() -> JSONResponse:
        return _json(LeaseList(leases=await _run(store.list_leases)))

    @app.get("/v1/leases/{lease_id}")
    async def get_lease(lease_id: str) -> JSONResponse:
        return _json(await _run(store.get_lease, lease_id))

    @app.put("/v1/tables/{name}/lake")
    async def put_lake(name: str, request: Request) -> JSONResponse:
        return _json(await _run(store.put_lake, name, await _body(request, LakeReport)))

    @app.get("/v1/tables/{name}/lake")
    async def get_lake(name: str) -> JSONResponse:
        return _json(await _run(store.get_lake, name))

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(await _run(store.metrics.render), media_type=CONTENT_TYPE_LATEST)

    return app
