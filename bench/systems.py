"""The systems the side-by-side benchmark drives, each a real process tree on this machine: `duetime local`
(SQLite or moto backend) over its HTTP API, and a Celery + Redis ETA peer. Each one submits a one-off due
at a given instant and reports, per submitted key, when it started and finished as the system recorded it."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from bench.common import ROOT
from bench.outcome import Outcome

PYTHON = sys.executable
STARTUP_SECONDS = 60.0  # `duetime local --backend moto` starts a moto process and creates tables first
READERS = 8  # threads reading results back over HTTP
STORE_READ_CHUNK = 500  # jobs a query when results are read from duetime's SQLite file


def iso_ms(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_ms(text: str | None) -> int | None:
    if not text:
        return None
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


class Submitter(Protocol):
    def submit(self, index: int, due: datetime) -> str:
        """Submit one one-off due at `due`; its key, or raise `Refused`."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class BatchSubmitter(Submitter, Protocol):
    def submit_many(self, first_index: int, dues: list[datetime]) -> list[str | Refused]:
        """Submit one one-off a due time in one request (the system's batch route); each job's key or
        `Refused`, in order: a refused item does not refuse the others."""
        ...


class System(Protocol):
    name: str
    # Jobs due within this many seconds of their submit go straight to the due queue (duetime's dispatch
    # horizon); a scheduled-ahead run's jobs are due beyond it, so the pre-loader sends them.
    horizon_seconds: float

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def submitter(self) -> Submitter: ...

    def outcomes(self, keys: list[str]) -> dict[str, Outcome]: ...

    def rss_bytes(self) -> int: ...


class Refused(Exception):
    """The system did not accept a submit (the status and body say why)."""


# --- process trees ----------------------------------------------------------------------------------


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def rss_of(pids: Iterable[int]) -> int:
    """Resident memory in bytes of the given processes together (VmRSS; 0 for one that has gone)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stop_process(process: subprocess.Popen[Any], grace: float = 20.0) -> None:
    """SIGTERM to the process (it stops its own children), SIGKILL if it outlives `grace`."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        for pid in reversed(descendants(process.pid)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait(timeout=10)


# --- duetime local over HTTP ------------------------------------------------------------------------


def local_backends() -> set[str]:
    """The backends this checkout's `duetime local` offers (`--backend`), or moto alone before it had one."""
    try:
        from duetime.local.backends import BACKENDS
    except ImportError:
        return {"moto"}
    return set(BACKENDS)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    core = str(ROOT / "layers" / "core" / "python")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (core, str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("DUETIME_LOG_LEVEL", "WARNING")
    env.update(extra or {})
    return env


class Http:
    """One keep-alive HTTP/1.1 connection to the API with the bearer token (one per thread)."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        sent = {**self.headers, **(headers or {})}
        for attempt in (1, 2):  # a keep-alive connection the server closed is reopened once
            try:
                self.connection.request(method, path, body=data, headers=sent)
                response = self.connection.getresponse()
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.connection.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.connection.close()


def one_off_spec(index: int, due: datetime) -> dict[str, Any]:
    return {"name": f"bench-{index}", "handler": "demo.echo", "schedule": {"at": iso_ms(due)}}


class DuetimeSubmitter:
    def __init__(self, url: str, token: str) -> None:
        self.http = Http(url, token)

    def submit(self, index: int, due: datetime) -> str:
        status, body = self.http.call("POST", "/jobs", one_off_spec(index, due))
        if status != 201:
            raise Refused(f"{status} {json.dumps(body)[:200]}")
        return str(body["jobId"])

    def submit_many(self, first_index: int, dues: list[datetime]) -> list[str | Refused]:
        """`POST /jobs/batch` with one job a due time (at most MAX_BATCH_JOBS): an item is taken when
        answered 201 on its own; a request refused whole refuses each of its items. It asks for
        `Prefer: return=minimal` (each job's id, not the whole job: what a bulk creator keeps); a checkout
        without it answers whole jobs, read the same way."""
        specs = [one_off_spec(first_index + n, due) for n, due in enumerate(dues)]
        status, body = self.http.call("POST", "/jobs/batch", {"jobs": specs}, headers={"Prefer": "return=minimal"})
        if status != 200:
            return [Refused(f"{status} {json.dumps(body)[:200]}")] * len(dues)
        return [
            str(item.get("jobId") or item["job"]["jobId"])
            if item["status"] == 201
            else Refused(f"{item['status']} {json.dumps(item)[:200]}")
            for item in body["results"]
        ]

    def close(self) -> None:
        self.http.close()


class DuetimeLocal:
    """`duetime local --backend BACKEND` in a process of its own, from a temporary data dir (or a given one,
    kept), reached only over its HTTP API; results are read back from each job's history."""

    def __init__(
        self,
        backend: str,
        workers: int | None = None,
        data_dir: Path | None = None,
        legacy: bool = False,
        api_processes: int | None = None,
        worker_processes: int = 1,
    ) -> None:
        self.backend, self.workers, self.api_processes = backend, workers, api_processes
        self.worker_processes = worker_processes
        self.name = f"duetime {backend}"
        self.legacy = legacy  # a `duetime local` without --backend (moto only)
        self.given_dir = data_dir
        self.data_dir = data_dir or Path("/nonexistent")
        self.process: subprocess.Popen[str] | None = None
        self.url = self.token = ""
        self.horizon_seconds = 10.0
        self.output: list[str] = []

    def start(self) -> None:
        if self.given_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix=f"duetime-bench-{self.backend}-"))
        command = [PYTHON, "-m", "duetime.cli", "local", "--port", "0", "--data-dir", str(self.data_dir)]
        if self.workers is not None:  # else its default for the backend
            command += ["--workers", str(self.workers)]
        if not self.legacy:
            command += ["--backend", self.backend]
        if self.api_processes is not None:  # None: its default; given only when asked, as older checkouts have
            command += ["--api-processes", str(self.api_processes)]  # no --api-processes
        if self.worker_processes > 1:  # likewise --worker-processes
            command += ["--worker-processes", str(self.worker_processes)]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=child_env(),
            cwd=self.data_dir,
        )
        deadline = time.monotonic() + STARTUP_SECONDS
        assert self.process.stdout is not None
        while time.monotonic() < deadline and not (self.url and self.token):
            line = self.process.stdout.readline()
            if not line:
                break
            self.output.append(line.rstrip())
            if match := re.search(r"API:\s+(\S+)", line):
                self.url = match.group(1)
            if match := re.search(r"token:\s+(\S+)", line):
                self.token = match.group(1)
        if not (self.url and self.token):
            self.stop()
            raise RuntimeError(f"{self.name} did not start: " + " | ".join(self.output[-10:]))
        # Keep reading its output so a chatty process never blocks on a full pipe.
        threading.Thread(target=self._drain_output, daemon=True).start()
        from duetime.local.state import load_state  # local.json's one reader (bench.common puts duetime on the path)

        self.horizon_seconds = float(load_state(self.data_dir).preload_window_seconds)

    def _drain_output(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line.rstrip())
            del self.output[:-200]

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None
        if self.given_dir is None and self.data_dir.exists():
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def submitter(self) -> DuetimeSubmitter:
        return DuetimeSubmitter(self.url, self.token)

    def outcomes(self, keys: list[str]) -> dict[str, Outcome]:
        """Each job's execution: on SQLite read from the store's file, as Celery's are read from its Redis
        (`peer_tasks.read_outcomes`); on moto over the API (`outcomes_over_api`).

        Read over the API, each job cost the system a request (~1 ms of its CPU) while it was still
        draining: collecting a burst of 10,000 took ~1 s of the two cores from the runs it measured (5.5
        against 4.4 s, docs/performance.md), where Celery's reads cost its worker nothing. A read-only
        connection on the WAL file takes no lock a writer waits for. `api_mismatches` checks a sample of
        what this read against the API once the runs have ended."""
        if self.backend != "sqlite":
            return self.outcomes_over_api(keys)
        from duetime.adapters.sqlite.db import DATABASE_FILE

        found: dict[str, Outcome] = {}
        path = self.data_dir / DATABASE_FILE
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as conn:
            for start in range(0, len(keys), STORE_READ_CHUNK):
                chunk = keys[start : start + STORE_READ_CHUNK]
                rows = conn.execute(
                    "SELECT job_id, json_extract(doc, '$.scheduledMs'), json_extract(doc, '$.attempts[0].startedMs'),"
                    " json_extract(doc, '$.finishedMs'), status, json_array_length(doc, '$.attempts')"
                    f" FROM executions WHERE job_id IN ({','.join('?' * len(chunk))})"
                    " ORDER BY json_extract(doc, '$.scheduledMs')",
                    chunk,
                ).fetchall()
                for job_id, scheduled, started, finished, status, runs in rows:  # a job's first run, as the API's read
                    found.setdefault(job_id, Outcome(int(scheduled), started, finished, str(status), int(runs or 0)))
        return found

    def api_mismatches(self, found: dict[str, Outcome], sample: int = 200) -> list[str]:
        """Jobs among an even `sample` of `found` whose execution the API shows otherwise than
        `outcomes` read it (empty: the two agree)."""
        keys = sorted(found)[:: max(1, len(found) // sample)]
        shown = self.outcomes_over_api(keys)
        return [key for key in keys if shown.get(key) != found[key]]

    def outcomes_over_api(self, keys: list[str]) -> dict[str, Outcome]:
        """Each job's execution from `GET /jobs/{jobId}/executions`, READERS requests at a time."""
        local = threading.local()
        connections: list[Http] = []

        def read(job_id: str) -> tuple[str, Outcome | None]:
            if not hasattr(local, "http"):
                local.http = Http(self.url, self.token)
                connections.append(local.http)
            status, body = local.http.call("GET", f"/jobs/{job_id}/executions")
            if status != 200 or not body["executions"]:
                return job_id, None
            row = body["executions"][-1]  # newest first, so the first run is the last (a one-off has one)
            return job_id, Outcome(
                scheduled_ms=parse_ms(row["scheduledAt"]) or 0,
                started_ms=parse_ms(row["attempts"][0]["startedAt"]) if row.get("attempts") else None,
                finished_ms=parse_ms(row.get("finishedAt")),
                status=str(row["status"]),
                runs=len(row.get("attempts") or []),
            )

        with ThreadPoolExecutor(READERS) as pool:
            found = {key: outcome for key, outcome in pool.map(read, keys) if outcome is not None}
        for connection in connections:
            connection.close()
        return found

    def rss_bytes(self) -> int:
        return rss_of(descendants(self.process.pid)) if self.process else 0


# --- the peer: Celery + Redis ETA tasks --------------------------------------------------------------


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


class CeleryPeer:
    """redis-server and a Celery worker (prefork, `concurrency` processes) of their own; each task records
    its start and end in Redis, keyed by the id the submitter gave it."""

    name = "celery+redis"
    horizon_seconds = 0.0  # a Celery worker holds every ETA task in memory from the start

    def __init__(self, concurrency: int = 4) -> None:
        self.concurrency = concurrency
        self.redis: subprocess.Popen[str] | None = None
        self.worker: subprocess.Popen[str] | None = None
        self.url = ""
        self.tmp: Path | None = None
        self.app: Any = None

    def start(self) -> None:
        from bench import peer_tasks

        server = redis_server_path()
        if server is None:
            raise RuntimeError("redis-server is not installed")
        port = free_port()
        self.url = f"redis://127.0.0.1:{port}/0"
        self.tmp = Path(tempfile.mkdtemp(prefix="duetime-bench-redis-"))
        self.redis = subprocess.Popen(
            [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=self.tmp,
        )
        self.app = peer_tasks.make_app(self.url)
        deadline = time.monotonic() + 20
        while True:
            try:
                peer_tasks.redis_client(self.url).ping()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        peer_tasks.redis_client(self.url).flushdb()
        self.worker = subprocess.Popen(
            [
                *(PYTHON, "-m", "celery", "-A", "bench.peer_tasks", "worker", "--pool", "prefork"),
                *("--concurrency", str(self.concurrency), "--loglevel", "WARNING"),
                *("--without-gossip", "--without-mingle", "--without-heartbeat"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            env=child_env({peer_tasks.URL_VARIABLE: self.url}),
            cwd=ROOT,
        )
        # Ready when a task sent now has run.
        probe = peer_tasks.probe_key()
        self.app.send_task(peer_tasks.TASK, args=[probe, int(time.time() * 1000)])
        deadline = time.monotonic() + 60
        while not self.outcomes([probe]):
            if time.monotonic() > deadline or self.worker.poll() is not None:
                self.stop()
                raise RuntimeError("the Celery worker did not start")
            time.sleep(0.2)

    def submitter(self) -> CelerySubmitter:
        return CelerySubmitter(self.app)

    def outcomes(self, keys: list[str]) -> dict[str, Outcome]:
        from bench import peer_tasks

        return peer_tasks.read_outcomes(self.url, keys)

    def rss_bytes(self) -> int:
        pids = [*(descendants(self.worker.pid) if self.worker else []), *([self.redis.pid] if self.redis else [])]
        return rss_of(pids)

    def stop(self) -> None:
        if self.worker is not None:
            stop_process(self.worker)
            self.worker = None
        if self.redis is not None:
            stop_process(self.redis)
            self.redis = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


class CelerySubmitter:
    def __init__(self, app: Any) -> None:
        self.app = app
        self.run = uuid.uuid4().hex[:8]

    def submit(self, index: int, due: datetime) -> str:
        from bench import peer_tasks

        key = f"{self.run}-{index}"  # unique across the runs one reused worker serves
        self.app.send_task(peer_tasks.TASK, args=[key, int(due.timestamp() * 1000)], eta=due)
        return key

    def close(self) -> None:
        pass
