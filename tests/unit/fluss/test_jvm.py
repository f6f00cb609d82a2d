"""Where our JVM module's jar is found: the copy an installed wheel carries as package data first,
then a checkout's Maven target; None when neither has one. And what a JVM without its classes is
told: a Spark JVM the copy to put on spark.jars, a gateway JVM of ours where none was found."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiering.fluss import jvm
from tiering.fluss.jvm import SNAPSHOT_SOURCE_PLACES, local_jar, snapshot_source_hint, snapshot_source_jar

pytestmark = pytest.mark.unit

JAR = "fluss-snapshot-source-0.1.0.jar"


def places(root: Path) -> tuple[Path, Path]:
    packaged, target = root / "package" / "resources" / "jvm", root / "checkout" / "target"
    packaged.mkdir(parents=True)
    target.mkdir(parents=True)
    return packaged, target


def test_the_package_s_copy_is_found_before_the_checkout_s_build(tmp_path):
    packaged, target = places(tmp_path)
    (packaged / JAR).touch()
    (target / JAR).touch()

    assert snapshot_source_jar((packaged, target)) == packaged / JAR


def test_a_checkout_without_the_package_s_copy_finds_its_maven_build(tmp_path):
    packaged, target = places(tmp_path)
    (target / JAR).touch()
    (target / "original-fluss-snapshot-source.jar").touch()

    assert snapshot_source_jar((packaged, target)) == target / JAR


def test_neither_is_none(tmp_path):
    assert snapshot_source_jar(places(tmp_path)) is None


def test_the_places_are_the_package_s_resources_then_the_checkout_s_target():
    packaged, target = SNAPSHOT_SOURCE_PLACES
    tiering = Path(__file__).resolve().parents[3] / "tiering"
    assert packaged == tiering / "resources" / "jvm"
    assert target == tiering.parent / "jvm" / "fluss-snapshot-source" / "target"


def test_a_spark_jvm_is_told_to_put_the_found_copy_on_spark_jars(tmp_path, monkeypatch):
    packaged, target = places(tmp_path)
    (target / JAR).touch()
    monkeypatch.setattr(jvm, "SNAPSHOT_SOURCE_PLACES", (packaged, target))

    assert snapshot_source_hint(owned=False) == f"put {target / JAR} on spark.jars beside fluss-client"
    monkeypatch.setattr(jvm, "SNAPSHOT_SOURCE_PLACES", ())
    assert snapshot_source_hint(owned=False) == "put fluss-snapshot-source-*.jar on spark.jars beside fluss-client"


CLIENT = "fluss-client-0.9.1-incubating.jar"


def test_the_driver_s_client_jar_is_used_where_it_exists(tmp_path):
    driver, fetched = tmp_path / "driver", tmp_path / "fetched"
    driver.mkdir()
    fetched.mkdir()
    (driver / CLIENT).touch()
    (fetched / CLIENT).touch()

    assert local_jar(driver / CLIENT, [fetched]) == driver / CLIENT


def test_an_executor_finds_the_client_jar_spark_fetched_by_its_name(tmp_path):
    empty, fetched = tmp_path / "empty", tmp_path / "fetched"
    empty.mkdir()
    fetched.mkdir()
    (fetched / CLIENT).touch()

    assert local_jar(Path("/driver/only/jars") / CLIENT, [empty, fetched]) == fetched / CLIENT


def test_the_working_directory_is_looked_in_by_default(tmp_path, monkeypatch):
    (tmp_path / CLIENT).touch()
    monkeypatch.chdir(tmp_path)

    assert local_jar(Path("/driver/only/jars") / CLIENT) == tmp_path / CLIENT


def test_a_jar_found_nowhere_is_named_as_given(tmp_path):
    assert local_jar(Path("/driver/only/jars") / CLIENT, [tmp_path]) == Path("/driver/only/jars") / CLIENT
    assert local_jar(None, [tmp_path]) is None
