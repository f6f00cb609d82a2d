"""What stands in front of every route: the bearer token and the body size limit (plain ASGI).

Failure modes: a token compared with ``==`` leaks how much of a guess was right through the
time it takes, and a token in a log line leaks whole; a body read into memory before its size
is known lets one client exhaust the store's memory (and a 10^6-row JSON body would). So:

- the token is compared with ``secrets.compare_digest`` on every path but ``/v1/health`` (the
  OpenAPI document included: it is part of the API, not of its discovery) and appears in no
  message; an unauthenticated request is refused before its body is read;
- a body is counted while it streams in and refused with 413 once it crosses
  ``max_body_bytes`` — before reading any of it when ``Content-Length`` already says so. The
  refusal is raised from the body stream, so it leaves the route like every protocol error,
  through the app's handlers, as ``{"error": "PAYLOAD_TOO_LARGE", ...}``.

A client that stalls half-way through its body holds only its own request: bodies are awaited
on the event loop, never in a thread the other requests need.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from tiering.kvstore.server.errors import PAYLOAD_TOO_LARGE, UNAUTHORIZED, ApiError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/v1/health"})


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((value for key, value in scope["headers"] if key.lower() == name), None)


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": code, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BearerAuth:
    """Refuses (401) every request without ``Authorization: Bearer <token>``, but health."""

    def __init__(self, app: App, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            given = _header(scope, b"authorization") or b""
            if not secrets.compare_digest(given, self._expected):
                await _refuse(send, 401, UNAUTHORIZED, "missing or wrong bearer token (Authorization: Bearer <token>)")
                return
        await self.app(scope, receive, send)


def _too_large(limit: int, what: str) -> ApiError:
    return ApiError(
        413, PAYLOAD_TOO_LARGE, f"body: {what} is over the store's limit of {limit} bytes (--max-body-bytes)"
    )


class BodyLimit:
    """Refuses (413) a request body over ``max_body_bytes``, announced or streamed."""

    def __init__(self, app: App, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            error = _too_large(self.max_body_bytes, f"Content-Length {int(declared)}")
            await _refuse(send, error.status, error.code, error.message)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_body_bytes:
                raise _too_large(self.max_body_bytes, f"at least {received} bytes")
            return message

        await self.app(scope, counted, send)
