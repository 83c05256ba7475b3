"""A worker process told to stop (SIGTERM, as ECS scale-in does) hands its unfinished run to another
worker at once instead of leaving it to wait out the lease."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from duetime.local.system import LocalSystem

from tests.e2e.helpers import iso_in, new_local_system, parse, submit, wait_for, wait_terminal
from tests.e2e.test_fencing import Workers, running_attempt
from tests.http_client import Api

LEASE = 20


@pytest.fixture(scope="module")
def long_lease_system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    system = new_local_system(
        tmp_path_factory.mktemp("shutdown"), port=0, workers=0, lease_seconds=LEASE, shards=2, prefix="shutdown"
    )
    yield system.start()
    system.stop()


def test_sigterm_hands_the_run_to_another_worker_well_inside_one_lease(long_lease_system):
    api = Api(long_lease_system.api_url, long_lease_system.token("alice"))
    workers = Workers(long_lease_system.data_dir, extra=["--grace-seconds", "1"])
    try:
        workers.start("w-e")
        workers.start("w-f")
        job = submit(api, handler="demo.sleep", payload={"seconds": 8}, schedule={"at": iso_in(2)})
        first = wait_for(lambda: running_attempt(api, job["jobId"], 1), timeout=20, what="attempt 1 running")
        workers.signal(first["workerId"], signal.SIGTERM)
        stopped_at = time.time()
        second = wait_for(lambda: running_attempt(api, job["jobId"], 2), timeout=LEASE, what="attempt 2 running")
        handover = parse(second["startedAt"]).timestamp() - stopped_at
        assert second["workerId"] != first["workerId"]
        assert handover < LEASE / 4, f"handover took {handover:.1f} s of a {LEASE} s lease"
        assert workers.procs[first["workerId"]].wait(timeout=15) == 0
        [done] = wait_terminal(api, job["jobId"], timeout=30)
        assert done["status"] == "succeeded" and done["attempt"] == 2
        assert done["attempts"][0]["outcome"] is None
    finally:
        workers.stop_all()
