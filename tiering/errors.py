"""Every error the tiering service raises, rooted at :class:`TieringError`.

The hierarchy says what is safe to retry (like requests' ``ConnectTimeout(ConnectionError,
Timeout)``): only subclasses of :class:`RetryableError` are retried by the named retry
policies; everything else is a fact about the request, the lease or the epoch that a retry
cannot change. Errors carry the object they are about (``table``, ``lease_id``, ``epoch``)
so an operator reading one line of log knows what to look at.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def one_line(error: BaseException | str) -> str:
    """An error's text as one plain line: delta-rs chains its causes over several colored lines
    ("↳ ..."), pyarrow's S3 errors and HTTP bodies wrap; a log line, the health file and
    ``tiering status`` need the whole cause, not its first words."""
    return " ".join(_ANSI.sub("", str(error)).replace("↳", "->").split())


__all__ = [
    "one_line",
    "TieringError",
    "RetryableError",
    "ConfigError",
    "StoreError",
    "StoreUnavailableError",
    "BadRequestError",
    "UnauthorizedError",
    "NotFoundError",
    "TableNotFoundError",
    "LeaseNotFoundError",
    "SnapshotUnavailableError",
    "LeaseUnsupportedError",
    "ConflictError",
    "TableMovedError",
    "TableEpochFencedError",
    "NotLeaderError",
    "FencedEpochError",
    "DataLossError",
    "LakeCommitError",
    "SchemaMismatchError",
    "BucketWriteError",
    "ForeignCommitError",
    "TableRecreatedError",
    "RoundStateError",
    "LakeReadError",
    "LakeStorageError",
    "ObjectWriteError",
    "CoordinationError",
    "FlussClusterError",
    "FlussClientError",
    "LeadershipLostError",
    "CheckpointError",
    "OffsetLogFormatError",
    "UsageError",
]


class TieringError(Exception):
    """Root of every error raised by this package."""

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        lease_id: str | None = None,
        epoch: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.table = table
        self.lease_id = lease_id
        self.epoch = epoch

    def __reduce__(self) -> tuple[object, ...]:
        """Rebuilt from its args and attributes, not through ``__init__``: an error crosses
        processes (a bucket task's result, a planning process's answer, Spark's Python workers)
        and the subclasses' constructors take other arguments than the message pickle keeps."""
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(cls: type[TieringError], args: tuple[object, ...], state: dict[str, object]) -> TieringError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class RetryableError(TieringError):
    """A passing condition: the same call may succeed later. Retry policies retry only these."""


class ConfigError(TieringError):
    """The configuration is invalid; ``problems`` lists every bad key with what was expected."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid configuration:\n  " + "\n  ".join(problems))
        self.problems = problems


class StoreError(TieringError):
    """The KV store answered with an error. ``code`` is the protocol's error code."""

    def __init__(self, message: str, *, code: str = "", status: int = 0, **context) -> None:
        super().__init__(message, **context)
        self.code = code
        self.status = status


class StoreUnavailableError(StoreError, RetryableError):
    """The store could not be reached, timed out, or answered 5xx/503. Retryable."""


class BadRequestError(StoreError):
    """400: the request is malformed; the message names the field."""


class UnauthorizedError(StoreError):
    """401: missing or wrong bearer token."""


class NotFoundError(StoreError):
    """404: the object does not exist."""


class TableNotFoundError(NotFoundError):
    """404 for a table name."""


class LeaseNotFoundError(NotFoundError):
    """404 for a lease: unknown, dropped, or expired (an expired lease must be re-acquired)."""


class LeaseUnsupportedError(StoreError):
    """The store has no snapshot lease API (a release before it): the job tiers without holds."""


class SnapshotUnavailableError(StoreError):
    """410: the snapshot's files are gone (garbage-collected); plan from a newer snapshot."""


class ConflictError(StoreError):
    """409 that is not an epoch fence: the object changed under the request."""


class TableMovedError(TieringError):
    """The table moved to another member of this job's tiering group: refused where the write
    landed (the store, a Delta commit of a newer table epoch) or found before it (the group's
    ownership no longer gives this job the table). It ends this job's work on that table, not its
    term: never retry it."""


class TableEpochFencedError(StoreError, TableMovedError):
    """409 ``TABLE_EPOCH_FENCED``: the store has seen a higher table epoch than the one this job
    holds; the message names the new owner and its table epoch."""


class NotLeaderError(TieringError):
    """This driver's leadership term is over: stop acting, never retry.

    The root of every way a stale term finds out, wherever the write lands (docs/DESIGN.md §7): the
    store's fenced reply, ZooKeeper's epoch check, a newer term's Delta commit, a lost
    session. Whoever catches it stops the query and leaves the lease to the new leader.
    """


class FencedEpochError(NotLeaderError):
    """A write refused because a newer epoch exists: the store's 409 ``FENCED_EPOCH``, the
    epoch check of a ZooKeeper transaction, or a newer term's transaction in a Delta table.
    ``status`` is the HTTP status when the store said it (else 0)."""

    def __init__(self, message: str, *, code: str = "FENCED_EPOCH", status: int = 0, **context) -> None:
        super().__init__(message, **context)
        self.code = code
        self.status = status


class DataLossError(TieringError):
    """The changelog was truncated past the lake offset and ``fail-on-data-loss`` is set."""


class LakeCommitError(TieringError):
    """A table's round could not be committed to Delta (schema mismatch, conflict, I/O)."""


class SchemaMismatchError(LakeCommitError):
    """The KV table's schema changed in a way the Delta table cannot follow (a type changed, a
    column dropped, a NOT NULL column, another partitioning); names the table and the column."""


class BucketWriteError(LakeCommitError):
    """A bucket's data files could not be written; nothing of the table's round was committed."""


class ForeignCommitError(LakeCommitError):
    """Another writer changed the rows of a tiered table (an append, a delete, a restore made with
    another tool): the lake no longer follows the store, and no round is written on top of it
    until ``tiering resync`` rebuilds the table. ``version`` and ``operation`` name that commit."""

    def __init__(self, message: str, *, version: int, operation: str, **context) -> None:
        super().__init__(message, **context)
        self.version = version
        self.operation = operation


class TableRecreatedError(TieringError):
    """The table was dropped and re-created upstream mid-round (a new ``table_id``)."""


class RoundStateError(TieringError):
    """A table of a round was asked to take a step its state does not allow: a bug, never retried."""


class LakeReadError(TieringError):
    """A table's Delta log (or its files' listing) could not be read from the lake's object store:
    names the table, its location and the store's answer. Passing, as a rule: the next round reads again."""


class LakeStorageError(TieringError):
    """The lake's root cannot be used: unreachable, no such bucket, access denied, a file where
    the directory should be, or a store without conditional puts. Names the root and the reason."""


class ObjectWriteError(LakeStorageError):
    """A write to the lake's object store did not land: the object is missing, short, or the
    store refused a step of its upload. ``key`` is the object's URI, ``operation`` the request
    that failed (``PutObject``, ``UploadPart``, ``CompleteMultipartUpload``, ``HeadObject``...)
    and ``answer`` what the store said (``ACCESS_DENIED``, ``SLOW_DOWN``, a timeout...). The
    client already retried what its retry strategy deems transient; this is what remained."""

    def __init__(self, key: str, operation: str, answer: str, **context) -> None:
        super().__init__(f"object store write of {key} did not land: {operation} failed: {answer}", **context)
        self.key = key
        self.operation = operation
        self.answer = answer


class CoordinationError(TieringError):
    """ZooKeeper could not be reached or answered unexpectedly."""


class JavaNotFoundError(TieringError):
    """No java to start a JVM with (tiering/java.py): a setting to fix (``JAVA_HOME``), never retried."""


class FlussClusterError(TieringError):
    """A process of a Fluss cluster this package starts (tiering/fluss/cluster.py) could not
    start, exited, or was asked for before it started; the message names it and its log."""


class FlussClientError(TieringError):
    """Fluss's Java client cannot be reached from this process: no JVM has fluss-client (the
    driver's lacks it on ``spark.jars``) and no fluss-client jar was given to start one with. A
    setting to fix, never retried."""


class LeadershipLostError(NotLeaderError, CoordinationError):
    """This driver is no longer the leader of its job (session lost, epoch moved on)."""


class UsageError(TieringError):
    """A command's argument names something it cannot act on (a table the store does not have or
    the job does not tier); nothing was done. The command exits 2, like a bad configuration."""


class CheckpointError(TieringError):
    """The streaming checkpoint cannot be used as it is: Spark's part (``offsets/``, ``commits/``,
    ``metadata``...) or the job's own files (``<checkpoint>/tiering/``), or its disk refuses
    writes; the message names the path. Never repaired silently: a new lease id would leak the
    old one, and a removed log entry could replay a round the lake does not expect."""


class OffsetLogFormatError(CheckpointError):
    """An entry of Spark's offsets log has a version this code does not read (another Spark
    wrote it). Not corruption: the batch's rows still hold its splits. ``path`` names the file,
    ``version`` is its version line as found."""

    def __init__(self, message: str, *, path: str, version: str) -> None:
        super().__init__(message)
        self.path = path
        self.version = version
