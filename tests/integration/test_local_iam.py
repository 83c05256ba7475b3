"""IAM enforced by the local moto server: a call signed with a role's key is served only as that role's policies
allow, and refused with the service's own AccessDenied error (what botocore raises on AWS); the developer's
calls are not checked. Then the whole AWS-faithful mode: a grant taken out of the synthesized template is a
call the function makes that is denied locally."""

from __future__ import annotations

import copy
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from duetime.adapters.aws.client import make_client
from duetime.local.backends import MOTO
from duetime.local.moto_server import EmbeddedMoto, denied_calls, enforce_roles, served_calls
from duetime.local.stack_roles import policy_table, role_key
from duetime.local.synth import template
from duetime.local.system import LocalSystem
from duetime.local.template_stack import LocalStack, localized

from tests.http_client import Api

REGION = "us-east-1"
ACCOUNT = "123456789012"


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedMoto]:
    moto = EmbeddedMoto().start()
    yield moto
    moto.stop()


def role_template(prefix: str) -> dict[str, Any]:
    """One function role allowed GetItem and Query on one table's indexes, SendMessage to one queue, Publish to
    one topic."""
    table_arn = {"Fn::GetAtt": ["Table", "Arn"]}
    statements = [
        {"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": table_arn},
        {"Effect": "Allow", "Action": "dynamodb:Query", "Resource": {"Fn::Join": ["", [table_arn, "/index/*"]]}},
        {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": {"Fn::GetAtt": ["Queue", "Arn"]}},
        {"Effect": "Allow", "Action": "sns:Publish", "Resource": {"Ref": "AlertsTopicCF7C81C9"}},
    ]
    return {
        "Resources": {
            "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {"TableName": f"{prefix}-jobs"}},
            "Queue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": f"{prefix}-due"}},
            "AlertsTopicCF7C81C9": {"Type": "AWS::SNS::Topic", "Properties": {}},
            "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
            "Function": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                    "Environment": {"Variables": {"POWERTOOLS_SERVICE_NAME": "api"}},
                },
            },
            "Policy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {"Roles": [{"Ref": "Role"}], "PolicyDocument": {"Statement": statements}},
            },
        }
    }


@pytest.fixture(scope="module")
def resources(server: EmbeddedMoto) -> dict[str, str]:
    """Two tables, two queues and the topic, made by the developer; the role's policy given to the server."""
    prefix = f"iam{secrets.token_hex(3)}"
    dynamodb = make_client("dynamodb", REGION, server.endpoint_url)
    for name in ("jobs", "other"):
        dynamodb.create_table(
            TableName=f"{prefix}-{name}",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[
                {"AttributeName": "id", "AttributeType": "S"},
                {"AttributeName": "o", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "byO",
                    "KeySchema": [{"AttributeName": "o", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
        )
    sqs = make_client("sqs", REGION, server.endpoint_url)
    due = sqs.create_queue(QueueName=f"{prefix}-due")["QueueUrl"]
    other = sqs.create_queue(QueueName=f"{prefix}-other")["QueueUrl"]
    topic = make_client("sns", REGION, server.endpoint_url).create_topic(Name=f"{prefix}-alerts")["TopicArn"]
    # Resolved from the template alone (its resources were made by hand above), the alert topic as `<prefix>-alerts`
    stack = LocalStack(localized(role_template(prefix), prefix, from_prefix=prefix), REGION, ACCOUNT, "DuetimeStack")
    enforce_roles(server.endpoint_url, policy_table(stack))
    return {"prefix": prefix, "due": due, "other": other, "topic": topic, "key": role_key("Role")}


def as_role(server: EmbeddedMoto, resources: dict[str, str], service: str) -> Any:
    return make_client(service, REGION, server.endpoint_url, identity=resources["key"])


def denied_code(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as raised:
        call(**kwargs)
    return str(raised.value.response["Error"]["Code"])


def test_dynamodb_calls_are_checked_per_table_and_index(server: EmbeddedMoto, resources: dict[str, str]) -> None:
    prefix, dynamodb = resources["prefix"], as_role(server, resources, "dynamodb")
    dynamodb.get_item(TableName=f"{prefix}-jobs", Key={"id": {"S": "a"}})  # allowed
    dynamodb.query(
        TableName=f"{prefix}-jobs",
        IndexName="byO",
        KeyConditionExpression="o = :o",
        ExpressionAttributeValues={":o": {"S": "x"}},
    )
    assert (
        denied_code(dynamodb.get_item, TableName=f"{prefix}-other", Key={"id": {"S": "a"}}) == "AccessDeniedException"
    )
    assert (
        denied_code(dynamodb.put_item, TableName=f"{prefix}-jobs", Item={"id": {"S": "a"}}) == "AccessDeniedException"
    )
    # A batch over an allowed and a refused table is refused as a whole.
    both = {f"{prefix}-jobs": {"Keys": [{"id": {"S": "a"}}]}, f"{prefix}-other": {"Keys": [{"id": {"S": "a"}}]}}
    assert denied_code(dynamodb.batch_get_item, RequestItems=both) == "AccessDeniedException"
    # Nothing was written by the refused put (moto never saw it), and the developer is not checked.
    developer = make_client("dynamodb", REGION, server.endpoint_url)
    assert "Item" not in developer.get_item(TableName=f"{prefix}-jobs", Key={"id": {"S": "a"}})
    developer.put_item(TableName=f"{prefix}-other", Item={"id": {"S": "a"}})


def test_sqs_and_sns_calls_are_checked_per_queue_and_topic(server: EmbeddedMoto, resources: dict[str, str]) -> None:
    sqs, sns = as_role(server, resources, "sqs"), as_role(server, resources, "sns")
    sqs.send_message(QueueUrl=resources["due"], MessageBody="x")
    assert denied_code(sqs.send_message, QueueUrl=resources["other"], MessageBody="x") == "AccessDenied"
    assert denied_code(sqs.receive_message, QueueUrl=resources["due"]) == "AccessDenied"
    sns.publish(TopicArn=resources["topic"], Message="x")
    other_topic = resources["topic"].replace("-alerts", "-other")
    assert denied_code(sns.publish, TopicArn=other_topic, Message="x") == "AuthorizationError"
    refused = {(d["action"], d["resource"].rsplit(":", 1)[-1]) for d in denied_calls(server.endpoint_url)}
    assert ("sqs:SendMessage", f"{resources['prefix']}-other") in refused


def test_the_server_counts_the_requests_it_serves_by_operation_whoever_signs_them(
    server: EmbeddedMoto, resources: dict[str, str]
) -> None:
    # Given the server's count so far
    before = served_calls(server.endpoint_url)
    # When a role sends and reads, the developer receives, and a role's call is denied
    as_role(server, resources, "sqs").send_message(QueueUrl=resources["due"], MessageBody="counted")
    as_role(server, resources, "dynamodb").get_item(TableName=f"{resources['prefix']}-jobs", Key={"id": {"S": "a"}})
    make_client("sqs", REGION, server.endpoint_url).receive_message(QueueUrl=resources["due"], WaitTimeSeconds=0)
    denied_code(as_role(server, resources, "sqs").send_message, QueueUrl=resources["other"], MessageBody="no")
    # Then each served request is counted once under boto3's name for it, and the denied one is not
    after = served_calls(server.endpoint_url)
    grown = {name: count - before.get(name, 0) for name, count in after.items() if count != before.get(name, 0)}
    assert grown == {"sqs:SendMessage": 1, "dynamodb:GetItem": 1, "sqs:ReceiveMessage": 1}


def without_grant(raw: dict[str, Any], role_prefix: str, action: str, resource_id: str) -> dict[str, Any]:
    """`raw` with the role's grant of `action` on the resource `resource_id` (a logical id) taken out, its
    other actions and resources left as they were."""
    changed = copy.deepcopy(raw)
    for policy in changed["Resources"].values():
        if policy["Type"] != "AWS::IAM::Policy":
            continue
        if not any(str(r.get("Ref", "")).startswith(role_prefix) for r in policy["Properties"]["Roles"]):
            continue
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        for statement in list(statements):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            if action not in actions or not any(resource_id in str(r) for r in resources):
                continue
            others = [r for r in resources if resource_id not in str(r)]
            statement["Action"] = [a for a in actions if a != action]
            if not statement["Action"]:
                statements.remove(statement)
            if others:
                statements.append({"Effect": "Allow", "Action": action, "Resource": others})
            return changed
    raise AssertionError(f"no statement of {role_prefix} grants {action} on {resource_id}")


def test_a_grant_taken_out_of_the_template_is_a_call_denied_locally(tmp_path: Path) -> None:
    """The synthesized stack with the pre-loader's sqs:SendMessage to the `default` class's due queue taken
    out: the pre-loader's dispatch of a due run is refused, so the run never happens. (The e2e suite runs the
    same jobs on the stack as synthesized.) The run is due well past the dispatch horizon (window + 5 s), so
    the API's create does not dispatch it itself: the pre-loader must."""
    synthesized = template()
    crippled = without_grant(synthesized, "FunctionsPreloaderRole", "sqs:SendMessage", "QueuesDuedefault")
    system = LocalSystem(tmp_path, backend=MOTO, port=0, workers=1, shards=2, stack_template=crippled).start()
    try:
        api = Api(system.api_url, system.token("alice"))
        horizon = system.local_backend.ports.settings.preload_window_seconds + 5 if system.local_backend else 15
        at = (datetime.now(UTC) + timedelta(seconds=horizon + 30)).isoformat(timespec="seconds").replace("+00:00", "Z")
        created = api.post("/jobs", json={"name": "once", "handler": "demo.echo", "schedule": {"at": at}})
        assert created.status_code == 201, created.text  # the API's own grants are untouched
        assert system.moto is not None
        deadline = time.monotonic() + horizon + 150
        while time.monotonic() < deadline:
            refused = denied_calls(system.moto.endpoint_url)
            if any(d["action"] == "sqs:SendMessage" for d in refused):
                break
            time.sleep(0.5)
        [refusal, *_] = [d for d in refused if d["action"] == "sqs:SendMessage"]
        assert refusal["role"].startswith("FunctionsPreloaderRole")
        assert refusal["resource"] == f"arn:aws:sqs:{REGION}:{ACCOUNT}:duetime-due-default"
        executions = api.get(f"/jobs/{created.json()['jobId']}/executions").json()["executions"]
        assert [e["status"] for e in executions] == ["scheduled"]  # never sent, never run
    finally:
        system.stop()
