"""Events of terminal runs and job changes: EventBridge on moto (read back through a rule to an SQS queue),
one PutEvents request per batch of terminal runs, refused entries counted, the console and webhook locally."""

from __future__ import annotations

import io
import json
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from duetime.adapters.aws.client import make_client
from duetime.api.auth import issue_token
from duetime.domain.events import DETAIL_TYPES, Event
from duetime.domain.models import JobSpec, format_time
from duetime.event_sinks import ConsoleEvents, EventBridgeEvents
from duetime.service.jobs import cancel_job, pause_job, resume_job, submit_job
from duetime.worker.runtime import Worker

from tests.conftest import BOTH_BACKENDS
from tests.integration.test_entry_points import (  # noqa: F401 (deployment: the fixture)
    SECRET,
    LambdaContext,
    deployment,
    sqs_event,
    submit,
)

BUS = "duetime-test-events"


class Bus:
    """An EventBridge bus on moto with a rule sending every duetime event to an SQS queue, and a count of
    the calls each client made by "service:Operation"."""

    def __init__(self, ports: Any) -> None:
        self.events = make_client("events", "us-east-1")
        self.sqs = make_client("sqs", "us-east-1")
        self.events.create_event_bus(Name=BUS)
        self.queue_url = self.sqs.create_queue(QueueName="events-read-back")["QueueUrl"]
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
        self.events.put_rule(Name="all", EventBusName=BUS, EventPattern=json.dumps({"source": ["duetime"]}))
        self.events.put_targets(
            Rule="all", EventBusName=BUS, Targets=[{"Id": "q", "Arn": attributes["Attributes"]["QueueArn"]}]
        )
        self.calls: Counter[str] = Counter()
        for client in (ports.store.client, ports.queues.client, self.events):
            client.meta.events.register("before-parameter-build.*.*", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[f"{model.service_model.service_id.hyphenize()}:{model.name}"] += 1

    def delivered(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        while True:
            messages = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get("Messages", [])
            if not messages:
                return found
            for message in messages:
                found.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])


@pytest.fixture
def bus(ports):
    return Bus(ports)


def every_minute(**extra: Any) -> JobSpec:
    """A recurring job (its runs end without ending the job, so a batch's events are the runs' alone)."""
    body = {"name": "e", "handler": "demo.echo", "schedule": {"cron": "* * * * *"}, "payload": {"secret": "s3cr3t"}}
    return JobSpec.model_validate({**body, **extra})


def run_batch(ports: Any, worker: Worker, n: int) -> list[str]:
    """Receive and run `n` messages as one SQS batch is run, then flush the batch's events (as the
    worker function does after its batch)."""
    batch = ports.queues.receive("default", n, 0, 30)
    assert len(batch) == n
    outcomes = [str(worker.process(received)) for received in batch]
    worker.flush_events()
    return outcomes


def test_a_batch_of_terminal_runs_adds_exactly_one_put_events_and_nothing_else(ports, clock, bus):
    # Given ten jobs due in the next minute, sent to the queue, and a worker without events
    for _ in range(10):
        submit_job(ports, "alice", every_minute())
    clock.advance(60)
    from duetime.service.dispatch import preload

    preload(ports, "p1")
    quiet = Worker(ports, "default", "w-quiet", concurrency=5)
    bus.calls.clear()
    # When five runs end with no event sink
    assert run_batch(ports, quiet, 5) == ["succeeded"] * 5
    without_events = Counter(bus.calls)
    # ...and five more with events on
    loud = Worker(replace(ports, events=EventBridgeEvents(bus.events, BUS)), "default", "w-loud", concurrency=5)
    bus.calls.clear()
    assert run_batch(ports, loud, 5) == ["succeeded"] * 5
    # Then events add one PutEvents request for the batch, and no other call (SQS's aside: how the two batches'
    # runs shared messages, adapters/aws/carriers.py, decides their receives and deletes)
    with_events = Counter({call: n for call, n in bus.calls.items() if not call.startswith("sqs:")})
    without_events = Counter({call: n for call, n in without_events.items() if not call.startswith("sqs:")})
    assert with_events - without_events == Counter({"eventbridge:PutEvents": 1})
    assert without_events - with_events == Counter()
    # And the five events arrive through the rule, each with its run's facts and never the payload
    delivered = bus.delivered()
    assert [e["detail-type"] for e in delivered] == ["Execution Succeeded"] * 5
    assert all(e["source"] == "duetime" for e in delivered)
    detail = delivered[0]["detail"]
    assert detail["owner"] == "alice" and detail["status"] == "succeeded" and detail["attempt"] == 1
    assert {"jobId", "executionId", "kind", "scheduledAt", "dueAt", "startedAt", "finishedAt", "latenessMs"} <= set(
        detail
    )
    assert detail["result"] == {"type": "object", "bytes": len('{"secret":"s3cr3t"}')}
    assert "s3cr3t" not in json.dumps(delivered)


def test_more_than_ten_events_go_in_requests_of_ten(ports, clock, bus):
    sink = EventBridgeEvents(bus.events, BUS)
    events = [Event("Execution Succeeded", clock.now, {"owner": "o", "executionId": f"x{i}"}) for i in range(23)]
    bus.calls.clear()
    sink.publish(events)
    assert bus.calls == Counter({"eventbridge:PutEvents": 3})  # ceil(23 / 10)
    assert len(bus.delivered()) == 23 and sink.failed == 0


def test_an_entry_eventbridge_refuses_is_counted_and_the_others_are_published(ports, clock, bus):
    class OneMalformed(EventBridgeEvents):
        def entry(self, event: Event) -> dict[str, Any]:
            entry = super().entry(event)
            return {**entry, "Detail": "not json"} if event.detail.get("bad") else entry

    counted: list[tuple[str, int]] = []
    sink = OneMalformed(bus.events, BUS, count_metric=lambda name, n: counted.append((name, n)))
    sink.publish([Event("Job Paused", clock.now, {"bad": True}), Event("Job Resumed", clock.now, {"owner": "o"})])
    assert sink.failed == 1 and counted == [("EventsFailed", 1)]
    assert [e["detail-type"] for e in bus.delivered()] == ["Job Resumed"]


def test_a_bus_that_is_gone_fails_no_run(ports, clock, bus):
    ports = replace(ports, events=EventBridgeEvents(bus.events, "no-such-bus"))
    worker = Worker(ports, "default", "w1", concurrency=1)
    submit_job(
        ports,
        "alice",
        JobSpec.model_validate(
            {"name": "t", "handler": "demo.echo", "schedule": {"at": format_time(clock.now + timedelta(seconds=10))}}
        ),
    )
    clock.advance(10)
    assert run_batch(ports, worker, 1) == ["succeeded"]
    assert worker.ports.events is not None and worker.event_buffer is not None
    assert isinstance(ports.events, EventBridgeEvents) and ports.events.failed >= 1


def test_job_changes_are_events_with_their_detail_types(ports, clock, bus):
    ports = replace(ports, events=EventBridgeEvents(bus.events, BUS))
    job, _ = submit_job(ports, "bob", every_minute())
    pause_job(ports, "bob", job.job_id, note="holiday")
    resume_job(ports, "bob", job.job_id)
    cancel_job(ports, "bob", job.job_id)
    delivered = bus.delivered()
    assert [e["detail-type"] for e in delivered] == ["Job Created", "Job Paused", "Job Resumed", "Job Cancelled"]
    assert delivered[1]["detail"]["note"] == "holiday" and delivered[1]["detail"]["status"] == "paused"
    assert {e["detail"]["jobId"] for e in delivered} == {job.job_id}
    assert all(e["detail-type"] in DETAIL_TYPES for e in delivered)


@BOTH_BACKENDS
def test_locally_a_run_that_failed_for_good_prints_on_the_console(ports, clock):
    console = io.StringIO()
    ports = replace(ports, events=ConsoleEvents(stream=console))
    worker = Worker(ports, "default", "w1", concurrency=1)
    at = format_time(clock.now + timedelta(seconds=10))
    spec = {"name": "f", "handler": "demo.fail", "payload": {"times": 5, "permanent": True}, "schedule": {"at": at}}
    submit_job(ports, "carol", JobSpec.model_validate(spec))
    clock.advance(10)
    [received] = ports.queues.receive("default", 1, 0, 30)
    assert worker.process(received) == "failed"
    worker.flush_events()
    lines = [line for line in console.getvalue().splitlines() if "Execution" in line]
    assert len(lines) == 1 and lines[0].startswith("[duetime] event Execution Failed: ")
    detail = json.loads(lines[0].split(": ", 1)[1])
    assert detail["owner"] == "carol" and "demo.fail: attempt 1" in detail["error"]


def test_the_worker_lambda_sends_its_batchs_events_in_one_put_events_request(deployment):  # noqa: F811
    events, sqs = make_client("events", "us-east-1"), make_client("sqs", "us-east-1")
    events.create_event_bus(Name=BUS)
    queue_url = sqs.create_queue(QueueName="events-read-back")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="all", EventBusName=BUS, EventPattern=json.dumps({"source": ["duetime"]}))
    events.put_targets(Rule="all", EventBusName=BUS, Targets=[{"Id": "q", "Arn": queue_arn}])
    api = deployment.load("api", DUETIME_JWT_SECRET=SECRET, DUETIME_EVENT_BUS_NAME=BUS)
    token = issue_token(SECRET, "alice")
    jobs = [submit(api, token, datetime.now(UTC) - timedelta(seconds=1)) for _ in range(3)]
    worker = deployment.load("worker", DUETIME_JOB_CLASS="default", DUETIME_EVENT_BUS_NAME=BUS)
    calls: Counter[str] = Counter()
    worker.PORTS.events.client.meta.events.register(
        "before-parameter-build.*.*", lambda model, **_: calls.update([model.name])
    )
    event = sqs_event(deployment, "default")
    assert len(event["Records"]) == 3
    assert worker.handler(event, LambdaContext("ep-worker-default")) == {"batchItemFailures": []}
    assert calls == Counter({"PutEvents": 1})
    messages = []
    while batch := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
        messages += [json.loads(m["Body"]) for m in batch]
        for m in batch:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
    kinds = Counter(m["detail-type"] for m in messages)
    # Each one-off job completes with its run, in the same batch's PutEvents
    assert kinds == Counter({"Job Created": 3, "Execution Succeeded": 3, "Job Completed": 3})
    succeeded = {m["detail"]["jobId"] for m in messages if m["detail-type"] == "Execution Succeeded"}
    assert succeeded == {job["jobId"] for job in jobs}


@BOTH_BACKENDS
def test_locally_events_are_posted_to_the_events_webhook_signed(ports, clock, tmp_path):
    from duetime.adapters.aws.secrets import FileSecrets
    from duetime.definitions import LOCAL_EVENTS_SIGNER
    from duetime.targets.webhook import WebhookTarget

    from tests.webhook_receiver import receiver

    secrets = FileSecrets(tmp_path)
    with receiver(secrets.secret_for) as hook:
        sink = ConsoleEvents(webhook_url=hook.url, webhooks=WebhookTarget(secrets, allow_loopback=True), echo=False)
        ports = replace(ports, events=sink)
        job, _ = submit_job(ports, "dana", every_minute())
        pause_job(ports, "dana", job.job_id)
    assert [r.json["detail-type"] for r in hook.requests] == ["Job Created", "Job Paused"]
    assert all(r.verified and r.headers["Duetime-Owner"] == LOCAL_EVENTS_SIGNER for r in hook.requests)
    assert len({r.headers["Idempotency-Key"] for r in hook.requests}) == 2 and sink.failed == 0


def test_an_events_webhook_that_is_down_fails_nothing(ports, clock, tmp_path):
    from duetime.adapters.aws.secrets import FileSecrets
    from duetime.targets.webhook import WebhookTarget

    webhooks = WebhookTarget(FileSecrets(tmp_path), allow_loopback=True)
    sink = ConsoleEvents(stream=io.StringIO(), webhook_url="http://127.0.0.1:9/nobody", webhooks=webhooks)
    job, created = submit_job(replace(ports, events=sink), "dana", every_minute())
    assert created and sink.failed == 1 and [e.detail_type for e in sink.published] == ["Job Created"]
