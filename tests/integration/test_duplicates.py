"""Duplicate due messages of a running execution: deleted at once, never redriven, never failing the run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.provision import create_queues, create_tables
from duetime.adapters.aws.queue import DueMessage, DueQueues
from duetime.adapters.aws.store import DynamoStore
from duetime.definitions import Settings
from duetime.domain.models import ExecutionStatus, JobSpec, format_time
from duetime.notify import ConsoleNotifier
from duetime.service import executions as cases
from duetime.service.context import Ports, utc_now
from duetime.service.deadletters import drain_dead_letters
from duetime.service.dispatch import preload, reconcile_after
from duetime.service.jobs import pause_job, resume_job, submit_job
from duetime.worker.observe import CountingObserver
from duetime.worker.runtime import RunRecord, Worker

from tests.integration.succeeded import worker_loop

# On the real clock: a heartbeat (every third of the lease) must get through before the lease ends, on a loaded
# 2-core machine where this process runs at a lower priority beside a dozen others (a 2 s lease and then a 5 s
# one were lost there, the run taken over): a 10 s lease, and a receive limit of 2 to keep the run short
LEASE_SECONDS = 10
MAX_RECEIVES = 2  # the queue's maxReceiveCount here; the run lasts longer than MAX_RECEIVES leases


@pytest.fixture
def real_time_ports() -> Iterator[Ports]:
    """moto with the real clock (SQS visibility runs on it) and a redrive after MAX_RECEIVES receives."""
    from moto import mock_aws

    settings = Settings(shards=4, preload_interval_seconds=5, preload_window_seconds=30)
    settings = settings.with_lease_seconds(LEASE_SECONDS)
    with mock_aws():
        dynamodb, sqs = make_client("dynamodb", "us-east-1"), make_client("sqs", "us-east-1")
        create_tables(dynamodb, settings)
        create_queues(sqs, settings)
        queues = DueQueues.resolve(sqs, settings, max_delay_seconds=0)
        dlq_arn = sqs.get_queue_attributes(QueueUrl=queues.dlq_urls["long"], AttributeNames=["QueueArn"])
        redrive = {"deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"], "maxReceiveCount": MAX_RECEIVES}
        sqs.set_queue_attributes(QueueUrl=queues.queue_urls["long"], Attributes={"RedrivePolicy": json.dumps(redrive)})
        yield Ports(
            store=DynamoStore(dynamodb, settings),
            queues=queues,
            settings=settings,
            notifier=ConsoleNotifier(),
            clock=utc_now,
        )


def test_a_long_run_with_duplicate_messages_succeeds_once_and_the_drain_never_fails_it(real_time_ports):
    ports = real_time_ports
    run_seconds = MAX_RECEIVES * LEASE_SECONDS + 3
    spec = JobSpec.model_validate(
        {
            "name": "long",
            "handler": "demo.sleep",
            "payload": {"seconds": run_seconds},
            "jobClass": "long",
            "schedule": {"at": format_time(utc_now())},
        }
    )
    job, _ = submit_job(ports, "alice", spec)
    [execution] = ports.store.executions_of_job(job.job_id)
    duplicate = DueMessage.for_execution(execution, ports.store.key_of(execution))
    runs: list[RunRecord] = []
    worker = Worker(ports, "long", "w1", concurrency=3, on_run=runs.append, observer=CountingObserver())
    with worker_loop(worker):
        deadline = time.monotonic() + run_seconds + 20
        sent_duplicates = 0
        while time.monotonic() < deadline:
            row = ports.store.get_execution(duplicate.key)
            if row is not None and row.status.is_terminal:
                break
            if row is not None and row.status == ExecutionStatus.RUNNING and sent_duplicates < 4:
                ports.queues.send([duplicate], utc_now())  # SQS delivered it twice, or the reconciler resent it
                sent_duplicates += 1
            drain_dead_letters(ports, "long")  # the DLQ notifier runs all along
            time.sleep(1)
    row = ports.store.get_execution(duplicate.key)
    assert sent_duplicates == 4
    assert row is not None and row.status == ExecutionStatus.SUCCEEDED and row.attempt == 1
    assert [r.outcome for r in runs] == ["succeeded"]
    assert drain_dead_letters(ports, "long") == 0 and ports.notifier.sent == []
    # And nothing is left on the queue to come back later
    assert ports.queues.receive("long", 10, 0, 0) == []


def test_a_duplicate_is_told_to_go_away_while_another_worker_holds_a_live_lease(ports, clock):
    spec = JobSpec.model_validate(
        {"name": "t", "handler": "demo.echo", "schedule": {"at": format_time(clock.now + timedelta(seconds=5))}}
    )
    job, _ = submit_job(ports, "alice", spec)
    [execution] = ports.store.executions_of_job(job.job_id)
    message = DueMessage.for_execution(execution, ports.store.key_of(execution))
    clock.advance(5)
    assert cases.claim_execution(ports, message, "w1").verdict == cases.ClaimVerdict.CLAIMED
    duplicate = cases.claim_execution(ports, message, "w2")
    assert duplicate.verdict == cases.ClaimVerdict.DONE and duplicate.execution.worker_id == "w1"


def test_the_drain_never_fails_a_redriven_execution_whose_lease_is_live(ports, clock):
    spec = JobSpec.model_validate(
        {"name": "t", "handler": "demo.echo", "schedule": {"at": format_time(clock.now + timedelta(seconds=5))}}
    )
    job, _ = submit_job(ports, "alice", spec)
    [execution] = ports.store.executions_of_job(job.job_id)
    message = DueMessage.for_execution(execution, ports.store.key_of(execution))
    clock.advance(5)
    assert cases.claim_execution(ports, message, "w1").verdict == cases.ClaimVerdict.CLAIMED
    # A duplicate that SQS redrove (received too often) reaches the DLQ while w1 still runs it
    ports.queues.client.send_message(QueueUrl=ports.queues.dlq_urls["default"], MessageBody=message.to_body())
    assert drain_dead_letters(ports, "default") == 1
    row = ports.store.get_execution(message.key)
    assert row.status == ExecutionStatus.RUNNING and ports.notifier.sent == []
    # Once its lease is long over with no heartbeat (its worker is lost), a redriven message fails it
    clock.advance(3600)
    ports.queues.client.send_message(QueueUrl=ports.queues.dlq_urls["default"], MessageBody=message.to_body())
    assert drain_dead_letters(ports, "default") == 1
    assert ports.store.get_execution(message.key).status == ExecutionStatus.FAILED


def test_a_catch_up_run_redriven_while_it_waits_its_turn_is_sent_again_not_failed(ports, clock):
    # Given a forbid job paused past three slots, resumed with catch-up all, its first run going
    body = {"name": "c", "handler": "demo.echo", "schedule": {"cron": "* * * * *"}, "catchUp": "all"}
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    pause_job(ports, "alice", job.job_id)
    clock.advance(3 * 60 + 30)
    resume_job(ports, "alice", job.job_id)
    now_ms = int(clock.now.timestamp() * 1000)
    waiting = []
    while batch := ports.queues.receive("default", 10, 0, 900):
        waiting += [r for r in batch if r.message.due_ms <= now_ms]
    first, second = waiting[0], waiting[1]
    assert second.message.kind == "catchup"
    assert cases.claim_execution(ports, first.message, "w1").verdict == cases.ClaimVerdict.CLAIMED
    # When SQS redrives the second (received too often while it waited its turn)
    ports.queues.client.send_message(QueueUrl=ports.queues.dlq_urls["default"], MessageBody=second.message.to_body())
    assert drain_dead_letters(ports, "default") == 1
    # Then it still waits, nobody was told of a failure, and the reconciler sends it again once overdue
    assert ports.store.get_execution(second.message.key).status == ExecutionStatus.SCHEDULED
    assert ports.notifier.sent == []
    clock.advance(reconcile_after(ports).total_seconds() + 1)
    cases.heartbeat(ports, first.message.key, 1)  # the first run is still going
    preload(ports, "p")
    resent = []
    while batch := ports.queues.receive("default", 10, 0, 900):
        resent += [r.message.execution_id for r in batch]
    assert second.message.execution_id in resent
    # And once nothing runs beside it, a redriven message is poison again: it fails
    cases.complete(ports, first.message.key, 1, succeeded=True)
    ports.queues.client.send_message(QueueUrl=ports.queues.dlq_urls["default"], MessageBody=second.message.to_body())
    drain_dead_letters(ports, "default")
    assert ports.store.get_execution(second.message.key).status == ExecutionStatus.FAILED
