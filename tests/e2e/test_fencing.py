"""Fencing with real worker processes: a killed worker's run is claimed again within one lease; a
frozen worker resumed after its lease cannot overwrite the newer attempt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from duetime.local.system import LocalSystem

from tests.e2e.helpers import executions, iso_in, new_local_system, parse, submit, wait_for, wait_terminal
from tests.http_client import Api

LEASE = 4


@pytest.fixture(scope="module")
def bare_system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    """`duetime local` with no worker threads: only the worker processes of each test run jobs."""
    system = new_local_system(
        tmp_path_factory.mktemp("fencing"), port=0, workers=0, lease_seconds=LEASE, shards=2, prefix="fencing"
    )
    yield system.start()
    system.stop()


class Workers:
    """`duetime worker` processes against one local system, addressed by worker id."""

    def __init__(self, data_dir: Path, extra: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra = extra or []
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, worker_id: str) -> None:
        cmd = [
            sys.executable,
            "-m",
            "duetime.cli",
            "worker",
            "--data-dir",
            str(self.data_dir),
            "--worker-id",
            worker_id,
            "--concurrency",
            "1",
            *self.extra,
        ]
        self.procs[worker_id] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def signal(self, worker_id: str, sig: int) -> None:
        os.kill(self.procs[worker_id].pid, sig)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def workers(bare_system: LocalSystem) -> Iterator[Workers]:
    pool = Workers(bare_system.data_dir)
    yield pool
    pool.stop_all()


def running_attempt(api: Api, job_id: str, attempt: int) -> dict | None:
    found = [e for e in executions(api, job_id) if e["status"] == "running" and e["attempt"] == attempt]
    return found[0] if found else None


def test_a_killed_worker_is_replaced_within_one_lease(bare_system, workers):
    api = Api(bare_system.api_url, bare_system.token("alice"))
    workers.start("w-a")
    workers.start("w-b")
    job = submit(api, handler="demo.sleep", payload={"seconds": 6}, schedule={"at": iso_in(2)})
    first = wait_for(lambda: running_attempt(api, job["jobId"], 1), timeout=20, what="attempt 1 running")
    # When the holder is killed mid-run
    workers.signal(first["workerId"], signal.SIGKILL)
    killed_at = time.time()
    # Then the other worker claims attempt 2 within one lease (plus a second of polling)
    second = wait_for(lambda: running_attempt(api, job["jobId"], 2), timeout=LEASE + 10, what="attempt 2 running")
    assert second["workerId"] != first["workerId"]
    assert parse(second["startedAt"]).timestamp() - killed_at <= LEASE + 2
    [done] = wait_terminal(api, job["jobId"], timeout=20)
    assert done["status"] == "succeeded" and done["attempt"] == 2


def test_a_frozen_worker_resumed_after_its_lease_cannot_overwrite_the_newer_attempt(bare_system, workers):
    api = Api(bare_system.api_url, bare_system.token("alice"))
    workers.start("w-c")
    workers.start("w-d")
    job = submit(api, handler="demo.sleep", payload={"seconds": 7}, schedule={"at": iso_in(2)})
    first = wait_for(lambda: running_attempt(api, job["jobId"], 1), timeout=20, what="attempt 1 running")
    # When the holder is frozen past its lease, the other worker takes attempt 2
    workers.signal(first["workerId"], signal.SIGSTOP)
    second = wait_for(lambda: running_attempt(api, job["jobId"], 2), timeout=LEASE + 10, what="attempt 2 running")
    # And the frozen one is resumed while attempt 2 runs
    workers.signal(first["workerId"], signal.SIGCONT)
    [done] = wait_terminal(api, job["jobId"], timeout=30)
    # Then the result is attempt 2's; attempt 1 never recorded an outcome
    assert done["status"] == "succeeded" and done["attempt"] == 2
    assert done["workerId"] == second["workerId"] != first["workerId"]
    assert done["attempts"][0]["outcome"] is None
    assert done["attempts"][1]["outcome"] == "succeeded"
    time.sleep(2)  # the resumed worker's late heartbeat or completion, if any, lands now
    [after] = executions(api, job["jobId"])
    assert after["status"] == "succeeded" and after["attempt"] == 2 and after["workerId"] == second["workerId"]


def test_a_stale_attempt_over_http_gets_409_and_changes_nothing(api, worker_api):
    job = submit(api, handler="demo.echo", schedule={"at": iso_in(1)})
    [done] = wait_terminal(api, job["jobId"], timeout=20)
    execution_id = done["executionId"]
    beat = worker_api.post(
        f"/executions/{execution_id}/heartbeat", json={"attempt": 1, "workerId": "w1", "claimToken": "t"}
    )
    assert beat.status_code == 409, beat.text
    stale = worker_api.post(
        f"/executions/{execution_id}/complete",
        json={"attempt": 1, "workerId": "w1", "claimToken": "t", "result": "failed"},
    )
    assert stale.status_code == 409, stale.text
    [after] = executions(api, job["jobId"])
    assert after["status"] == "succeeded" and after["finishedAt"] == done["finishedAt"]


def test_an_at_most_once_run_whose_worker_is_killed_ends_with_its_result_unknown_never_started_again(
    bare_system, workers
):
    api = Api(bare_system.api_url, bare_system.token("alice"))
    workers.start("w-e")
    workers.start("w-f")
    job = submit(api, handler="demo.sleep", payload={"seconds": 6}, schedule={"at": iso_in(2)}, delivery="at-most-once")
    first = wait_for(lambda: running_attempt(api, job["jobId"], 1), timeout=20, what="attempt 1 running")
    # When the holder is killed mid-run, its message comes back to the other worker after the lease
    workers.signal(first["workerId"], signal.SIGKILL)
    [done] = wait_terminal(api, job["jobId"], timeout=LEASE + 20)
    # Then no second attempt started: the run ended failed, its one attempt's outcome unknown
    assert done["status"] == "failed" and done["attempt"] == 1
    assert [a["outcome"] for a in done["attempts"]] == ["unknown"] and done["error"].startswith("result unknown")
    time.sleep(LEASE)  # any later copy of its message finds the run ended
    [after] = executions(api, job["jobId"])
    assert after["attempt"] == 1 and after["status"] == "failed"


def test_an_at_most_once_run_whose_worker_is_frozen_is_not_taken_over_and_its_late_outcome_is_refused(
    bare_system, workers
):
    api = Api(bare_system.api_url, bare_system.token("alice"))
    workers.start("w-g")
    workers.start("w-h")
    job = submit(api, handler="demo.sleep", payload={"seconds": 7}, schedule={"at": iso_in(2)}, delivery="at-most-once")
    first = wait_for(lambda: running_attempt(api, job["jobId"], 1), timeout=20, what="attempt 1 running")
    # When the holder is frozen past its lease, the other worker ends the run, result unknown
    workers.signal(first["workerId"], signal.SIGSTOP)
    [done] = wait_terminal(api, job["jobId"], timeout=LEASE + 20)
    assert done["status"] == "failed" and done["attempts"][0]["outcome"] == "unknown"
    # And the frozen one, resumed, finishes its handler: its outcome is refused, nothing starts again
    workers.signal(first["workerId"], signal.SIGCONT)
    time.sleep(9)
    [after] = executions(api, job["jobId"])
    assert after["status"] == "failed" and after["attempt"] == 1 and after["attempts"][0]["outcome"] == "unknown"
