"""Python handlers in a child process the worker kills at the timeout or when the attempt is lost.

The child is a fresh interpreter (`python -c`, with the worker's sys.path) that imports the handler's
module, runs it once and writes its outcome as one JSON document (after a `checkpoint <JSON>` line per
ctx.checkpoint, which the worker records as they come; a refused one stops the run, killing the child).
A plain subprocess rather than multiprocessing: nothing is pickled, the parent's `__main__` (a Lambda
runtime's bootstrap, a test runner) is never re-imported, and no semaphore needs /dev/shm, which Lambda
lacks. The child exits on its own when the worker dies (its stdin reaches end of file), so an orphan never
runs beside the next attempt.

The child gets a small environment, not the worker's: the worker's holds its AWS credentials (Lambda puts
them there; ECS the URI they are fetched from), the Lambda runtime API's address and duetime's own
settings, none of which a handler, run for whichever owner, may use. It gets what a program needs to run
(HANDLER_BASE_ENVIRONMENT, LC_* included) and the names the operator lists in DUETIME_HANDLER_ENV.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from duetime.domain.results import ResultRejected, encode_result
from duetime.service.outcomes import RunResult
from duetime.worker.registry import JobContext, RegisteredHandler, failure_of, get_registered, load_modules, not_served

# How often the worker checks the run's cancel flag while the child runs.
POLL_SECONDS = 0.05
_BOOTSTRAP = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from duetime.worker.isolation import child_main; child_main()"
)
# The exit code of a child whose worker went away before the handler finished.
ORPHANED_EXIT = 75
# A line of the result channel carrying a checkpoint (ctx.checkpoint in the child), before the outcome.
CHECKPOINT_LINE = b"checkpoint "
# What a handler's process gets of the worker's environment: what a Python program needs to run, find its
# libraries and certificates, and keep the worker's time zone, language and temporary folder.
HANDLER_BASE_ENVIRONMENT = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TMP",
        "TEMP",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONHASHSEED",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONPYCACHEPREFIX",
        "PYTHONUNBUFFERED",
        "VIRTUAL_ENV",
        "LD_LIBRARY_PATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
    }
)
HANDLER_BASE_PREFIXES = ("LC_",)
# The operator's list of further names a handler gets (comma-separated; a name ending in `*` is a prefix),
# e.g. `BILLING_API_URL,HTTPS_PROXY`. Whatever it names is the operator's choice, credentials included.
HANDLER_ENV_SETTING = "DUETIME_HANDLER_ENV"


def run_in_child(registered: RegisteredHandler, ctx: JobContext) -> RunResult:
    """Run `registered` for `ctx` in a child process; returns its outcome (the child writes it as
    {"status": "succeeded", "result"} or {"status": "failed", "error", "retryable"}). When `ctx.cancelled`
    is set the child is killed at once and the outcome says it was stopped."""
    request = {
        "module": registered.module,
        "handler": registered.name,
        "context": {
            "executionId": ctx.execution_id,
            "jobId": ctx.job_id,
            "attempt": ctx.attempt,
            "scheduledAt": ctx.scheduled_at.isoformat(),
            "payload": ctx.payload,
            "owner": ctx.owner,
            "lastCheckpoint": ctx.last_checkpoint,
        },
    }
    child = subprocess.Popen(
        child_command(registered.module),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=handler_environment(os.environ),
        start_new_session=True,  # a Ctrl-C to the worker's terminal is the worker's to handle, not the run's
    )
    assert child.stdin is not None and child.stdout is not None
    output: list[bytes] = []
    reader = threading.Thread(target=_read_channel, args=(child.stdout, ctx, output), daemon=True)
    reader.start()
    try:
        child.stdin.write(json.dumps(request).encode() + b"\n")
        child.stdin.flush()  # stdin stays open: its end of file tells the child that the worker is gone
        while reader.is_alive():
            if ctx.cancelled.wait(POLL_SECONDS):
                child.kill()
                child.wait()
                return RunResult.failure("the handler's process was killed: the run was told to stop")
    except BrokenPipeError:
        pass  # the child died before reading its request: reported from its exit code below
    finally:
        if child.poll() is None and ctx.cancelled.is_set():
            child.kill()
        child.stdin.close()
    code = child.wait()
    reader.join()
    return _parse_outcome(b"".join(output), code)


def handler_environment(worker: Mapping[str, str]) -> dict[str, str]:
    """The environment of a handler's process, from the worker's: the base names, LC_*, and what
    DUETIME_HANDLER_ENV lists; never anything else (AWS_*, DUETIME_*, the Lambda runtime's)."""
    names = {n.strip() for n in worker.get(HANDLER_ENV_SETTING, "").split(",") if n.strip()}
    exact = HANDLER_BASE_ENVIRONMENT | {n for n in names if not n.endswith("*")}
    prefixes = HANDLER_BASE_PREFIXES + tuple(n[:-1] for n in names if n.endswith("*") and len(n) > 1)
    return {k: v for k, v in worker.items() if k in exact or k.startswith(prefixes)}


def _read_channel(channel: IO[bytes], ctx: JobContext, output: list[bytes]) -> None:
    """Read the child's result channel: each checkpoint line goes to the run's checkpoints as it comes (a
    refused one has already told the run to stop, which kills the child); the rest is the outcome."""
    for line in channel:
        if line.startswith(CHECKPOINT_LINE):
            # Whatever a checkpoint meets (refused, or no worker to record it), the outcome must still be read.
            with contextlib.suppress(Exception):
                ctx.checkpoint(json.loads(line[len(CHECKPOINT_LINE) :]))
            continue
        output.append(line)


def child_command(module: str | None = None) -> list[str]:
    """The command of a child: this interpreter, with this process's sys.path (the project folder, the
    Lambda layer's /opt/python...), running child_main. The folder `module` was imported from leads the
    path when it is not on it (the local Lambda emulation imports a worker's handlers from its layer), so
    the child runs the code the worker registered."""
    path = list(sys.path)
    root = import_root(module) if module else None
    if root is not None and root not in path:
        path.insert(0, root)
    return [sys.executable, "-c", _BOOTSTRAP, json.dumps(path)]


def import_root(module: str) -> str | None:
    """The sys.path entry an imported `module` was found under (None: not imported, or not from a file)."""
    file = getattr(sys.modules.get(module), "__file__", None)
    if module == "__main__" or not file:
        return None
    where = Path(file)
    depth = module.count(".") + (1 if where.name == "__init__.py" else 0)
    return str(where.parents[depth])


def _parse_outcome(raw: bytes, code: int) -> RunResult:
    try:
        outcome = json.loads(raw) if raw else None
    except ValueError:
        outcome = None
    if isinstance(outcome, dict) and outcome.get("status") == "succeeded":
        return RunResult.success(outcome.get("result"))
    if isinstance(outcome, dict) and outcome.get("status") == "failed":
        return RunResult.failure(str(outcome.get("error")), bool(outcome.get("retryable", True)))
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    return RunResult.failure(f"the handler's process {how} without a result")


def child_main() -> None:
    """The child's side: read the request, run the handler once, write the outcome to the result channel."""
    result_channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever the handler prints goes to stderr, never into the result channel
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    request = json.loads(sys.stdin.readline())
    threading.Thread(target=_exit_when_orphaned, daemon=True).start()
    written = threading.Lock()

    def send_checkpoint(text: str) -> None:
        with written:  # a handler's own threads may checkpoint too: one whole line each
            result_channel.write(CHECKPOINT_LINE.decode() + text + "\n")
            result_channel.flush()

    outcome = _run_request(request, send_checkpoint)
    with written:
        result_channel.write(outcome)
        result_channel.flush()
    os._exit(0)  # skip interpreter teardown: threads the handler left behind must not keep the run going


def _exit_when_orphaned() -> None:
    sys.stdin.read()  # returns at end of file: the worker closed our stdin or died
    os._exit(ORPHANED_EXIT)


def _run_request(request: dict[str, Any], send_checkpoint: Callable[[str], None] | None = None) -> str:
    name = str(request["handler"])
    values = request["context"]
    try:
        load_modules([request["module"]])
        registered = get_registered(name)
        if registered is None:
            return json.dumps({"status": "failed", "error": not_served(name), "retryable": False})
        ctx = JobContext(
            execution_id=values["executionId"],
            job_id=values["jobId"],
            attempt=int(values["attempt"]),
            scheduled_at=datetime.fromisoformat(values["scheduledAt"]),
            payload=values["payload"],
            owner=values["owner"],
            last_checkpoint=values.get("lastCheckpoint"),
            on_checkpoint=send_checkpoint,
        )
        result = registered.fn(ctx)
        text = encode_result(result)
    except ResultRejected as exc:
        return json.dumps({"status": "failed", "error": str(exc), "retryable": False})
    except BaseException as exc:
        error, retryable = failure_of(exc)
        return json.dumps({"status": "failed", "error": error, "retryable": retryable})
    return '{"status":"succeeded","result":' + text + "}"
