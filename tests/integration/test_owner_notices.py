"""Owners' failure destinations: a job's `notify.onFailure` (a webhook, an SNS topic the owner owns, a mail
address) hears of its runs that failed for good and of its automatic pause; the operator's topic does not."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.secrets import FileSecrets
from duetime.domain.destinations import owner_email_topic_name
from duetime.domain.errors import InvalidInput
from duetime.domain.models import JobSpec, format_time
from duetime.notify import OwnerNotifier
from duetime.service.deadletters import drain_dead_letters
from duetime.service.jobs import get_job, submit_job
from duetime.targets.webhook import WebhookTarget
from duetime.worker.runtime import Worker
from pydantic import ValidationError

from tests.integration.test_entry_points import LambdaContext, deployment  # noqa: F401 (the fixture)
from tests.webhook_receiver import receiver

OWNER_TOPIC = "arn:aws:sns:us-east-1:123456789012:duetime-notify-alice"


def subscribed_queue(sns: Any, sqs: Any, topic_arn: str, name: str) -> str:
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
    return str(queue_url)


def drained(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


def failing_job(clock: Any, notify: dict[str, Any] | None, **extra: Any) -> JobSpec:
    body = {
        "name": "nightly-export",
        "handler": "demo.fail",
        "payload": {"times": 99, "permanent": True, "token": "s3cr3t"},
        "schedule": {"at": format_time(clock.now + timedelta(seconds=10))},
        "retry": {"maxAttempts": 1},
        **extra,
    }
    if notify is not None:
        body["notify"] = notify
    return JobSpec.model_validate(body)


def run_once(ports: Any, clock: Any) -> str:
    clock.advance(10)
    [received] = ports.queues.receive("default", 1, 0, 30)
    return str(Worker(ports, "default", "w1", concurrency=1).process(received))


@pytest.fixture
def notifier_on_moto(ports, tmp_path):
    ports.settings = replace(ports.settings, allow_loopback_webhooks=True)
    webhooks = WebhookTarget(FileSecrets(tmp_path), allow_loopback=True)
    notifier = OwnerNotifier(make_client("sns", "us-east-1"), webhooks, "duetime")
    ports.notifier = notifier
    return notifier


def test_a_failure_reaches_each_of_the_owners_destinations_and_only_those(ports, clock, notifier_on_moto, tmp_path):
    sns, sqs = make_client("sns", "us-east-1"), make_client("sqs", "us-east-1")
    sns.create_topic(Name="duetime-notify-alice")
    owner_queue = subscribed_queue(sns, sqs, OWNER_TOPIC, "alice-inbox")
    secret = FileSecrets(tmp_path).secret_for("alice")
    with receiver(lambda owner: FileSecrets(tmp_path).secret_for(owner)) as hook:
        notify = {"onFailure": [{"webhook": hook.url}, {"snsTopicArn": OWNER_TOPIC}, {"email": "alice@example.com"}]}
        job, _ = submit_job(ports, "alice", failing_job(clock, notify))
        # Another owner's failing job names no destination
        submit_job(ports, "bob", failing_job(clock, None))
        clock.advance(10)
        worker = Worker(ports, "default", "w1", concurrency=2)
        for received in ports.queues.receive("default", 2, 0, 30):
            assert worker.process(received) == "failed"
        assert drain_dead_letters(ports, "default") == 2
    # The webhook got one signed POST, verified with alice's secret, with the failure and never the payload
    [request] = hook.requests
    assert request.verified and secret
    assert request.json["subject"].startswith("duetime: execution ") and request.json["jobId"] == job.job_id
    assert "demo.fail" in request.json["error"] and "s3cr3t" not in request.body.decode()
    assert not {"pk", "sk", "notify"} & set(request.json)
    # The owner's topic got it
    [published] = drained(sqs, owner_queue)
    assert published["jobId"] == job.job_id and published["owner"] == "alice"
    # The mail went through alice's own topic, which the notifier made, with her address subscribed
    mail_topic = sns.create_topic(Name=owner_email_topic_name("duetime", "alice"))["TopicArn"]
    subscriptions = sns.list_subscriptions_by_topic(TopicArn=mail_topic)["Subscriptions"]
    assert [(s["Protocol"], s["Endpoint"]) for s in subscriptions] == [("email", "alice@example.com")]
    from moto.sns.models import sns_backends

    sent = sns_backends["123456789012"]["us-east-1"].topics[mail_topic].sent_notifications
    assert len(sent) == 1 and json.loads(sent[0][1])["jobId"] == job.job_id
    # Bob's failure was told to nobody but counted
    assert notifier_on_moto.take_counts() == {"delivered": 3, "withoutDestination": 1}


def test_a_destination_that_fails_is_counted_and_the_others_still_hear(ports, clock, notifier_on_moto):
    sns, sqs = make_client("sns", "us-east-1"), make_client("sqs", "us-east-1")
    sns.create_topic(Name="duetime-notify-alice")
    owner_queue = subscribed_queue(sns, sqs, OWNER_TOPIC, "alice-inbox")
    gone = "arn:aws:sns:us-east-1:123456789012:duetime-notify-deleted"
    submit_job(ports, "alice", failing_job(clock, {"onFailure": [{"snsTopicArn": gone}, {"snsTopicArn": OWNER_TOPIC}]}))
    assert run_once(ports, clock) == "failed"
    assert drain_dead_letters(ports, "default") == 1
    assert len(drained(sqs, owner_queue)) == 1
    assert notifier_on_moto.take_counts() == {"failed": 1, "delivered": 1}


def test_an_automatic_pause_is_told_at_the_owners_destinations(ports, clock, notifier_on_moto):
    sns, sqs = make_client("sns", "us-east-1"), make_client("sqs", "us-east-1")
    sns.create_topic(Name="duetime-notify-alice")
    owner_queue = subscribed_queue(sns, sqs, OWNER_TOPIC, "alice-inbox")
    # A repeating job: a one-off job's failed run completes it (there is nothing left to pause)
    hourly = {"every": "1h", "startAt": format_time(clock.now + timedelta(seconds=10))}
    notify = {"onFailure": [{"snsTopicArn": OWNER_TOPIC}]}
    job, _ = submit_job(ports, "alice", failing_job(clock, notify, pauseAfterFailures=1, schedule=hourly))
    assert run_once(ports, clock) == "failed"
    assert get_job(ports, "alice", job.job_id).job.status == "paused"
    assert drain_dead_letters(ports, "default") == 2  # the failure, then the pause
    told = drained(sqs, owner_queue)
    assert sorted(m["kind"] for m in told) == ["failed", "paused"]
    [paused] = [m for m in told if m["kind"] == "paused"]
    assert paused["subject"] == "duetime: job nightly-export paused" and "consecutive" in paused["note"]


@pytest.mark.parametrize(
    ("destination", "field", "words"),
    [
        ({"snsTopicArn": "arn:aws:sns:us-east-1:123456789012:billing-alarms"}, "snsTopicArn", "duetime-notify-"),
        ({"snsTopicArn": "not-an-arn"}, "snsTopicArn", "SNS topic ARN"),
        ({"email": "nobody"}, "email", "address"),
        ({"email": "a@b.co", "webhook": "https://example.com/x"}, "", "exactly one"),
        ({"pager": "123"}, "pager", "Extra inputs"),
    ],
)
def test_a_bad_destination_is_refused_naming_it(clock, destination, field, words):
    with pytest.raises(ValidationError) as refused:
        failing_job(clock, {"onFailure": [destination]})
    [error] = refused.value.errors()
    assert error["loc"][:3] == ("notify", "onFailure", 0) and words in error["msg"]
    assert field in ".".join(str(p) for p in error["loc"])


def test_more_than_five_destinations_are_refused(clock):
    with pytest.raises(ValidationError, match="at most 5"):
        failing_job(clock, {"onFailure": [{"email": f"a{i}@b.co"} for i in range(6)]})


@pytest.mark.parametrize("url", ["https://10.0.0.7/hook", "https://169.254.169.254/", "http://127.0.0.1:9/x"])
def test_a_private_webhook_destination_is_refused_at_submit_on_aws(ports, clock, url):
    with pytest.raises(InvalidInput) as refused:
        submit_job(ports, "alice", failing_job(clock, {"onFailure": [{"webhook": url}]}))
    assert refused.value.field == "notify.onFailure[0].webhook"


def test_the_dlq_notifier_lambda_tells_the_owner_and_the_operator_only_an_aggregate(deployment):  # noqa: F811
    from datetime import UTC, datetime

    from duetime.domain.models import Job
    from duetime.service import executions as cases
    from duetime.service.dispatch import new_execution

    sns, sqs = make_client("sns", "us-east-1"), make_client("sqs", "us-east-1")
    operator_topic = sns.create_topic(Name="ep-alerts")["TopicArn"]
    operator_queue = subscribed_queue(sns, sqs, operator_topic, "operator-inbox")
    sns.create_topic(Name="duetime-notify-alice")
    owner_queue = subscribed_queue(sns, sqs, OWNER_TOPIC, "alice-inbox")
    grants = [{"owners": ["*"], "handlers": ["demo.*"]}, {"owners": ["alice"], "handlers": [f"sns:{OWNER_TOPIC}"]}]
    notifier = deployment.load(
        "dlq_notifier", DUETIME_ALERT_TOPIC_ARN=operator_topic, DUETIME_HANDLER_GRANTS=json.dumps(grants)
    )
    ports = notifier.PORTS
    now = datetime.now(UTC).replace(microsecond=0)
    spec = JobSpec.model_validate(
        {
            "name": "n",
            "handler": "demo.echo",
            "schedule": {"at": now},
            "retry": {"maxAttempts": 1},
            "notify": {"onFailure": [{"snsTopicArn": OWNER_TOPIC}]},
        }
    )
    job = Job(**spec.model_dump(), job_id="j_00000000000000e1", owner="alice", created_at=now, updated_at=now)
    execution = new_execution(job, now)
    ports.store.create_job(job, execution)
    key = ports.store.key_of(execution)
    ports.store.claim(key, "w1", now, now + timedelta(seconds=30))
    cases.complete(ports, key, 1, succeeded=False, error="the vendor said no", job=job)
    # When the notifier runs as Lambda invokes it
    assert notifier.handler({"source": "aws.events"}, LambdaContext("ep-dlq-notifier"))["default"] == 1
    # Then the owner's topic has the failure
    [told] = drained(sqs, owner_queue)
    assert told["executionId"] == execution.execution_id and told["error"] == "the vendor said no"
    # And the operator's topic one aggregate, naming no tenant's execution or error
    [aggregate] = drained(sqs, operator_queue)
    assert aggregate == {"handled": {"default": 1, "long": 0}, "told": {"delivered": 1}}


# --- destinations are granted as handlers are ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("destination", "field"),
    [
        ({"webhook": "https://hooks.example.com/not-granted"}, "notify.onFailure[0].webhook"),
        ({"snsTopicArn": OWNER_TOPIC}, "notify.onFailure[0].snsTopicArn"),
        ({"email": "anyone@example.com"}, "notify.onFailure[0].email"),
    ],
)
def test_a_destination_outside_the_owners_grants_is_403_at_create_and_edit(ports, clock, destination, field):
    from duetime.domain.errors import Forbidden
    from duetime.domain.grants import Grants
    from duetime.service.edit import edit_job

    ports.grants = Grants.parse([{"owners": ["*"], "handlers": ["demo.*"]}])
    with pytest.raises(Forbidden) as refused:
        submit_job(ports, "alice", failing_job(clock, {"onFailure": [destination]}))
    assert refused.value.field == field
    job, _ = submit_job(ports, "alice", failing_job(clock, None))
    with pytest.raises(Forbidden) as refused:
        edit_job(ports, "alice", job.job_id, job.version, {"notify": {"onFailure": [destination]}})
    assert refused.value.field == field


def test_each_kind_of_destination_is_granted_by_its_own_name(ports, clock):
    from duetime.domain.grants import Grants

    ports.grants = Grants.parse(
        [
            {"owners": ["*"], "handlers": ["demo.*"]},
            {
                "owners": ["group:ops"],
                "handlers": ["https://hooks.example.com/ops/*", "sns:*:duetime-notify-alice", "email:*@example.com"],
            },
        ]
    )
    notify = {
        "onFailure": [
            {"webhook": "https://hooks.example.com/ops/x"},
            {"snsTopicArn": OWNER_TOPIC},
            {"email": "Alice@EXAMPLE.com"},  # the domain compares in lower case
        ]
    }
    job, created = submit_job(ports, "alice", failing_job(clock, notify), groups=["ops"])
    assert created and job.notify is not None and len(job.notify.on_failure) == 3


@pytest.mark.parametrize("backend", ["moto", "sqlite"], indirect=True)
def test_a_destination_no_longer_granted_is_not_delivered_to(ports, clock, tmp_path):
    from duetime.domain.grants import Grants

    ports.settings = replace(ports.settings, allow_loopback_webhooks=True)
    with receiver(lambda owner: FileSecrets(tmp_path).secret_for(owner)) as hook:
        granted = Grants.parse([{"owners": ["*"], "handlers": ["demo.*"]}, {"owners": ["alice"], "handlers": ["*"]}])
        ports.grants = granted
        submit_job(ports, "alice", failing_job(clock, {"onFailure": [{"webhook": hook.url}]}))
        # The grant is withdrawn before the run fails: the notifier, configured as the API is, refuses it
        withdrawn = Grants.parse([{"owners": ["*"], "handlers": ["demo.*"]}])
        ports.notifier = notifier = OwnerNotifier(
            None, WebhookTarget(FileSecrets(tmp_path), allow_loopback=True), "duetime", grants=withdrawn
        )
        assert run_once(ports, clock) == "failed"
        assert drain_dead_letters(ports, "default") == 1
        assert hook.requests == []
        assert notifier.take_counts() == {"notGranted": 1}


def test_a_destination_granted_through_a_group_is_delivered_with_the_jobs_groups(ports, clock, notifier_on_moto):
    from duetime.domain.grants import Grants

    sns, sqs = make_client("sns", "us-east-1"), make_client("sqs", "us-east-1")
    sns.create_topic(Name="duetime-notify-alice")
    owner_queue = subscribed_queue(sns, sqs, OWNER_TOPIC, "alice-inbox")
    ports.grants = notifier_on_moto.grants = Grants.parse(
        [{"owners": ["*"], "handlers": ["demo.*"]}, {"owners": ["group:ops"], "handlers": [f"sns:{OWNER_TOPIC}"]}]
    )
    submit_job(ports, "alice", failing_job(clock, {"onFailure": [{"snsTopicArn": OWNER_TOPIC}]}), groups=["ops"])
    assert run_once(ports, clock) == "failed"
    assert drain_dead_letters(ports, "default") == 1
    [told] = drained(sqs, owner_queue)
    assert "ownerGroups" not in told  # the notifier's own field, not the owner's news
    assert notifier_on_moto.take_counts() == {"delivered": 1}
