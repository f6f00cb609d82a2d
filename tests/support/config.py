"""Job configurations for tests: a TOML file for a ``tiering`` process (:func:`write_conf`) or a
validated :class:`TieringConfig` for a job run in the test's process (:func:`make_config`; the
benchmarks' :func:`job_config`, at the service's own pace).

A configuration naming ``lake.writer = "delta-spark"`` also declares ``lake.delta_spark_single_driver``
unless it says otherwise: a test runs one driver per lake at a time (a crash test starts the next
one after the last died), which is what the declaration promises; the tests that run two drivers
at once (failover, zombies) tier with delta-rs."""

from __future__ import annotations

from pathlib import Path

import tomli_w

from tiering.conf.loader import load_config
from tiering.conf.model import TieringConfig

#: A driver process's own Spark: two local cores, no UI, no progress bars in its output.
SPARK_LOCAL = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "1g",
}
#: Chaos runs use a short lease so a crashed driver's lease lapses within a trial...
CHAOS_LEASE_S = 6.0
#: ...and a short session: how long after a driver's death its leadership lingers.
CHAOS_SESSION_TIMEOUT_S = 3.0
#: The sections of a chaos driver's config (``write_conf(..., **CHAOS)``).
CHAOS = {
    "zookeeper": {"session_timeout_s": CHAOS_SESSION_TIMEOUT_S},
    "lease": {"duration_s": CHAOS_LEASE_S, "renew": True},
    "spark": SPARK_LOCAL,
}


def write_conf(
    path: Path,
    *,
    job: str,
    store_url: str,
    zk_hosts: str,
    checkpoint: Path | str | None = None,
    lake_root: Path | str | None = None,
    group: str | None = None,
    **sections: dict,
) -> Path:
    """A ``tiering`` TOML config at ``path``: the job, its store and ZooKeeper, its checkpoint and
    lake root (by default ``ckpt`` and ``lake`` beside the file), its tiering ``group`` if any; each
    of ``sections`` adds keys to a section or a whole section (``zookeeper={"session_timeout_s": 2.0}``,
    ``lake={"storage": ...}``, ``spark=SPARK_LOCAL``)."""
    conf: dict = {
        "job": {
            "name": job,
            "checkpoint": str(checkpoint or path.parent / "ckpt"),
            **({"group": group} if group else {}),
        },
        "kvstore": {"url": store_url},
        "zookeeper": {"hosts": zk_hosts},
        "lake": {"root": str(lake_root or path.parent / "lake")},
    }
    for section, values in sections.items():
        conf.setdefault(section, {}).update(values)
    if conf["lake"].get("writer") == "delta-spark":
        conf["lake"].setdefault("delta_spark_single_driver", True)
    path.write_bytes(tomli_w.dumps(conf).encode())
    return path


def job_config(root: Path, store_url: str, zk_hosts: str, job: str, **overrides) -> TieringConfig:
    """An availableNow job on ``root/ckpt`` and ``root/lake`` with the service's defaults for the
    rest; ``overrides`` by dotted key (the benchmarks measure the job as deployed)."""
    if overrides.get("lake.writer") == "delta-spark":
        overrides = {"lake.delta_spark_single_driver": True, **overrides}
    base = {
        "job.name": job,
        "job.checkpoint": str(root / "ckpt"),
        "kvstore.url": store_url,
        "zookeeper.hosts": zk_hosts,
        "lake.root": str(root / "lake"),
        "trigger.available_now": True,
    }
    return load_config(None, {}, {**base, **overrides})


#: A test's pace: a short session, rounds a second apart, a lease no test outlives.
TEST_PACE = {"zookeeper.session_timeout_s": 4.0, "trigger.interval_s": 1.0, "lease.duration_s": 60.0}


def make_config(tmp_path: Path, store_url: str, zk_hosts: str, job: str = "t-job", **overrides) -> TieringConfig:
    """An availableNow job on ``tmp_path/ckpt`` and ``tmp_path/lake`` at :data:`TEST_PACE`;
    ``overrides`` by dotted key."""
    return job_config(tmp_path, store_url, zk_hosts, job, **{**TEST_PACE, **overrides})
