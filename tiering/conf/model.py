"""The typed configuration (docs/DESIGN.md §8): one frozen model per TOML section.

Failure mode this prevents: a typo or a wrong type that silently falls back to a default (a
misspelt ``fail_on_data_loss`` that leaves data loss unreported, ``interval_s = "5"`` read as
text). Every section forbids unknown keys and validates strictly — TOML already has real types,
so ``"10"`` is not a number; text from the environment is parsed by the loader first. The field
descriptions generate the manual's reference (``tiering.conf.reference``), so they are the docs.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from tiering.conf.defaults import (
    DEFAULT_COMPRESSION,
    DEFAULT_DRIVER_MAX_CHANGES,
    DEFAULT_MERGE_MAX_ROWS,
    DEFAULT_TARGET_FILE_MB,
)
from tiering.conf.fields import Secret, is_secret, setting

__all__ = [
    "JobConfig",
    "KvStoreConfig",
    "ZooKeeperConfig",
    "LakeConfig",
    "TablesConfig",
    "TriggerConfig",
    "LeaseConfig",
    "LimitsConfig",
    "MaintenanceConfig",
    "TieringConfig",
    "SECTIONS",
    "Compression",
    "RENAMED_KEYS",
    "MIN_FILE_RETENTION_HOURS",
    "flatten_spark",
]

#: The Parquet codecs ``lake.compression`` accepts, as pyarrow names them: those pyarrow writes
#: and delta-rs reads (and writes, for a MERGE or a compaction). "none" writes uncompressed pages.
Compression = Literal["zstd", "snappy", "lz4", "gzip", "none"]

#: Keys that were split or renamed: ``(section, old key) -> the keys it now sets``. The old key
#: keeps working (it sets each new key not given explicitly) and the loader warns, naming them.
RENAMED_KEYS: dict[tuple[str, str], tuple[str, ...]] = {
    ("lake", "merge_max_changes"): ("driver_max_changes", "merge_max_rows"),
}

#: The shortest ``maintenance.file_retention_hours`` accepted: an unreferenced file younger than
#: this may be a round's file not yet committed, or one a reader of a recent version still reads.
MIN_FILE_RETENTION_HOURS = 24

_NAME = re.compile(r"[A-Za-z0-9._-]+")
_HOST_PORT = re.compile(r"(?P<host>[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})")


#: ``lake.table_parallelism`` when unset on an ``s3://`` root: each of a table's requests waits a
#: round trip there, so more tables at once pay (benchmarks/results/SUMMARY.md has the figures).
S3_TABLE_PARALLELISM = 32


def _host_port_list(v: str) -> str:
    """Comma-separated ``host:port`` pairs, spaces around them dropped."""
    pairs = [p.strip() for p in v.split(",")]
    for pair in pairs:
        match = _HOST_PORT.fullmatch(pair)
        if match is None:
            raise ValueError(f"{pair!r} is not host:port" if len(pairs) > 1 else "")
        if not 1 <= int(match["port"]) <= 65535:
            raise ValueError(f"port {match['port']} is out of range 1-65535")
    return ",".join(pairs)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class JobConfig(_Section):
    """[job] — the name scopes everything the job owns: ZooKeeper paths, lease ids, Delta app ids."""

    name: str = setting(
        "Job name; unique per deployment. Scopes the ZooKeeper election and epoch "
        "(`/tiering/jobs/<name>`) and the Delta transaction app ids (`tiering/<name>/<table>`).",
        label="name matching [A-Za-z0-9._-]+",
    )
    checkpoint: str = setting(
        "Streaming checkpoint location: a local path or `file:` URI of the driver, or "
        "`s3://bucket/prefix` so that a driver restarted on any node continues from it (Spark "
        "writes its part through hadoop-aws's `s3a`, whose jars must be on Spark's classpath; the "
        "job's own files go through the lake's object store, reached with `[lake.storage]` and the "
        "`AWS_*` environment). Holds the source offsets and the lease id (created once, no-clobber: "
        "a link on a local disk, a conditional put on S3); restarting from it resumes the job "
        "instead of bootstrapping again.",
        label="non-empty local path, file: URI or s3://bucket/prefix",
        min_length=1,
    )

    group: str | None = setting(
        "Tiering group: jobs with the same `group` share the tables their `[tables]` selection "
        "picks (the same selection in every member: a member whose selection differs is refused "
        "at start, naming the difference). Each table is tiered by one member at a time, under a "
        "table epoch kept in ZooKeeper (`/tiering/groups/<group>`) that fences the Delta commits of a "
        "member that lost the table, and the reference store's lake reports and leases (Fluss takes "
        "neither: there ZooKeeper and the lake fence alone); a member's "
        "leader registers while it leads, and its departure (its session ending) moves its tables "
        "to the others. Each member keeps its own name, checkpoint and lease. Unset: the job tiers "
        "every selected table alone.",
        None,
        label="name matching [A-Za-z0-9._-]+",
    )
    group_members: int | None = setting(
        "How many members the group runs (`group` set): a member's first assignment waits until "
        "that many have joined, then takes its share at once (at most `group_start_wait_s`). "
        "Members started together (Airflow tasks, spark-submits) join seconds apart, each once its "
        "query has started; at a new group's first start no table has an owner to wait for, and "
        "without it the first to join takes every table and hands the rest back as the others "
        "join, each move a table epoch bump and a Delta fence commit. Unset: the first assignment "
        "waits for the jobs that owned the tables before and for a membership quiet for a fifth of "
        "the session timeout.",
        None,
        ge=1,
    )
    group_start_wait_s: float | None = setting(
        "The longest a member waits for its peers (`group_members`, or the tables' previous "
        "owners) before its first assignment, in seconds; then it takes its share of the members "
        "present. Set it above the spread of the members' starts (their JVMs and queries "
        "starting). Unset: the ZooKeeper session timeout (the server's grant).",
        None,
        gt=0,
    )

    @model_validator(mode="after")
    def _group_keys_need_a_group(self) -> JobConfig:
        for key in ("group_members", "group_start_wait_s"):
            if getattr(self, key) is not None and self.group is None:
                raise ValueError(f"{key}: set without job.group; expected a group name in job.group, or no {key}")
        return self

    @field_validator("checkpoint")
    @classmethod
    def _local(cls, v: str) -> str:
        parsed = urlsplit(v)
        if parsed.scheme == "file" and parsed.netloc not in ("", "localhost"):
            raise ValueError(f"file URI with remote host {parsed.netloc!r}")
        if parsed.scheme == "s3" and not parsed.netloc:
            raise ValueError("no bucket; expected s3://bucket/prefix")
        if len(parsed.scheme) > 1 and parsed.scheme not in ("file", "s3"):
            raise ValueError(
                f"scheme {parsed.scheme!r} is not supported; use a local path, a file: URI or s3://bucket/prefix"
            )
        return v

    @field_validator("name", "group")
    @classmethod
    def _path_safe(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not _NAME.fullmatch(v):
            raise ValueError("")
        if v in (".", ".."):
            raise ValueError("'.' and '..' are not valid ZooKeeper path segments")
        return v


#: ``[kvstore]``'s keys by the ``kind`` they belong to: one set to other than its default under
#: another kind is refused, naming it
_KIND_KEYS: dict[str, tuple[str, ...]] = {
    "http": ("url", "token"),
    "fluss": ("bootstrap_servers", "database", "client", "report_lake_progress"),
}
_REQUIRED_KEYS: dict[str, tuple[str, ...]] = {"http": ("url",), "fluss": ("bootstrap_servers", "database")}


class KvStoreConfig(_Section):
    """[kvstore] — the upstream store: the reference store's HTTP protocol (docs/DESIGN.md §3) or
    one database of an Apache Fluss cluster."""

    kind: Literal["http", "fluss"] = setting(
        "The store: `http`, the reference store's HTTP protocol at `url`; or `fluss`, the primary-key "
        "tables of one Apache Fluss `database` at `bootstrap_servers`.",
        "http",
    )
    url: str | None = setting(
        "kind `http`: base URL of the KV store, without the `/v1` prefix.", None, label="http(s) URL"
    )
    token: Secret = setting(
        "kind `http`: bearer token sent to the store; empty means no authentication. Never logged.",
        SecretStr(""),
        secret=True,
    )
    bootstrap_servers: str | None = setting(
        "kind `fluss`: the Fluss cluster's coordinator, comma-separated `host:port` pairs.",
        None,
        label="host:port[,host:port...]",
    )
    database: str | None = setting(
        "kind `fluss`: the Fluss database whose tables the job tiers (picked by `[tables]`).",
        None,
        label="non-empty string",
        min_length=1,
    )
    client: dict[str, str] = setting(
        "kind `fluss`: Fluss client options passed through as-is, as `[spark]`'s are "
        '(`[kvstore.client]`, e.g. `"client.request-timeout" = "60s"`): to Fluss\'s Java client, '
        "and to the Python client for the options it knows.",
        {},
        label="table of strings",
    )
    report_lake_progress: bool = setting(
        "kind `fluss`: after each round, tell Fluss the lake's progress per table (the Delta version "
        "as its lake snapshot id, each bucket's log offset tiered), which Fluss then shows as the "
        "table's lake snapshot (`getLatestLakeSnapshot`). It uses Fluss's internal coordinator calls "
        "(those of its own tiering), not a public API: a refused report is logged and sent again next "
        "round, never failing the round. Needs our `fluss-snapshot-source` jar on `[spark] spark.jars`.",
        False,
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("like 'http://127.0.0.1:8420'")
        return v.rstrip("/")

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, v: str | None) -> str | None:
        return v if v is None else _host_port_list(v)

    @model_validator(mode="after")
    def _one_kind(self) -> KvStoreConfig:
        # each message opens with the key at fault: the loader names it, with its source
        missing = [k for k in _REQUIRED_KEYS[self.kind] if getattr(self, k) is None]
        if missing:
            also = f"; so is {', '.join(missing[1:])}" if missing[1:] else ""
            raise ValueError(f"{missing[0]}: required with kind = {self.kind!r}, missing{also}")
        defaults = {k: f.default for k, f in type(self).model_fields.items()}
        other = [
            k for kind, keys in _KIND_KEYS.items() if kind != self.kind for k in keys if getattr(self, k) != defaults[k]
        ]
        if other:
            also = f" (nor is {', '.join(other[1:])})" if other[1:] else ""
            raise ValueError(f"{other[0]}: not a setting of kind = {self.kind!r}{also}")
        return self

    @property
    def http_url(self) -> str:
        """``url`` of an ``http`` store (the model refuses one without it)."""
        if self.url is None:
            raise ValueError(f"[kvstore] kind = {self.kind!r} has no url")
        return self.url

    @property
    def fluss_database(self) -> tuple[str, str]:
        """``(bootstrap_servers, database)`` of a ``fluss`` store (the model refuses one without them)."""
        if self.bootstrap_servers is None or self.database is None:
            raise ValueError(f"[kvstore] kind = {self.kind!r} has no Fluss database")
        return self.bootstrap_servers, self.database

    @property
    def where(self) -> str:
        """The store in words, for a message: its URL, or the Fluss database and its servers."""
        return self.http_url if self.kind == "http" else f"Fluss database {self.database!r} at {self.bootstrap_servers}"


class ZooKeeperConfig(_Section):
    """[zookeeper] — leader election and epoch fencing (docs/DESIGN.md §7)."""

    hosts: str = setting(
        "ZooKeeper connect string, comma-separated `host:port` pairs.",
        label="host:port[,host:port...]",
    )
    session_timeout_s: float = setting(
        "ZooKeeper session timeout in seconds. A leader suspended longer than this stops its query on its own.",
        10.0,
        gt=0,
    )
    auth_user: str | None = setting(
        "User for a ZooKeeper digest ACL on the job's znodes; set together with `auth_password`.",
        None,
        label="non-empty string",
        min_length=1,
    )
    auth_password: Secret | None = setting(
        "Password for the digest ACL; set together with `auth_user`. Never logged.",
        None,
        secret=True,
    )

    @field_validator("hosts")
    @classmethod
    def _host_ports(cls, v: str) -> str:
        return _host_port_list(v)

    @model_validator(mode="after")
    def _consistent(self) -> ZooKeeperConfig:
        if (self.auth_user is None) != (self.auth_password is None):
            given = "auth_user" if self.auth_user is not None else "auth_password"
            raise ValueError(f"auth_user and auth_password go together: expected both or neither, got only {given}")
        return self


class LakeConfig(_Section):
    """[lake] — where the Delta tables are written (docs/DESIGN.md §6)."""

    root: str = setting(
        "Root of the lake; table `t` is written to `<root>/t`: a local path, a `file://` URI or "
        "`s3://bucket/prefix` (any S3-compatible store that honours conditional puts).",
        label="local path, file:// or s3:// URI",
        min_length=1,
    )
    storage: dict[str, Secret] = setting(
        "Object store settings for an `s3://` root, passed to delta-rs (and the executors' "
        "pyarrow) as storage options: `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ALLOW_HTTP`, "
        "`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`. The same `AWS_*` "
        "environment variables are read too; a key set here wins. Values are never logged or shown.",
        {},
        label="table of storage options",
        secret=True,
    )
    writer: Literal["delta-rs", "delta-spark"] = setting(
        "Delta writer: `delta-rs` (no JVM jars needed) or `delta-spark` (needs the Delta jars on "
        "Spark's classpath; a local root only, and only with `delta_spark_single_driver`: Delta's "
        "commits can overwrite each other's). Same commit protocol.",
        "delta-rs",
    )
    delta_spark_single_driver: bool = setting(
        "delta-spark writer: declares that no two drivers of this job ever run at once against "
        "`root` (no standby; a driver is started only once the previous one is dead, never beside a "
        "frozen or partitioned one). Delta commits a version to a local root by checking that its "
        "file is absent and then renaming a temporary file onto it, which replaces whatever is "
        "there: a second driver committing between the two (a zombie after a failover, a standby "
        "that took over) has its commit replaced, and its changes are lost without an error. "
        "Without it, delta-spark is refused; delta-rs commits with a create that cannot overwrite.",
        False,
    )
    delta_spark_write: Literal["merge", "replace"] = setting(
        "delta-spark writer: how a round changes rows already in the lake. `merge`: one Delta "
        "MERGE of the round's changes, with deletion vectors on (a file holding a changed key "
        "gets a bitmap of its dropped rows instead of being rewritten, so a small change to a "
        "big table writes little; the change data feed holds exactly the round's changes); "
        "needs Delta's SQL extension and catalog in the [spark] section, and readers of the "
        "lake that support the `deletionVectors` reader feature. `replace`: every bucket the "
        "round touches is rewritten (`replaceWhere`), readable by any Delta reader; no change "
        "data feed. A table that has deletion vectors is merged whatever the setting. The "
        "benchmarks page compares the two.",
        "merge",
    )
    driver_max_changes: int = setting(
        "delta-rs writer: a round of a table with no bootstrap bucket and at most this many "
        "changes is written by the driver itself (no Spark job: the round of a few changed "
        "rows); bigger rounds and bootstraps are written by the executors. Bounds the changes "
        "the driver holds for a rewrite; 0 means always the executors. The older key "
        "`merge_max_changes` still sets it and `merge_max_rows` both.",
        DEFAULT_DRIVER_MAX_CHANGES,
        ge=0,
    )
    merge_max_rows: int = setting(
        "delta-rs writer with `change_data_feed` on: the most rows the source of a round's MERGE "
        "may hold in the driver (the changes, and the whole content of a re-bootstrapped bucket); "
        "a bigger round fails its table naming this key.",
        DEFAULT_MERGE_MAX_ROWS,
        ge=0,
    )
    change_data_feed: bool = setting(
        "Create tables with Delta's change data feed (`delta.enableChangeDataFeed`; a table "
        "created without it gets it at its next round) and write every round so that the feed "
        "holds exactly its changes: per Delta version, each key the round changed with its net "
        "change (`insert`, `update_preimage`/`update_postimage`, `delete`). delta-rs writer: "
        "a round that changes rows already in the lake is then one MERGE in the driver, whose "
        "source (the changes, and the whole content of a re-bootstrapped bucket) must fit in "
        "`merge_max_rows` rows, or the table's round fails naming both keys. delta-spark writer: "
        "needs `delta_spark_write` `merge` (Delta's own MERGE, in Spark).",
        False,
    )

    target_file_mb: int = setting(
        "delta-rs writer: the size, in MiB, of the files a round writes. A bucket is kept as "
        "key-sorted files of about this size, with their key range in their statistics, and a "
        "round rewrites only the files whose range could hold a key it changed: smaller files "
        "make a round of a few changes cheaper and the table's log longer. Compaction "
        "(`maintenance.target_file_mb`) merges files smaller than its own target.",
        DEFAULT_TARGET_FILE_MB,
        ge=1,
    )

    compression: Compression = setting(
        "delta-rs writer: the Parquet codec of the data files the job writes: rounds (by the "
        "executors or the driver), a change-feed MERGE, compaction and resync. `snappy` and `lz4` "
        "encode faster than `zstd` and write several times its bytes (the benchmarks page has "
        "the figures); `gzip` is far slower. Files already in the lake keep "
        "their codec, as do snapshot files a bootstrap copies byte for byte (the store writes zstd): "
        "a table may mix codecs, which Parquet readers handle file by file. delta-spark writes with "
        "Spark's `spark.sql.parquet.compression.codec`.",
        DEFAULT_COMPRESSION,
    )

    catalog_database: str | None = setting(
        "A database of the Spark session catalog (the Hive metastore when the session has one: "
        "`spark.sql.catalogImplementation = hive`, a remote one through "
        "`spark.hadoop.hive.metastore.uris`) in which the leader registers every table it tiers "
        "(`CREATE TABLE IF NOT EXISTS db.t USING DELTA LOCATION ...`, once per term, after the "
        'table\'s round), so that `spark.table("db.t")` reads the lake; a re-created upstream '
        "table re-points its entry. Needs the Delta jars and Delta's catalog "
        "(`spark.sql.catalog.spark_catalog`) in the session, or the job refuses to start naming "
        "what is missing. A table the catalog refuses (its names take letters, digits and `_` "
        "only) or an entry that points elsewhere is a warning in the driver's log: the round is "
        "committed and the next one tries again. Unset: no catalog is written.",
        None,
        label="letters, digits and _",
        pattern=r"^[A-Za-z0-9_]+$",
    )

    table_parallelism: int = setting(
        "Tables of one round prepared, committed and reported at the same time (threads of the "
        "driver; delta-rs commits and store calls wait on I/O), and planned (threads of the planning "
        "process); also the tables a maintenance pass maintains at once (one compaction at a time). "
        "1 handles them one by one. A table's round is a few dozen object-store requests one "
        "after another, half of them its Delta log's, so on S3, where each takes tens of "
        "milliseconds, more tables at once pay: unset, it is 8 on a local root and "
        f"{S3_TABLE_PARALLELISM} on an `s3://` one. The driver writes two tables' big rounds at a "
        "time whatever it is.",
        8,
        ge=1,
    )

    @model_validator(mode="before")
    @classmethod
    def _parallelism_by_root(cls, data: Any) -> Any:
        """Unset ``table_parallelism`` follows the root: an S3 lake waits on round trips."""
        if (
            isinstance(data, Mapping)
            and "table_parallelism" not in data
            and str(data.get("root", "")).startswith("s3://")
        ):
            return {**data, "table_parallelism": S3_TABLE_PARALLELISM}
        return data

    @model_validator(mode="after")
    def _feed_writable(self) -> LakeConfig:
        if self.writer == "delta-spark" and self.root.startswith("s3://"):
            raise ValueError(
                f'lake.writer = "delta-spark" cannot commit to an S3 lake.root ({self.root!r}): Delta\'s S3 '
                "LogStore writes a version in two requests, not one conditional put, so a second driver (a zombie "
                'after a failover) can overwrite a commit (docs/DESIGN.md §6); use lake.writer = "delta-rs" on '
                "S3 (every commit a conditional put)"
            )
        if self.writer == "delta-spark" and not self.delta_spark_single_driver:
            raise ValueError(
                f'lake.writer = "delta-spark" cannot commit safely to lake.root ({self.root!r}) when more than one '
                "driver can reach it: Delta checks that a version's file is absent, then renames its commit onto "
                "it, replacing whatever another driver committed in between (a zombie after a failover, a standby "
                "that took over), and that commit's changes are lost without an error (docs/DESIGN.md §6); use "
                'lake.writer = "delta-rs" (every commit a create that cannot overwrite), or set '
                "lake.delta_spark_single_driver = true if no two drivers of this job ever run at once"
            )
        if self.change_data_feed and self.writer == "delta-spark" and self.delta_spark_write == "replace":
            raise ValueError(
                'lake.change_data_feed = true with lake.writer = "delta-spark" needs lake.delta_spark_write = '
                '"merge": "replace" rewrites whole buckets (replaceWhere), which Delta records as every row of '
                "every touched bucket deleted and inserted again, not as the round's changes"
            )
        if self.change_data_feed and self.merge_max_rows == 0:
            raise ValueError(
                "lake.change_data_feed = true needs lake.merge_max_rows > 0: rounds recorded in the feed "
                "are MERGEs in the driver, bounded by it"
            )
        return self

    @field_validator("storage", mode="before")
    @classmethod
    def _storage_strings(cls, v: Any) -> Any:
        """TOML booleans and numbers (``AWS_ALLOW_HTTP = true``) become the strings delta-rs reads."""
        return flatten_spark(v) if isinstance(v, Mapping) else v


class TablesConfig(_Section):
    """[tables] — which store tables are tiered, by glob pattern (fnmatch, case-sensitive)."""

    include: list[str] = setting(
        "Glob patterns of table names to tier; a table is tiered when it matches one of them.",
        ["*"],
        label="non-empty list of glob patterns",
        min_length=1,
    )
    exclude: list[str] = setting(
        "Glob patterns of table names never to tier; wins over `include`.",
        [],
        label="list of glob patterns",
    )
    freshness_target_s: float = setting(
        "Freshness target in seconds: how stale a table's lake may get (the age of the oldest "
        "store write it lacks) before the `KvTieringFreshnessOverTarget` alert fires. Exported "
        "per table as `kv_tiering_freshness_target_seconds`; `freshness_targets` overrides it. "
        "It only alerts: a table with no entry in `freshness_targets` is planned at every trigger "
        "that finds it changed.",
        300.0,
        gt=0,
    )
    freshness_targets: dict[str, float] = setting(
        "Per-table freshness targets in seconds, by table name or glob pattern "
        '(`freshness_targets = { orders = 60, "audit_*" = 3600 }`): a table\'s exact name wins, '
        "else the first pattern in file order that matches it, else `freshness_target_s`. "
        "Each target must be > 0. A target given here also schedules its tables: a changed table "
        "is planned once its lake would otherwise get older than half its target before the next "
        "trigger (at once when new, re-created or behind its last round), so tables with long "
        "targets leave most rounds to the ones with short targets (an availableNow run plans "
        "every changed table). Keep a target below the store's log retention.",
        {},
        label="table of name or glob = seconds",
    )

    @field_validator("freshness_targets", mode="before")
    @classmethod
    def _positive_targets(cls, v: Any) -> Any:
        """Checked here, whole, so the error names the key and every bad entry at once."""
        if not isinstance(v, Mapping):
            return v
        bad = {
            name: seconds
            for name, seconds in v.items()
            if not name
            or isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 < seconds < float("inf")
        }
        if bad:
            raise ValueError(f"each target needs a non-empty name and a number of seconds > 0: {bad}")
        return v

    def selects(self, name: str) -> bool:
        """Whether table ``name`` is tiered. Case-sensitive on every OS, like the store's names."""
        return any(fnmatch.fnmatchcase(name, p) for p in self.include) and not any(
            fnmatch.fnmatchcase(name, p) for p in self.exclude
        )

    def freshness_target(self, name: str) -> float:
        """Table ``name``'s freshness target in seconds: its own, a pattern's, or the default."""
        own = self.own_freshness_target(name)
        return self.freshness_target_s if own is None else own

    def own_freshness_target(self, name: str) -> float | None:
        """Table ``name``'s target from ``freshness_targets`` (its name's, else the first matching
        pattern's), or None: only such a target schedules a table (tiering.enumerator.schedule),
        so a config that sets none plans every changed table at every trigger."""
        if name in self.freshness_targets:
            return self.freshness_targets[name]
        return next((s for p, s in self.freshness_targets.items() if fnmatch.fnmatchcase(name, p)), None)


class TriggerConfig(_Section):
    """[trigger] — when rounds run."""

    available_now: bool = setting(
        "Tier everything available at start, then stop (Spark's `availableNow`; for scheduled "
        "runs). Otherwise run continuously.",
        False,
    )
    interval_s: float = setting(
        "Seconds between round starts when running continuously (Spark processing-time trigger).",
        5.0,
        gt=0,
    )
    stop_wait_s: float = setting(
        "On a clean stop (SIGTERM, SIGINT), seconds the running round may take to end before the "
        "query is stopped mid-round (its splits are then replayed by the next start); a second "
        "signal stops at once. Keep it below the supervisor's grace period before it kills "
        "(Kubernetes `terminationGracePeriodSeconds`, systemd `TimeoutStopSec`).",
        20.0,
        ge=0,
    )


class LeaseConfig(_Section):
    """[lease] — the job-scoped snapshot lease (docs/DESIGN.md §1)."""

    duration_s: float = setting(
        "Lease duration in seconds. Snapshots a crashed job held become collectable this long after its last renewal.",
        600.0,
        gt=0,
    )
    renew: bool = setting(
        "Renew the lease in the background while the job runs; without it a round longer than "
        "`duration_s` may lose its snapshots.",
        True,
    )


class LimitsConfig(_Section):
    """[limits] — admission control per round (docs/DESIGN.md §5)."""

    max_splits_per_trigger: int = setting(
        "Most splits planned in one round; 0 means no limit.",
        0,
        ge=0,
    )
    max_bytes_per_trigger: int = setting(
        "Most bytes (snapshot and log file sizes) planned in one round; 0 means no limit. "
        "Bounds driver memory for changelog merges.",
        0,
        ge=0,
    )
    fail_on_data_loss: bool = setting(
        "Fail when the changelog was truncated past the lake offset, instead of bootstrapping "
        "the bucket again from its latest snapshot.",
        False,
    )


class MaintenanceConfig(_Section):
    """[maintenance] — lake hygiene the leader runs between rounds (docs/DESIGN.md §6); `tiering maintain`
    runs one pass by hand."""

    enabled: bool = setting(
        "Run a maintenance pass over the job's tables in the leader, between rounds. Each pass "
        "is a fenced commit of the leader, like a round's.",
        True,
    )
    every_rounds: int = setting(
        "The leader runs a pass after each round whose id is a multiple of this.",
        100,
        ge=1,
    )
    target_file_mb: int = setting(
        "Compaction target: files of a bucket smaller than this many MiB are merged into files "
        "of about this size (a data-change = false commit: the rows stay the same).",
        128,
        ge=1,
    )
    min_files: int = setting(
        "A bucket is compacted once it holds at least this many files smaller than the target.",
        8,
        ge=2,
    )
    checkpoint_interval: int = setting(
        "Delta checkpoint every this many commits: set as the tables' `delta.checkpointInterval` "
        "(the writers then checkpoint on their own) and checked by every pass. A delta-rs commit "
        "replays the log since the last checkpoint, so a round's commit gets dearer as commits "
        "pile up: 20 keeps it near its cost on a fresh table (Delta's own default is 100).",
        20,
        ge=1,
    )
    log_retention_hours: int = setting(
        "Delta log entries older than this (and older than the last checkpoint) are deleted: the "
        "tables' `delta.logRetentionDuration`; time travel reaches back this far.",
        720,
        ge=1,
    )
    file_retention_hours: int = setting(
        "Data files no version newer than this many hours references (replaced by a round or a "
        "compaction, or left by a lost commit race or a crash) are deleted. At least "
        f"{MIN_FILE_RETENTION_HOURS}: a younger file may belong to a round not yet committed or "
        "to a reader of a recent version.",
        168,
        ge=MIN_FILE_RETENTION_HOURS,
    )


def flatten_spark(conf: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``[spark]`` with unquoted dotted keys parses into nested tables: join them back into Spark
    conf keys (``spark.sql.shuffle.partitions``). Scalars become strings the way Spark writes them."""
    flat: dict[str, Any] = {}
    for key, value in conf.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_spark(value, f"{name}."))
        elif isinstance(value, bool):
            flat[name] = "true" if value else "false"
        elif isinstance(value, (int, float)):
            flat[name] = str(value)
        else:
            flat[name] = value
    return flat


class TieringConfig(BaseModel):
    """The whole configuration: file, then ``TIERING_<SECTION>_<KEY>`` environment, then CLI
    overrides (see :func:`tiering.conf.loader.load_config`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    job: JobConfig
    kvstore: KvStoreConfig
    zookeeper: ZooKeeperConfig
    lake: LakeConfig
    tables: TablesConfig = Field(default_factory=TablesConfig)
    trigger: TriggerConfig = Field(default_factory=TriggerConfig)
    lease: LeaseConfig = Field(default_factory=LeaseConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    spark: dict[str, str] = setting(
        "Spark conf passed through as-is (`spark.sql.shuffle.partitions = 4`); values become "
        "strings. Set in the file or as overrides, not from the environment (keys contain dots).",
        {},
        label="string, number or boolean",
    )

    @field_validator("spark", mode="before")
    @classmethod
    def _spark_strings(cls, v: Any) -> Any:
        return flatten_spark(v) if isinstance(v, Mapping) else v

    @model_validator(mode="after")
    def _what_needs_the_reference_store(self) -> TieringConfig:
        kind = self.kvstore.kind
        # delta-spark reads the store's files with Spark; Fluss has none a task can open
        if self.lake.writer == "delta-spark" and kind != "http":
            raise ValueError(
                f"lake.writer: 'delta-spark' reads the store's files and kind = {kind!r} has none; "
                "expected 'delta-rs' (its bucket tasks read through the store's reader)"
            )
        return self

    def redacted(self) -> dict[str, Any]:
        """The config as plain data for logs: a set secret shows as ``***``, an empty one as ``""``."""
        data = self.model_dump(mode="json")
        for section, model in SECTIONS.items():
            for key, info in model.model_fields.items():
                if is_secret(info):
                    data[section][key] = _redact(getattr(getattr(self, section), key))
        return data


def _redact(secret: SecretStr | Mapping[str, SecretStr] | None) -> Any:
    if secret is None:
        return None
    if isinstance(secret, Mapping):
        return {k: _redact(v) for k, v in secret.items()}
    return "***" if secret.get_secret_value() else ""


SECTIONS: dict[str, type[_Section]] = {
    "job": JobConfig,
    "kvstore": KvStoreConfig,
    "zookeeper": ZooKeeperConfig,
    "lake": LakeConfig,
    "tables": TablesConfig,
    "trigger": TriggerConfig,
    "lease": LeaseConfig,
    "limits": LimitsConfig,
    "maintenance": MaintenanceConfig,
}
"""Every section with fixed keys, in file order; ``[spark]`` is the free-form map besides them."""
