"""The import-linter contracts of pyproject.toml (run by `make lint`) hold for the code, and they do fail when a
layer imports across its boundary: checked on a throwaway package tree with the same names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duetime
import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
# Every package the contracts name, so a tree of empty ones satisfies them.
PACKAGES = (
    "duetime.domain",
    "duetime.service",
    "duetime.api",
    "duetime.worker",
    "duetime.adapters",
    "duetime.adapters.aws",
    "duetime.adapters.sqlite",
    "duetime.targets",
    "duetime.local",
    "duetime.cli",
    "functions",
)
MODULES = ("duetime.definitions", "duetime.config", "duetime.client", "duetime.notify")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter (dev extra) is not installed")


def lint_imports(cwd: Path, python_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(python_path)} if python_path else dict(os.environ)
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def tree(root: Path, imports: dict[str, str]) -> Path:
    """A package tree with every layer the contracts name, empty but for `imports` ({module: source})."""
    for package in ("duetime", *PACKAGES):
        folder = root.joinpath(*package.split("."))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text('"""A layer."""\n')
    for module in MODULES:
        root.joinpath(*module.split(".")).with_suffix(".py").write_text('"""A module."""\n')
    for module, source in imports.items():
        root.joinpath(*module.split(".")).with_suffix(".py").write_text(source)
    return root


def test_the_code_keeps_every_contract():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "source", "contract"),
    [
        ("duetime.domain.keys", "import boto3\n", "domain imports no AWS SDK"),
        ("duetime.domain.models", "from duetime.service import jobs\n", "domain imports no AWS SDK"),
        ("duetime.api.app", "from duetime.worker import registry\n", "api depends on the service"),
        ("duetime.api.app", "from duetime.adapters import aws\n", "api depends on the service"),
        ("duetime.service.jobs", "from duetime.local import system\n", "service does not import"),
        ("duetime.service.jobs", "import functions.worker\n", "service does not import"),
        ("duetime.service.jobs", "from duetime.adapters.sqlite import store\n", "service does not import"),
        ("duetime.adapters.sqlite.store", "from duetime.adapters.aws import items\n", "the SQLite adapter imports"),
        ("duetime.adapters.aws.store", "from duetime.adapters.sqlite import items\n", "the AWS adapter imports"),
    ],
)
def test_a_crossed_boundary_fails_lint(tmp_path, module, source, contract):
    # The imported module exists (empty); only the import itself crosses the boundary.
    target = source.split()[1]
    extra = {}
    if source.startswith("from "):
        extra[f"{target}.{source.split()[3]}"] = '"""A module."""\n'
    elif "." in target and target.split(".", 1)[0] in {"functions", "duetime"}:
        extra[target] = '"""A module."""\n'
    root = tree(tmp_path, {**extra, module: f'"""A module."""\n\n{source}'})
    done = lint_imports(root, python_path=root)
    assert done.returncode != 0, done.stdout[-3000:]
    assert "1 broken" in done.stdout
    broken = done.stdout.split("Broken contracts", 1)[1]
    assert contract in broken.replace("\n", " ")


def test_the_same_tree_without_the_crossing_passes(tmp_path):
    root = tree(tmp_path, {"duetime.domain.keys": '"""A module."""\n\nfrom duetime import definitions\n'})
    done = lint_imports(root, python_path=root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_what_production_runs_imports_no_test_or_local_only_package():
    # The ECS image installs no `local` extra and the Lambda layer no dev dependency: `duetime worker`, the
    # handler API and the wiring of the functions must start without moto, werkzeug or croniter.
    code = (
        "import sys, duetime, duetime.cli.main, duetime.config, duetime.api.app, duetime.worker.runtime; "
        "print(sorted(m for m in ('moto', 'werkzeug', 'croniter') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
    assert {"handler", "JobContext", "PermanentFailure", "StaleAttempt", "CheckpointRejected"} == set(duetime.__all__)
