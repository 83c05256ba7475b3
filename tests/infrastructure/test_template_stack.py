"""The local stack from the synthesized template (duetime.local.template_stack) on in-process moto: its tables,
indexes, TTL, queues, redrive policies, topic, bus, keys and role policies are what the template says; duetime's
adapters, configured from a function's environment in the template, submit, pre-load and receive a job through
them; and the hand-made provisioning (adapters/aws/provision.py) creates the same tables and queues."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.provision import create_queues, create_tables
from duetime.adapters.aws.queue import DueQueues
from duetime.config import RuntimeConfig, build_ports
from duetime.definitions import TABLES
from duetime.domain.models import JobSpec, format_time
from duetime.local.template_stack import LocalStack, TemplateError, creation_order, provision_template
from duetime.service.dispatch import preload
from duetime.service.jobs import submit_job
from moto import mock_aws

REGION = "us-east-1"
HAND_MADE_REGION = "eu-west-1"  # the hand-made look-alikes, beside the template's stack in the same moto


def _client(region: str = REGION) -> Any:
    return lambda service: make_client(service, region)


@pytest.fixture
def stack(synthesized) -> Iterator[LocalStack]:
    with mock_aws():
        yield provision_template(synthesized.raw, _client())


def _logical_id_of_queue(synthesized, name: str) -> str:
    [found] = [k for k, v in synthesized.resources("AWS::SQS::Queue").items() if v["Properties"]["QueueName"] == name]
    return found


def _function(synthesized, service_name: str) -> str:
    """The logical id of the Lambda function whose POWERTOOLS_SERVICE_NAME is `service_name`."""
    [found] = [
        k
        for k, v in synthesized.resources("AWS::Lambda::Function").items()
        if v["Properties"].get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME") == service_name
    ]
    return found


# --- what is created is what the template says --------------------------------------------------------------


def _table_shape(client: Any, name: str) -> dict[str, Any]:
    """A table as DescribeTable, DescribeTimeToLive and DescribeContinuousBackups give it, in the template's terms."""
    table = client.describe_table(TableName=name)["Table"]
    ttl = client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    backups = client.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
    recovery = backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"
    return {
        "KeySchema": table["KeySchema"],
        "AttributeDefinitions": sorted(table["AttributeDefinitions"], key=lambda a: a["AttributeName"]),
        "BillingMode": table.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED"),
        "GlobalSecondaryIndexes": sorted(
            (
                {"IndexName": i["IndexName"], "KeySchema": i["KeySchema"], "Projection": i["Projection"]}
                for i in table.get("GlobalSecondaryIndexes", [])
            ),
            key=lambda i: i["IndexName"],
        ),
        "SSEEnabled": table.get("SSEDescription", {}).get("Status") == "ENABLED",
        "DeletionProtectionEnabled": table.get("DeletionProtectionEnabled", False),
        "TimeToLive": {"AttributeName": ttl["AttributeName"], "Enabled": True}
        if ttl["TimeToLiveStatus"] == "ENABLED"
        else None,
        "PointInTimeRecoveryEnabled": recovery,
    }


def _template_table_shape(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "KeySchema": properties["KeySchema"],
        "AttributeDefinitions": sorted(properties["AttributeDefinitions"], key=lambda a: a["AttributeName"]),
        "BillingMode": properties.get("BillingMode", "PROVISIONED"),
        "GlobalSecondaryIndexes": sorted(properties.get("GlobalSecondaryIndexes", []), key=lambda i: i["IndexName"]),
        "SSEEnabled": properties.get("SSESpecification", {}).get("SSEEnabled", False),
        "DeletionProtectionEnabled": properties.get("DeletionProtectionEnabled", False),
        "TimeToLive": properties.get("TimeToLiveSpecification"),
        "PointInTimeRecoveryEnabled": properties.get("PointInTimeRecoverySpecification", {}).get(
            "PointInTimeRecoveryEnabled", False
        ),
    }


def test_every_table_has_the_template_keys_indexes_projections_billing_sse_and_ttl(synthesized, stack):
    tables = synthesized.resources("AWS::DynamoDB::Table")
    assert len(tables) == len(TABLES)
    dynamodb = make_client("dynamodb", REGION)
    for logical_id, resource in tables.items():
        name = stack.physical_ids()[logical_id]
        assert name == resource["Properties"]["TableName"]
        assert _table_shape(dynamodb, name) == _template_table_shape(resource["Properties"]), logical_id
    # The executions' and control records' TTL, which nothing but the template sets on a local stack
    ttl = {t.logical_name: t.ttl_attribute for t in TABLES if t.ttl_attribute}
    assert ttl == {"executions": "expiresAt", "control": "expiresAt"}
    for logical_name, attribute in ttl.items():
        described = dynamodb.describe_time_to_live(TableName=f"duetime-{logical_name}")["TimeToLiveDescription"]
        assert described == {"TimeToLiveStatus": "ENABLED", "AttributeName": attribute}


def _queue_shape(client: Any, url: str) -> dict[str, Any]:
    """A queue's attributes as the template states them, its redrive target by queue name (not ARN)."""
    attributes = client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    shape = {
        key: attributes[key]
        for key in ("VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds", "ReceiveMessageWaitTimeSeconds")
    }
    shape["SqsManagedSseEnabled"] = attributes.get("SqsManagedSseEnabled") == "true"
    if "RedrivePolicy" in attributes:
        redrive = json.loads(attributes["RedrivePolicy"])
        shape["RedrivePolicy"] = {
            "deadLetterTarget": redrive["deadLetterTargetArn"].rsplit(":", 1)[1],
            "maxReceiveCount": int(redrive["maxReceiveCount"]),
        }
    return shape


def test_every_queue_has_the_template_attributes_and_redrives_to_its_local_dlq(synthesized, stack):
    sqs = make_client("sqs", REGION)
    queues = synthesized.resources("AWS::SQS::Queue")
    assert set(stack.of_type("AWS::SQS::Queue")) == set(queues)
    for logical_id, resource in queues.items():
        properties = resource["Properties"]
        url = stack.physical_ids()[logical_id]
        assert url == sqs.get_queue_url(QueueName=properties["QueueName"])["QueueUrl"]
        expected = {
            "VisibilityTimeout": str(properties.get("VisibilityTimeout", 30)),
            "MessageRetentionPeriod": str(properties.get("MessageRetentionPeriod", 345600)),
            "DelaySeconds": str(properties.get("DelaySeconds", 0)),
            "ReceiveMessageWaitTimeSeconds": str(properties.get("ReceiveMessageWaitTimeSeconds", 0)),
            "SqsManagedSseEnabled": properties.get("SqsManagedSseEnabled", False),
        }
        if "RedrivePolicy" in properties:
            dlq_id, attribute = properties["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"]
            assert attribute == "Arn"
            assert stack.get_att(dlq_id, "Arn").endswith(":" + queues[dlq_id]["Properties"]["QueueName"])
            expected["RedrivePolicy"] = {
                "deadLetterTarget": queues[dlq_id]["Properties"]["QueueName"],
                "maxReceiveCount": properties["RedrivePolicy"]["maxReceiveCount"],
            }
        assert _queue_shape(sqs, url) == expected, logical_id
    # Each queue's TLS-only policy, its Fn::GetAtt resolved to the queue's own local ARN
    for resource in synthesized.resources("AWS::SQS::QueuePolicy").values():
        [queue] = resource["Properties"]["Queues"]
        url = stack.ref(queue["Ref"])
        policy = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"]
        assert json.loads(policy) == stack.resolve(resource["Properties"]["PolicyDocument"])
        assert json.loads(policy)["Statement"][0]["Resource"] == stack.get_att(queue["Ref"], "Arn")


def test_a_due_queue_comes_after_its_dlq(synthesized):
    order = creation_order(synthesized.raw)
    for logical_id, resource in synthesized.resources("AWS::SQS::Queue").items():
        redrive = resource["Properties"].get("RedrivePolicy")
        if redrive:
            dlq_id = redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]
            assert order.index(dlq_id) < order.index(logical_id)


def test_the_alert_topic_its_key_subscriptions_and_the_event_bus(synthesized, stack):
    sns = make_client("sns", REGION)
    [(topic_id, topic)] = synthesized.resources("AWS::SNS::Topic").items()
    arn = stack.ref(topic_id)
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    key_id = topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
    assert attributes["KmsMasterKeyId"] == stack.get_att(key_id, "Arn")
    assert attributes["DisplayName"] == topic["Properties"]["DisplayName"]
    assert make_client("kms", REGION).get_key_rotation_status(KeyId=stack.ref(key_id))["KeyRotationEnabled"]
    subscribed = {
        (s["Protocol"], s["Endpoint"]) for s in sns.list_subscriptions_by_topic(TopicArn=arn)["Subscriptions"]
    }
    expected = {
        (s["Properties"]["Protocol"], s["Properties"]["Endpoint"])
        for s in synthesized.resources("AWS::SNS::Subscription").values()
    }
    assert subscribed == expected and expected
    for policy in synthesized.resources("AWS::SNS::TopicPolicy").values():
        assert json.loads(attributes["Policy"]) == stack.resolve(policy["Properties"]["PolicyDocument"])
    [(bus_id, bus)] = synthesized.resources("AWS::Events::EventBus").items()
    described = make_client("events", REGION).describe_event_bus(Name=bus["Properties"]["Name"])
    assert described["Arn"] == stack.get_att(bus_id, "Arn")


def _unresolved(value: Any) -> bool:
    text = json.dumps(value)
    return '"Ref"' in text or '"Fn::' in text


def test_every_role_holds_its_template_policies_with_refs_resolved(synthesized, stack):
    iam = make_client("iam", REGION)
    roles = synthesized.resources("AWS::IAM::Role")
    assert set(stack.of_type("AWS::IAM::Role")) == set(roles)
    for logical_id, resource in roles.items():
        role = iam.get_role(RoleName=stack.ref(logical_id))["Role"]
        assert role["Arn"] == stack.get_att(logical_id, "Arn")
        assert role["AssumeRolePolicyDocument"] == resource["Properties"]["AssumeRolePolicyDocument"]
    for policy in synthesized.resources("AWS::IAM::Policy").values():
        properties = policy["Properties"]
        expected = stack.resolve(properties["PolicyDocument"])
        assert not _unresolved(expected)
        for role in properties["Roles"]:
            held = iam.get_role_policy(RoleName=stack.ref(role["Ref"]), PolicyName=properties["PolicyName"])
            assert held["PolicyDocument"] == expected
    # The API role's grant on the jobs table names the local table's ARN and its index
    api_role = stack.ref(synthesized.logical_id(synthesized.stack.functions.api.role))
    jobs_arn = make_client("dynamodb", REGION).describe_table(TableName="duetime-jobs")["Table"]["TableArn"]
    names = iam.list_role_policies(RoleName=api_role)["PolicyNames"]
    statements = [
        s for n in names for s in iam.get_role_policy(RoleName=api_role, PolicyName=n)["PolicyDocument"]["Statement"]
    ]
    assert any(s["Resource"] == [jobs_arn, f"{jobs_arn}/index/byOwner"] for s in statements)


def test_only_aws_managed_policies_moto_does_not_hold_are_skipped(stack):
    assert all("managed policy arn:aws:iam::aws:policy/" in s for s in stack.skipped), stack.skipped


# --- duetime against the stack -----------------------------------------------------------------------------


@pytest.mark.parametrize("function", ["api", "preloader", "worker", "dlq_notifier"])
def test_each_function_environment_points_duetime_at_the_stack(synthesized, stack, function):
    config = RuntimeConfig.from_env(stack.environment(_function(synthesized, function)))
    tables = {r.ref for r in stack.of_type("AWS::DynamoDB::Table").values()}
    assert {config.settings().table_name(t) for t in TABLES} == tables
    queue_urls = {r.ref for r in stack.of_type("AWS::SQS::Queue").values()}
    assert set((config.queue_urls or {}).values()) | set((config.dlq_urls or {}).values()) == queue_urls
    assert config.event_bus_name in {r.ref for r in stack.of_type("AWS::Events::EventBus").values()}
    if function == "dlq_notifier":
        assert config.alert_topic_arn in {r.ref for r in stack.of_type("AWS::SNS::Topic").values()}


def test_a_job_is_submitted_preloaded_and_received_through_the_stack(synthesized, stack):
    config = RuntimeConfig.from_env(stack.environment(_function(synthesized, "api")))
    ports = build_ports(config)
    now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    clock = [now]
    assert config.queue_urls and config.dlq_urls
    queues = DueQueues(make_client("sqs", REGION), config.queue_urls, config.dlq_urls, max_delay_seconds=0)
    ports = replace(ports, clock=lambda: clock[0], queues=queues)
    at = now + timedelta(seconds=config.preload_window_seconds + 60)  # beyond the dispatch horizon at submit
    spec = JobSpec.model_validate({"name": "t", "handler": "demo.echo", "schedule": {"at": format_time(at)}})
    job, _ = submit_job(ports, "alice", spec)
    assert queues.receive("default", 10, 0, 0) == []
    clock[0] = at - timedelta(seconds=30)
    report = preload(ports, owner="tick-1")
    assert (report.shards, report.errors) == (config.shards, 0)
    [received] = queues.receive("default", 10, 0, 60)
    assert received.message.job_id == job.job_id
    assert ports.store.get_job(job.job_id) is not None


def test_an_unknown_intrinsic_is_refused(stack):
    with pytest.raises(TemplateError, match="Fn::If"):
        stack.resolve({"Fn::If": ["Cond", "a", "b"]})


# --- the hand-made look-alikes -------------------------------------------------------------------------------


def test_the_hand_made_tables_and_queues_are_the_template_ones(synthesized, stack):
    """adapters/aws/provision.py (the tests' and benchmarks' tables and queues) create what the
    template creates, for the template's settings: every difference would be a defect in one of them."""
    settings = RuntimeConfig.from_env(stack.environment(_function(synthesized, "api"))).settings()
    create_tables(make_client("dynamodb", HAND_MADE_REGION), settings)
    create_queues(make_client("sqs", HAND_MADE_REGION), settings)
    for region in (REGION, HAND_MADE_REGION):  # the tables and queues of both, one set of names
        names = make_client("dynamodb", region).list_tables()["TableNames"]
        assert sorted(names) == sorted(settings.table_name(t) for t in TABLES)
    for table in TABLES:
        name = settings.table_name(table)
        hand_made = _table_shape(make_client("dynamodb", HAND_MADE_REGION), name)
        assert hand_made == _table_shape(make_client("dynamodb", REGION), name), name
    template_sqs, hand_sqs = make_client("sqs", REGION), make_client("sqs", HAND_MADE_REGION)
    template_names = sorted(u.rsplit("/", 1)[1] for u in template_sqs.list_queues()["QueueUrls"])
    assert sorted(u.rsplit("/", 1)[1] for u in hand_sqs.list_queues()["QueueUrls"]) == template_names
    for name in template_names:
        hand_made = _queue_shape(hand_sqs, hand_sqs.get_queue_url(QueueName=name)["QueueUrl"])
        assert hand_made == _queue_shape(template_sqs, template_sqs.get_queue_url(QueueName=name)["QueueUrl"]), name


def test_the_hardened_stack_encrypts_its_tables_and_queues_with_its_own_local_key(hardened):
    """The deployment with a customer-managed data key (the `hardened` synthesis other tests share): every
    table's and queue's key is the local key created from the template, and the task roles exist."""
    with mock_aws():
        stack = provision_template(hardened.raw, _client())
        [key_id] = [k for k in stack.of_type("AWS::KMS::Key") if k.startswith("DataKey")]
        key_arn = stack.get_att(key_id, "Arn")
        dynamodb, sqs = make_client("dynamodb", REGION), make_client("sqs", REGION)
        for table in stack.of_type("AWS::DynamoDB::Table").values():
            assert dynamodb.describe_table(TableName=table.ref)["Table"]["SSEDescription"]["KMSMasterKeyArn"] == key_arn
        for queue in stack.of_type("AWS::SQS::Queue").values():
            attributes = sqs.get_queue_attributes(QueueUrl=queue.ref, AttributeNames=["KmsMasterKeyId"])["Attributes"]
            assert attributes["KmsMasterKeyId"] == key_arn
        assert set(stack.of_type("AWS::IAM::Role")) == set(hardened.resources("AWS::IAM::Role"))
        # A policy attached by name to roles from outside the stack (context handlerTaskRoles): held by them
        iam = make_client("iam", REGION)
        by_name = [
            p["Properties"]
            for p in hardened.resources("AWS::IAM::Policy").values()
            if any(isinstance(r, str) for r in p["Properties"]["Roles"])
        ]
        assert by_name
        for properties in by_name:
            for role in properties["Roles"]:
                held = iam.get_role_policy(RoleName=role, PolicyName=properties["PolicyName"])["PolicyDocument"]
                assert held == stack.resolve(properties["PolicyDocument"])
        assert sorted(stack.external_roles) == sorted(r for p in by_name for r in p["Roles"])
        assert all("managed policy arn:aws:iam::aws:policy/" in s for s in stack.skipped), stack.skipped
