"""Restart without loss: the real `duetime local`, run as a process from a fresh folder, is stopped (SIGTERM)
and later killed (SIGKILL) while jobs are posted to it at a steady rate, and started again on the same data
dir each time. Every accepted job (each 201) and every history row is still there; the execution running at
the kill is taken over after its lease; the cron chains continue, and the slots missed while it was down
follow each job's catch-up policy; no attempt runs twice unless its holder was stopped; `duetime audit`
finds nothing."""

from __future__ import annotations

import itertools
import json
import math
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from duetime.domain.catchup import MISSED_AFTER
from duetime.local.backends import attach_ports
from duetime.local.state import load_state
from duetime.service.context import Ports

from tests.e2e import recording
from tests.e2e.helpers import E2E_BACKEND, executions, iso_in, new_local_system, parse, submit, wait_for
from tests.frozen_writer import frozen_writer
from tests.http_client import Api

pytestmark = pytest.mark.skipif(
    E2E_BACKEND == "moto", reason="moto keeps everything in memory: a restarted `duetime local` starts empty"
)

LEASE = 4
RATE_PER_SECOND = 10
DATA_DIR = ".duetime"  # the default, relative to the folder `duetime local` runs in
TERMINAL = {"succeeded", "failed", "cancelled", "skipped"}
KILL_SECOND = 50  # a few seconds before the next cron slot, so the outage below is short


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalProcess:
    """`duetime local` as a user runs it: a process in its own folder, on a fixed port, restartable."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.run_log = folder / "runs.jsonl"  # every handler run, as tests/e2e/recording.py records them
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.ports: Ports | None = None  # its data, read to see which handlers its workers announced
        self.stopped: list[tuple[float, float]] = []  # each stop: when its signal was sent, when the process ended

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        """Start it and return the token it prints once it serves."""
        self.starts += 1
        output = self.folder / f"local-{self.starts}.out"
        command = [sys.executable, "-m", "duetime.cli", "local", "--port", str(self.port), "--workers", "8"]
        command += ["--lease-seconds", str(LEASE), "--shards", "4", "--backend", E2E_BACKEND]
        command += ["--handlers", recording.MODULE]
        env = recording.worker_environment(self.run_log)
        with open(output, "wb") as out:
            self.process = subprocess.Popen(command, cwd=self.folder, env=env, stdout=out, stderr=subprocess.STDOUT)

        def token() -> str | None:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"duetime local exited: {output.read_text()}")
            lines = [line.split("token:", 1)[1].strip() for line in output.read_text().splitlines() if "token:" in line]
            return lines[0] if lines else None

        printed = str(wait_for(token, 60, interval=0.1, what="duetime local to serve"))
        # Its workers (a child process) announce the recording handlers; jobs naming them are accepted from then.
        if self.ports is None:
            self.ports = attach_ports(self.folder / DATA_DIR, load_state(self.folder / DATA_DIR))
        ports = self.ports
        wait_for(lambda: recording.served(ports), 30, interval=0.1, what="the recording handlers to be announced")
        return printed

    def stop(self, sig: signal.Signals) -> float:
        """Send `sig`, wait for the process to end, return when it was sent (`stopped` holds both instants)."""
        assert self.process is not None
        sent = time.time()
        self.process.send_signal(sig)
        code = self.process.wait(timeout=60)
        assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL), code
        self.stopped.append((sent, time.time()))
        return sent


class Load(threading.Thread):
    """Posts one-off jobs at a steady rate, due a few seconds ahead, a quarter of them sleeping a while;
    keeps every accepted body (201) and counts the refusals while nothing listens. Paused while the test
    only waits for the clock, so the jobs to check stay a few hundred."""

    def __init__(self, api: Api, rng: random.Random) -> None:
        super().__init__(name="load", daemon=True)
        self.api, self.rng = api, rng
        self.accepted: dict[str, dict[str, Any]] = {}
        self.refused = 0
        self.stopped = threading.Event()
        self.running = threading.Event()
        self.running.set()

    def body(self, n: int) -> dict[str, Any]:
        body: dict[str, Any] = {"name": f"load-{n}", "schedule": {"at": iso_in(self.rng.uniform(0.5, 4))}}
        if self.rng.random() < 0.25:
            body.update(handler="record.sleep", payload={"seconds": round(self.rng.uniform(0.5, 2.5), 1)})
        else:
            body.update(handler="record.echo", payload={"n": n})
        return body

    def run(self) -> None:
        n = 0
        next_at = time.monotonic()
        while not self.stopped.is_set():
            if not self.running.is_set():
                self.running.wait(0.5)
                next_at = time.monotonic()
                continue
            n += 1
            body = self.body(n)
            try:
                response = self.api.post("/jobs", json=body)
            except requests.RequestException:
                self.refused += 1
            else:
                if response.status_code == 201:
                    self.accepted[response.json()["jobId"]] = body
                else:
                    self.refused += 1
            next_at += 1 / RATE_PER_SECOND
            self.stopped.wait(max(0.0, next_at - time.monotonic()))


def history(api: Api, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Every execution row of these jobs, by execution id."""
    return {e["executionId"]: e for job_id in job_ids for e in executions(api, job_id)}


def minute_after(instant: float) -> float:
    return (int(instant) // 60 + 1) * 60


@pytest.mark.observe_last
@pytest.mark.timeout(480)
def test_kill_and_restart_under_load_loses_nothing(tmp_path):
    local = LocalProcess(tmp_path)
    api = Api(local.url, local.start())
    load = Load(api, random.Random(13))
    try:
        crons = {
            policy: api.post(
                "/jobs",
                json={
                    "name": f"cron-{policy}",
                    "handler": "record.echo",
                    "catchUp": policy,
                    "overlap": "allow",  # a late slot and a catch-up run may overlap: this test is about restarts
                    "schedule": {"cron": "* * * * *", "timeZone": "UTC"},
                },
            ).json()["jobId"]
            for policy in ("latest", "all", "none")
        }
        load.start()

        # A graceful stop and restart under load: the running executions are released, not lost.
        time.sleep(8)
        terminated_at = local.stop(signal.SIGTERM)
        assert local.start(), "restart after SIGTERM"
        time.sleep(5)

        # Kill it under load, with a long run under way and jobs in every state, shortly before a cron slot.
        # (Every row so far is read while the load pauses; the jobs of the last seconds are checked by id.)
        kill_at = math.ceil((time.time() + 30 - KILL_SECOND) / 60) * 60 + KILL_SECOND
        load.running.clear()
        before_kill = history(api, [*crons.values(), *list(load.accepted)])
        time.sleep(max(0.0, kill_at - 10 - time.time()))
        load.running.set()
        time.sleep(max(0.0, kill_at - 2 - time.time()))
        long_run = api.post(
            "/jobs",
            json={"name": "long", "handler": "record.sleep", "payload": {"seconds": 6}, "schedule": {"at": iso_in(0)}},
        ).json()["jobId"]
        wait_for(lambda: executions(api, long_run)[0]["status"] == "running", 5, what="the long run to start")
        killed_at = local.stop(signal.SIGKILL)
        time.sleep(1)
        load.running.clear()
        state = json.loads((tmp_path / DATA_DIR / "local.json").read_text())
        assert state["backend"] == E2E_BACKEND

        # Down until the next slot is missed (a minute late) and the one after it has fallen due.
        first_missed = minute_after(killed_at)
        restart_at = first_missed + MISSED_AFTER.total_seconds() + 5
        time.sleep(restart_at - time.time())
        restarted_at = time.time()
        assert local.start(), "restart after SIGKILL"
        load.running.set()
        time.sleep(10)
        load.stopped.set()
        load.join(timeout=30)
        # Every accepted one-off is waited for, those due in the last seconds of the load too (each is checked
        # below to have succeeded).
        cutoff = max([datetime.now(UTC), *(parse(body["schedule"]["at"]) for body in load.accepted.values())])

        # Settle: everything accepted and due has ended.
        accepted = [*list(load.accepted), long_run]

        def open_due() -> list[tuple[str, str]]:
            return [
                (e["executionId"], e["status"])
                for job_id in accepted
                for e in executions(api, job_id)
                if e["status"] not in TERMINAL and parse(e["dueAt"]) <= cutoff
            ]

        wait_for(lambda: not open_due(), 90, interval=1, what="every accepted execution to end")

        # Nothing accepted is lost: every one-off job has its one execution, and it succeeded.
        after = history(api, [*crons.values(), *accepted])
        for job_id, body in load.accepted.items():
            [execution] = executions(api, job_id)
            assert execution["status"] == "succeeded", (body, execution)

        # Every history row seen before the kill is still there; what had ended is unchanged.
        for execution_id, row in before_kill.items():
            assert execution_id in after, f"{execution_id} lost"
            if row["status"] in TERMINAL:
                assert after[execution_id] == row

        # The run under way at the kill was taken over once its lease ended, and finished.
        [long] = executions(api, long_run)
        assert long["status"] == "succeeded" and long["attempt"] == 2, long
        first, second = long["attempts"]
        assert first["outcome"] is None and parse(second["startedAt"]).timestamp() >= restarted_at

        # No attempt ran twice, and an execution ran again only after its holder was stopped.
        runs = recording.read_runs(local.run_log)
        holders: dict[tuple[str, int], str] = {}
        for run in runs:
            key = (run["execution_id"], run["attempt"])
            assert holders.setdefault(key, run["worker_id"]) == run["worker_id"], run
            assert sum(1 for r in runs if (r["execution_id"], r["attempt"]) == key) == 1, run
        # A stop lasts from its signal to the process's end: a worker may claim a run in between (it hears of
        # the stop from its parent), and a graceful stop releases it for the next start to take up.
        stops = local.stopped
        assert [sent for sent, _ in stops] == [terminated_at, killed_at]
        for execution in after.values():
            attempts = execution["attempts"]
            for earlier, later in itertools.pairwise(attempts):
                if earlier["outcome"] == "failed":
                    continue
                begin, end = parse(earlier["startedAt"]).timestamp(), parse(later["startedAt"]).timestamp()
                assert any(sent <= end and begin <= ended for sent, ended in stops), execution

        # The cron chains continue: every minute once, and the slots missed while down follow the policy.
        missed_until = restarted_at - MISSED_AFTER.total_seconds()
        for policy, job_id in crons.items():
            chain = sorted(executions(api, job_id), key=lambda e: e["scheduledAt"])
            slots = [parse(e["scheduledAt"]) for e in chain]
            assert len(slots) == len(set(slots)), f"a doubled slot in {policy}: {slots}"
            covered = sum((e.get("skippedCount") or 1) if e["status"] == "skipped" else 1 for e in chain)
            assert covered == int((slots[-1] - slots[0]).total_seconds() // 60) + 1, f"a missing slot in {policy}"
            assert chain[-1]["status"] == "scheduled", chain[-1]
            # The slots that fell due while it was down (queued before the kill or not) follow the policy: those
            # missed (a minute late at the restart) are skipped unless the policy runs them; later ones just run.
            in_outage = [e for e in chain if killed_at < parse(e["scheduledAt"]).timestamp() < restarted_at]
            missed_slots = [e for e in in_outage if parse(e["scheduledAt"]).timestamp() <= missed_until]
            assert missed_slots, chain
            skipped = [e for e in chain if e["status"] == "skipped"]
            assert all(e["skipReason"] == f"catch-up {policy}" for e in skipped), chain
            if policy == "all":
                assert not skipped and all(e["status"] == "succeeded" for e in in_outage), chain
            elif policy == "latest":
                assert [e["status"] for e in in_outage] == ["skipped"] * (len(in_outage) - 1) + ["succeeded"], chain
            else:
                # `none` skips the missed stretch when the system decided, by its own clock after its start (which
                # takes seconds on a loaded machine): judged by the times it recorded, not by when the test started
                # it. The stretch runs from its first slot, a minute or more late then, up to the moment of the
                # decision (docs/schedules.md): a later slot of it may be only seconds late, and is skipped with it.
                # A slot after the stretch runs, within a minute of its time.
                stretch_start = parse(in_outage[0]["scheduledAt"])
                for e in in_outage:
                    decided = parse(e["finishedAt" if e["status"] == "skipped" else "startedAt"])
                    late = decided - parse(e["scheduledAt"])
                    if e["status"] == "skipped":
                        assert decided - stretch_start >= MISSED_AFTER and late >= timedelta(0), (e, chain)
                    else:
                        assert e["status"] == "succeeded" and late < MISSED_AFTER + timedelta(seconds=1), (e, chain)
                # The first slot of the outage was more than a minute late whenever the restarted system looked.
                assert in_outage[0]["status"] == "skipped", chain
        by_status: dict[str, int] = defaultdict(int)
        for execution in after.values():
            by_status[execution["status"]] += 1

        # And the audit of the restarted system finds nothing.
        audit = subprocess.run(
            [sys.executable, "-m", "duetime.cli", "audit", "--data-dir", DATA_DIR],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert audit.returncode == 0, audit.stdout + audit.stderr
        print(
            f"\nrestart: {len(load.accepted)} accepted, {load.refused} refused while down; "
            f"rows {dict(by_status)}; down {restarted_at - killed_at:.0f} s after SIGKILL; "
            f"audit: {audit.stdout.splitlines()[-1]}",
            flush=True,
        )
    finally:
        load.stopped.set()
        if local.process and local.process.poll() is None:
            local.process.terminate()
            local.process.wait(timeout=30)


def test_a_restart_on_the_same_data_dir_keeps_jobs_tokens_and_the_preloader_owner(tmp_path):
    """In process, the wiring the kill test relies on: the database file, the secret and the pre-loader's
    owner outlive a stop; local.json says which backend and file a `duetime worker` must open."""
    first = new_local_system(tmp_path, port=0, workers=0, shards=2).start()
    try:
        token = first.token("alice")
        job = submit(Api(first.api_url, token), handler="demo.echo", schedule={"at": iso_in(3600)})
        state = load_state(tmp_path)
    finally:
        first.stop()
    assert (state.backend, state.database_file) == (E2E_BACKEND, "duetime.sqlite3")
    assert (tmp_path / "duetime.sqlite3").exists()

    second = new_local_system(tmp_path, port=0, workers=0, shards=2).start()
    try:
        api = Api(second.api_url, token)  # the token of the first run is still good
        assert api.get(f"/jobs/{job['jobId']}").json()["jobId"] == job["jobId"]
        [waiting] = executions(api, job["jobId"])
        assert waiting["status"] == "scheduled"
        assert load_state(tmp_path).preloader_id == state.preloader_id
        assert attach_ports(tmp_path, load_state(tmp_path)).store.get_job(job["jobId"]) is not None
    finally:
        second.stop()


def test_a_kept_alive_connection_is_refused_with_503_once_stopped(tmp_path):
    """A client's kept-alive connection outlives the listener: after a stop it gets 503 (try again), never a
    500 from a store being closed."""
    system = new_local_system(tmp_path, port=0, workers=0, shards=2).start()
    api = Api(system.api_url, system.token("alice"))
    try:
        assert api.get("/jobs").status_code == 200  # the session now holds a connection open
    finally:
        system.stop()
    try:
        response = api.get("/jobs")
    except requests.ConnectionError:
        return  # the connection was already gone: the client reconnects and is refused
    assert response.status_code == 503 and response.json()["error"]["code"] == "unavailable", response.text


@pytest.mark.timeout(120)
def test_a_process_frozen_holding_the_write_lock_gets_callers_503_then_everything_goes_on(tmp_path):
    """Another process on the file frozen mid-write (SIGSTOP) holds SQLite's write lock: a create waits out
    the busy timeout and is answered 503 with Retry-After, never a 500; once it is resumed the same request,
    with its Idempotency-Key, creates the job, and the job runs."""
    system = new_local_system(tmp_path, port=0, workers=1, shards=2).start()
    api = Api(system.api_url, system.token("alice"))
    wait_for(  # the worker process is up and has announced its handlers
        lambda: api.post("/jobs", json={"name": "first", "handler": "demo.echo", "schedule": {"at": iso_in(1)}}).ok,
        60,
        what="the worker to announce demo.echo",
    )
    writer = frozen_writer(tmp_path / "duetime.sqlite3")
    try:
        body = {"name": "after-a-freeze", "handler": "demo.echo", "schedule": {"at": iso_in(1)}}
        headers = {"Idempotency-Key": "frozen-writer-1"}
        refused = api.post("/jobs", json=body, headers=headers)
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "unavailable" and int(refused.headers["Retry-After"]) >= 1
        writer.send_signal(signal.SIGCONT)
        assert writer.wait(timeout=10) == 0
        job = api.post("/jobs", json=body, headers=headers)
        assert job.status_code == 201, job.text
        wait_for(
            lambda: [e for e in executions(api, job.json()["jobId"]) if e["status"] == "succeeded"],
            60,
            what="the job created after the freeze to run",
        )
    finally:
        if writer.poll() is None:
            writer.send_signal(signal.SIGCONT)
            writer.kill()
        system.stop()
