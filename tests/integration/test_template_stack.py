"""duetime.local.template_stack over small hand-written templates on in-process moto: the intrinsic functions,
names derived when the template sets none, dependency order, the properties duetime's own stack does not use
(FIFO, provisioned capacity, streams, a customer-managed key), and what it refuses. The synthesized stack itself
is tests/infrastructure/test_template_stack.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from duetime.adapters.aws.client import make_client
from duetime.local.template_stack import LocalStack, TemplateError, creation_order, provision_template
from moto import mock_aws

REGION = "us-east-1"


@pytest.fixture(autouse=True)
def moto() -> Iterator[None]:
    with mock_aws():
        yield


def _provision(resources: dict[str, Any], **template: Any) -> LocalStack:
    return provision_template({"Resources": resources, **template}, lambda service: make_client(service, REGION))


def _key_schema(name: str) -> dict[str, Any]:
    return {
        "KeySchema": [{"AttributeName": name, "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": name, "AttributeType": "S"}],
    }


def test_a_fifo_queue_without_a_name_gets_a_stack_name_ending_in_fifo_and_redrives_to_its_dlq():
    stack = _provision(
        {
            # Named after the queue that refers to it: the order comes from the references, not the names
            "ZDlq": {"Type": "AWS::SQS::Queue", "Properties": {"FifoQueue": True}},
            "Due": {
                "Type": "AWS::SQS::Queue",
                "Properties": {
                    "FifoQueue": True,
                    "ContentBasedDeduplication": True,
                    "DelaySeconds": 5,
                    "ReceiveMessageWaitTimeSeconds": 20,
                    "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["ZDlq", "Arn"]}, "maxReceiveCount": 3},
                },
            },
        }
    )
    assert stack.physical_ids()["Due"].endswith("/DuetimeStack-Due.fifo")
    sqs = make_client("sqs", REGION)
    attributes = sqs.get_queue_attributes(QueueUrl=stack.ref("Due"), AttributeNames=["All"])["Attributes"]
    assert (attributes["FifoQueue"], attributes["ContentBasedDeduplication"]) == ("true", "true")
    assert (attributes["DelaySeconds"], attributes["ReceiveMessageWaitTimeSeconds"]) == ("5", "20")
    redrive = json.loads(attributes["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == stack.get_att("ZDlq", "Arn")
    assert redrive["deadLetterTargetArn"].endswith(":DuetimeStack-ZDlq.fifo")
    assert int(redrive["maxReceiveCount"]) == 3


def test_a_provisioned_table_with_a_stream_and_a_customer_managed_key():
    stack = _provision(
        {
            "Key": {"Type": "AWS::KMS::Key", "Properties": {"EnableKeyRotation": True}},
            "Table": {
                "Type": "AWS::DynamoDB::Table",
                "Properties": {
                    **_key_schema("k"),
                    "ProvisionedThroughput": {"ReadCapacityUnits": 5, "WriteCapacityUnits": 7},
                    "StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"},
                    "SSESpecification": {
                        "SSEEnabled": True,
                        "SSEType": "KMS",
                        "KMSMasterKeyId": {"Fn::GetAtt": ["Key", "Arn"]},
                    },
                },
            },
        }
    )
    table = make_client("dynamodb", REGION).describe_table(TableName="DuetimeStack-Table")["Table"]
    assert table["ProvisionedThroughput"]["ReadCapacityUnits"] == 5
    assert table["ProvisionedThroughput"]["WriteCapacityUnits"] == 7
    assert table["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert table["SSEDescription"]["KMSMasterKeyArn"] == stack.get_att("Key", "Arn")
    assert stack.get_att("Table", "StreamArn") == table["LatestStreamArn"]


def test_intrinsics_resolve_against_the_stack_pseudo_parameters_and_parameter_defaults():
    stack = _provision(
        {"Bus": {"Type": "AWS::Events::EventBus", "Properties": {"Name": {"Fn::Sub": "${Prefix}-events"}}}},
        Parameters={"Prefix": {"Type": "String", "Default": "dt"}},
    )
    assert stack.ref("Bus") == "dt-events"
    assert stack.resolve({"Fn::Sub": "${Bus.Arn}|${AWS::Region}|${!Literal}"}) == (
        f"arn:aws:events:{REGION}:123456789012:event-bus/dt-events|{REGION}|${{Literal}}"
    )
    assert (
        stack.resolve({"Fn::Sub": ["${Name}:${AWS::AccountId}", {"Name": {"Ref": "Bus"}}]}) == "dt-events:123456789012"
    )
    assert stack.resolve({"Fn::Select": [1, {"Fn::Split": [",", "a,b,c"]}]}) == "b"
    assert stack.resolve({"Fn::Join": ["/", ["x", {"Ref": "AWS::Partition"}]]}) == "x/aws"
    # AWS::NoValue leaves the property (or list element) out
    assert stack.resolve({"A": {"Ref": "AWS::NoValue"}, "B": ["x", {"Ref": "AWS::NoValue"}]}) == {"B": ["x"]}


def test_a_reference_to_a_resource_not_created_locally_is_a_stand_in_in_its_service_format():
    stack = _provision(
        {
            "Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": "/aws/lambda/fn"}},
            "Cluster": {"Type": "AWS::ECS::Cluster"},
            "Role": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": []},
                    "Policies": [
                        {
                            "PolicyName": "logs",
                            "PolicyDocument": {
                                "Version": "2012-10-17",
                                "Statement": [
                                    {
                                        "Effect": "Allow",
                                        "Action": "logs:PutLogEvents",
                                        "Resource": [
                                            {"Fn::GetAtt": ["Logs", "Arn"]},
                                            {"Fn::GetAtt": ["Cluster", "Arn"]},
                                        ],
                                    }
                                ],
                            },
                        }
                    ],
                },
            },
        }
    )
    held = make_client("iam", REGION).get_role_policy(RoleName="DuetimeStack-Role", PolicyName="logs")
    assert held["PolicyDocument"]["Statement"][0]["Resource"] == [
        f"arn:aws:logs:{REGION}:123456789012:log-group:/aws/lambda/fn:*",
        f"arn:aws:ecs:{REGION}:123456789012:cluster/DuetimeStack-Cluster",
    ]
    assert not stack.resources["Logs"].created and "Logs" not in stack.physical_ids()


def test_a_property_the_local_stack_does_not_apply_is_listed_not_dropped_silently():
    stack = _provision(
        {
            "T": {
                "Type": "AWS::DynamoDB::Table",
                "Properties": {
                    **_key_schema("k"),
                    "BillingMode": "PAY_PER_REQUEST",
                    "ContributorInsightsSpecification": {"Enabled": True},
                },
            }
        }
    )
    assert stack.skipped == ["T: property ContributorInsightsSpecification not applied"]


def test_a_cycle_a_condition_and_an_unknown_intrinsic_are_refused():
    cycle = {
        "A": {"Type": "AWS::SQS::Queue", "Properties": {"RedriveAllowPolicy": {"sourceQueueArns": [{"Ref": "B"}]}}},
        "B": {"Type": "AWS::SQS::Queue", "DependsOn": "A"},
    }
    with pytest.raises(TemplateError, match="cycle"):
        creation_order({"Resources": cycle})
    with pytest.raises(TemplateError, match="Condition"):
        _provision({"Q": {"Type": "AWS::SQS::Queue", "Condition": "IsProd"}})
    with pytest.raises(TemplateError, match="Fn::ImportValue"):
        _provision({"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Fn::ImportValue": "x"}}}})
    with pytest.raises(TemplateError, match="no resource Missing"):
        _provision({"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Ref": "Missing"}}}})
