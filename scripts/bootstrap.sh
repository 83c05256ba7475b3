#!/usr/bin/env bash
# Create .venv and install duetime with every extra; uses uv when it can, plain pip otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if ! "$PYTHON" -m uv --version >/dev/null 2>&1; then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check uv || true
fi
if "$PYTHON" -m uv --version >/dev/null 2>&1; then
  [ -x .venv/bin/python ] || "$PYTHON" -m uv venv --quiet .venv --python "$PYTHON"
  "$PYTHON" -m uv pip install --quiet --python .venv/bin/python -e '.[local,infra,dev,bench]'
else
  [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -e '.[local,infra,dev,bench]'
fi
