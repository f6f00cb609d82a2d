#!/usr/bin/env bash
# Makes the virtualenvs scripts/test_airflow.sh tests the Airflow DAG factory in: the newest and
# the oldest Airflow the project claims, each with its Spark provider and pytest: .venv-airflow
# (Airflow 3.3.2) and .venv-airflow-oldest (Airflow 2.10.5, the oldest 2.x line still installing
# on Python 3.11 with a Spark provider of its own). Airflow pins many libraries; keeping it out of
# .venv keeps the service's own dependency set small. A venv already on its version is kept, so
# this is quick when nothing changed. Called by scripts/setup_tests.sh and test_airflow.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv_install.sh
PY=${PYTHON:-python3}

# make_venv VENV AIRFLOW_VERSION SPARK_PROVIDER_VERSION
make_venv() {
  local venv=$1 airflow=$2 provider=$3
  [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
  if ! "$venv/bin/python" -c "import airflow, airflow.providers.apache.spark, pytest, sys; sys.exit(airflow.__version__ != '$airflow')" 2>/dev/null; then
    echo "setup_airflow: installing apache-airflow $airflow and its Spark provider $provider into $venv"
    venv_install "$venv" "apache-airflow==$airflow" "apache-airflow-providers-apache-spark==$provider" pytest
  fi
  echo "setup_airflow: $venv ready (Airflow $airflow)"
}

make_venv .venv-airflow 3.3.2 6.3.4
make_venv .venv-airflow-oldest 2.10.5 5.3.4
