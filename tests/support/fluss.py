"""The Apache Fluss jars and Python client the Fluss tests need, and the skip when they are absent.

``scripts/setup_fluss.sh`` fetches the jars into ``deploy/jars/fluss/lib`` (deploy/jars/fluss/pom.xml
pins them); pyfluss is the ``fluss`` extra, inside the ``test`` one. Without either the tests that
start a cluster are skipped, naming what is missing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

JARS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "jars" / "fluss" / "lib"


def _why_not() -> str | None:
    if not sorted(JARS_DIR.glob("fluss-server-*.jar")):
        return f"no fluss-server jar in {JARS_DIR} (scripts/setup_fluss.sh fetches it)"
    if importlib.util.find_spec("fluss") is None:
        return "no pyfluss (pip install 'kv-tiering[fluss]')"
    return None


def client_jar() -> Path:
    """fluss-client, the jar a Spark driver puts on spark.jars to call Fluss from the JVM."""
    return sorted(JARS_DIR.glob("fluss-client-*.jar"))[0]


def skip_without_fluss() -> None:
    """Skip the calling test or fixture, naming what is missing, when it cannot start a cluster."""
    reason = _why_not()
    if reason:
        pytest.skip(f"Apache Fluss: {reason}")


async def connect(cluster):
    """A pyfluss connection to ``cluster`` (a :class:`tiering.fluss.cluster.FlussCluster`)."""
    import fluss

    return await fluss.FlussConnection.create(fluss.Config({"bootstrap.servers": cluster.bootstrap_servers}))


async def new_table(cluster, database: str, name: str, schema, buckets: int):
    """A connection, its admin, and a new table of ``buckets`` buckets in a new ``database``."""
    import fluss

    connection = await connect(cluster)
    admin = connection.get_admin()
    await admin.create_database(database, ignore_if_exists=True)
    path = fluss.TablePath(database, name)
    await admin.create_table(path, fluss.TableDescriptor(schema, bucket_count=buckets))
    return connection, admin, path, await connection.get_table(path)
