"""Protocol errors of the reference store: a request that cannot succeed as sent.

Raised anywhere below the HTTP layer and turned into ``{"error": CODE, "message": ...}`` by
the app, so a storage function can refuse a request without knowing about HTTP. The codes are
part of the protocol: the client maps them to typed errors (tiering.errors).

One convention across the server: a refusal is raised, never returned (no error values, no
None or flag meaning "refused"). Raised inside a transaction, it rolls that transaction back;
a change that must outlive a refusal (deleting an expired lease) is committed in a
transaction of its own first. Only a ``find_*`` lookup returns None, for a miss that is an
answer (catalog.find_snapshot: the caller tells "never existed" from "deleted by GC").
"""

from __future__ import annotations

BAD_REQUEST = "BAD_REQUEST"
UNAUTHORIZED = "UNAUTHORIZED"
NOT_FOUND = "NOT_FOUND"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
TABLE_NOT_FOUND = "TABLE_NOT_FOUND"
LEASE_NOT_FOUND = "LEASE_NOT_FOUND"
CONFLICT = "CONFLICT"
FENCED_EPOCH = "FENCED_EPOCH"
OTHER_JOB = "OTHER_JOB"
TABLE_EPOCH_FENCED = "TABLE_EPOCH_FENCED"
SNAPSHOT_GONE = "SNAPSHOT_GONE"
LOG_TRUNCATED = "LOG_TRUNCATED"
PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
UNAVAILABLE = "UNAVAILABLE"
INTERNAL = "INTERNAL"


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def bad_request(message: str) -> ApiError:
    return ApiError(400, BAD_REQUEST, message)


def table_not_found(name: str) -> ApiError:
    return ApiError(404, TABLE_NOT_FOUND, f"table {name!r} does not exist")


def lease_not_found(lease_id: str) -> ApiError:
    return ApiError(404, LEASE_NOT_FOUND, f"lease {lease_id!r} is unknown, dropped or expired; acquire it again")


def fenced(what: str, epoch: int, current: int) -> ApiError:
    return ApiError(
        409, FENCED_EPOCH, f"{what}: epoch {epoch} is below the current epoch {current}; a newer leader exists"
    )
