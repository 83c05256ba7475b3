"""Job classes isolate work: while every `long` worker slot is busy, `default` jobs still start on time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from duetime.local.system import LocalSystem

from tests.e2e.helpers import executions, iso_in, new_local_system, parse, submit, wait_for, wait_terminal
from tests.http_client import Api

SLOTS = 2


@pytest.fixture(scope="module")
def classes_system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    system = new_local_system(
        tmp_path_factory.mktemp("classes"), port=0, workers=SLOTS, lease_seconds=6, shards=2, prefix="classes"
    )
    yield system.start()
    system.stop()


def test_a_flood_of_long_jobs_does_not_delay_default_jobs(classes_system):
    api = Api(classes_system.api_url, classes_system.token("alice"))
    # Given three times more long jobs than long worker slots, all due now
    long_jobs = [
        submit(
            api,
            handler="demo.sleep",
            payload={"seconds": 12},
            jobClass="long",
            timeoutSeconds=60,
            schedule={"at": iso_in(1)},
        )
        for _ in range(3 * SLOTS)
    ]

    def long_slots_full():
        running = [e for j in long_jobs for e in executions(api, j["jobId"]) if e["status"] == "running"]
        return len(running) == SLOTS

    wait_for(long_slots_full, timeout=15, what="every long slot busy")
    # When default jobs fall due while the long class is saturated
    default_jobs = [submit(api, handler="demo.echo", schedule={"at": iso_in(2)}) for _ in range(6)]
    lateness = []
    for job in default_jobs:
        [execution] = wait_terminal(api, job["jobId"], timeout=20)
        assert execution["status"] == "succeeded"
        lateness.append((parse(execution["startedAt"]) - parse(execution["scheduledAt"])).total_seconds())
    # Then each started within 2 s of its time, and the long class was still saturated meanwhile
    assert max(lateness) < 2.0, lateness
    waiting_long = [j for j in long_jobs if executions(api, j["jobId"])[0]["status"] == "scheduled"]
    assert waiting_long, "the long class should still have a backlog"
