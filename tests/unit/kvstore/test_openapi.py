"""The store's OpenAPI document says what the routes do (tiering.kvstore.server.openapi): every
body they read, every error envelope they send, the bearer scheme when a token is required,
no 422 FastAPI would have claimed, and only schemas that are valid JSON Schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema_rs
import pytest

from tiering.kvstore.server.app import create_app
from tiering.kvstore.server.store import Store

pytestmark = pytest.mark.unit

BODIES = {
    ("post", "/v1/tables"),
    ("post", "/v1/tables/{name}/columns"),
    ("post", "/v1/tables/{name}/rows"),
    ("post", "/v1/tables/{name}/log/segments"),
    ("post", "/v1/leases/{lease_id}/acquire"),
    ("post", "/v1/leases/{lease_id}/renew"),
    ("post", "/v1/leases/{lease_id}/release"),
    ("put", "/v1/tables/{name}/lake"),
    ("post", "/v1/logs"),
    ("post", "/v1/segments"),
    ("post", "/v1/lake-reports"),
}


def _document(tmp_path, token: str | None) -> dict[str, Any]:
    store = Store(tmp_path)
    try:
        return create_app(store, token, 1024).openapi()
    finally:
        store.close()


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            yield method, path, operation


def _schemas(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        if "schema" in value and isinstance(value["schema"], dict):
            yield value["schema"]
        for item in value.values():
            yield from _schemas(item)


def test_bodies_errors_and_auth_are_declared(tmp_path):
    doc = _document(tmp_path, token="t")
    assert {(m, p) for m, p, op in _operations(doc) if "requestBody" in op} == BODIES
    rows = doc["paths"]["/v1/tables/{name}/rows"]["post"]["requestBody"]["content"]
    assert set(rows) == {"application/json", "application/vnd.apache.arrow.stream"}
    assert doc["components"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}
    for method, path, op in _operations(doc):
        statuses = set(op["responses"])
        assert "422" not in statuses, (method, path)
        if path == "/v1/health":
            assert op["security"] == [] and statuses == {"200"}
            continue
        assert {"200", "400", "401", "503"} <= statuses, (method, path)
        assert ("413" in statuses) == ((method, path) in BODIES), (method, path)
        for status in statuses - {"200", "304"}:  # a 304 has no body
            schema = op["responses"][status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)
    assert doc["components"]["schemas"]["ErrorBody"]["required"] == ["error", "message"]
    tables = doc["paths"]["/v1/tables"]["get"]
    assert tables["responses"]["304"]["headers"]["ETag"]["required"]
    assert [(p["name"], p["in"]) for p in tables["parameters"]] == [("if-none-match", "header")]


def test_without_a_token_the_document_claims_no_auth(tmp_path):
    doc = _document(tmp_path, token=None)
    assert "security" not in doc and "securitySchemes" not in doc["components"]
    assert all("401" not in op["responses"] for _, _, op in _operations(doc))


def test_every_schema_is_valid_json_schema(tmp_path):
    """A tuple once rendered as ``items: [...]``, which OpenAPI 3.1 (JSON Schema 2020-12) refuses."""
    doc = _document(tmp_path, token="t")
    schemas = [*doc["components"]["schemas"].values(), *_schemas(doc["paths"])]
    assert len(schemas) > 30
    for schema in schemas:
        assert jsonschema_rs.meta.is_valid(schema), schema


def _models(schema: Any, schemas: dict[str, Any], found: set[str]) -> set[str]:
    """The component names ``schema`` refers to, at any depth."""
    if isinstance(schema, dict):
        ref = schema.get("$ref", "")
        if ref.startswith("#/components/schemas/") and (name := ref.rsplit("/", 1)[1]) not in found:
            found.add(name)
            _models(schemas[name], schemas, found)
        for value in schema.values():
            _models(value, schemas, found)
    elif isinstance(schema, list):
        for value in schema:
            _models(value, schemas, found)
    return found


def test_request_bodies_refuse_fields_they_do_not_know_and_answers_may_carry_more(tmp_path):
    """What the store reads is strict (400 naming the field), what it answers may grow: a client of
    an earlier release ignores a field it does not know (a rolling upgrade, docs/DESIGN.md §3). A
    model a request and an answer share is the request's, strict."""
    doc = _document(tmp_path, token=None)
    schemas = doc["components"]["schemas"]
    read, answered = set(), set()
    for _, _, op in _operations(doc):
        for media in op.get("requestBody", {}).get("content", {}).values():
            _models(media["schema"], schemas, read)
        _models(op["responses"].get("200", {}), schemas, answered)

    assert {"LakeReport", "Column", "SnapshotRef"} <= read & answered
    for name in read:
        assert schemas[name]["additionalProperties"] is False, name
    for name in answered - read:
        assert "additionalProperties" not in schemas[name], name
    assert "refused (400 naming it)" in doc["info"]["description"]
    for method in ("get", "post"):
        holders = [p for p in doc["paths"]["/v1/logs"][method]["parameters"] if p["name"] == "holders"]
        assert holders and holders[0]["in"] == "query" and "lake_job" in holders[0]["description"], method
