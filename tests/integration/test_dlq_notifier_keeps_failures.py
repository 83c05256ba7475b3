"""The DLQ notifier Lambda (functions/dlq_notifier) on moto: telling the owner leaves the failed execution in
DynamoDB, with its error, and puts it in the owner's dead letters (GET /dead-letters), where it can be retried."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from duetime.adapters.aws.client import make_client
from duetime.domain.models import ExecutionStatus, Job, JobSpec
from duetime.service import executions as cases
from duetime.service.dispatch import new_execution
from duetime.service.redrive import retry_execution

from tests.integration.test_entry_points import LambdaContext, deployment  # noqa: F401 (the fixture)


def test_the_notifier_tells_the_owner_and_the_failure_stays_queryable_with_its_error(deployment):  # noqa: F811
    topic = make_client("sns", "us-east-1").create_topic(Name="ep-alerts")["TopicArn"]
    notifier = deployment.load("dlq_notifier", DUETIME_ALERT_TOPIC_ARN=topic)
    ports = notifier.PORTS
    now = datetime.now(UTC).replace(microsecond=0)
    spec = JobSpec.model_validate(
        {"name": "n", "handler": "demo.echo", "schedule": {"at": now}, "retry": {"maxAttempts": 1}}
    )
    job = Job(**spec.model_dump(), job_id="j_00000000000000d1", owner="olga", created_at=now, updated_at=now)
    execution = new_execution(job, now)
    ports.store.create_job(job, execution)
    key = ports.store.key_of(execution)
    ports.store.claim(key, "w1", now, now + timedelta(seconds=30))
    failed = cases.complete(ports, key, 1, succeeded=False, error="the vendor said no", job=job)
    assert failed.status == ExecutionStatus.FAILED
    # The notifier drains the failure notice and tells the owner
    assert notifier.handler({"source": "aws.events"}, LambdaContext("ep-dlq-notifier"))["default"] == 1
    # The row is still there, failed, with its error and attempts: told, not deleted
    row = ports.store.find_execution(job.job_id, execution.execution_id)
    assert (row.status, row.error, row.attempt) == (ExecutionStatus.FAILED, "the vendor said no", 1)
    assert [e.execution_id for e in ports.store.list_dead_letters("olga", 10, None).items] == [execution.execution_id]
    # ...so its owner can retry it
    assert retry_execution(ports, "olga", execution.execution_id).status == ExecutionStatus.SCHEDULED
    assert ports.store.list_dead_letters("olga", 10, None).items == []


def test_an_invocation_stops_before_a_dead_letter_it_may_not_have_the_time_to_finish(deployment):  # noqa: F811
    # Issue 29: the notifier drained until the DLQ was empty whatever its time left; a backlog got it killed at
    # its timeout mid-batch, and the next run told again what it had told.
    topic = make_client("sns", "us-east-1").create_topic(Name="ep-alerts")["TopicArn"]
    notifier = deployment.load("dlq_notifier", DUETIME_ALERT_TOPIC_ARN=topic)
    sqs = make_client("sqs", "us-east-1")
    dlq = deployment.queues.dlq_urls["default"]
    for n in range(5):
        body = {"kind": "paused", "owner": "olga", "jobId": f"j_{n:016x}", "jobName": f"job {n}"}
        sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps(body))
    told = notifier.PORTS.notifier.sent  # every notice the owner notifier was handed

    class Invocation(LambdaContext):
        """Time passes as notices go out: each one takes 10 s of the invocation's time, so three fit before
        less than one notice's longest time is left."""

        def get_remaining_time_in_millis(self) -> int:
            return int((notifier.NOTICE_AT_MOST_SECONDS + 10 * (3 - len(told))) * 1000)

    assert notifier.handler({"source": "aws.events"}, Invocation("ep-dlq-notifier"))["default"] == 3
    assert len(told) == 3
    # The other two are still on the DLQ (received, not deleted): the next run tells them, once.
    attributes = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["All"])["Attributes"]
    left = int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])
    assert left == 2
