"""Where the lake's files live and how every process reaches them: a local directory or S3.

Failure modes this guards against:
- a root only the driver can reach: data files are written by executors, so every process
  opens the same root with the same options (plain values, picklable into Spark tasks);
- an unsafe S3 commit: delta-rs commits a Delta version with a conditional put
  (``If-None-Match: *``), which is what makes two racing drivers safe. The unsafe-rename mode
  and a disabled conditional put are refused as configuration errors, and :meth:`check` proves
  at start-up that the server honours the condition (two commits of one version: one must fail);
- a bad root discovered mid-round after leases were taken: :meth:`check` runs before the job
  leads, names the root and the reason (no such bucket, unreachable, access denied, a file
  where the root should be), and writes nothing outside a probe directory it removes.

- a store that slows down, errs or hangs (503 SlowDown, 500, resets, a frozen server): every
  request retries transient answers with backoff and gives up after a bounded time, in both
  clients, from one set of options (:data:`S3_CLIENT_DEFAULTS`, delta-rs/object_store names):
  ``connect_timeout`` and ``timeout`` (per request; pyarrow's ``connect_timeout`` and
  ``request_timeout``, the latter a low-speed limit under curl), ``max_retries`` (pyarrow's
  ``AwsStandardS3RetryStrategy(max_attempts=max_retries + 1)``: exponential backoff with jitter,
  for throttling, 5xx and network errors), and delta-rs's own ``retry_timeout`` and
  ``backoff_config.*``. A write that still fails fails its bucket (:mod:`tiering.objectstore.landed`),
  a commit its table's round; the next round writes and commits again;
- two writers creating one small file (the streaming checkpoint's lease-id file) where each must
  see the same winner: :meth:`put_if_absent` puts it with the same conditional put delta-rs
  commits with (``If-None-Match: *``, through obstore, the Python binding of delta-rs's
  object_store), so exactly one put lands and the other learns that it lost.

S3 settings come from ``[lake.storage]`` (delta-rs storage option names such as
``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ALLOW_HTTP``, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, and the client settings above, which a key set there overrides),
over the same ``AWS_*`` variables from the environment.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from urllib.parse import urlsplit

import pyarrow.fs as pafs
from deltalake.exceptions import DeltaError

from tiering.errors import ConfigError, LakeStorageError, one_line

__all__ = ["ObjectStore", "S3_ENV_KEYS"]

#: The environment variables read for an S3 root (the config's ``[lake.storage]`` wins).
S3_ENV_KEYS = (
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ALLOW_HTTP",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
)
#: Timeouts and retries of every S3 request, delta-rs (object_store) option names and values;
#: the executors' pyarrow takes the same ones. Bounded: a request gives up after about
#: ``max_retries`` x ``timeout`` plus backoff (delta-rs also stops at ``retry_timeout``), so a
#: frozen store fails the round's tables instead of hanging the round. object_store's own
#: defaults (10 retries within 3 min) would hold a round for minutes; pyarrow's (3 attempts,
#: the SDK's 1 s connect timeout) gives up on the first SlowDown burst.
S3_CLIENT_DEFAULTS = {
    "connect_timeout": "5s",
    "timeout": "30s",
    "max_retries": "5",
    "retry_timeout": "60s",
    "backoff_config.init_backoff": "100ms",
    "backoff_config.max_backoff": "5s",
    "backoff_config.base": "2",
}
_UNSAFE = {"aws_s3_allow_unsafe_rename": "true", "aws_conditional_put": "disabled", "conditional_put": "disabled"}
_SCHEMES = ("", "file", "s3")


@dataclass(frozen=True)
class ObjectStore:
    """A lake root and the options to reach it; equal values open the same files anywhere."""

    root: str
    options: Mapping[str, str] = field(default_factory=dict, hash=False)

    @classmethod
    def of(
        cls, root: str, storage: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None
    ) -> ObjectStore:
        """The store of a configured root: local roots become absolute paths; an S3 root takes
        ``storage`` over the ``AWS_*`` variables of ``env`` (default: this process's)."""
        parts = urlsplit(root)
        if parts.scheme not in _SCHEMES or (len(parts.scheme) == 1):
            raise ConfigError(
                [
                    f"lake.root: {root!r}: scheme {parts.scheme!r} is not supported; use a local path, "
                    "a file:// URI or s3://bucket/prefix"
                ]
            )
        if parts.scheme == "s3":
            if not parts.netloc:
                raise ConfigError([f"lake.root: {root!r}: no bucket; expected s3://bucket/prefix"])
            env = os.environ if env is None else env
            options = {k: env[k] for k in S3_ENV_KEYS if env.get(k)}
            options.update(storage or {})
            _refuse_unsafe(options)
            options.setdefault("aws_conditional_put", "etag")
            for key, value in S3_CLIENT_DEFAULTS.items():
                if _option(options, key) is None:
                    options[key] = value
            _client_settings(options)
            return cls(f"s3://{parts.netloc}/{parts.path.strip('/')}".rstrip("/"), options)
        if parts.scheme == "file" and parts.netloc not in ("", "localhost"):
            raise ConfigError([f"lake.root: {root!r}: file URI with remote host {parts.netloc!r}"])
        if storage:
            raise ConfigError([f"lake.storage: only used with an s3:// lake.root, the root is {root!r}"])
        local = parts.path if parts.scheme == "file" else root
        return cls(os.path.abspath(local))

    @property
    def is_s3(self) -> bool:
        return self.root.startswith("s3://")

    def uri(self, name: str) -> str:
        """``<root>/<name>`` for one path segment ``name``."""
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"{name!r} cannot be a directory name under the lake root")
        return f"{self.root}/{name}"

    def delta_options(self) -> dict[str, str] | None:
        """delta-rs ``storage_options`` (None for a local root)."""
        return dict(self.options) if self.is_s3 else None

    @cached_property
    def filesystem(self) -> pafs.FileSystem:
        """The pyarrow filesystem of this root (created once per process; never pickled)."""
        if not self.is_s3:
            return pafs.LocalFileSystem()
        return pafs.S3FileSystem(**_pyarrow_s3_options(self.options))

    def path(self, uri: str) -> str:
        """The filesystem path of a URI under this store (``bucket/key`` on S3)."""
        return uri.removeprefix("s3://") if self.is_s3 else uri.removeprefix("file://")

    def locate(self, files: Sequence[str]) -> tuple[pafs.FileSystem, list[str]]:
        """The filesystem and paths of files to read: S3 URIs through this store, the KV store's
        files (local paths, as the reference store writes them) through the local one."""
        if files and all(f.startswith("s3://") for f in files):
            return self.filesystem, [self.path(f) for f in files]
        return pafs.LocalFileSystem(), [f.removeprefix("file://") for f in files]

    def put_if_absent(self, uri: str, data: bytes) -> bool:
        """Create the object ``uri`` holding ``data`` unless something is there already: True
        when this call created it, False when it existed (never overwritten). S3 only; atomic
        even when many processes race (a conditional put, as delta-rs commits)."""
        import obstore
        from obstore.exceptions import AlreadyExistsError

        if not self.is_s3:
            raise ValueError(f"put_if_absent is for S3 roots, {self.root!r} is local")
        try:
            obstore.put(
                self._conditional_store, self.path(uri).split("/", 1)[1], data, mode="create", use_multipart=False
            )
        except AlreadyExistsError:
            return False
        except Exception as e:  # obstore's errors are not OSErrors; callers handle those
            raise OSError(one_line(e)[:300]) from e
        return True

    @cached_property
    def _conditional_store(self):
        """obstore's S3 client of this root's bucket, with the options delta-rs commits with."""
        from obstore.store import S3Store

        options = self.options
        config: dict[str, str] = {
            "conditional_put": _option(options, "aws_conditional_put", "conditional_put") or "etag"
        }
        for key, names in (
            ("endpoint", ("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint")),
            ("region", ("aws_region", "region", "aws_default_region")),
            ("access_key_id", ("aws_access_key_id", "access_key_id")),
            ("secret_access_key", ("aws_secret_access_key", "secret_access_key")),
            ("session_token", ("aws_session_token", "session_token")),
            ("virtual_hosted_style_request", ("aws_virtual_hosted_style_request", "virtual_hosted_style_request")),
        ):
            value = _option(options, *names)
            if value:
                config[key] = value
        connect_s, request_s, retries = _client_settings(options)
        client = {
            "connect_timeout": _dt(connect_s),
            "timeout": _dt(request_s),
            "allow_http": str(_option(options, "aws_allow_http", "allow_http") or "false").lower() == "true",
        }
        retry = {
            "max_retries": retries,
            "retry_timeout": _dt(
                _seconds("retry_timeout", str(_option(options, "retry_timeout") or S3_CLIENT_DEFAULTS["retry_timeout"]))
            ),
        }
        bucket = self.path(self.root).split("/", 1)[0]
        return S3Store(bucket, config=config, client_options=client, retry_config=retry)

    def __getstate__(self) -> dict:
        return {"root": self.root, "options": dict(self.options)}

    def __setstate__(self, state: dict) -> None:
        object.__setattr__(self, "root", state["root"])
        object.__setattr__(self, "options", state["options"])

    def check(self, *, probe: bool | None = None) -> None:
        """:class:`LakeStorageError` unless the root is usable now (see the module docstring).
        ``probe``: commit twice to a scratch table under the root (writes and conditional puts
        work); by default on S3 only, where a server may ignore the condition."""
        try:
            info = self.filesystem.get_file_info(self.path(self.root))
        except OSError as e:
            raise LakeStorageError(f"lake root {self.root!r}: {_reason(e)}") from None
        if info.type == pafs.FileType.File:
            raise LakeStorageError(f"lake root {self.root!r} is a file, not a directory")
        if self.is_s3:
            self._check_bucket()
        if self.is_s3 if probe is None else probe:
            self._check_conditional_put()

    def _check_bucket(self) -> None:
        bucket = self.path(self.root).split("/", 1)[0]
        try:
            info = self.filesystem.get_file_info(bucket)
        except OSError as e:
            raise LakeStorageError(f"lake root {self.root!r}: {_reason(e)}") from None
        if info.type != pafs.FileType.Directory:
            raise LakeStorageError(f"lake root {self.root!r}: bucket {bucket!r} does not exist")

    def _check_conditional_put(self) -> None:
        """Two commits of the same Delta version in a probe table: the store must refuse one."""
        from tiering.objectstore.commit_probe import probe_conditional_put

        probe = self.uri(f"_tiering_probe_{uuid.uuid4().hex}")
        try:
            honoured = probe_conditional_put(probe, self.delta_options())
        except (OSError, DeltaError) as e:
            raise LakeStorageError(f"lake root {self.root!r}: {_reason(e)}") from None
        finally:
            self._remove(probe)
        if not honoured:
            raise LakeStorageError(
                f"lake root {self.root!r}: the object store ignores conditional puts (If-None-Match), so two "
                "drivers could overwrite each other's Delta commits; use a store that honours them"
            )

    def _remove(self, uri: str) -> None:
        try:
            self.filesystem.delete_dir(self.path(uri))
        except (FileNotFoundError, OSError):
            pass  # never created, or the store went away: a leftover probe harms nobody


def _refuse_unsafe(options: Mapping[str, str]) -> None:
    for key, value in options.items():
        if _UNSAFE.get(key.lower()) == str(value).strip().lower():
            raise ConfigError(
                [
                    f"lake.storage.{key}: {value!r} makes Delta commits on S3 unsafe (two drivers could "
                    "both commit one version); commits use S3 conditional puts instead, leave it unset"
                ]
            )


def _option(options: Mapping[str, str], *names: str) -> str | None:
    lowered = {k.lower(): v for k, v in options.items()}
    return next((lowered[n] for n in names if lowered.get(n)), None)


def _pyarrow_s3_options(options: Mapping[str, str]) -> dict:
    """delta-rs option names to ``pyarrow.fs.S3FileSystem`` arguments."""
    kwargs: dict = {
        "allow_bucket_creation": False,
        # a small file is one PutObject at close, not CreateMultipartUpload + UploadPart +
        # Complete; a refused open then surfaces at close, where every write is checked anyway
        "allow_delayed_open": True,
    }
    kwargs["connect_timeout"], kwargs["request_timeout"], retries = _client_settings(options)
    kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=retries + 1)
    endpoint = _option(options, "aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs["endpoint_override"] = parts.netloc
        kwargs["scheme"] = parts.scheme
    region = _option(options, "aws_region", "region", "aws_default_region")
    if region:
        kwargs["region"] = region
    key, secret = (
        _option(options, "aws_access_key_id", "access_key_id"),
        _option(options, "aws_secret_access_key", "secret_access_key"),
    )
    if key and secret:
        kwargs.update(
            access_key=key, secret_key=secret, session_token=_option(options, "aws_session_token", "session_token")
        )
    return kwargs


def _client_settings(options: Mapping[str, str]) -> tuple[float, float, int]:
    """``(connect timeout s, request timeout s, retries)``; :class:`ConfigError` naming the key."""

    def value(key: str) -> str:
        return str(_option(options, key) or S3_CLIENT_DEFAULTS[key])

    retries = value("max_retries")
    if not retries.isdigit():
        raise ConfigError([f"lake.storage.max_retries: {retries!r} is not a whole number >= 0"])
    return _seconds("connect_timeout", value("connect_timeout")), _seconds("timeout", value("timeout")), int(retries)


def _seconds(key: str, duration: str) -> float:
    """An object_store duration (``500ms``, ``30s``, ``2m``, or plain seconds) in seconds."""
    text = str(duration).strip().lower()
    for unit, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if text.endswith(unit) and text[: -len(unit)].replace(".", "", 1).isdigit():
            return float(text[: -len(unit)]) * factor
    try:
        return float(text)
    except ValueError:
        raise ConfigError([f"lake.storage.{key}: {duration!r} is not a duration (e.g. '500ms', '30s', '2m')"]) from None


def _dt(seconds: float):
    import datetime

    return datetime.timedelta(seconds=seconds)


def _reason(error: Exception) -> str:
    """The useful part of an S3/pyarrow error: access denied, no such bucket, unreachable."""
    text = one_line(error)
    for marker, reason in (
        ("NETWORK_CONNECTION", "unreachable"),
        ("Could not connect", "unreachable"),
        ("NO_SUCH_BUCKET", "bucket does not exist"),
        ("ACCESS_DENIED", "access denied (check the credentials)"),
        ("INVALID_ACCESS_KEY_ID", "access denied (unknown access key)"),
        ("SIGNATURE_DOES_NOT_MATCH", "access denied (wrong secret key)"),
    ):
        if marker in text:
            return f"{reason}: {text[:300]}"
    return text[:300]
