"""A team's handler folder as a deployment gives it to the workers: copied as their handler layer, and the
manifest of what its modules register (for the API, which never imports them), made in a process of its own.

The CDK synth (infra/handlers.py) and `duetime local --backend moto` (duetime.local.system) both use these,
so the emulated Lambda functions get what a deploy with the same handlers would give the deployed ones.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from duetime.definitions import JOB_CLASSES

# The folder that holds the `duetime` package (layers/core/python in a checkout): the manifest's process
# imports duetime from here, as the workers do from the core layer.
CORE_PYTHON = Path(__file__).resolve().parents[2]
# Never shipped from a handler folder: caches, virtual environments, VCS and test folders.
SKIPPED_PATTERNS = (
    "__pycache__",
    "*.pyc",
    ".git",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "cdk.out",
    "tests",
)
SKIPPED = shutil.ignore_patterns(*SKIPPED_PATTERNS)
# Imports the modules in a clean interpreter and prints what the registry then holds (demo handlers included).
MANIFEST_SCRIPT = """
import json, sys
from duetime.worker.registry import load_modules, registered_names
load_modules([m for m in sys.argv[1:] if m])
print(json.dumps(registered_names()))
"""


def stage_handler_layer(folder: Path, target: Path, also_skip: Iterable[Path] = ()) -> Path:
    """Copy `folder` (less SKIPPED_PATTERNS and the `also_skip` directories) to `target`/python, the
    directory a Lambda layer puts on sys.path (/opt/python); returns that directory. `target` is replaced."""
    skipped_dirs = {p.resolve() for p in also_skip}

    def ignore(directory: str, names: list[str]) -> set[str]:
        ignored = set(SKIPPED(directory, names))
        return ignored | {name for name in names if (Path(directory) / name).resolve() in skipped_dirs}

    shutil.rmtree(target, ignore_errors=True)
    python = target / "python"
    shutil.copytree(folder, python, ignore=ignore)
    return python


def registered_names_of(modules: Sequence[str], folder: Path | None, timeout: float = 120) -> list[str]:
    """The handler names `modules` register (the demo handlers included), imported in a subprocess of this
    interpreter with the core and `folder` on its path, so the caller never imports the team's code itself.
    Raises ValueError with the import's error when a module does not import."""
    paths = [str(CORE_PYTHON), *([str(folder)] if folder else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", MANIFEST_SCRIPT, *modules],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(folder or CORE_PYTHON),
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise ValueError(f"cannot import handler modules {','.join(modules)!r} from {folder}: {done.stderr[-2000:]}")
    names: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return names


def handler_manifest(modules: Sequence[str], folder: Path | None) -> dict[str, list[str]]:
    """{jobClass: [handler names]} the workers of each class serve (DUETIME_HANDLER_MANIFEST of the API).
    Every worker class imports the same modules (the Lambda workers and the `long` image alike)."""
    names = registered_names_of(modules, folder)
    return {job_class: names for job_class in JOB_CLASSES}
