"""Test harness: real services as fixtures (docs/DESIGN.md §9). Unit tests need none of them."""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

pytest_plugins = [
    "tests.fixtures.s3",
    "tests.fixtures.spark",
    "tests.fixtures.spark_cluster",
    "tests.fixtures.store",
    "tests.fixtures.zk",
]
