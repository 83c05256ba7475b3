"""`duetime local` restarted with another --shards on the same data dir (issue 18): the jobs accepted before and
after are found over HTTP and run once, an hour nobody wrote to takes the new count, and `duetime audit` and
`duetime reshard` report a clean, consistent system."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from duetime.cli.main import main
from duetime.domain.keys import hour_bucket, shard_of, shard_of_partition
from duetime.local.backends import attach_ports
from duetime.local.state import load_state

from tests.e2e.helpers import E2E_BACKEND, command_output, executions, new_local_system, submit, wait_terminal
from tests.http_client import Api

pytestmark = pytest.mark.skipif(
    E2E_BACKEND == "moto", reason="moto keeps everything in memory: a restarted `duetime local` starts empty"
)


def one_offs(api: Api, seconds: float, count: int, name: str, at: datetime | None = None) -> list[str]:
    at = at or datetime.now(UTC) + timedelta(seconds=seconds)
    return [
        submit(api, name=f"{name}{i}", handler="demo.echo", schedule={"at": at.isoformat()})["jobId"]
        for i in range(count)
    ]


def test_restarting_duetime_local_on_more_shards_keeps_every_job_and_applies_to_hours_not_fixed(tmp_path, capsys):
    far = datetime.now(UTC).replace(minute=30, second=0, microsecond=0) + timedelta(hours=3)
    # Given `duetime local` on 4 shards with jobs run and jobs still waiting in this hour
    first = new_local_system(tmp_path, port=0, workers=2, shards=4).start()
    try:
        api = Api(first.api_url, first.token("alice"))
        ran_before = one_offs(api, 1, 4, "before")
        waiting = one_offs(api, 8, 4, "waiting")  # due after the restart
        for job_id in ran_before:
            wait_terminal(api, job_id)
    finally:
        first.stop()
    # When it is started again on the same data dir with 7 shards and takes more jobs, this hour and later
    second = new_local_system(tmp_path, port=0, workers=2, shards=7).start()
    try:
        api = Api(second.api_url, second.token("alice"))
        after = one_offs(api, 1, 4, "after")
        far_jobs = one_offs(api, 0, 6, "far", at=far)
        # Then every job of before and after runs once, on its first attempt
        for job_id in ran_before + waiting + after:
            [run] = wait_terminal(api, job_id)
            assert (run["status"], run["attempt"]) == ("succeeded", 1), run
        # ...the far hour, fixed by its first write after the restart, has 7 shards and its rows are found
        ports = attach_ports(tmp_path, load_state(tmp_path))
        assert ports.store.recorded_shards([hour_bucket(datetime.now(UTC)), hour_bucket(far)]) == {
            hour_bucket(datetime.now(UTC)): 4,
            hour_bucket(far): 7,
        }
        for job_id in far_jobs:
            [row] = ports.store.executions_of_job(job_id)
            key = ports.store.key_of(row)
            assert shard_of_partition(key.pk) == shard_of(job_id, 7)
            assert ports.store.get_execution(key) == row
            [listed] = executions(api, job_id)
            assert (listed["executionId"], listed["status"]) == (row.execution_id, "scheduled")
        # ...and found where its hour says by a use-case that derives its key: cancel ends it
        response = api.delete(f"/jobs/{far_jobs[0]}")
        assert response.status_code in (200, 204), response.text
        [cancelled] = executions(api, far_jobs[0])
        assert cancelled["status"] == "cancelled"
        # ...and the audit is clean; `duetime reshard` shows each hour's count
        command_output(capsys)
        assert main(["audit", "--data-dir", str(tmp_path)]) == 0
        assert main(["reshard", "--data-dir", str(tmp_path), "--hours", "5"]) == 0
        out, _ = command_output(capsys)
        assert "configured shards: 7" in out and f"hour {hour_bucket(far)}: 7" in out, out
        # ...and the one-time migration finds nothing to move on a system that recorded its counts from the start
        assert main(["reshard", "--record-current", "--data-dir", str(tmp_path)]) == 0
        out, _ = command_output(capsys)
        assert "moved 0 open rows" in out, out
    finally:
        second.stop()
