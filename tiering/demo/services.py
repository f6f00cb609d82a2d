"""The processes a demo runs: embedded ZooKeeper, the reference store (or with ``--store fluss`` a
Fluss cluster), a local Spark driver, and with ``--lake s3`` an embedded S3 server.

Failure mode: a demo that leaves processes behind, on success, on failure, on Ctrl-C or on
SIGTERM. :class:`DemoServices` stops everything it started, in reverse order, whatever
happened; ZooKeeper additionally dies with this process, and an abandoned Spark JVM exits
when this process does (its stdin pipe closes).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from rich.console import Console

from tiering.conf.model import TieringConfig
from tiering.coord.embedded import EmbeddedZooKeeper
from tiering.fluss.cluster import FlussCluster
from tiering.kvstore.server.process import StoreProcess
from tiering.objectstore.embedded_s3 import EmbeddedS3

__all__ = ["DemoServices", "log_to_file", "wait_interruptibly", "SPARK_LOG4J"]

log = logging.getLogger(__name__)

#: Spark's own log goes to a file: the live view owns the terminal.
SPARK_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{ISO8601}} %p %c{{1}}: %m%n%ex
"""


class DemoServices:
    """ZooKeeper, the store (or Fluss) and Spark for one demo run; :meth:`stop` is safe at any point."""

    def __init__(self, data_dir: Path, console: Console) -> None:
        self.data_dir = data_dir
        self.console = console
        self.zk = EmbeddedZooKeeper()
        self.store: StoreProcess | None = None
        self.fluss: FlussCluster | None = None
        self.s3: EmbeddedS3 | None = None
        self.spark = None

    def start_zookeeper(self) -> None:
        self.zk.start(self.data_dir / "zookeeper")
        self.console.print(f"demo: ZooKeeper pid {self.zk.pid} at {self.zk.hosts}")

    def start_store(self) -> StoreProcess:
        store = StoreProcess.start(
            self.data_dir / "kvstore", num_retained=2, gc_interval_s=5.0, snapshot_interval_s=15.0
        )
        self.store = store
        self.console.print(f"demo: KV store pid {store.pid} at {store.url}")
        return store

    def start_fluss(self, cluster: FlussCluster) -> FlussCluster:
        """``cluster`` started in the data directory (registered first: a failed start is stopped too)."""
        self.fluss = cluster
        cluster.start(self.data_dir / "fluss")
        pids = ", ".join(f"{p.name} {p.pid}" for p in (cluster.zookeeper, cluster.coordinator, cluster.tablet) if p)
        self.console.print(f"demo: Fluss cluster pids {pids} at {cluster.bootstrap_servers}")
        return cluster

    def start_s3(self) -> EmbeddedS3:
        self.s3 = EmbeddedS3(bucket="demo").start(self.data_dir / "s3")
        self.console.print(
            f"demo: S3 server (SeaweedFS) pid {self.s3.pid} at {self.s3.endpoint}, lake in {self.s3.root}"
        )
        return self.s3

    def start_spark(self, config: TieringConfig):
        """Build the session in a helper thread, so pyspark installs no SIGINT handler of its own.

        pyspark's handler (installed when a SparkContext starts in the main thread) calls into
        the JVM to cancel jobs; during the context's start that call can hang, and Ctrl-C with
        it. Here the main thread only waits, and Ctrl-C interrupts the wait.
        """
        from tiering.job import build_spark

        result: dict = {}

        def start() -> None:
            try:
                result["spark"] = build_spark(config)
                result["spark"].sparkContext.setLogLevel("ERROR")
            except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
                result["error"] = e

        thread = threading.Thread(target=start, name="demo-spark-start", daemon=True)
        thread.start()
        wait_interruptibly(thread)
        if "error" in result:
            raise result["error"]
        spark = self.spark = result["spark"]
        self.console.print(f"demo: Spark driver JVM pid {spark.sparkContext._jvm.ProcessHandle.current().pid()}")
        return spark

    def stop(self) -> None:
        if self.spark is not None:
            try:
                self.spark.stop()
            except Exception as e:  # noqa: BLE001 - the JVM may already be gone; keep cleaning up
                log.warning("stopping Spark: %s", e)
        if self.store is not None:
            self.store.stop()
        if self.fluss is not None:
            self.fluss.stop()
        if self.s3 is not None:
            self.s3.stop()
        self.zk.stop()
        self.console.print("demo: stopped every process it started")


def wait_interruptibly(thread: threading.Thread) -> None:
    """Join ``thread`` in short waits: a bare ``join()`` would hold Ctrl-C off until it ends."""
    while thread.is_alive():
        thread.join(0.2)


def log_to_file(path: Path) -> None:
    """The live display owns the terminal: log lines go to ``path`` instead."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
    root.addHandler(handler)
    logging.getLogger("py4j").setLevel(logging.WARNING)
