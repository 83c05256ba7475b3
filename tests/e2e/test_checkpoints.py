"""Checkpoints with real worker processes (`duetime worker --data-dir` beside `duetime local`): a handler
that checkpoints every second is SIGKILLed mid-run and the next attempt resumes from its last checkpoint;
a frozen (SIGSTOP) attempt's late checkpoint is refused, with 409 over the worker route."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from duetime.cli.main import main
from duetime.local.system import LocalSystem

from tests.e2e.helpers import command_output, executions, iso_in, new_local_system, submit, wait_for, wait_terminal
from tests.e2e.test_fencing import Workers, running_attempt
from tests.e2e.test_redrive import cli_json
from tests.http_client import Api

LEASE = 4


@pytest.fixture(scope="module")
def bare_system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    """`duetime local` with no worker threads: only the worker processes of each test run jobs."""
    system = new_local_system(
        tmp_path_factory.mktemp("checkpoints"), port=0, workers=0, lease_seconds=LEASE, shards=2, prefix="ckpt"
    )
    yield system.start()
    system.stop()


class LoggedWorkers(Workers):
    """Workers whose log (stderr: warnings and up) is kept in a file per worker id, to read what each saw."""

    def __init__(self, data_dir: Path, logs: Path) -> None:
        super().__init__(data_dir, extra=["--handlers", "tests.e2e.checkpoint_handlers"])
        self.logs = logs

    def start(self, worker_id: str) -> None:
        cmd = [sys.executable, "-m", "duetime.cli", "worker", "--data-dir", str(self.data_dir)]
        cmd += ["--worker-id", worker_id, "--concurrency", "1", *self.extra]
        with open(self.log_of(worker_id), "wb") as log:
            self.procs[worker_id] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)

    def log_of(self, worker_id: str) -> Path:
        return self.logs / f"{worker_id}.log"


@pytest.fixture
def workers(bare_system: LocalSystem, tmp_path: Path) -> Iterator[LoggedWorkers]:
    pool = LoggedWorkers(bare_system.data_dir, tmp_path)
    yield pool
    pool.stop_all()


def execution(api: Api, execution_id: str) -> dict[str, Any]:
    response = api.get(f"/executions/{execution_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def counted(api: Api, execution_id: str, at_least: int) -> dict[str, Any] | None:
    """The execution once its checkpoint has counted to `at_least`."""
    shown = execution(api, execution_id)
    checkpoint = shown.get("checkpoint")
    return shown if checkpoint and checkpoint["state"]["count"] >= at_least else None


def test_a_killed_counter_resumes_from_its_last_checkpoint(bare_system, workers, capsys):
    api = Api(bare_system.api_url, bare_system.token("alice"))
    workers.start("k-a")
    workers.start("k-b")
    job = submit(api, handler="demo.count", payload={"to": 8, "every": 1}, schedule={"at": iso_in(1)})
    first = wait_for(lambda: running_attempt(api, job["jobId"], 1), timeout=20, what="attempt 1 running")
    wait_for(lambda: counted(api, first["executionId"], 3), timeout=20, what="three counts checkpointed")
    # When the worker running it is killed mid-count
    workers.signal(first["workerId"], signal.SIGKILL)
    at_kill = execution(api, first["executionId"])["checkpoint"]
    assert at_kill["attempt"] == 1 and 3 <= at_kill["state"]["count"] < 8
    # Then the other worker takes it over after the lease, and attempt 2 starts from that checkpoint
    [done] = wait_terminal(api, job["jobId"], timeout=40)
    assert done["status"] == "succeeded" and done["attempt"] == 2, done
    assert done["workerId"] != first["workerId"]
    assert done["result"] == {"count": 8, "resumedFrom": at_kill["state"]["count"], "attempt": 2}
    assert done["checkpoint"]["attempt"] == 2 and done["checkpoint"]["state"] == {"count": 8}
    # And `duetime executions get` shows it, as a table and as the API's JSON
    conn = ["--data-dir", str(bare_system.data_dir), "--owner", "alice"]
    capsys.readouterr()
    assert main(["executions", "get", done["executionId"], *conn]) == 0
    out, _ = command_output(capsys)
    assert f'checkpoint (attempt 2, {done["checkpoint"]["recordedAt"]}): {{"count": 8}}' in out
    assert main(["executions", "get", done["executionId"], "--json", *conn]) == 0
    assert cli_json(command_output(capsys)[0])["checkpoint"] == done["checkpoint"]


def test_a_frozen_attempts_late_checkpoint_is_refused_with_409_and_changes_nothing(bare_system, workers, tmp_path):
    api = Api(bare_system.api_url, bare_system.token("alice"))
    worker_api = Api(bare_system.api_url, bare_system.token("external", worker=True))
    workers.start("f-a")
    workers.start("f-b")
    body = {"handler": "e2e.count_and_tell", "payload": {"to": 10, "every": 1, "dir": str(tmp_path)}}

    def submitted() -> dict[str, Any] | None:  # accepted once a worker has announced the handler
        response = api.post("/jobs", json={"name": "tell", **body, "schedule": {"at": iso_in(1)}})
        return dict(response.json()) if response.status_code == 201 else None

    job = wait_for(submitted, timeout=20, what="the handler announced")
    first = wait_for(lambda: running_attempt(api, job["jobId"], 1), timeout=20, what="attempt 1 running")
    execution_id = first["executionId"]
    wait_for(lambda: counted(api, execution_id, 2), timeout=20, what="two counts checkpointed")
    claim_1 = json.loads(Path(tmp_path / "attempt-1.json").read_text())
    # When attempt 1's worker is frozen past its lease, the other takes attempt 2 over from its checkpoint
    workers.signal(first["workerId"], signal.SIGSTOP)
    frozen_at = execution(api, execution_id)["checkpoint"]
    assert frozen_at["attempt"] == 1 and frozen_at["state"]["count"] >= 2
    second = wait_for(lambda: running_attempt(api, job["jobId"], 2), timeout=LEASE + 15, what="attempt 2 running")
    # Then attempt 1's late checkpoint, sent over the worker route with its own claim, is 409
    late = worker_api.post(f"/executions/{execution_id}/heartbeat", json={**claim_1, "checkpoint": {"count": 99}})
    assert late.status_code == 409, late.text
    assert late.json()["error"]["field"] == "attempt"
    # And once it runs again, its own worker's next write (heartbeat or checkpoint) is refused in-process:
    # it stops the handler, and nothing of attempt 1 lands
    workers.signal(first["workerId"], signal.SIGCONT)
    fenced = f"{execution_id} attempt 1 was fenced out of its row"
    wait_for(lambda: fenced in workers.log_of(first["workerId"]).read_text(), timeout=20, what="attempt 1 fenced")
    [done] = wait_terminal(api, job["jobId"], timeout=40)
    assert done["status"] == "succeeded" and done["attempt"] == 2 and done["workerId"] == second["workerId"]
    assert done["result"] == {"count": 10, "resumedFrom": frozen_at["state"]["count"], "attempt": 2}
    assert done["attempts"][0]["outcome"] is None
    assert (done["checkpoint"]["attempt"], done["checkpoint"]["state"]) == (2, {"count": 10})
    [after] = executions(api, job["jobId"])
    assert after["checkpoint"]["state"] == {"count": 10} and after["checkpoint"]["attempt"] == 2
