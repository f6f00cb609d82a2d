"""`tiering demo`: everything embedded, a writer of realistic changes, a live view, and a final
row-by-row check of the lake against the store. See :mod:`tiering.demo.run`."""

from tiering.demo.run import DemoOptions, run_demo
from tiering.demo.scenario import DEMO_TABLES

__all__ = ["DemoOptions", "run_demo", "DEMO_TABLES"]
