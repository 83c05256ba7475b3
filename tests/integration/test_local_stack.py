"""`duetime local --backend moto` runs on the tables, queues and alert topic (with its policy) of the synthesized
template, created as `cdk deploy` creates them (duetime.local.backends.create_local_stack over
duetime.local.template_stack): a property set only in the template is what runs locally, under the local prefix,
with a class spread over the queues `--class-queues` gives it; a template that lacks a table or queue the local
settings name stops the start."""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from duetime.adapters.aws.client import make_client
from duetime.definitions import DLQ_RETENTION_SECONDS, TABLES
from duetime.local.backends import MOTO, LocalBackend, local_settings, start_backend
from duetime.local.synth import template

REGION = "us-east-1"
# A DLQ retention no hand-made look-alike gives (duetime.adapters.aws.provision: DLQ_RETENTION_SECONDS).
CHANGED_RETENTION = 7200


@pytest.fixture(scope="module")
def synthesized() -> dict[str, Any]:
    return template()  # kept under build/synth/ for these sources (`make test` synthesizes it first)


def _of_queue(raw: dict[str, Any], name: str) -> dict[str, Any]:
    [properties] = [
        r["Properties"]
        for r in raw["Resources"].values()
        if r["Type"] == "AWS::SQS::Queue" and r["Properties"]["QueueName"] == name
    ]
    return properties  # the template's own: a change to it is a change to the template


@pytest.fixture(scope="module")
def backend(synthesized: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBackend]:
    """A moto backend under a prefix of its own, the `default` class on 3 queues, from the synthesized template
    with the `default` class's DLQ retention changed."""
    changed = copy.deepcopy(synthesized)
    _of_queue(changed, "duetime-dlq-default")["MessageRetentionPeriod"] = CHANGED_RETENTION
    prefix = f"wire{secrets.token_hex(3)}"
    settings = local_settings(MOTO, prefix, shards=2, lease_seconds=5, class_queues={"default": 3})
    started = start_backend(
        MOTO, tmp_path_factory.mktemp("stack"), settings, moto_in_process=True, stack_template=changed
    )
    yield started
    started.stop()


def _client(backend: LocalBackend, service: str) -> Any:
    return make_client(service, REGION, backend.endpoint_url)


def test_the_tables_have_the_template_ttl_recovery_and_encryption(synthesized, backend):
    dynamodb, settings = _client(backend, "dynamodb"), backend.ports.settings
    by_name = {
        r["Properties"]["TableName"].removeprefix("duetime-"): r["Properties"]
        for r in synthesized["Resources"].values()
        if r["Type"] == "AWS::DynamoDB::Table"
    }
    assert set(by_name) == {t.logical_name for t in TABLES}
    for table in TABLES:
        name, properties = settings.table_name(table), by_name[table.logical_name]
        described = dynamodb.describe_table(TableName=name)["Table"]
        assert described["SSEDescription"]["Status"] == "ENABLED"
        assert described["DeletionProtectionEnabled"] is properties["DeletionProtectionEnabled"]
        ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        expected = properties.get("TimeToLiveSpecification")
        assert (ttl.get("AttributeName"), ttl["TimeToLiveStatus"]) == (
            (expected["AttributeName"], "ENABLED") if expected else (None, "DISABLED")
        )
        backups = dynamodb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
        assert backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"


def test_the_queues_are_the_template_ones_each_of_a_spread_class_redriven_to_its_dlq(synthesized, backend):
    sqs, settings = _client(backend, "sqs"), backend.ports.settings
    default = settings.job_class("default")
    dlq_url = sqs.get_queue_url(QueueName=default.dlq_name(settings.prefix))["QueueUrl"]
    dlq = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["All"])["Attributes"]
    # The template's retention, not the hand-made one: the local DLQ is the template's
    assert CHANGED_RETENTION != DLQ_RETENTION_SECONDS
    assert int(dlq["MessageRetentionPeriod"]) == CHANGED_RETENTION
    template_due = _of_queue(synthesized, default.queue_name("duetime"))
    assert default.queues == 3
    for name in default.queue_names(settings.prefix):
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        redrive = json.loads(attributes["RedrivePolicy"])
        assert redrive["deadLetterTargetArn"] == dlq["QueueArn"], name
        assert int(redrive["maxReceiveCount"]) == template_due["RedrivePolicy"]["maxReceiveCount"]
        assert int(attributes["VisibilityTimeout"]) == template_due["VisibilityTimeout"]
        assert attributes["SqsManagedSseEnabled"] == "true"
        # Its TLS-only queue policy, naming the queue itself
        [statement] = json.loads(attributes["Policy"])["Statement"]
        assert (statement["Effect"], statement["Resource"]) == ("Deny", attributes["QueueArn"])
    # Every queue and table is named with the local prefix; nothing with the template's
    names = [u.rsplit("/", 1)[1] for u in sqs.list_queues(QueueNamePrefix=settings.prefix)["QueueUrls"]]
    assert len(names) == 3 + 1 + 2  # default's three and DLQ, long's queue and DLQ
    assert backend.stack is not None
    assert not [n for n in backend.stack.physical_ids().values() if "duetime-" in n]
    # Not the roles: the moto server checks their policies itself (moto's IAM is never asked)
    assert not backend.stack.of_type("AWS::IAM::Role")


def test_the_alert_topic_is_the_template_one_under_the_local_prefix(backend):
    assert backend.stack is not None
    [topic] = backend.stack.of_type("AWS::SNS::Topic").values()
    assert topic.ref.endswith(f":{backend.ports.settings.prefix}-alerts")
    attributes = _client(backend, "sns").get_topic_attributes(TopicArn=topic.ref)["Attributes"]
    # Its key, by the ARN the template names (no key is made locally: nothing encrypts there)
    [key_id] = [k for k, r in backend.stack.template["Resources"].items() if r["Type"] == "AWS::KMS::Key"]
    assert attributes["KmsMasterKeyId"] == backend.stack.get_att(key_id, "Arn")
    assert not backend.stack.of_type("AWS::KMS::Key")
    # Its policy, the template's
    [policy] = [r for r in backend.stack.template["Resources"].values() if r["Type"] == "AWS::SNS::TopicPolicy"]
    assert json.loads(attributes["Policy"]) == backend.stack.resolve(policy["Properties"]["PolicyDocument"])


def test_a_template_without_a_queue_the_settings_name_stops_the_start(synthesized, tmp_path: Path):
    lacking = copy.deepcopy(synthesized)
    _of_queue(lacking, "duetime-dlq-long")["QueueName"] = "duetime-dead-letters-long"
    prefix = f"wire{secrets.token_hex(3)}"
    settings = local_settings(MOTO, prefix, shards=2, lease_seconds=5)
    with pytest.raises(ValueError, match=f"does not create {prefix}-dlq-long$"):
        start_backend(MOTO, tmp_path, settings, moto_in_process=True, stack_template=lacking)
