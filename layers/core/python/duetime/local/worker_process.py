"""`duetime local`'s workers in a process of their own beside the API, on the same SQLite file.

Why a process: one Python process runs Python code on one core at a time (the GIL). With the API, the
pre-loader and the workers in one process, 500 jobs/s submitted over HTTP while they run needed more than
that core: measured on a 2-core machine, the API took ~350 jobs/s and the rest fell behind, while the
same load with the workers in a second process was taken in full (p99 start lateness under 1 s). Both
processes open the database file as attached `duetime worker --data-dir` processes do (WAL: one writer at
a time, readers never blocked; wake-ups across processes from db.py's watcher).

The child serves every job class with `concurrency` slots each and runs the `--handlers` modules the parent
loaded. It stops gracefully (runs finish within the grace, the rest are handed back) when its stdin reaches
end of file: the parent closes it to stop it. A killed `duetime local` (SIGKILL) takes its workers with it,
as when they were threads of it: on Linux the kernel kills the child when the parent dies (PR_SET_PDEATHSIG;
the parent's starting thread must live as long as the child, as `duetime local`'s main thread does),
elsewhere it stops at end of its stdin.

`start` returns once the child has announced its handlers (a byte on a pipe of its own): from then on the
API accepts jobs naming them, as it did when the workers were threads started before the API's first answer.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from duetime.adapters.aws.secrets import FileSecrets
from duetime.local.backends import attach_ports
from duetime.local.state import load_state
from duetime.targets.webhook import WebhookTarget
from duetime.worker.kinds import Targets
from duetime.worker.registry import load_modules
from duetime.worker.runtime import Worker

log = logging.getLogger("duetime.local")
GRACE_SECONDS = 5.0
READY_TIMEOUT_SECONDS = 60.0  # imports of the --handlers modules included
PR_SET_PDEATHSIG = 1  # linux/prctl.h
# The child is a fresh interpreter given the parent's sys.path, as worker/isolation.py starts its children.
_BOOTSTRAP = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from duetime.local.worker_process import main; main(sys.argv[2:])"
)


class WorkerProcess:
    """The workers of every job class in a child process on `data_dir`'s database (started after local.json
    is written: the child reads it to attach)."""

    def __init__(self, data_dir: Path, concurrency: int, handler_modules: Sequence[str] = ()) -> None:
        self.data_dir, self.concurrency, self.handler_modules = data_dir, concurrency, list(handler_modules)
        self.process: subprocess.Popen[bytes] | None = None
        self._ready_read = -1

    def start(self) -> WorkerProcess:
        """Start the child and wait until it has announced its handlers; raises RuntimeError if it ends or
        stays silent for READY_TIMEOUT_SECONDS instead."""
        return self.launch().wait_ready()

    def launch(self) -> WorkerProcess:
        """Start the child (wait_ready waits for it: several start side by side)."""
        ready_read, ready_write = os.pipe()
        command = [sys.executable, "-c", _BOOTSTRAP, json.dumps(sys.path), str(os.getpid()), str(self.data_dir)]
        command += [str(self.concurrency), str(ready_write)]
        try:
            self.process = subprocess.Popen(
                [*command, *self.handler_modules], stdin=subprocess.PIPE, pass_fds=(ready_write,)
            )
        finally:
            os.close(ready_write)
        self._ready_read = ready_read
        return self

    def wait_ready(self) -> WorkerProcess:
        """Wait until the launched child has announced its handlers (see start)."""
        if not signalled_ready(self._ready_read):
            self.stop()
            raise RuntimeError("duetime local's worker process did not start (its errors are above)")
        return self

    def ask_to_stop(self) -> None:
        """Close its stdin, its signal to stop, without waiting (stop waits)."""
        if self.process is not None and self.process.stdin is not None:
            self.process.stdin.close()

    def stop(self) -> None:
        """Close its stdin (it lets runs finish within GRACE_SECONDS and hands back the rest), then wait; kill
        it if it does not end."""
        if self.process is not None:
            end_child(self.process, GRACE_SECONDS + 10)
        self.process = None


def main(argv: Sequence[str]) -> None:
    """The child: PARENT_PID DATA_DIR CONCURRENCY READY_FD [HANDLER_MODULE ...]."""
    parent, data_dir, concurrency, ready = int(argv[0]), argv[1], int(argv[2]), int(argv[3])
    modules = list(argv[4:])
    die_with(parent)
    logging.basicConfig(level=os.environ.get("DUETIME_LOG_LEVEL", "WARNING"))
    load_modules(modules)
    state = load_state(data_dir)
    ports = attach_ports(data_dir, state)
    webhooks = WebhookTarget(FileSecrets(data_dir), allow_loopback=ports.settings.allow_loopback_webhooks)
    workers = [
        Worker(
            ports,
            name,
            f"local-{name}-{secrets.token_hex(2)}",
            concurrency,
            targets=Targets(webhook_target=webhooks),
        )
        for name in ports.settings.job_classes
    ]

    def stop(signum: int = 0, frame: FrameType | None = None) -> None:
        for worker in workers:
            worker.stopping.set()

    # SIGINT too: a Ctrl-C in the terminal reaches the whole process group, and the parent stops this one.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for worker in workers:  # before the parent goes on: the API accepts these handlers' names from now on
        worker.announcer.announce()
    os.write(ready, b"1")
    os.close(ready)
    threads = [threading.Thread(target=w.run, args=(GRACE_SECONDS,), name=f"worker-{w.job_class}") for w in workers]
    for thread in threads:
        thread.start()
    threading.Thread(target=stop_at_end_of_input, args=(stop,), name="parent-watch", daemon=True).start()
    for thread in threads:
        thread.join()


def signalled_ready(ready_read: int) -> bool:
    """Whether a child wrote its ready byte to the pipe `ready_read` within READY_TIMEOUT_SECONDS (False: it
    ended, or stayed silent); the pipe is closed either way."""
    try:
        readable, _, _ = select.select([ready_read], [], [], READY_TIMEOUT_SECONDS)
        return bool(os.read(ready_read, 1)) if readable else False
    finally:
        os.close(ready_read)


def end_child(process: subprocess.Popen[bytes], timeout: float) -> None:
    """Close a child's stdin (its signal to stop), wait up to `timeout` s for it to end, then kill it."""
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def die_with(parent: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux), and exit now if it already has."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: end of stdin still stops it
            log.warning("could not tie the worker process to its parent's life")
    if os.getppid() != parent:
        os._exit(0)


def stop_at_end_of_input(stop: Callable[[], None]) -> None:
    """Wait for end of file on stdin (the parent closed it, or died), then stop the workers."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except OSError:
        pass
    stop()
