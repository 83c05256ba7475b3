"""The handler folder of `duetime local --backend moto --handlers`, made what the synth makes of it: copied as
the worker functions' handler layer, and the manifest of what its modules register (for the API, which never
imports them), made in a process of its own that imports them as a worker function's cold start does
(duetime.local.lambda_mode.layer_imports: the layer, duetime, its dependency layer's distributions and those
the folder's requirements.txt names), so a module that would not import on Lambda stops `duetime local` with
its error, as it fails the synth.

The synth (infra/handlers.py) installs the dependency layer's pins and the folder's requirements for the
functions' platform; here they are this environment's installed distributions, so a requirement must be
installed here too.
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
from duetime.worker.packaging import SKIPPED

# The folder that holds the `duetime` package (layers/core/python in a checkout).
CORE_PYTHON = Path(__file__).resolve().parents[2]
# Imports the modules (argv[3:]) with duetime from argv[1] and the layer argv[2], as a worker's cold start
# does, and prints what the registry then holds (demo handlers included).
MANIFEST_SCRIPT = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from duetime.local.lambda_mode import layer_imports
from duetime.worker.registry import load_modules, registered_names
with layer_imports([Path(sys.argv[2])]):
    load_modules([m for m in sys.argv[3:] if m])
print(json.dumps(registered_names()))
"""


def stage_handler_layer(folder: Path, target: Path, also_skip: Iterable[Path] = ()) -> Path:
    """Copy `folder` (less SKIPPED and the `also_skip` directories, such as a data dir inside it) to
    `target`/python, the directory a layer puts on the path (/opt/python); returns it. `target` is replaced."""
    skipped_dirs = {p.resolve() for p in also_skip}

    def ignore(directory: str, names: list[str]) -> set[str]:
        ignored = set(SKIPPED(directory, names))
        return ignored | {name for name in names if (Path(directory) / name).resolve() in skipped_dirs}

    shutil.rmtree(target, ignore_errors=True)
    python = target / "python"
    shutil.copytree(folder, python, ignore=ignore)
    return python


def handler_manifest(modules: Sequence[str], layer: Path, timeout: float = 120) -> dict[str, list[str]]:
    """{jobClass: [handler names]} the workers of each class serve (DUETIME_HANDLER_MANIFEST of the API):
    `modules` imported from the staged `layer` in a subprocess, as a worker function imports them. Raises
    ValueError with the import's error when a module does not import there."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", MANIFEST_SCRIPT, str(CORE_PYTHON), str(layer), *modules],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(CORE_PYTHON),
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise ValueError(
            f"cannot import handler modules {','.join(modules)!r} as the worker functions would: {done.stderr[-2000:]}"
        )
    names: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    # Every worker class imports the same modules (the Lambda workers and the `long` image alike).
    return {job_class: names for job_class in JOB_CLASSES}
