#!/usr/bin/env bash
# Builds our Spark source of Apache Fluss KV snapshots (jvm/fluss-snapshot-source, format
# "fluss-snapshot": docs/DESIGN.md §2) with mvn, against the Spark jars of the pyspark in the venv
# given (default .venv), into jvm/fluss-snapshot-source/target (ignored). Rebuilt only when its
# sources, its pom.xml or pyspark's jars are newer than the jar. fluss-client comes from mvn's local
# repository (scripts/setup_fluss.sh fetched it). The jar is then copied into the package's
# tiering/resources/jvm (ignored), whence a wheel built from this checkout carries it as package
# data (tiering.fluss.jvm.snapshot_source_jar finds it there). Called by scripts/setup_tests.sh's
# main part, after setup_fluss.sh. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
MODULE=jvm/fluss-snapshot-source
PACKAGED=tiering/resources/jvm
VENV=${1:-.venv}
# the built jar, alone, in the package's resources (a jar of another version removed)
package_jar() {
  if ! cmp -s "$1" "$PACKAGED/${1##*/}"; then
    mkdir -p "$PACKAGED"
    rm -f "$PACKAGED"/fluss-snapshot-source-*.jar
    cp "$1" "$PACKAGED/"
    echo "setup_fluss_source: copied ${1##*/} into $PACKAGED (the wheel's package data)"
  fi
}
command -v mvn >/dev/null 2>&1 || { echo "setup_fluss_source: needs Maven (scripts/setup_tests.sh installs it)" >&2; exit 1; }
# pyspark's jars directory found by its place in the venv: a Python start costs seconds
jars=("$VENV"/lib/python3*/site-packages/pyspark/jars)
[ -d "${jars[0]}" ] || { echo "setup_fluss_source: no pyspark jars in $VENV" >&2; exit 1; }
jars=$(readlink -f "${jars[0]}")
built=("$MODULE"/target/fluss-snapshot-source-*.jar)
if [ -f "${built[0]}" ] && [ -z "$(find "$MODULE/pom.xml" "$MODULE/src" "$jars" -newer "${built[0]}" -print -quit)" ]; then
  echo "setup_fluss_source: ${built[0]} is up to date"
  package_jar "${built[0]}"
  exit 0
fi
# the version in a jar's name: version_of spark-sql_2.13 -> 4.3.0 (of spark-sql_2.13-4.3.0.jar)
version_of() {
  local found=("$jars/$1"-[0-9]*.jar)
  [ -f "${found[0]}" ] || { echo "setup_fluss_source: no $1 jar in $jars" >&2; exit 1; }
  local name=${found[0]##*/}
  name=${name#"$1"-}
  echo "${name%.jar}"
}
spark=$(version_of spark-sql_2.13)
scala=$(version_of scala-library)
kryo=$(version_of kryo-shaded)
rm -rf "$MODULE/target"  # no class left from a deleted source
(cd "$MODULE" && mvn -q -B package -Dspark.jars="$jars" -Dspark.version="$spark" -Dscala.version="$scala" -Dkryo.version="$kryo")
built=("$MODULE"/target/fluss-snapshot-source-*.jar)
echo "setup_fluss_source: built ${built[0]} against Spark $spark ($jars)"
package_jar "${built[0]}"
