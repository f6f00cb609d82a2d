# Sourced by the setup scripts of the test-only virtualenvs (setup_oldest.sh, setup_delta.sh,
# setup_airflow.sh): venv_install VENV ARGS... installs pip's ARGS into VENV with uv, which .venv
# holds (the test extra). uv resolves the same packages from the same index as pip for a fraction
# of pip's CPU, and scripts/test.sh makes these venvs while the main suite's tests run on the same
# cores. uv reads the system's certificates, as pip does here. No cache: where the index answers
# every revalidation as modified (this machine's does), uv downloads and builds pyspark again each
# time and its cache grows by gigabytes a venv, for nothing. Without uv in .venv (a .venv made
# before uv was in the extra) it is pip, upgraded first, as before.
venv_install() {
  local venv=$1
  shift
  if [ -x .venv/bin/uv ]; then
    .venv/bin/uv pip install -q --no-cache --system-certs --python "$venv/bin/python" "$@"
  else
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q "$@"
  fi
}
