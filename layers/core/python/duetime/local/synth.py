"""The synthesized stack the AWS-faithful mode runs against: `cdk synth` once per change of its sources.

`duetime local --backend moto` checks every AWS call the functions make against the policies of their roles as
the synth writes them (duetime.local.iam), so it needs the template `cdk deploy` would deploy. A synth costs a
minute or more of CPU, so its cloud assembly is kept under build/synth/<hash>/, the hash taken over every file
that feeds it (infra/, functions/, layers/, app.py, cdk.json, pyproject.toml) and the context it was given; a file
lock makes parallel `duetime local` processes (an e2e session's, a developer's) synthesize it once between them.

The synth runs in a child process (`python -c`) from the checkout: the CDK app, cdk-nag and infra/ are the
project's build tools, never imported by duetime itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[5]
SYNTH_DIR = ROOT / "build" / "synth"
# What the stack is made of: a change to any of these makes another template.
SOURCES = ("infra", "functions", "layers", "app.py", "cdk.json", "pyproject.toml")
SKIPPED_PARTS = {"__pycache__", ".mypy_cache", ".ruff_cache", "node_modules"}
STACK_NAME = "DuetimeStack"
STALE_SECONDS = 24 * 3600
TEMPLATE_FILE = f"{STACK_NAME}.template.json"
# The alarm topic's subscription needs an address; it is no part of what runs locally.
LOCAL_CONTEXT = {"alarmEmail": "local@example.com"}
CHILD = r"""
import json, sys
root, outdir, context = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sys.path.insert(0, root)
from infra.build_layers import build_deps_layer
build_deps_layer()  # the same build `make synth` runs; kept when already built for these requirements
import aws_cdk as cdk
from app import build_app
defaults = json.load(open(root + "/cdk.json"))["context"]
app = cdk.App(outdir=outdir, context={**defaults, **context})
build_app(app)
app.synth()
"""


def _files(root: Path) -> Iterator[Path]:
    for name in SOURCES:
        path = root / name
        if path.is_file():
            yield path
        elif path.is_dir():
            for found in sorted(path.rglob("*")):
                parts = found.relative_to(root).parts
                if found.is_file() and not SKIPPED_PARTS.intersection(parts) and found.suffix != ".pyc":
                    yield found


def sources_hash(root: Path = ROOT, context: Mapping[str, Any] | None = None) -> str:
    """A hash of every source file the synth reads (path and content) and of the context it is given."""
    digest = hashlib.sha256(json.dumps(dict(context or {}), sort_keys=True).encode())
    for path in _files(root):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def synthesized(context: Mapping[str, Any] | None = None, root: Path = ROOT, cache: Path = SYNTH_DIR) -> Path:
    """The cloud assembly (cdk.out) of the stack for the current sources and `context`: synthesized now, or
    kept from an earlier synth of the same sources. Processes asking at once wait for the first one's synth."""
    wanted = {**LOCAL_CONTEXT, **(context or {})}
    outdir = cache / sources_hash(root, wanted)
    done = outdir / ".complete"
    if done.is_file():
        return outdir
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if done.is_file():  # another process synthesized it while this one waited
            return outdir
        staging = outdir.with_name(outdir.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        environment = {**os.environ, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"}
        result = subprocess.run(
            [sys.executable, "-c", CHILD, str(root), str(staging), json.dumps(wanted)],
            cwd=root,
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            message = f"cdk synth failed (the AWS-faithful mode runs what it deploys):\n{result.stderr[-4000:]}"
            raise RuntimeError(message)
        shutil.rmtree(outdir, ignore_errors=True)
        staging.rename(outdir)
        done.touch()
        # Earlier sources' assemblies (tens of MB of assets each), once no `duetime local` of a day ago can still
        # be running from one.
        for old in cache.iterdir():
            done_at = old / ".complete"
            if old != outdir and done_at.is_file() and time.time() - done_at.stat().st_mtime > STALE_SECONDS:
                shutil.rmtree(old, ignore_errors=True)
    return outdir


def template(context: Mapping[str, Any] | None = None, root: Path = ROOT, cache: Path = SYNTH_DIR) -> dict[str, Any]:
    """The synthesized CloudFormation template of the stack."""
    return dict(json.loads((synthesized(context, root, cache) / TEMPLATE_FILE).read_text()))


if __name__ == "__main__":
    # `make test` synthesizes once before its tiers start, so no process waits for another's synth on a busy
    # machine (one at a lower CPU priority, holding the lock, had kept the end-to-end sessions waiting 2 minutes).
    print(synthesized())
