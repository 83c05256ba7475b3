"""What a run under a rate limit costs in AWS calls (issue 20), counted as tests/integration/test_call_counts.py
counts a run without one (which it pins unchanged: a job naming no limit pays nothing for the feature)."""

from __future__ import annotations

from collections import Counter

import pytest
from duetime.service import limits
from duetime.service.jobs import submit_job
from duetime.worker.runtime import Worker

from tests.integration.test_call_counts import Calls, one_off, run_next


@pytest.fixture
def calls(ports):
    return Calls(ports)


def test_a_run_under_a_limit_with_a_start_free_costs_two_reads_and_the_bucket_writes_more(ports, clock, calls):
    # Given a limit with starts free and a one-off job naming it, due within the dispatch horizon
    limits.put_limit(ports, "alice", "partner-api", 50, 100, None)
    worker = Worker(ports, "default", "w1", concurrency=1)
    submit_job(ports, "alice", one_off(clock, rateLimit="partner-api"))
    clock.advance(10)
    calls.reset()
    # When a worker runs it to success
    assert run_next(ports, worker) == "succeeded"
    # Then the run costs what a run without a limit costs, plus the limits record read and the bucket's write
    assert calls.calls == Counter(
        {
            "sqs:ReceiveMessage": 1,
            # the job, the owner's limits, and the finished row read back (the finish is the transaction
            # that completes the one-off job)
            "dynamodb:GetItem": 3,
            # The bucket is idle: its busy-bucket write is refused, then it restarts from now (under load the
            # first write takes the start: one), then the claim
            "dynamodb:UpdateItem": 3,
            "dynamodb:TransactWriteItems": 1,
            "sqs:DeleteMessage": 1,
        }
    )
    assert calls.execution_writes() == 2
    # Under load (the bucket busy, a start still free within the burst) the bucket costs one write
    calls.reset()
    now_ms = int(clock.now.timestamp() * 1000)
    assert ports.store.reserve_start("limitbucket#alice#partner-api", now_ms, 20.0, 100) == now_ms
    assert calls.calls == Counter({"dynamodb:UpdateItem": 1})


def test_a_run_held_back_by_its_limit_costs_a_send_and_a_delete_then_its_wait_is_recorded(ports, clock, calls):
    # Given a limit of one start a second whose start of this second is taken
    limits.put_limit(ports, "alice", "slow", 1, 0, None)
    worker = Worker(ports, "default", "w1", concurrency=1)
    submit_job(ports, "alice", one_off(clock, rateLimit="slow"))
    clock.advance(10)
    now_ms = int(clock.now.timestamp() * 1000)
    assert ports.store.reserve_start("limitbucket#alice#slow", now_ms, 1000.0, 0) == now_ms
    calls.reset()
    # When a worker receives the run, it reserves the next start and sends the message again for then
    assert run_next(ports, worker) == "limited"
    assert calls.calls == Counter(
        {
            "sqs:ReceiveMessage": 1,
            "dynamodb:GetItem": 2,  # the job, the owner's limits
            "dynamodb:UpdateItem": 1,  # the bucket: no attempt is spent, the row is not written
            "sqs:SendMessageBatch": 1,
            "sqs:DeleteMessage": 1,
        }
    )
    calls.reset()
    # And at its start it runs without a second reservation, recording its wait on the row
    clock.advance(1)
    assert run_next(ports, worker) == "succeeded"
    assert calls.calls == Counter(
        {
            "sqs:ReceiveMessage": 1,
            "dynamodb:GetItem": 3,  # the job, the owner's limits, the finished row read back
            "dynamodb:UpdateItem": 2,  # the claim, the wait
            "dynamodb:TransactWriteItems": 1,  # the finish, which completes the one-off job
            "sqs:DeleteMessage": 1,
        }
    )
    [row] = ports.store.executions_of_job(ports.store.list_jobs("alice", 1, None).items[0].job_id)
    assert row.attempt == 1 and row.waited_for_limit_ms == 1000
