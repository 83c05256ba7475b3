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
# checkov (scripts/checkov-requirements.txt) in a venv of its own: it pins an older boto3 than duetime runs on,
# so the two cannot share .venv. tests/infrastructure/test_checkov.py runs .checkov/bin/checkov.
if "$PYTHON" -m uv --version >/dev/null 2>&1; then
  [ -x .checkov/bin/python ] || "$PYTHON" -m uv venv --quiet .checkov --python "$PYTHON"
  "$PYTHON" -m uv pip install --quiet --python .checkov/bin/python -r scripts/checkov-requirements.txt
else
  [ -x .checkov/bin/python ] || "$PYTHON" -m venv .checkov
  .checkov/bin/pip install --quiet --disable-pip-version-check -r scripts/checkov-requirements.txt
fi
