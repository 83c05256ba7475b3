"""More processes serving `duetime local`'s API on SQLite, accepting connections from the parent's one
listening socket.

Why: one Python process runs Python code on one core at a time (the GIL). A `POST /jobs` costs the API
~1.6 ms of CPU on this 2-core machine (HTTP parsing, token, validation, the job's transaction and its due
queue send), so 500 submits/s need ~0.8 of a core in one process, beside its pre-loader: every request
then queues behind the others, and the closed-loop bench submitter fell behind 500/s. Each extra process
serves the same routes over the same database file (WAL: one writer at a time, its commits seen by the
worker process as the parent's are), with the parent's signing key, audience and quotas.

The processes share the listening socket itself (inherited), not a port: a second `duetime local` on the
same port still fails to bind, as with one process. The parent stops them before it closes its own listener
(end of their stdin, as local/worker_process.py's child), and a killed parent takes them with it
(PR_SET_PDEATHSIG). `start` returns once the child serves.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from types import FrameType

from duetime.api.app import build_app, one_at_a_time
from duetime.domain.quotas import Quotas
from duetime.local.backends import attach_ports
from duetime.local.http_bridge import ApiServer
from duetime.local.state import load_state
from duetime.local.worker_process import die_with, end_child, signalled_ready, stop_at_end_of_input

log = logging.getLogger("duetime.local")
STOP_TIMEOUT_SECONDS = 15.0
# The child is a fresh interpreter given the parent's sys.path, as local/worker_process.py starts its own.
_BOOTSTRAP = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from duetime.local.api_process import main; main(sys.argv[2:])"
)


class ApiProcess:
    """One more process answering the API on `listener` (started after local.json is written: the child
    reads it to attach, and takes the signing key and audience from it)."""

    def __init__(self, data_dir: Path, listener: socket.socket, quotas: Quotas) -> None:
        self.data_dir, self.listener, self.quotas = data_dir, listener, quotas
        self.process: subprocess.Popen[bytes] | None = None
        self.ready_read = -1

    def start(self) -> ApiProcess:
        """Start the child (`wait_ready` waits until it serves: start several, or the worker process, first)."""
        ready_read, ready_write = os.pipe()
        listen_fd = self.listener.fileno()
        command = [sys.executable, "-c", _BOOTSTRAP, json.dumps(sys.path), str(os.getpid()), str(self.data_dir)]
        command += [str(listen_fd), str(ready_write), json.dumps(asdict(self.quotas))]
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, pass_fds=(listen_fd, ready_write))
        finally:
            os.close(ready_write)
        self.ready_read = ready_read
        return self

    def wait_ready(self) -> None:
        """Wait until the child serves; raises RuntimeError if it ends or stays silent for
        READY_TIMEOUT_SECONDS instead."""
        if not signalled_ready(self.ready_read):
            self.stop()
            raise RuntimeError("duetime local's API process did not start (its errors are above)")

    def stop(self) -> None:
        """Close its stdin (it stops accepting and answers requests still arriving on kept-alive connections
        with 503, as the parent's bridge does when stopping), then wait; kill it if it does not end."""
        if self.process is not None:
            end_child(self.process, STOP_TIMEOUT_SECONDS)
        self.process = None


def main(argv: list[str]) -> None:
    """The child: PARENT_PID DATA_DIR LISTEN_FD READY_FD QUOTAS_JSON."""
    parent, data_dir, listen_fd, ready = int(argv[0]), argv[1], int(argv[2]), int(argv[3])
    quotas = Quotas(**json.loads(argv[4]))
    die_with(parent)
    logging.basicConfig(level=os.environ.get("DUETIME_LOG_LEVEL", "WARNING"))
    state = load_state(data_dir)
    ports = attach_ports(data_dir, state)
    ports.quotas = quotas
    app = build_app(ports, local_secret=state.jwt_secret, local_audience=state.instance_id)
    server = ApiServer(one_at_a_time(app), listener=socket.socket(fileno=listen_fd)).start()
    stopping = threading.Event()

    def stop(signum: int = 0, frame: FrameType | None = None) -> None:
        stopping.set()

    # SIGINT too: a Ctrl-C in the terminal reaches the whole process group, and the parent stops this one.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=stop_at_end_of_input, args=(stop,), name="parent-watch", daemon=True).start()
    os.write(ready, b"1")
    os.close(ready)
    stopping.wait()
    server.stop()
