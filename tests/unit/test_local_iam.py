"""duetime.local.iam's policy evaluation, the requests duetime.local.iam_requests reads out of API calls, and the
roles duetime.local.stack_roles resolves from a template: pure functions, no server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from duetime.local.iam import Request, Role, Statement, condition_holds, evaluate, wildcard_match
from duetime.local.iam_requests import credential_scope, requests_of
from duetime.local.stack_roles import function_roles, policy_table, role_key, roles_of_table
from duetime.local.template_stack import LocalStack, localized

JOBS = "arn:aws:dynamodb:us-east-1:123456789012:table/duetime-jobs"
EXECUTIONS = "arn:aws:dynamodb:us-east-1:123456789012:table/duetime-executions"


def allow(actions: Any, resources: Any, **condition: Any) -> Statement:
    raw: dict[str, Any] = {"Effect": "Allow", "Action": actions, "Resource": resources}
    if condition:
        raw["Condition"] = condition
    return Statement.parse(raw)


def allowed(statements: list[Statement], action: str, resource: str, **context: tuple[str, ...]) -> bool:
    return evaluate(statements, Request(action, resource, context)).allowed


class TestMatching:
    def test_an_action_matches_case_insensitively_and_with_wildcards(self) -> None:
        statements = [allow(["dynamodb:Get*", "SQS:sendmessage"], "*")]
        assert allowed(statements, "dynamodb:GetItem", JOBS)
        assert allowed(statements, "sqs:SendMessage", "*")
        assert not allowed(statements, "dynamodb:PutItem", JOBS)
        assert not allowed(statements, "dynamodb:BatchGetItem", JOBS)  # the wildcard is anchored

    def test_a_question_mark_is_one_character(self) -> None:
        assert wildcard_match("table/job?", "table/jobs")
        assert not wildcard_match("table/job?", "table/job")

    def test_a_resource_matches_exactly_or_by_wildcard_across_slashes(self) -> None:
        statements = [allow("dynamodb:Query", [JOBS, f"{EXECUTIONS}/index/*"])]
        assert allowed(statements, "dynamodb:Query", JOBS)
        assert allowed(statements, "dynamodb:Query", f"{EXECUTIONS}/index/byJob")
        assert not allowed(statements, "dynamodb:Query", EXECUTIONS)  # the table itself is not an index
        assert not allowed(statements, "dynamodb:Query", f"{JOBS}/index/byOwner")  # jobs' table only
        assert not allowed(statements, "dynamodb:Query", JOBS.upper())  # ARNs are case-sensitive

    def test_a_grant_on_one_table_is_not_one_on_another(self) -> None:
        statements = [allow("dynamodb:UpdateItem", EXECUTIONS)]
        assert not allowed(statements, "dynamodb:UpdateItem", JOBS)

    def test_brackets_are_literal_not_a_character_class(self) -> None:
        assert not wildcard_match("arn:[ab]", "arn:a")
        assert wildcard_match("arn:[ab]", "arn:[ab]")

    def test_nothing_allowed_is_denied(self) -> None:
        assert not allowed([], "dynamodb:GetItem", JOBS)

    def test_an_explicit_deny_beats_an_allow(self) -> None:
        deny = Statement.parse({"Effect": "Deny", "Action": "dynamodb:*", "Resource": JOBS})
        assert not allowed([allow("dynamodb:*", "*"), deny], "dynamodb:GetItem", JOBS)
        assert allowed([allow("dynamodb:*", "*"), deny], "dynamodb:GetItem", EXECUTIONS)

    def test_not_action_and_not_resource(self) -> None:
        statement = Statement.parse({"Effect": "Allow", "NotAction": "dynamodb:Delete*", "NotResource": JOBS})
        assert allowed([statement], "dynamodb:GetItem", EXECUTIONS)
        assert not allowed([statement], "dynamodb:DeleteItem", EXECUTIONS)
        assert not allowed([statement], "dynamodb:GetItem", JOBS)


class TestConditions:
    ATTRIBUTES = {"ForAllValues:StringEquals": {"dynamodb:Attributes": ["id", "payload"]}}

    def test_for_all_values_holds_when_every_value_is_listed(self) -> None:
        statements = [allow("dynamodb:GetItem", JOBS, **self.ATTRIBUTES)]
        assert allowed(statements, "dynamodb:GetItem", JOBS, **{"dynamodb:Attributes": ("payload",)})
        assert not allowed(statements, "dynamodb:GetItem", JOBS, **{"dynamodb:Attributes": ("payload", "owner")})

    def test_for_all_values_holds_without_values_unless_null_requires_them(self) -> None:
        assert allowed([allow("dynamodb:GetItem", JOBS, **self.ATTRIBUTES)], "dynamodb:GetItem", JOBS)
        required = allow("dynamodb:GetItem", JOBS, **self.ATTRIBUTES, Null={"dynamodb:Attributes": "false"})
        assert not allowed([required], "dynamodb:GetItem", JOBS)
        assert allowed([required], "dynamodb:GetItem", JOBS, **{"dynamodb:Attributes": ("id",)})

    def test_if_exists_holds_without_the_key_and_checks_it_when_present(self) -> None:
        statements = [allow("dynamodb:Query", JOBS, StringEqualsIfExists={"dynamodb:Select": "SPECIFIC_ATTRIBUTES"})]
        assert allowed(statements, "dynamodb:Query", JOBS)
        assert allowed(statements, "dynamodb:Query", JOBS, **{"dynamodb:Select": ("SPECIFIC_ATTRIBUTES",)})
        assert not allowed(statements, "dynamodb:Query", JOBS, **{"dynamodb:Select": ("ALL_ATTRIBUTES",)})

    def test_a_missing_key_fails_a_plain_operator_and_holds_a_negated_one(self) -> None:
        assert not condition_holds("StringEquals", "kms:ViaService", ["sqs.us-east-1.amazonaws.com"], {})
        assert condition_holds("StringNotEquals", "kms:ViaService", ["sqs.us-east-1.amazonaws.com"], {})

    def test_keys_are_case_insensitive_and_values_are_alternatives(self) -> None:
        context = {"KMS:ViaService": ("sqs.us-east-1.amazonaws.com",)}
        values = ["sns.us-east-1.amazonaws.com", "sqs.us-east-1.amazonaws.com"]
        assert condition_holds("StringEquals", "kms:viaservice", values, context)

    def test_like_arn_bool_and_numeric_operators(self) -> None:
        assert condition_holds("StringLike", "k", ["a*"], {"k": ("abc",)})
        assert condition_holds(
            "ArnEquals", "ecs:cluster", ["arn:aws:ecs:*:*:cluster/x"], {"ecs:cluster": ("arn:aws:ecs:r:1:cluster/x",)}
        )
        assert condition_holds("Bool", "aws:SecureTransport", ["true"], {"aws:SecureTransport": ("True",)})
        assert condition_holds("NumericLessThan", "n", ["10"], {"n": ("3",)})
        assert not condition_holds("NumericLessThan", "n", ["10"], {"n": ("30",)})
        assert condition_holds("ForAnyValue:StringEquals", "k", ["b"], {"k": ("a", "b")})
        assert not condition_holds("ForAnyValue:StringEquals", "k", ["b"], {})

    @pytest.mark.parametrize("effect", ["Allow", "Deny"])
    def test_an_unknown_operator_denies_whatever_the_effect(self, effect: str) -> None:
        odd = Statement.parse(
            {"Effect": effect, "Action": "*", "Resource": "*", "Condition": {"DateLessThan": {"aws:CurrentTime": "x"}}}
        )
        decision = evaluate([allow("*", "*"), odd], Request("dynamodb:GetItem", JOBS))
        assert not decision.allowed and "DateLessThan" in decision.reason


def body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def dynamodb(operation: str, **fields: Any) -> list[Request] | None:
    headers = {"x-amz-target": f"DynamoDB_20120810.{operation}"}
    return requests_of("dynamodb", "us-east-1", "POST", "/", headers, body(**fields))


class TestRequests:
    def test_the_credential_scope_names_key_region_and_service(self) -> None:
        header = "AWS4-HMAC-SHA256 Credential=ASIALOCAL1/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=x"
        assert credential_scope(header) == ("ASIALOCAL1", "us-east-1", "dynamodb")
        assert credential_scope("") is None

    def test_a_dynamodb_call_is_its_operation_on_its_table_or_index(self) -> None:
        [get] = dynamodb("GetItem", TableName="duetime-jobs", Key={}) or []
        assert (get.action, get.resource) == ("dynamodb:GetItem", JOBS)
        [query] = dynamodb("Query", TableName="duetime-executions", IndexName="byJob") or []
        assert query.resource == f"{EXECUTIONS}/index/byJob"

    def test_a_projection_gives_the_attributes_condition_key(self) -> None:
        [get] = (
            dynamodb(
                "GetItem",
                TableName="duetime-jobs",
                ProjectionExpression="#p, id.x",
                ExpressionAttributeNames={"#p": "payload"},
            )
            or []
        )
        assert get.context["dynamodb:Attributes"] == ("payload", "id")

    def test_a_batch_asks_for_every_table_it_names(self) -> None:
        requests = dynamodb(
            "BatchGetItem", RequestItems={"duetime-jobs": {"Keys": []}, "duetime-executions": {"Keys": []}}
        )
        assert {(r.action, r.resource) for r in requests or []} == {
            ("dynamodb:BatchGetItem", JOBS),
            ("dynamodb:BatchGetItem", EXECUTIONS),
        }

    def test_a_transaction_asks_for_the_actions_it_holds(self) -> None:
        items = [
            {"Update": {"TableName": "duetime-jobs", "Key": {}}},
            {"Put": {"TableName": "duetime-executions", "Item": {}}},
            {"ConditionCheck": {"TableName": "duetime-jobs", "Key": {}}},
        ]
        requests = dynamodb("TransactWriteItems", TransactItems=items) or []
        assert [(r.action, r.resource) for r in requests] == [
            ("dynamodb:UpdateItem", JOBS),
            ("dynamodb:PutItem", EXECUTIONS),
            ("dynamodb:ConditionCheckItem", JOBS),
        ]

    def test_sqs_json_and_query_calls_are_on_the_queue_of_their_url(self) -> None:
        url = "http://127.0.0.1:5000/secret/123456789012/duetime-due-default"
        arn = "arn:aws:sqs:us-east-1:123456789012:duetime-due-default"
        headers = {"x-amz-target": "AmazonSQS.DeleteMessageBatch"}
        [batch] = requests_of("sqs", "us-east-1", "POST", "/", headers, body(QueueUrl=url, Entries=[])) or []
        assert (batch.action, batch.resource) == ("sqs:DeleteMessage", arn)
        form = f"Action=SendMessage&QueueUrl={url}&MessageBody=x".encode()
        [send] = requests_of("sqs", "us-east-1", "POST", "/", {}, form) or []
        assert (send.action, send.resource) == ("sqs:SendMessage", arn)

    def test_sns_events_and_lambda_calls(self) -> None:
        topic = "arn:aws:sns:us-east-1:123456789012:duetime-alerts"
        [publish] = requests_of("sns", "us-east-1", "POST", "/", {}, f"Action=Publish&TopicArn={topic}".encode()) or []
        assert (publish.action, publish.resource) == ("sns:Publish", topic)
        headers = {"x-amz-target": "AWSEvents.PutEvents"}
        entries = [{"EventBusName": "duetime-events"}, {}]
        events = requests_of("events", "us-east-1", "POST", "/", headers, body(Entries=entries)) or []
        assert {r.resource for r in events} == {
            "arn:aws:events:us-east-1:123456789012:event-bus/duetime-events",
            "arn:aws:events:us-east-1:123456789012:event-bus/default",
        }
        path = "/2015-03-31/functions/report/invocations"
        [invoke] = requests_of("lambda", "us-east-1", "POST", path, {}, b"{}") or []
        assert (invoke.action, invoke.resource) == (
            "lambda:InvokeFunction",
            "arn:aws:lambda:us-east-1:123456789012:function:report",
        )

    def test_an_unreadable_request_is_none(self) -> None:
        assert requests_of("dynamodb", "us-east-1", "POST", "/", {"x-amz-target": "X.Y"}, b"not json") is None
        assert requests_of("s3", "us-east-1", "GET", "/bucket", {}, b"") is None


def template(prefix: str = "duetime") -> dict[str, Any]:
    """A template shaped like the synthesized stack's: a function, its role, and a policy attached to it."""
    jobs_arn = {"Fn::GetAtt": ["Jobs", "Arn"]}
    return {
        "Resources": {
            "Jobs": {"Type": "AWS::DynamoDB::Table", "Properties": {"TableName": f"{prefix}-jobs"}},
            "Due": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": f"{prefix}-due-default"}},
            "AlertsTopicCF7C81C9": {"Type": "AWS::SNS::Topic", "Properties": {}},
            "PreloaderRole": {"Type": "AWS::IAM::Role", "Properties": {}},
            "Preloader": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Role": {"Fn::GetAtt": ["PreloaderRole", "Arn"]},
                    "Environment": {"Variables": {"POWERTOOLS_SERVICE_NAME": "preloader", "DUETIME_PREFIX": prefix}},
                },
            },
            "PreloaderPolicy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "Roles": [{"Ref": "PreloaderRole"}],
                    "PolicyDocument": {
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Action": ["dynamodb:Query"],
                                "Resource": [jobs_arn, {"Fn::Join": ["", [jobs_arn, "/index/*"]]}],
                            },
                            {
                                "Effect": "Allow",
                                "Action": "sqs:SendMessage",
                                "Resource": {"Fn::GetAtt": ["Due", "Arn"]},
                            },
                            {"Effect": "Allow", "Action": "sns:Publish", "Resource": {"Ref": "AlertsTopicCF7C81C9"}},
                            {
                                "Effect": "Allow",
                                "Action": "secretsmanager:GetSecretValue",
                                "Resource": {
                                    "Fn::Join": [
                                        "",
                                        [
                                            "arn:",
                                            {"Ref": "AWS::Partition"},
                                            ":secretsmanager:",
                                            {"Ref": "AWS::Region"},
                                            ":",
                                            {"Ref": "AWS::AccountId"},
                                            f":secret:{prefix}/webhook-secrets/*",
                                        ],
                                    ]
                                },
                            },
                        ]
                    },
                },
            },
        }
    }


class TestStackRoles:
    def test_each_function_is_known_by_its_role(self) -> None:
        assert function_roles(template()) == {"preloader": "PreloaderRole"}

    def test_policies_resolve_to_the_local_resources(self) -> None:
        local = localized(template(), "e2e", {"e2e-due-default": ["e2e-due-default", "e2e-due-default-1"]})
        stack = LocalStack(local, "us-east-1", "123456789012", "DuetimeStack")  # nothing created: from the template
        roles = roles_of_table(json.loads(json.dumps(policy_table(stack))))
        role = roles[role_key("PreloaderRole")]
        assert isinstance(role, Role) and role.name == "PreloaderRole"
        e2e_jobs = "arn:aws:dynamodb:us-east-1:123456789012:table/e2e-jobs"

        def ok(action: str, resource: str) -> bool:
            return evaluate(role.statements, Request(action, resource)).allowed

        assert ok("dynamodb:Query", e2e_jobs) and ok("dynamodb:Query", f"{e2e_jobs}/index/byOwner")
        assert not ok("dynamodb:Query", JOBS)  # the template's prefix stands for the local one
        assert ok("sqs:SendMessage", "arn:aws:sqs:us-east-1:123456789012:e2e-due-default-1")  # every queue of the class
        assert ok("sns:Publish", "arn:aws:sns:us-east-1:123456789012:e2e-alerts")
        assert ok(
            "secretsmanager:GetSecretValue",
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:e2e/webhook-secrets/alice-x",
        )
        assert not ok("dynamodb:GetItem", e2e_jobs)

    def test_role_keys_differ_per_role(self) -> None:
        assert role_key("A") != role_key("B") and role_key("A").startswith("ASIA")
