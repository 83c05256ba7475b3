"""A team's handler code for the workers: staged offline as a Lambda layer (with the distributions its
requirements.txt names) and into the `long` image's build context, and its handler manifest (what the modules
register, read by the API) made at synth in a subprocess that sees only what a worker function would: so a
module that cannot import fails the synth, not the cold start."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from duetime.config import RuntimeConfig
from duetime.definitions import JOB_CLASSES
from duetime.worker import packaging
from duetime.worker.packaging import SKIPPED

from infra.build_layers import (
    PROVIDED_BY_RUNTIME,
    _install,
    _name,
    build_deps_layer,
    built_once,
    compile_for_runtime,
    install_here,
    pinned_distributions,
    remove_distributions,
    runtime_boto3,
    runtime_python,
    tree_digest,
)

ROOT = Path(__file__).resolve().parents[1]
CORE_PYTHON = ROOT / "layers" / "core" / "python"
STAGING = ROOT / "build"
# What the `long` image's build needs from duetime itself (Dockerfile: `pip install .`).
IMAGE_FILES = ("Dockerfile", "pyproject.toml", "README.md")
IMAGE_HANDLER_DIR = "handlers"
# The distributions a handler folder needs beyond duetime's own (which the dependency layer ships): installed
# into the handler layer for the functions' platform, and into the `long` image (Dockerfile).
REQUIREMENTS_FILE = "requirements.txt"
# Imports the modules in an interpreter run with -S -I, whose sys.path is the standard library and exactly the
# folders given (argv[1], JSON), and prints what the registry then holds (demo handlers included).
MANIFEST_SCRIPT = """
import json, sys
sys.path[:0] = json.loads(sys.argv[1])
from duetime.worker.registry import load_modules, registered_names
load_modules([m for m in sys.argv[2:] if m])
print(json.dumps(registered_names()))
"""


@dataclass(frozen=True)
class HandlerCode:
    """A team's handlers: the source folder that holds their packages (e.g. examples/handlers, where
    billing/handlers.py lives) and the modules to import (e.g. ["billing.handlers"])."""

    path: Path | None = None
    modules: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.path is not None and not self.path.is_dir():
            raise ValueError(f"handler folder {self.path} does not exist (context handlerPath)")

    @property
    def key(self) -> str:
        """A short name for this folder's staging directories, so two apps' folders never mix."""
        return hashlib.sha256(str(self.path).encode()).hexdigest()[:12]

    @property
    def modules_env(self) -> str:
        """DUETIME_HANDLER_MODULES as the workers read it (comma list)."""
        return ",".join(self.modules)


def stage_layer(code: HandlerCode) -> Path:
    """build/layers/handlers-<key>/python/: a copy of the handler folder, which Lambda puts on sys.path, with the
    distributions its requirements.txt names (those the dependency layer does not ship already)."""
    if code.path is None:
        raise ValueError("no handler folder to stage")
    folder = code.path
    requirements = handler_requirements(code)

    def build(staging: Path) -> None:
        shutil.copytree(folder, staging / "python", ignore=SKIPPED)
        if requirements is not None:
            shutil.copytree(requirements, staging / "python", dirs_exist_ok=True)
        compile_for_runtime(staging / "python")

    key = json.dumps([tree_digest(folder, SKIPPED), str(requirements), runtime_python() is not None])
    return built_once(STAGING / "layers" / f"handlers-{code.key}", key, build)


def handler_requirements(code: HandlerCode) -> Path | None:
    """The handler folder's requirements.txt installed for the functions' platform (arm64, CPython 3.12), the
    dependency layer's pins as constraints, less what that layer and the runtime ship; cached under build/ by
    the file's content and those pins. None without a requirements.txt."""
    if code.path is None or not (code.path / REQUIREMENTS_FILE).is_file():
        return None
    requirements_file = code.path / REQUIREMENTS_FILE
    text = requirements_file.read_text()
    shipped = pinned_distributions(build_deps_layer() / "python")
    digest = hashlib.sha256(json.dumps([text, shipped]).encode()).hexdigest()[:16]

    def build(staging: Path) -> None:
        constraints = staging / "constraints.txt"
        constraints.write_text("\n".join(shipped) + "\n")
        try:
            _install([], staging / "python", ["-r", str(requirements_file), "-c", str(constraints)])
        except subprocess.CalledProcessError as exc:
            raise ValueError(f"cannot install {requirements_file} for the worker functions: {exc}") from exc
        remove_distributions(staging / "python", PROVIDED_BY_RUNTIME | {_name(pin) for pin in shipped})
        shutil.rmtree(staging / "python" / "bin", ignore_errors=True)
        for cache in (staging / "python").rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)

    return built_once(STAGING / "layers" / f"handler-requirements-{digest}", text, build) / "python"


def stage_image_context(code: HandlerCode) -> Path:
    """build/images/worker-<key>/: the Docker build context of the `long` worker image, with the handler
    folder as `handlers/` (empty when there is none), so a folder outside this repository can be copied."""
    folder = code.path

    def build(staging: Path) -> None:
        for name in IMAGE_FILES:
            shutil.copy2(ROOT / name, staging / name)
        shutil.copytree(ROOT / "layers", staging / "layers", ignore=SKIPPED)
        handlers = staging / IMAGE_HANDLER_DIR
        if folder is not None:
            shutil.copytree(folder, handlers, ignore=SKIPPED)
        else:
            handlers.mkdir()
            (handlers / ".keep").write_text("no handler folder: the image runs duetime's own handlers only\n")

    sources = [tree_digest(ROOT / "layers", SKIPPED), *(tree_digest(f, SKIPPED) for f in [folder] if f is not None)]
    key = json.dumps([sources, [(ROOT / name).read_text() for name in IMAGE_FILES]])
    return built_once(STAGING / "images" / f"worker-{code.key if folder else 'core'}", key, build)


def worker_import_path(code: HandlerCode) -> list[str]:
    """What a worker function has on sys.path, for this interpreter: the handler folder and its requirements,
    the core, the dependency layer's pins and the runtime's boto3 (each installed here: infra.build_layers);
    never this environment's site-packages, which hold far more than the layers do."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    paths: list[Path] = []
    if code.path is not None:
        paths.append(code.path)
        if (requirements := handler_requirements(code)) is not None and (pins := pinned_distributions(requirements)):
            paths.append(install_here(pins, "handler-requirements", version, no_deps=True))
    paths.append(CORE_PYTHON)
    paths.append(install_here(pinned_distributions(build_deps_layer() / "python"), "layer", version, no_deps=True))
    paths.append(install_here([runtime_boto3()], "runtime-boto3", version, no_deps=False))
    return [str(path) for path in paths]


def handler_manifest(code: HandlerCode) -> dict[str, list[str]]:
    """{jobClass: [handler names]} the workers of each class serve: the modules imported, in a subprocess
    with only what a worker function has on its path (worker_import_path), so the synth never imports user
    code itself and a module that imports something no layer ships fails here, not at a cold start."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-S", "-I", "-c", MANIFEST_SCRIPT, json.dumps(worker_import_path(code)), *code.modules],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(code.path or ROOT),
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise ValueError(f"cannot import handlerModules {code.modules_env!r} from {code.path}: {done.stderr[-2000:]}")
    names: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    # Every worker class imports the same modules (the Lambda workers and the `long` image alike).
    return {job_class: names for job_class in JOB_CLASSES}


def grants_environment(grants: str | None) -> dict[str, str]:
    """DUETIME_HANDLER_GRANTS of context handlerGrants (JSON), for the API and every worker; none without."""
    return RuntimeConfig(handler_grants=json.loads(grants)).to_env() if grants else {}


def api_handler_environment(code: HandlerCode, grants: str | None) -> dict[str, str]:
    """DUETIME_HANDLER_MANIFEST (and DUETIME_HANDLER_GRANTS when given) for the API function; raises
    ValueError at synth rather than at deploy when they would not fit Lambda's 4 KB environment."""
    return packaging.api_handler_environment(handler_manifest(code), json.loads(grants) if grants else None)
