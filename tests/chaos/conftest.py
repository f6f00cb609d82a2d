"""The chaos cases' session fixtures: the fault matrix every case adds its row to."""

from tests.support.fault_matrix import fault_matrix  # noqa: F401 - a fixture, found by pytest here
