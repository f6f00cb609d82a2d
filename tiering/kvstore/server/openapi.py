"""The store's OpenAPI document (``GET /openapi.json``), true to what the routes serve.

Failure mode: a document that lies. FastAPI describes only what it parses itself, and the
store's handlers parse bodies on their own (so a refusal names the field the protocol's way,
and a large body is decoded off the event loop). Left alone, the document would show no
request bodies, a 422 the store never sends, and none of the ``{"error", "message"}``
envelopes it does send. So routes declare their bodies with :func:`json_body` and their
refusals with :func:`errors`, and :func:`document` finishes the generated document: request
schemas into ``components``, the bearer scheme when a token is required, no 422.

Tools fuzz the store from this document (tests/integration/kvstore/test_api_fuzz.py): a
constraint it states must be one the store enforces, and the other way round where JSON
Schema can say it (cross-field rules, such as a primary key naming a column of the schema,
and byte lengths cannot be said; those refusals are 400s the document lists).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from tiering.kvstore.models import ErrorBody

ARROW_STREAM = "application/vnd.apache.arrow.stream"
_REF = "#/components/schemas/{model}"
_STATUS_MEANING = {
    400: "BAD_REQUEST: the message names the field or parameter",
    401: "UNAUTHORIZED: missing or wrong bearer token",
    404: "NOT_FOUND, TABLE_NOT_FOUND or LEASE_NOT_FOUND: names what is unknown",
    409: "FENCED_EPOCH (a newer epoch was seen), OTHER_JOB (another job's lake report holds the table) or CONFLICT",
    410: "SNAPSHOT_GONE or LOG_TRUNCATED: deleted by GC",
    413: "PAYLOAD_TOO_LARGE: the body is over the store's --max-body-bytes",
    503: "UNAVAILABLE: storage failed; retry",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route: the error envelope for each status it can answer with.
    Every route can answer 400 (a malformed parameter) and 503 (storage), so those are added."""
    return {
        status: {"model": ErrorBody, "description": _STATUS_MEANING[status]} for status in sorted({400, 503, *statuses})
    }


def json_body(model: type[BaseModel], *, arrow: bool = False) -> dict[str, Any]:
    """``openapi_extra=`` of a route whose handler reads ``model`` from a JSON body (and, with
    ``arrow``, alternatively an Arrow IPC stream)."""
    content: dict[str, Any] = {
        "application/json": {"schema": model.model_json_schema(by_alias=True, ref_template=_REF)},
    }
    if arrow:
        content[ARROW_STREAM] = {"schema": {"type": "string", "format": "binary"}}
    return {"requestBody": {"required": True, "content": content}}


def document(app: FastAPI, *, token_required: bool) -> dict[str, Any]:
    """The finished document of ``app`` (see the module docstring)."""
    doc = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        separate_input_output_schemas=False,
    )
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for path, operations in doc["paths"].items():
        for operation in operations.values():
            operation["responses"].pop("422", None)
            for media in operation.get("requestBody", {}).get("content", {}).values():
                schemas.update(media["schema"].pop("$defs", {}))
            if token_required and path != "/v1/health":
                operation["responses"]["401"] = {
                    "description": _STATUS_MEANING[401],
                    "content": {"application/json": {"schema": {"$ref": _REF.format(model="ErrorBody")}}},
                }
            elif token_required:
                operation["security"] = []
    if token_required:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
    return doc
