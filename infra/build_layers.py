"""Build the Lambda dependency layer (build/layers/deps/python) with pip for arm64 Python 3.12, without Docker.

The requirements are the core's runtime dependencies from pyproject.toml, less boto3 and botocore, which the
Lambda runtime provides; what they pull in that the runtime provides too (aws-xray-sdk, of Powertools' tracer
extra, requires botocore) is taken out again, so the runtime's botocore is the one imported, beside its boto3.
A target already built for the same requirement list is kept as it is, so `make synth` and the infrastructure
tests rebuild only when pyproject.toml changes.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from email.parser import HeaderParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEPS_LAYER_DIR = ROOT / "build" / "layers" / "deps"
HERE_DIR = ROOT / "build" / "here"  # the layers' pins installed for this machine (install_here)
CORE_LAYER_DIR = ROOT / "layers" / "core"
# Left out of the core layer: the command line (its planner, audit and API client) never runs in a Lambda
# function; the ECS image installs the whole package (Dockerfile) and does run `duetime worker`.
CORE_LAYER_EXCLUDES = ["python/duetime/cli"]
CORE_LAYER_STAGED = ROOT / "build" / "layers" / "core"
# The Python of the functions (infra/functions.py RUNTIME): the layers' wheels and bytecode are built for it.
RUNTIME_PYTHON_VERSION = "3.12"
# The Lambda runtime ships these (and their own dependencies); shipping them again only costs size.
PROVIDED_BY_RUNTIME = {"boto3", "botocore", "s3transfer", "jmespath", "urllib3"}
PLATFORM_ARGS = [
    "--platform",
    "manylinux2014_aarch64",
    "--implementation",
    "cp",
    "--python-version",
    "3.12",
    "--only-binary=:all:",
]


@contextmanager
def exclusive(target: Path) -> Iterator[None]:
    """Hold `target`'s build lock (a sibling `<name>.lock`, flock'd): the test tiers and `duetime local` synth in
    parallel processes, and two of them staging one folder at once would delete each other's work."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def built_once(target: Path, key: str, build: Callable[[Path], None]) -> Path:
    """`target` as `build(staging)` makes it, built again only when `key` (what it is built from) changes: the
    key is kept beside it (`<name>.key`, outside what an asset zips). Safe across processes: the build goes
    into a folder of this process's own, renamed into place under `exclusive(target)`."""
    stamp = target.with_name(target.name + ".key")
    with exclusive(target):
        if target.is_dir() and stamp.is_file() and stamp.read_text() == key:
            return target
        stamp.unlink(missing_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", suffix=".partial", dir=target.parent))
        staging.chmod(0o755)  # mkdtemp makes it 0700; an asset zips its folders with their modes
        try:
            build(staging)
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        stamp.write_text(key)
    return target


def tree_digest(folder: Path, ignore: Callable[[str, list[str]], Iterable[str]] | None = None) -> str:
    """A digest of every file under `folder` (its path and bytes), less what `ignore` (as copytree's) skips."""
    digest = hashlib.sha256()
    for directory, dirs, files in os.walk(folder):
        skipped = set(ignore(directory, [*dirs, *files])) if ignore else set[str]()
        dirs[:] = sorted(d for d in dirs if d not in skipped)
        for name in sorted(f for f in files if f not in skipped):
            path = Path(directory) / name
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def layer_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The core's runtime dependencies as pinned in pyproject.toml, less what the Lambda runtime provides."""
    project = tomllib.loads(pyproject.read_text())["project"]
    requirements = [r for r in project["dependencies"] if _name(r) not in PROVIDED_BY_RUNTIME]
    if not any(_name(r) == "python-dateutil" for r in requirements):
        requirements.append("python-dateutil<3")  # botocore needs <3; PyPI serves 4.x
    return requirements


@functools.cache
def _pip_command() -> list[str]:
    """pip of this interpreter, else of python3 on PATH, else uv's pip (the venv may be made by uv without pip).
    Found once a process: the probe (`python3 -m pip --version`) costs about half a second of CPU, and a synth
    builds several layers."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    for python in ("python3", "python"):
        found = shutil.which(python)
        if found and subprocess.run([found, "-m", "pip", "--version"], capture_output=True).returncode == 0:
            return [found, "-m", "pip"]
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip"]
    raise RuntimeError("no pip found: install pip or uv to build the Lambda dependency layer")


def _install(requirements: list[str], target: Path, options: list[str] | None = None) -> None:
    """pip install `requirements` (and `options`: -r, -c) for arm64 CPython 3.12 into `target`."""
    pip = _pip_command()
    if pip[-1] == "pip" and pip[0].endswith("uv"):
        command = [
            *pip,
            "install",
            "--quiet",
            "--python-platform",
            "aarch64-manylinux2014",
            "--python-version",
            "3.12",
            "--only-binary",
            ":all:",
            "--target",
            str(target),
            *(options or []),
            *requirements,
        ]
    else:
        command = [
            *pip,
            "install",
            "-qq",
            "--disable-pip-version-check",
            "--no-warn-conflicts",
            "--root-user-action=ignore",
            "--no-compile",
            *PLATFORM_ARGS,
            "--target",
            str(target),
            *(options or []),
            *requirements,
        ]
    subprocess.run(command, check=True)


def remove_distributions(site: Path, names: set[str]) -> None:
    """Delete the named distributions from a `pip install --target` folder: every file their RECORD lists."""
    for dist_info in list(site.glob("*.dist-info")):
        if _name(dist_info.name.removesuffix(".dist-info").rsplit("-", 1)[0]) not in names:
            continue
        folders = set()
        for row in (dist_info / "RECORD").read_text().splitlines():
            path = (site / row.split(",", 1)[0]).resolve()
            if path.is_relative_to(site.resolve()) and path.is_file():
                path.unlink()
                folders.add(path.parent)
        shutil.rmtree(dist_info, ignore_errors=True)
        # The package folders they leave empty (deepest first).
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
            while folder != site.resolve() and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
                folder = folder.parent


def pinned_distributions(site: Path) -> list[str]:
    """The distributions (name==version) installed in a `pip install --target` folder, from their metadata."""
    pins = []
    for dist_info in sorted(site.glob("*.dist-info")):
        metadata = HeaderParser().parsestr((dist_info / "METADATA").read_text(encoding="utf-8"))
        pins.append(f"{metadata['Name']}=={metadata['Version']}")
    return pins


def install_here(requirements: list[str], name: str, python_version: str, *, no_deps: bool) -> Path:
    """`pip install --target` of `requirements` for this machine's platform and `python_version`, binary wheels
    only (as the layers are built), cached under build/here/ by what it installs. A layer holds arm64 wheels:
    the same pins installed here stand in for it when its code is imported on this machine."""
    key = json.dumps([requirements, python_version, sysconfig.get_platform(), no_deps])
    target = HERE_DIR / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"

    def build(staging: Path) -> None:
        pip = _pip_command()
        if pip[0].endswith("uv"):
            options = ["--quiet", "--python-version", python_version, "--only-binary", ":all:"]
        else:
            options = ["-qq", "--disable-pip-version-check", "--no-warn-conflicts", "--no-compile"]
            options += ["--python-version", python_version, "--implementation", "cp", "--only-binary=:all:"]
        command = [*pip, "install", *options, *(["--no-deps"] if no_deps else []), "--target", str(staging)]
        subprocess.run([*command, *requirements], check=True)

    return built_once(target, key, build)


def runtime_boto3() -> str:
    """The boto3 pin of pyproject.toml: what the Lambda runtime's boto3 stands for here."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return str(next(d for d in dependencies if _name(d) == "boto3"))


def runtime_python() -> str | None:
    """An interpreter of the functions' Python (RUNTIME_PYTHON_VERSION): on PATH, under pyenv, or this one."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == RUNTIME_PYTHON_VERSION:
        return sys.executable
    name = f"python{RUNTIME_PYTHON_VERSION}"
    candidates = [
        shutil.which(name),
        *sorted(Path.home().glob(f".pyenv/versions/{RUNTIME_PYTHON_VERSION}.*/bin/{name}")),
    ]
    for candidate in candidates:
        if candidate and subprocess.run([str(candidate), "-c", ""], capture_output=True).returncode == 0:
            return str(candidate)
    return None


def compile_for_runtime(folder: Path) -> bool:
    """Write the bytecode of every module under `folder` for the functions' Python, as unchecked-hash .pyc
    (PEP 552): Lambda's /opt is read-only, so a layer without it compiles every module it imports at every
    cold start (3.3 s of CPU for the API instead of 1.1 s), and CDK's asset zips do not keep the sources'
    mtimes a timestamp .pyc is checked against. False (and a warning) without such an interpreter here."""
    python = runtime_python()
    if python is None:
        print(f"warning: no python{RUNTIME_PYTHON_VERSION} here: {folder} ships without bytecode", file=sys.stderr)
        return False
    # -I: the .pyc go beside the sources, whatever this environment says (a PYTHONPYCACHEPREFIX, as `make` sets,
    # would write them elsewhere and leave the layer without any).
    command = [python, "-I", "-m", "compileall", "-q", "-q", "--invalidation-mode", "unchecked-hash", str(folder)]
    # A module that does not compile for the runtime (a test file of some distribution) is left to compile at
    # import, as it would without bytecode: compileall's exit status says only that one did not.
    subprocess.run(command, check=False)
    return True


def stage_core_layer(target: Path = CORE_LAYER_STAGED) -> Path:
    """build/layers/core/python: the core's package without the command line, with its bytecode; staged again
    only when its sources change."""
    excluded = {str(CORE_LAYER_DIR / path) for path in CORE_LAYER_EXCLUDES}

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [
            n
            for n in names
            if n in {"__pycache__", ".mypy_cache"}
            or n.endswith((".pyc", ".egg-info"))
            or str(Path(folder) / n) in excluded
        ]

    def build(staging: Path) -> None:
        shutil.copytree(CORE_LAYER_DIR / "python", staging / "python", ignore=ignore)
        compile_for_runtime(staging / "python")

    source = CORE_LAYER_DIR / "python"
    key = json.dumps([tree_digest(source, ignore), runtime_python() is not None and RUNTIME_PYTHON_VERSION])
    return built_once(target, key, build)


def build_deps_layer(target: Path = DEPS_LAYER_DIR, requirements: list[str] | None = None) -> Path:
    """Build (or keep) the dependency layer at `target`; returns `target`, whose `python/` Lambda puts on sys.path."""
    requirements = layer_requirements() if requirements is None else requirements
    wanted = {
        "requirements": requirements,
        "platform": PLATFORM_ARGS,
        "without": sorted(PROVIDED_BY_RUNTIME),
        "bytecode": runtime_python() is not None and RUNTIME_PYTHON_VERSION,
    }
    return built_once(target, json.dumps(wanted, sort_keys=True), lambda staging: _build_deps(requirements, staging))


def _build_deps(requirements: list[str], staging: Path) -> None:
    _install(requirements, staging / "python")
    remove_distributions(staging / "python", PROVIDED_BY_RUNTIME)
    # Console scripts and caches are of no use in a layer.
    shutil.rmtree(staging / "python" / "bin", ignore_errors=True)
    for cache in (staging / "python").rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    compile_for_runtime(staging / "python")


def main() -> int:
    target = build_deps_layer()
    print(f"dependency layer ready: {target.relative_to(ROOT)}/python ({', '.join(layer_requirements())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
