"""Whether the driver's Spark session can load Delta Lake's JVM classes, checked before anything
needs them.

Failure mode it guards against: a setting that needs the Delta jars (``lake.writer =
"delta-spark"``, ``lake.catalog_database``) failing in the middle of a round, with a py4j
traceback, after leases were taken. Checked when the writer or the catalog is built: a
:class:`ConfigError` naming the setting, the missing class and how to add the jars (or what to
use instead). Below both the delta-spark writer and the catalog, which both check it.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from tiering.errors import ConfigError

__all__ = ["DELTA_CLASS", "check_delta_jars"]

#: A class every delta-spark release ships; loadable iff the jars are on the driver's classpath.
DELTA_CLASS = "io.delta.tables.DeltaTable"

_MISSING_JARS = (
    "{who} needs the Delta Lake jars on Spark's classpath, but {cls} is not "
    'loadable ({why}); add them, e.g. spark.jars.packages = "io.delta:delta-spark_{minor}_2.13:<version '
    'matching Spark {spark}>" in the [spark] section (Delta 4.4 and later name the artifact by Spark '
    "version; earlier ones io.delta:delta-spark_2.13) (or --packages / spark.jars with spark-submit), or "
    "{instead}"
)


def check_delta_jars(
    spark: SparkSession,
    who: str = "lake.writer: 'delta-spark'",
    instead: str = 'use lake.writer = "delta-rs" (no JVM jars needed)',
) -> None:
    """:class:`ConfigError` unless the Delta classes load in the driver's JVM; the error says that
    ``who`` (a setting) needs them, and what to do ``instead``."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        why = "this session has no local JVM (Spark Connect?)"
    else:
        from py4j.java_gateway import JavaClass

        # py4j resolves names with the context class loader, which holds spark.jars/--packages
        if isinstance(jvm.io.delta.tables.DeltaTable, JavaClass):
            return
        why = "class not found"
    minor = ".".join(spark.version.split(".")[:2])
    raise ConfigError(
        [_MISSING_JARS.format(who=who, cls=DELTA_CLASS, why=why, spark=spark.version, minor=minor, instead=instead)]
    )
