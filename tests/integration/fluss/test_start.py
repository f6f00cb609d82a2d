"""What a Fluss job starts ahead of its first Java call, so that a cold JVM's start overlaps the work
that comes first (tiering/fluss/store.py ``open_java_soon``), on a real Fluss cluster: the driver's
lease store opens its Java client in Spark's JVM as soon as it is made (the term's lease claim is
its first call), and the source's planning process opens its gateway JVM at its first call (query
start), not at the round's first snapshots. Asserted on what is open, never on how long it took.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from tests.support.fluss_job import job_conf
from tiering.conf.loader import load_config
from tiering.context import TermContext

pytestmark = pytest.mark.integration

pytest.importorskip("fluss")

#: a client class a Fluss connection loads (the store's probe loads ConnectionFactory only)
_CONNECTION_CLASS = "org.apache.fluss.client.FlussConnection"

#: the planning process's side, in a process with no SparkContext as Spark's planning process is:
#: the reader's first call (the initial offset, at query start) and what its store has opened then
_PLANNING = """
import sys
from tiering.source import KvTieringStreamReader

reader = KvTieringStreamReader(sys.stdin.read())
reader.initialOffset()
opening = getattr(reader.store, "opening", None)
print("opening:", opening is not None)
if opening is not None:
    opening.join()
    print("gateway JVM:", reader.store._java is not None and reader.store._java.owned)
reader.store.close()
"""


#: the driver's side, in a driver process of its own (a fresh Spark JVM with fluss-client on
#: spark.jars): the lease's store as the term's job makes it, before any call, and whether Spark's
#: context class loader (the one holding spark.jars) has loaded a Fluss connection's class, asked
#: with ``ClassLoader.findLoadedClass``, which loads nothing (Spark opens java.lang to it)
_DRIVER = f"""
import sys
from tiering.context import TermContext
from tiering.job.query import TieringJob
from tiering.job.spark_session import build_spark

context = TermContext.from_option(sys.stdin.read())
spark = build_spark(context.config)
gateway = spark.sparkContext._gateway
jvm = gateway.jvm
loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
types = gateway.new_array(jvm.java.lang.Class, 1)
types[0] = jvm.java.lang.Class.forName("java.lang.String")
find = jvm.java.lang.Class.forName("java.lang.ClassLoader").getDeclaredMethod("findLoadedClass", types)
find.setAccessible(True)
name = gateway.new_array(jvm.java.lang.Object, 1)
name[0] = "{_CONNECTION_CLASS}"
print("loaded at first:", find.invoke(loader, name) is not None)
store = TieringJob(spark, context).lease.store
opening = getattr(store, "opening", None)
print("opening:", opening is not None)
if opening is not None:
    opening.join()
    print("in Spark's JVM:", store._java is not None and not store._java.owned)
    print("loaded:", find.invoke(loader, name) is not None)
context.close()
"""


def _context(tmp_path, servers: str, database: str) -> TermContext:
    conf = job_conf(tmp_path, f"start-{uuid.uuid4().hex[:6]}", servers, database, "127.0.0.1:1")
    return TermContext.begin(load_config(conf, {}, {"trigger.available_now": True}), 1)


def _run(script: str, context: TermContext) -> list[str]:
    """``script``'s lines of output, run in a Python process of its own given the term context."""
    done = subprocess.run(
        [sys.executable, "-c", script], input=context.to_option(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_the_planning_process_opens_its_gateway_jvm_at_its_first_call(fluss_cluster, database, tmp_path):
    context = _context(tmp_path, fluss_cluster.bootstrap_servers, database)

    assert _run(_PLANNING, context) == ["opening: True", "gateway JVM: True"]


def test_the_jobs_lease_store_opens_fluss_client_in_sparks_jvm_before_the_claim(fluss_cluster, database, tmp_path):
    context = _context(tmp_path, fluss_cluster.bootstrap_servers, database)

    assert _run(_DRIVER, context) == [
        "loaded at first: False",
        "opening: True",
        "in Spark's JVM: True",
        "loaded: True",
    ]
