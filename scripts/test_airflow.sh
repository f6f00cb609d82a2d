#!/usr/bin/env bash
# Loads the Airflow DAG factory (jobs/airflow/kv_tiering_dag.py) with Apache Airflow and its Spark
# provider and runs tests/airflow/ on the newest and the oldest Airflow the project claims, each in
# its own virtualenv: .venv-airflow (Airflow 3.3.2) and .venv-airflow-oldest (Airflow 2.10.5, the
# oldest 2.x line still installing on Python 3.11 with a Spark provider of its own). Airflow pins
# many libraries; keeping it out of .venv keeps the service's own dependency set small. Safe to run
# again: the venvs are reused. Arguments go to both pytest runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__UNIT_TEST_MODE=True

# test_on VENV AIRFLOW_VERSION SPARK_PROVIDER_VERSION [pytest args]
test_on() {
  local venv=$1 airflow=$2 provider=$3
  shift 3
  [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
  if ! "$venv/bin/python" -c "import airflow, airflow.providers.apache.spark, pytest, sys; sys.exit(airflow.__version__ != '$airflow')" 2>/dev/null; then
    echo "test_airflow: installing apache-airflow $airflow and its Spark provider $provider into $venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q "apache-airflow==$airflow" "apache-airflow-providers-apache-spark==$provider" pytest
  fi
  echo "test_airflow: Airflow $airflow ($venv)"
  # --noconftest and -c /dev/null: the main suite's conftest and settings need packages (kazoo,
  # pyspark, pytest-timeout) these venvs do not have; no cache shared with .venv's pytest.
  AIRFLOW_HOME="$PWD/$venv/airflow-home" "$venv/bin/python" -m pytest -p no:cacheprovider --noconftest -c /dev/null \
    --rootdir=. -o "markers=integration: real Airflow" tests/airflow "$@"
}

rc=0
test_on .venv-airflow 3.3.2 6.3.4 "$@" || rc=$?
test_on .venv-airflow-oldest 2.10.5 5.3.4 "$@" || rc=$?
exit "$rc"
