#!/usr/bin/env bash
# Loads the Airflow DAG (jobs/airflow/kv_tiering_dag.py) with Apache Airflow and its Spark
# provider installed in their own virtualenv, .venv-airflow, and checks the operator's
# arguments (tests/airflow/). Airflow pins many libraries; keeping it out of .venv keeps the
# service's own dependency set small. Safe to run again: the venv is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-airflow
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
if ! "$VENV/bin/python" -c 'import airflow, airflow.providers.apache.spark, pytest' 2>/dev/null; then
  echo "test_airflow: installing apache-airflow and apache-airflow-providers-apache-spark into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "apache-airflow==3.3.2" "apache-airflow-providers-apache-spark==6.3.4" pytest
fi
export AIRFLOW_HOME="${AIRFLOW_HOME:-$PWD/$VENV/airflow-home}"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__UNIT_TEST_MODE=True
# --noconftest and -c /dev/null: the main suite's conftest and settings need packages (kazoo,
# pyspark, pytest-timeout) this venv does not have; no cache shared with .venv's pytest.
exec "$VENV/bin/python" -m pytest -p no:cacheprovider --noconftest -c /dev/null --rootdir=. -o "markers=integration: real Airflow" tests/airflow "$@"
