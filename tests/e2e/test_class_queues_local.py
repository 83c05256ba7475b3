"""`duetime local --class-queues default=2`: the `default` class on two due queues by shard. Jobs of every
shard wait on the queue of their shard, the worker process (attached through local.json) reads both, and
each runs once; `duetime audit` is clean."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime.cli.main import main
from duetime.domain.keys import shard_of
from duetime.local.backends import attach_ports
from duetime.local.state import load_state

from tests.e2e.helpers import command_output, new_local_system, submit, wait_for, wait_terminal
from tests.http_client import Api
from tests.queue_depths import class_queue_depths

SHARDS = 4


def test_jobs_of_every_shard_run_once_through_both_queues_of_their_class(tmp_path, capsys):
    system = new_local_system(tmp_path, port=0, workers=2, shards=SHARDS, class_queues={"default": 2})
    system.use_worker_process = system.backend == "sqlite"  # as `duetime local` runs its workers on SQLite
    system.start()
    try:
        # The data dir records the spread, so every process that attaches reads both queues
        state = load_state(tmp_path)
        assert state.class_queues == {"default": 2}
        ports = attach_ports(tmp_path, state)
        assert ports.settings.job_class("default").queues == 2
        api = Api(system.api_url, system.token("alice"))
        at = (datetime.now(UTC) + timedelta(seconds=6)).isoformat()
        jobs: list[str] = []
        while len(jobs) < 16 or {shard_of(job_id, SHARDS) for job_id in jobs} != set(range(SHARDS)):
            # at least 16, and more until every shard has one (random ids may leave a shard out of 16)
            jobs.append(submit(api, name=f"j{len(jobs)}", handler="demo.echo", schedule={"at": at})["jobId"])
            assert len(jobs) < 100
        assert {shard_of(job_id, SHARDS) for job_id in jobs} == set(range(SHARDS))
        # Before they are due, each queue holds the jobs of its shards
        queued = wait_for(
            lambda: d if sum(d := class_queue_depths(ports.queues)) >= len(jobs) else None, 5, what="queued"
        )
        expected = [sum(1 for j in jobs if shard_of(j, SHARDS) % 2 == index) for index in (0, 1)]
        # (at least: a pre-load cycle may send again what the API sent, a duplicate dropped at claim)
        assert all(expected) and all(q >= e for q, e in zip(queued, expected, strict=True)), (queued, expected)
        # Then every job runs once, on its first attempt, and both queues are empty
        for job_id in jobs:
            [run] = wait_terminal(api, job_id)
            assert (run["status"], run["attempt"]) == ("succeeded", 1), run
        wait_for(lambda: class_queue_depths(ports.queues) == [0, 0], 10, what="both queues empty")
        command_output(capsys)
        assert main(["audit", "--data-dir", str(tmp_path)]) == 0
    finally:
        system.stop()
