"""Where the streaming checkpoint lives and how the job's own files in it are read and written:
a local directory or S3 (``job.checkpoint``, docs/DESIGN.md §4).

Failure modes this addresses:
- a driver tied to one disk: with the checkpoint on S3 a driver restarted on any node continues
  from it. Spark writes its part (``offsets/``, ``commits/``, ``metadata``, ``sources/``) through
  Hadoop's ``s3a`` filesystem (:attr:`CheckpointStore.spark_location`); the job's own files (the
  lease id, the table health) and what it reads of Spark's (the offsets log) go through the
  lake's object-store layer (:class:`tiering.objectstore.object_store.ObjectStore`: pyarrow, with the
  lake's ``[lake.storage]`` options over the ``AWS_*`` environment);
- two ids for one job: the lease-id file is created no-clobber on both (:meth:`create`): a link of
  a synced temporary file on a local disk, a conditional put (``If-None-Match: *``, as delta-rs
  commits) on S3, so of two drivers racing on a fresh checkpoint exactly one id lands;
- half a file seen by a reader: a file is replaced whole (:meth:`replace`): write, sync, rename
  locally (:mod:`tiering.atomic_file`); one PUT on S3 (an object is never seen half-written);
- a checkpoint that cannot take writes found mid-round: :meth:`probe` writes and removes a small
  hidden object in a directory (Spark ignores hidden names), used by the checks that run before
  the query starts (:mod:`tiering.state.checkpoint_check`).

Parts are named by their path relative to the checkpoint (``"tiering/lease.json"``); errors name
them as :meth:`name` spells them (a local path, or an ``s3://`` URI).
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from tiering.atomic_file import create_file, replace_file
from tiering.errors import CheckpointError, ConfigError

if TYPE_CHECKING:
    from tiering.conf.model import TieringConfig
    from tiering.objectstore.object_store import ObjectStore

__all__ = [
    "DIRECTORY",
    "FILE",
    "CheckpointStore",
    "LocalCheckpoint",
    "S3Checkpoint",
    "checkpoint_of",
    "open_checkpoint",
]

DIRECTORY, FILE = "a directory", "a file"
#: A probe writes this much and syncs it: an empty file needs no free block, so would not show a full disk.
_PROBE_BYTES = 4096


def open_checkpoint(checkpoint: str | CheckpointStore, storage: Mapping[str, str] | None = None) -> CheckpointStore:
    """The store of a checkpoint location: a local path or ``file:`` URI, or ``s3://bucket/prefix``
    reached with ``storage`` (delta-rs option names, the lake's ``[lake.storage]``) over the
    ``AWS_*`` environment. A store passes through unchanged."""
    if isinstance(checkpoint, (LocalCheckpoint, S3Checkpoint)):
        return checkpoint
    if not checkpoint:
        raise CheckpointError("checkpoint location is empty")
    parsed = urlparse(checkpoint)
    if parsed.scheme in ("s3", "s3a"):
        from tiering.objectstore.object_store import ObjectStore

        if not parsed.netloc:
            raise CheckpointError(f"checkpoint {checkpoint!r}: no bucket; expected s3://bucket/prefix")
        try:
            store = ObjectStore.of(f"s3://{parsed.netloc}/{parsed.path.strip('/')}", storage or {})
        except ConfigError as e:
            raise CheckpointError(f"checkpoint {checkpoint!r}: {e}") from None
        return S3Checkpoint(store)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise CheckpointError(f"checkpoint {checkpoint!r}: file URI with remote host {parsed.netloc!r}")
        return LocalCheckpoint(Path(parsed.path), checkpoint)
    if parsed.scheme and len(parsed.scheme) > 1:  # one letter is a Windows drive, not a scheme
        raise CheckpointError(f"checkpoint {checkpoint!r}: only local paths, file: URIs and s3:// are supported")
    return LocalCheckpoint(Path(checkpoint), checkpoint)


def checkpoint_of(config: TieringConfig) -> CheckpointStore:
    """The job's checkpoint, an S3 one reached with the lake's storage options."""
    storage = {
        k: v.get_secret_value() if hasattr(v, "get_secret_value") else str(v) for k, v in config.lake.storage.items()
    }
    return open_checkpoint(config.job.checkpoint, storage)


@dataclass(frozen=True)
class LocalCheckpoint:
    """A checkpoint in a directory of the driver's filesystem."""

    root: Path
    location: str

    is_s3 = False

    @property
    def spark_location(self) -> str:
        return self.location

    def hadoop_conf(self) -> dict[str, str]:
        """Nothing: Spark's local filesystem needs no settings."""
        return {}

    def name(self, part: str = "") -> str:
        return str(self.root / part) if part else str(self.root)

    def kind(self, part: str = "") -> str | None:
        """What is at ``part`` (``a directory``, ``a file``, ...), or None when nothing is or can be."""
        path = self.root / part if part else self.root
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            return "a dangling symlink" if path.is_symlink() else None
        except NotADirectoryError:  # an ancestor is a file: check_creatable names it
            return None
        except OSError as e:
            raise CheckpointError(f"checkpoint path {path} cannot be looked at: {reason(e)}") from None
        if stat.S_ISDIR(mode):
            return DIRECTORY
        return FILE if stat.S_ISREG(mode) else "a special file"

    def read_bytes(self, part: str) -> bytes:
        return (self.root / part).read_bytes()

    def listdir(self, part: str = "") -> list[str]:
        """The names in directory ``part`` ([] when it does not exist)."""
        path = self.root / part
        return os.listdir(path) if path.is_dir() else []

    def replace(self, part: str, data: bytes) -> None:
        """Write ``part`` whole: a reader sees the old file or the new one, never half of one."""
        path = self.root / part
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, data)

    def create(self, part: str, data: bytes) -> bool:
        """Create ``part`` holding ``data`` unless it exists: True when this call created it.
        Written and synced under a temporary name, then *linked* into place (:mod:`tiering.atomic_file`)."""
        path = self.root / part
        path.parent.mkdir(parents=True, exist_ok=True)
        return create_file(path, data)

    def probe(self, part: str = "") -> None:
        """Raise OSError unless directory ``part`` takes a synced write of a hidden file (removed)."""
        probe = (self.root / part) / f".tiering-probe.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        try:
            with open(probe, "xb") as f:
                f.write(bytes(_PROBE_BYTES))
                f.flush()
                os.fsync(f.fileno())
        finally:
            probe.unlink(missing_ok=True)

    def check_creatable(self) -> None:
        """A checkpoint not made yet: its nearest existing ancestor must be a directory it can be made in."""
        root = self.root
        if root.is_symlink():
            raise CheckpointError(f"checkpoint path {root} is a dangling symlink; expected a directory or nothing")
        ancestor = root.absolute().parent
        while LocalCheckpoint(ancestor, str(ancestor)).kind() is None and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        found = LocalCheckpoint(ancestor, str(ancestor)).kind()
        if found != DIRECTORY:
            raise CheckpointError(
                f"checkpoint path {ancestor} (where the checkpoint {root} is to be created) is "
                f"{found or 'missing'}; expected {DIRECTORY}"
            )
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise CheckpointError(f"checkpoint {root} cannot be created: directory {ancestor} does not take writes")


@dataclass(frozen=True)
class S3Checkpoint:
    """A checkpoint under an S3 prefix, reached through the lake's object-store layer. A
    "directory" is a prefix holding objects (S3 has no empty directories: Spark's and the job's
    files make them as they are written)."""

    store: ObjectStore

    is_s3 = True

    @property
    def location(self) -> str:
        return self.store.root

    @property
    def spark_location(self) -> str:
        """The location Spark is given: the same objects through Hadoop's ``s3a`` filesystem."""
        return "s3a://" + self.store.root.removeprefix("s3://")

    def name(self, part: str = "") -> str:
        return f"{self.store.root}/{part}" if part else self.store.root

    def hadoop_conf(self) -> dict[str, str]:
        """The ``fs.s3a.*`` settings that let Spark's ``s3a`` reach the same bucket as this store:
        its endpoint (with path-style requests, as S3-compatible stores need, unless the options
        ask for virtual-hosted style; TLS off for an ``http://`` one), region and static
        credentials when the options name them (else s3a's default chain: environment, instance
        role). Secrets end up in Spark's conf, which redacts keys matching ``secret``/``access.key``."""
        options = {k.lower(): str(v) for k, v in self.store.options.items()}

        def option(*names: str) -> str | None:
            return next((options[n] for n in names if options.get(n)), None)

        conf: dict[str, str] = {}
        endpoint = option("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint")
        if endpoint:
            conf["fs.s3a.endpoint"] = endpoint
            conf["fs.s3a.connection.ssl.enabled"] = "false" if endpoint.startswith("http://") else "true"
        virtual_hosted = (
            option("aws_virtual_hosted_style_request", "virtual_hosted_style_request") or ""
        ).lower() == "true"
        conf["fs.s3a.path.style.access"] = "false" if virtual_hosted else "true"
        region = option("aws_region", "region", "aws_default_region")
        if region:
            conf["fs.s3a.endpoint.region"] = region
        key, secret = option("aws_access_key_id", "access_key_id"), option("aws_secret_access_key", "secret_access_key")
        token = option("aws_session_token", "session_token")
        if key and secret:
            conf["fs.s3a.access.key"], conf["fs.s3a.secret.key"] = key, secret
            if token:
                conf["fs.s3a.session.token"] = token
                conf["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
            else:
                conf["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        return conf

    def _path(self, part: str = "") -> str:
        return self.store.path(self.name(part))

    def kind(self, part: str = "") -> str | None:
        import pyarrow.fs as pafs

        try:
            info = self.store.filesystem.get_file_info(self._path(part))
        except OSError as e:
            raise CheckpointError(f"checkpoint path {self.name(part)} cannot be looked at: {reason(e)}") from None
        if info.type == pafs.FileType.Directory:
            return DIRECTORY
        return FILE if info.type == pafs.FileType.File else None

    def read_bytes(self, part: str) -> bytes:
        with self.store.filesystem.open_input_stream(self._path(part)) as f:
            return f.read()

    def listdir(self, part: str = "") -> list[str]:
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self._path(part), allow_not_found=True)
        return [info.base_name for info in self.store.filesystem.get_file_info(selector)]

    def replace(self, part: str, data: bytes) -> None:
        """One PUT: S3 never shows half an object."""
        with self.store.filesystem.open_output_stream(self._path(part)) as f:
            f.write(data)

    def create(self, part: str, data: bytes) -> bool:
        """Create ``part`` unless it exists (a conditional put): True when this call created it."""
        return self.store.put_if_absent(self.name(part), data)

    def probe(self, part: str = "") -> None:
        """Raise OSError unless the prefix ``part`` takes a write of a hidden object (removed)."""
        probe = f"{self._path(part)}/.tiering-probe.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        try:
            with self.store.filesystem.open_output_stream(probe) as f:
                f.write(bytes(_PROBE_BYTES))
        finally:
            try:
                self.store.filesystem.delete_file(probe)
            except OSError:
                pass  # never written, or the store went away: a hidden leftover harms nobody

    def check_creatable(self) -> None:
        """A checkpoint not made yet: its bucket exists and the prefix takes writes."""
        bucket = self._path().split("/", 1)[0]
        if self.kind_of_bucket(bucket) is None:
            raise CheckpointError(f"checkpoint {self.location} cannot be created: bucket {bucket!r} does not exist")
        try:
            self.probe()
        except OSError as e:
            raise CheckpointError(f"checkpoint {self.location} cannot be created: {reason(e)}") from None

    def kind_of_bucket(self, bucket: str) -> str | None:
        import pyarrow.fs as pafs

        try:
            info = self.store.filesystem.get_file_info(bucket)
        except OSError as e:
            raise CheckpointError(f"checkpoint {self.location}: {reason(e)}") from None
        return DIRECTORY if info.type == pafs.FileType.Directory else None


CheckpointStore = LocalCheckpoint | S3Checkpoint


def reason(e: BaseException) -> str:
    """An OSError's reason without its path (messages name the path themselves)."""
    return e.strerror if isinstance(e, OSError) and e.strerror else str(e)[:300]
