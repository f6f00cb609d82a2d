"""How pytest-xdist hands the suite's modules to its workers: a module at a time (``--dist
loadfile``), except the modules that share a costly session fixture, which go to one worker as one
unit, in collection order, so that worker starts the fixture once for all of them.

A session fixture lives per worker: two modules on two workers start it twice (a standalone Spark
cluster's three JVMs, a wheel built and installed with pyspark in a fresh virtualenv), however
the two happen to be handed out. The unit takes the place of its first module in the queue.

Failure mode: a module renamed or moved drops out of its unit silently; it is then handed out
alone, as any module, and the suite still passes (its fixture starts once more).
"""

from __future__ import annotations

from xdist.scheduler import LoadFileScheduling

#: The spark_cluster fixture's modules and the installed_wheel fixture's: test_packed_env uses both.
_CLUSTER_AND_WHEEL = "spark_cluster, installed_wheel"
#: Modules (paths from the repository root) by the unit of the session fixtures they share.
SHARED_FIXTURE_UNITS = {
    "tests/integration/cluster/test_spark_submit_cluster.py": _CLUSTER_AND_WHEEL,
    "tests/integration/packaging/test_packed_env.py": _CLUSTER_AND_WHEEL,
    "tests/integration/packaging/test_wheel.py": _CLUSTER_AND_WHEEL,
}


def unit_of(nodeid: str) -> str:
    """The work unit of a test: its module, or the session fixtures its module shares with others."""
    module = nodeid.split("::", 1)[0]
    return SHARED_FIXTURE_UNITS.get(module, module)


class SharedFixtureScheduling(LoadFileScheduling):
    """``--dist loadfile``, the modules of :data:`SHARED_FIXTURE_UNITS` as units of their own."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
