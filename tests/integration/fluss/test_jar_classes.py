"""fluss-client's classes and our jar's against the jars of every Spark the project supports (the
pyspark of .venv, .venv-oldest and .venv-delta; a venv not made is skipped): what a Spark JVM with
both on ``spark.jars`` loads.

Spark's jars are on the JVM's class path and ``spark.jars`` in a child class loader that asks its
parent first, so of a class both hold, Spark's copy loads. fluss-client bundles some libraries
without relocating them; each is known and named below with why Spark's copy in its place is
harmless, and the check that makes it so: every member that the classes loaded from fluss-client
and from ours (Fluss's own, its relocated dependencies, ours) call on those libraries exists in
Spark's copy, so no ``NoSuchMethodError`` waits in a path the tests do not take. Any other class
they share with Spark fails, naming it and the jars. Reads jars only: no JVM, no cluster.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.class_files import JarClasses
from tests.support.fluss import client_jar
from tests.support.fluss_source import source_jar

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
SPARKS = (".venv", ".venv-oldest", ".venv-delta")
#: the libraries fluss-client 0.9.1 bundles unrelocated (its META-INF/DEPENDENCIES), by package:
#: the Spark jar whose copy loads instead, and why that is harmless
KNOWN_SHARED = {
    "org/rocksdb/": ("rocksdbjni-", "frocksdbjni 6.20.3 bundled, Spark's rocksdbjni 9.x loads: snapshots read on it"),
    "net/jpountz/": ("lz4-java-", "lz4-java 1.10.2 bundled; Spark's 1.8 (4.0) to 1.11 has every member Fluss calls"),
    "com/github/luben/zstd/": ("zstd-jni-", "zstd-jni 1.5.7-6 bundled; Spark's 1.5.6 to 1.5.7 has what Fluss calls"),
    "org/apache/commons/lang3/": (
        "commons-lang3-",
        "commons-lang3 3.18 bundled; Spark's 3.17 to 3.20 has what Fluss calls",
    ),
    "org/apache/commons/math3/": ("commons-math3-", "commons-math3 3.6.1 on both sides"),
    "org/slf4j/": ("slf4j-api-", "slf4j-api 1.7.36 bundled; Spark's 2.0 keeps the 1.7 API Fluss logs through"),
    "javax/annotation/": ("jsr305-", "jsr305 annotations: no behaviour"),
}


def library(name: str) -> str | None:
    return next((prefix for prefix in KNOWN_SHARED if name.startswith(prefix)), None)


@pytest.fixture(params=SPARKS)
def spark_jars(request) -> Path:
    found = sorted((REPO / request.param).glob("lib/python3*/site-packages/pyspark/jars"))
    if not found:
        pytest.skip(f"no pyspark jars in {request.param} (scripts/setup_tests.sh makes it)")
    return found[0]


def test_fluss_client_and_our_jar_share_only_the_known_libraries_with_spark(spark_jars):
    with JarClasses([client_jar(), source_jar()]) as ours, JarClasses(sorted(spark_jars.glob("*.jar"))) as spark:
        shared = ours.archive_of.keys() & spark.archive_of.keys()
        by_library: dict[str | None, set[str]] = defaultdict(set)
        for name in shared:
            by_library[library(name)].add(f"{ours.jar(name)} / {spark.jar(name)}")

    unknown = sorted(name.replace("/", ".") for name in shared if library(name) is None)
    assert not unknown, f"{len(unknown)} classes also in {spark_jars}, none known harmless: {unknown[:20]}"
    for prefix, pairs in by_library.items():
        assert prefix is not None
        expected, why = KNOWN_SHARED[prefix]
        assert all(pair.startswith(f"{client_jar().name} / {expected}") for pair in pairs), (
            f"{prefix} known harmless from Spark's {expected}*.jar ({why}), found in {sorted(pairs)}"
        )


def test_what_fluss_and_we_call_in_a_shared_library_is_in_spark_s_copy(spark_jars):
    missing: set[str] = set()
    with JarClasses([client_jar(), source_jar()]) as ours, JarClasses(sorted(spark_jars.glob("*.jar"))) as spark:
        for name in ours.archive_of:
            if library(name) is not None:
                continue  # a library's own class: Spark's copy of its package loads
            for owner, member in ours.read(name).references:
                if library(owner) is not None and not spark.declares(owner, member):
                    missing.add(f"{name} -> {owner}.{member[0]}{member[1]}")

    assert not missing, f"not in {spark_jars}'s copies: {sorted(missing)[:20]}"
