"""Spark's ``s3a`` jars (hadoop-aws and its AWS SDK bundle) for the tests that put a checkpoint on S3.

``scripts/setup_s3a.sh`` fetches them into ``deploy/jars/s3a/lib``, pinned to the Hadoop inside
the main virtualenv's pyspark. A pyspark with another Hadoop (``.venv-oldest``'s) cannot load
them: there :func:`s3a_jars` is None and the tests that need them are skipped, naming why. The
jars go on the driver's classpath only (``spark.driver.extraClassPath``): only the driver writes
the checkpoint, and shipping a 650 MB SDK bundle to every executor would cost minutes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyspark
import pytest

JARS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "jars" / "s3a" / "lib"


def pyspark_hadoop() -> str | None:
    """The Hadoop release inside this interpreter's pyspark (its hadoop-client-api jar)."""
    for jar in (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    return None


def _why_not() -> str | None:
    aws = sorted(JARS_DIR.glob("hadoop-aws-*.jar"))
    if not aws:
        return f"no hadoop-aws jar in {JARS_DIR} (scripts/setup_s3a.sh fetches it)"
    version = re.sub(r"^hadoop-aws-|\.jar$", "", aws[0].name)
    if version != pyspark_hadoop():
        return f"hadoop-aws {version} in {JARS_DIR} does not match this pyspark's Hadoop {pyspark_hadoop()}"
    return None


def s3a_jars() -> list[Path] | None:
    """The jars, when they fit this pyspark; else None."""
    return None if _why_not() else sorted(JARS_DIR.glob("*.jar"))


def s3a_driver_conf() -> dict[str, str]:
    """Spark conf putting the jars on the driver's classpath."""
    jars = s3a_jars()
    assert jars is not None, _why_not()
    return {"spark.driver.extraClassPath": ":".join(str(j) for j in jars)}


needs_s3a = pytest.mark.skipif(s3a_jars() is None, reason=f"Spark's s3a jars: {_why_not()}")
