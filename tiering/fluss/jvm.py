"""A JVM with Fluss's Java client, reached through py4j: for what pyfluss does not bind (KV
snapshots, the snapshot lease, reading a snapshot's rows).

Failure modes it guards against:
- a process with no JVM (the source's planning process has no SparkContext) or a driver's JVM
  without fluss-client (``spark.jars`` lacks it) left without the calls: it gets a small gateway
  JVM of its own (fluss-client on its classpath, and our jvm/fluss-snapshot-source jar when the
  install carries it or the checkout built it (:func:`snapshot_source_jar`), killed with the
  process that started it); with neither, one clear error naming both instead of a failure deep
  in a call;
- an executor on a cluster, where the driver's path of the fluss-client jar does not exist: Spark
  fetched the driver's ``spark.jars`` into the executor's working directory or its SparkFiles root,
  so the same file name is looked for there (:func:`local_jar`) before failing;
- a failure read as another: pyspark, once a SparkContext lives in the process, reads every py4j
  gateway's thrown Java exceptions through Spark's JVM, where another gateway's object ids are
  other objects. So futures hand their failures over as values (:meth:`FlussJvm.outcome`), never
  thrown; a synchronous call that throws there is reported as a py4j error, not as Fluss's;
- py4j's boxing: a small Python int arrives as ``java.lang.Integer`` and Fluss unboxes
  ``Map<TableBucket, Long>`` values as ``Long`` (a ClassCastException), so :func:`long_map` boxes
  them inside the JVM.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from py4j.java_gateway import JavaObject

from tiering.errors import FlussClientError
from tiering.java import find_java

__all__ = [
    "FlussJvm",
    "has_class",
    "local_jar",
    "long_map",
    "java_set",
    "snapshot_source_jar",
    "snapshot_source_hint",
    "SNAPSHOT_SOURCE_PLACES",
    "SNAPSHOT_SOURCE_JAR",
]

log = logging.getLogger(__name__)

#: a class of fluss-client, to tell whether a JVM has it
_PROBE = "org.apache.fluss.client.ConnectionFactory"
#: our JVM module's jar, as Maven names it (its version follows)
SNAPSHOT_SOURCE_JAR = "fluss-snapshot-source-*.jar"
#: where :func:`snapshot_source_jar` looks, in order: the package's copy (an installed wheel's
#: package data; scripts/setup_fluss_source.sh puts it there in a checkout), then the checkout's
#: Maven target, which the same script builds
SNAPSHOT_SOURCE_PLACES = (
    Path(__file__).resolve().parents[1] / "resources" / "jvm",
    Path(__file__).resolve().parents[2] / "jvm" / "fluss-snapshot-source" / "target",
)
#: the gateway JVM's settings: small; the client compiled by C1 alone (a worker's JVM starts cold
#: beside the round's own work, on the executor's few cores, and C2's compiler threads then take
#: more of them than its faster code gives back over a few buckets' reads); and Fluss's Arrow
#: memory needs java.nio opened
_JAVA_OPTIONS = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
)
#: how long a gateway JVM asked to end may run its shutdown hooks before it is killed
_END_WAIT_S = 5.0


class FlussJvm:
    """A py4j gateway to a JVM that has fluss-client, and a Fluss connection from it.

    Owned (``owned``): a gateway JVM this object started, ended by :meth:`close`: the gateway's
    shutdown stops only its server, and Fluss's client threads would keep the JVM alive until this
    process exits (``die_on_exit``), one more per term in a driver that runs term after term."""

    def __init__(
        self,
        gateway: Any,
        bootstrap_servers: str,
        *,
        owned: bool,
        options: Mapping[str, str] | None = None,
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.gateway = gateway
        self.process = process
        self.jvm = gateway.jvm
        self.owned = owned
        self.bootstrap_servers = bootstrap_servers
        settings = self.jvm.java.util.HashMap()
        for key, value in (options or {}).items():
            settings.put(key, value)
        settings.put("bootstrap.servers", bootstrap_servers)
        configuration = self.jvm.org.apache.fluss.config.Configuration.fromMap(settings)
        self.connection = self.jvm.org.apache.fluss.client.ConnectionFactory.createConnection(configuration)
        self.admin = self.connection.getAdmin()

    @classmethod
    def open(
        cls, bootstrap_servers: str, client_jar: Path | None, options: Mapping[str, str] | None = None
    ) -> FlussJvm:
        """The active SparkContext's JVM when it has fluss-client (on ``spark.jars``), else a gateway
        JVM of its own started from ``client_jar``; ``FlussClientError`` naming both when neither.
        ``options``: Fluss client options for its connection."""
        pyspark = sys.modules.get("pyspark")  # not imported: no SparkContext can be active
        context = pyspark.SparkContext._active_spark_context if pyspark is not None else None
        if context is not None and _has_client(context._gateway):
            return cls(context._gateway, bootstrap_servers, owned=False, options=options)
        client_jar = local_jar(client_jar)
        if client_jar is None or not client_jar.is_file():
            where = "the Spark driver's JVM has none" if context is not None else "no SparkContext is active"
            raise FlussClientError(
                f"no JVM with Fluss's client ({_PROBE}): {where} (put the fluss-client jar on spark.jars), "
                f"and no fluss-client jar at {client_jar} to start one with"
            )
        gateway, process = _launch(client_jar)
        return cls(gateway, bootstrap_servers, owned=True, options=options, process=process)

    def path(self, database: str, table: str) -> Any:
        return self.jvm.org.apache.fluss.metadata.TablePath.of(database, table)

    def bucket(self, table_id: int, bucket: int) -> Any:
        return self.jvm.org.apache.fluss.metadata.TableBucket(table_id, bucket)

    def outcome(self, future: Any) -> tuple[Any, Any]:
        """``(value, None)`` of a completed ``CompletableFuture``, or ``(None, throwable)`` when it
        failed. The failure never crosses py4j as a Java exception: pyspark, once a SparkContext
        lives in the process, reads every gateway's Java exceptions through Spark's own JVM
        (``install_exception_handler``), where this gateway's object ids mean other objects."""
        identity = self.jvm.java.util.function.Function.identity()
        value = future.exceptionally(identity).get()  # a failure completes it with the Throwable
        if isinstance(value, JavaObject) and self.jvm.java.lang.Class.forName("java.lang.Throwable").isInstance(value):
            return None, value
        return value, None

    def failure_kinds(self, throwable: Any) -> tuple[frozenset[str], str]:
        """Every class (and superclass) name along ``throwable``'s causes, and the innermost one's
        text: Fluss's own exception is usually wrapped (``CompletionException``, ``ExecutionException``)."""
        kinds: set[str] = set()
        text = ""
        while throwable is not None:
            text = throwable.toString()
            kind = throwable.getClass()
            while kind is not None:
                kinds.add(kind.getName())
                kind = kind.getSuperclass()
            throwable = throwable.getCause()
        return frozenset(kinds), text

    def close(self) -> None:
        try:
            self.admin.close()
            self.connection.close()
        finally:
            if self.owned:
                self.gateway.shutdown()
                _end(self.process)


def _end(process: subprocess.Popen[bytes] | None) -> None:
    """Ends a gateway JVM: asked first (SIGTERM runs its shutdown hooks), killed if it lingers."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(_END_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _has_client(gateway: Any) -> bool:
    return has_class(gateway, _PROBE)


def has_class(gateway: Any, name: str) -> bool:
    """Whether the gateway's JVM loads class ``name`` (through its context class loader, which
    holds a Spark driver's ``spark.jars``)."""
    try:
        loader = gateway.jvm.java.lang.Thread.currentThread().getContextClassLoader()
        gateway.jvm.java.lang.Class.forName(name, False, loader)
    except Exception:  # py4j's Py4JJavaError around a ClassNotFoundException
        return False
    return True


def local_jar(jar: Path | None, places: Sequence[Path] | None = None) -> Path | None:
    """``jar`` where it exists; else a file of its name in the first of ``places`` that holds one
    (by default the working directory, then pyspark's SparkFiles root: where an executor fetches
    the driver's ``spark.jars``); else ``jar`` as given, for the error to name."""
    if jar is None or jar.is_file():
        return jar
    for place in _fetched_jar_places() if places is None else places:
        if (place / jar.name).is_file():
            return place / jar.name
    return jar


def _fetched_jar_places() -> list[Path]:
    places = [Path.cwd()]
    files = sys.modules.get("pyspark.files")  # not imported: no Spark process fetched any file
    if files is not None:
        try:
            places.append(Path(files.SparkFiles.getRootDirectory()))
        except Exception:  # a driver without a SparkContext (an assertion), or its JVM gone (py4j)
            pass
    return places


def snapshot_source_jar(places: Sequence[Path] | None = None) -> Path | None:
    """Our JVM module's jar (jvm/fluss-snapshot-source: the Spark source and the Arrow snapshot
    writer) from the first of ``places`` (:data:`SNAPSHOT_SOURCE_PLACES` by default) that holds
    one, None when none does."""
    for place in SNAPSHOT_SOURCE_PLACES if places is None else places:
        found = sorted(place.glob(SNAPSHOT_SOURCE_JAR))
        if found:
            return found[-1]
    return None


def snapshot_source_hint(owned: bool) -> str:
    """How to give a JVM that lacks our JVM module's classes the jar: a Spark JVM (not ``owned``)
    takes it on ``spark.jars``; a gateway JVM of our own was started where none was found."""
    found = snapshot_source_jar()
    if not owned:
        return f"put {found or SNAPSHOT_SOURCE_JAR} on spark.jars beside fluss-client"
    if found is None:
        looked = " or ".join(map(str, SNAPSHOT_SOURCE_PLACES))
        return (
            f"no {SNAPSHOT_SOURCE_JAR} in {looked} to start it with (a kv-tiering wheel built after "
            "scripts/setup_fluss_source.sh carries it; in a checkout that script builds it)"
        )
    return f"it was started with {found}, which lacks it: build it again with scripts/setup_fluss_source.sh"


def _launch(client_jar: Path) -> tuple[Any, subprocess.Popen[bytes]]:
    """A gateway JVM with ``client_jar`` and, when found, :func:`snapshot_source_jar` on its
    classpath, and its process."""
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

    jars = [client_jar, *filter(None, [snapshot_source_jar()])]
    port, process = launch_gateway(
        classpath=os.pathsep.join(map(str, jars)),
        java_path=find_java(),
        javaopts=list(_JAVA_OPTIONS),
        die_on_exit=True,
        return_proc=True,
    )
    log.info("started a gateway JVM with %s on port %d", ", ".join(jar.name for jar in jars), port)
    return JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=False)), process


def long_map(gateway: Any, entries: Mapping[Any, int]) -> Any:
    """A ``java.util.Map<K, java.lang.Long>`` of ``entries``, boxed inside the JVM: a ``long[]``
    boxed by ``LongStream.boxed()``, each Long copied JVM-side into a key/value pair, the pairs made
    a map by commons-lang3's ``ArrayUtils.toMap`` (bundled in fluss-client, and in Spark's jars)."""
    jvm, new_array = gateway.jvm, gateway.new_array
    values = new_array(jvm.long, len(entries))
    for i, value in enumerate(entries.values()):
        values[i] = value
    boxed = jvm.java.util.Arrays.stream(values).boxed().toArray()
    pairs = new_array(jvm.java.lang.Object, len(entries))
    for i, key in enumerate(entries):
        pair = new_array(jvm.java.lang.Object, 2)
        pair[0] = key
        jvm.java.lang.System.arraycopy(boxed, i, pair, 1, 1)
        pairs[i] = pair
    return jvm.org.apache.commons.lang3.ArrayUtils.toMap(pairs)


def java_set(gateway: Any, items: Iterable[Any]) -> Any:
    result = gateway.jvm.java.util.HashSet()
    for item in items:
        result.add(item)
    return result
