"""The deployed template against an attacker inside the account (issue 14): worker routes admit only the
worker roles, limits hold under a burst, no wildcard grant beyond what AWS forces, data under the team's key."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match

from infra.api import ANONYMOUS_RATE_LIMIT
from infra.context import (
    DEFAULT_API_RESERVED_CONCURRENCY,
    DEFAULT_CALLER_RATE_LIMIT,
    DEFAULT_QUOTAS,
    DEFAULT_WORKER_MAX_CONCURRENCY,
    DeployContext,
)
from tests.infrastructure.helpers import statements_of

# The only actions that may stand on Resource "*": AWS offers no resource ARN for them.
WILDCARD_ONLY_ACTIONS = {
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "ecs:DescribeTaskDefinition",
    "ecr:GetAuthorizationToken",
}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def every_statement(synthesized: Any) -> list[dict[str, Any]]:
    return [
        statement
        for policy in synthesized.resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def resource_policy(synthesized: Any) -> list[dict[str, Any]]:
    [api] = synthesized.resources("AWS::ApiGateway::RestApi").values()
    return api["Properties"]["Policy"]["Statement"]


# Worker routes -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["synthesized", "hardened"])
def test_worker_routes_deny_every_principal_but_the_worker_roles(variant, request):
    synthesized = request.getfixturevalue(variant)
    stack = synthesized.stack
    statements = resource_policy(synthesized)
    [deny] = [s for s in statements if s["Effect"] == "Deny"]
    assert deny["Principal"] == {"AWS": "*"} and deny["Action"] == "execute-api:Invoke"
    assert sorted(deny["Resource"]) == [
        "execute-api:/*/POST/executions/*/complete",
        "execute-api:/*/POST/executions/*/heartbeat",
    ]
    admitted = deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    worker_roles = [fn.role for fn in stack.functions.workers.values()] + stack.workers.task_roles
    expected = [{"Fn::GetAtt": [synthesized.stack.get_logical_id(r.node.default_child), "Arn"]} for r in worker_roles]
    if variant == "hardened":
        expected.append("arn:aws:iam::123456789012:role/onprem-worker")
    assert admitted == expected
    # Nobody else: not the API, pre-loader or DLQ notifier roles, which hold table access of their own.
    others = [stack.functions.api.role, stack.functions.preloader.role, stack.functions.dlq_notifier.role]
    assert not any(stack.get_logical_id(r.node.default_child) in json.dumps(admitted) for r in others)
    # Owners' routes stay open to the Cognito authorizer: an explicit Allow, or API Gateway would refuse them.
    [allow] = [s for s in statements if s["Effect"] == "Allow"]
    assert allow["Resource"] == "execute-api:/*" and "Condition" not in allow


def test_worker_routes_still_require_sigv4_and_user_routes_cognito(synthesized):
    methods = synthesized.resources("AWS::ApiGateway::Method").values()
    by_type = {m["Properties"]["AuthorizationType"] for m in methods if m["Properties"]["HttpMethod"] != "OPTIONS"}
    assert by_type == {"AWS_IAM", "COGNITO_USER_POOLS"}
    iam_routes = [m for m in methods if m["Properties"]["AuthorizationType"] == "AWS_IAM"]
    assert len(iam_routes) == 2


# Limits --------------------------------------------------------------------------------------------------------


def test_each_worker_event_source_has_a_maximum_concurrency_and_a_matching_reservation(synthesized):
    mappings = synthesized.resources("AWS::Lambda::EventSourceMapping")
    assert mappings
    for mapping in mappings.values():
        assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": DEFAULT_WORKER_MAX_CONCURRENCY}
    for worker in synthesized.stack.functions.workers.values():
        function = synthesized.raw["Resources"][synthesized.logical_id(worker)]
        assert function["Properties"]["ReservedConcurrentExecutions"] == DEFAULT_WORKER_MAX_CONCURRENCY


def test_the_api_keeps_reserved_concurrency_the_workers_cannot_take(synthesized):
    functions = synthesized.stack.functions
    api = synthesized.raw["Resources"][synthesized.logical_id(functions.api)]
    assert api["Properties"]["ReservedConcurrentExecutions"] == DEFAULT_API_RESERVED_CONCURRENCY
    for scheduled in (functions.preloader, functions.dlq_notifier):
        assert (
            synthesized.raw["Resources"][synthesized.logical_id(scheduled)]["Properties"][
                "ReservedConcurrentExecutions"
            ]
            >= 1
        )


def test_a_web_acl_rate_limits_each_caller_on_the_owner_routes(synthesized):
    [acl] = synthesized.resources("AWS::WAFv2::WebACL").values()
    rules = {rule["Name"]: rule for rule in acl["Properties"]["Rules"]}
    assert acl["Properties"]["Scope"] == "REGIONAL"
    for name, key, limit in (
        ("rate-per-ip", {"IP": {}}, ANONYMOUS_RATE_LIMIT),
        ("rate-per-token", {"Header": Match.any_value()}, DEFAULT_CALLER_RATE_LIMIT),
    ):
        rate = rules[name]["Statement"]["RateBasedStatement"]
        # Answered as a quota is: 429 with Retry-After and the API's error body, not WAF's 403.
        response = rules[name]["Action"]["Block"]["CustomResponse"]
        assert response["ResponseCode"] == 429
        assert response["ResponseHeaders"] == [{"Name": "Retry-After", "Value": "60"}]
        body = acl["Properties"]["CustomResponseBodies"][response["CustomResponseBodyKey"]]
        assert body["ContentType"] == "APPLICATION_JSON"
        assert json.loads(body["Content"])["error"]["code"] == "rate_limited"
        assert rate["Limit"] == limit and rate["AggregateKeyType"] == "CUSTOM_KEYS"
        assert list(rate["CustomKeys"][0]) == list(key)
        # Worker routes are left out (ECS workers share one NAT address; the resource policy guards them).
        scope = rate["ScopeDownStatement"]
        owners_only = scope["AndStatement"]["Statements"][0] if "AndStatement" in scope else scope
        regex = owners_only["NotStatement"]["Statement"]["RegexMatchStatement"]["RegexString"]
        assert "heartbeat" in regex and "complete" in regex
    # Per address only without a token: the console's users reach the API from CloudFront's edge addresses.
    [_, without_token] = rules["rate-per-ip"]["Statement"]["RateBasedStatement"]["ScopeDownStatement"]["AndStatement"][
        "Statements"
    ]
    size = without_token["NotStatement"]["Statement"]["SizeConstraintStatement"]
    assert size["FieldToMatch"] == {"SingleHeader": {"Name": "authorization"}}
    assert (size["ComparisonOperator"], size["Size"]) == ("GT", 0)
    [association] = synthesized.resources("AWS::WAFv2::WebACLAssociation").values()
    stage_id = next(iter(synthesized.resources("AWS::ApiGateway::Stage")))
    assert stage_id in json.dumps(association["Properties"]["ResourceArn"])


def test_the_per_token_limit_sits_above_what_the_owner_quotas_allow():
    # Issue 29: 1,000 requests in 5 minutes per token was a third of the default job-creation quota alone
    # (600 a minute), and blocked docs/deploying.md's `duetime load` run with 403s.
    from infra.context import TOKEN_RATE_LIMIT_PER_QUOTA_MINUTE

    quotas = DEFAULT_QUOTAS
    writes_per_window = 5 * (quotas.job_creates_per_minute + quotas.run_nows_per_minute)
    assert TOKEN_RATE_LIMIT_PER_QUOTA_MINUTE * writes_per_window // 5 == DEFAULT_CALLER_RATE_LIMIT
    assert 2 * writes_per_window <= DEFAULT_CALLER_RATE_LIMIT
    # A load run of 200 jobs/s with one token raises that owner's creation quota; the WAF limit follows it.
    ctx = DeployContext.from_node(cdk.App(context={"jobCreatesPerMinute": 12_000}).node)
    assert ctx.caller_rate_limit == 10 * (12_000 + 120) > 200 * 300
    assert DeployContext.from_node(cdk.App(context={"callerRateLimit": 50_000}).node).caller_rate_limit == 50_000


def test_limits_come_from_context():
    ctx = DeployContext.from_node(
        cdk.App(context={"workerMaxConcurrency": "5", "apiReservedConcurrency": "0", "callerRateLimit": 300}).node
    )
    assert (ctx.worker_max_concurrency, ctx.api_reserved_concurrency, ctx.caller_rate_limit) == (5, 0, 300)
    with pytest.raises(ValueError, match="workerMaxConcurrency"):
        DeployContext.from_node(cdk.App(context={"workerMaxConcurrency": 1}).node)
    with pytest.raises(ValueError, match="callerRateLimit"):
        DeployContext.from_node(cdk.App(context={"callerRateLimit": 5}).node)


# Least privilege -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["synthesized", "hardened"])
def test_no_grant_stands_on_resource_star_but_actions_that_have_no_resource(variant, request):
    synthesized = request.getfixturevalue(variant)
    for statement in every_statement(synthesized):
        if statement["Effect"] == "Allow" and "*" in as_list(statement["Resource"]):
            assert set(as_list(statement["Action"])) <= WILDCARD_ONLY_ACTIONS, statement


def test_pass_role_and_run_task_name_the_task_roles_families_and_cluster(hardened):
    stack = hardened.stack
    cluster_id = stack.get_logical_id(stack.workers.cluster.node.default_child)
    roles = [fn.role for fn in stack.functions.workers.values()] + stack.workers.task_roles
    for role in roles:
        statements = statements_of(hardened, role)
        [pass_role] = [s for s in statements if s["Action"] == "iam:PassRole"]
        resources = json.dumps(pass_role["Resource"])
        assert "role/report-task" in resources and "role/export-task" in resources and '"*"' not in resources
        assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}}
        [run_task] = [s for s in statements if s["Action"] == "ecs:RunTask"]
        assert run_task["Condition"] == {"ArnEquals": {"ecs:cluster": {"Fn::GetAtt": [cluster_id, "Arn"]}}}
        families = json.dumps(run_task["Resource"])
        assert ":task-definition/report:*" in families and ":task-definition/export:*" in families
        [watch] = [s for s in statements if s["Action"] == ["ecs:DescribeTasks", "ecs:StopTask"]]
        assert cluster_id in json.dumps(watch["Resource"])


def test_without_ecs_handlers_no_role_may_run_tasks_or_pass_roles(synthesized):
    actions = {a for s in every_statement(synthesized) for a in as_list(s["Action"])}
    assert not {"iam:PassRole", "ecs:RunTask", "ecs:DescribeTaskDefinition"} & actions
    assert synthesized.stack.task_payload_reads is None  # no task roles: no payload reads granted


# Encryption ----------------------------------------------------------------------------------------------------


def data_key_id(synthesized: Any) -> str:
    return synthesized.stack.get_logical_id(synthesized.stack.data_key.node.default_child)


def test_with_kms_key_create_one_rotating_key_encrypts_tables_queues_topic_logs_and_environments(hardened):
    key_arn = {"Fn::GetAtt": [data_key_id(hardened), "Arn"]}
    [key] = [k for k in hardened.resources("AWS::KMS::Key").values()]
    assert key["Properties"]["EnableKeyRotation"] is True
    for table in hardened.resources("AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"] == {
            "KMSMasterKeyId": key_arn,
            "SSEEnabled": True,
            "SSEType": "KMS",
        }
    for queue in hardened.resources("AWS::SQS::Queue").values():
        assert queue["Properties"]["KmsMasterKeyId"] == key_arn
    for topic in hardened.resources("AWS::SNS::Topic").values():
        assert topic["Properties"]["KmsMasterKeyId"] == key_arn
    log_groups = hardened.resources("AWS::Logs::LogGroup")
    assert log_groups and all(g["Properties"]["KmsKeyId"] == key_arn for g in log_groups.values())
    for function in hardened.stack.functions.all:
        assert hardened.raw["Resources"][hardened.logical_id(function)]["Properties"]["KmsKeyArn"] == key_arn
    # The services that write with it are admitted by the key policy: CloudWatch Logs and alarms.
    principals = json.dumps(key["Properties"]["KeyPolicy"])
    assert "logs." in principals and "cloudwatch.amazonaws.com" in principals


def test_with_kms_key_every_role_that_reads_or_writes_data_may_use_the_key_and_nothing_more(hardened):
    key_arn = {"Fn::GetAtt": [data_key_id(hardened), "Arn"]}
    stack = hardened.stack
    for role in [fn.role for fn in stack.functions.all] + stack.workers.task_roles:
        uses = [s for s in statements_of(hardened, role) if s["Resource"] == key_arn]
        actions = {a for s in uses for a in as_list(s["Action"])}
        assert {"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"} <= actions
        assert not {"kms:*", "kms:CreateGrant", "kms:ScheduleKeyDeletion", "kms:PutKeyPolicy"} & actions


def test_without_kms_key_aws_managed_keys_and_no_data_key(synthesized):
    assert synthesized.stack.data_key is None
    for table in synthesized.resources("AWS::DynamoDB::Table").values():
        assert "KMSMasterKeyId" not in table["Properties"]["SSESpecification"]
    for queue in synthesized.resources("AWS::SQS::Queue").values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True and "KmsMasterKeyId" not in queue["Properties"]
    assert not any("KmsKeyId" in g["Properties"] for g in synthesized.resources("AWS::Logs::LogGroup").values())
    # The alert topic keeps its own key: CloudWatch alarms cannot publish to a topic under an AWS managed key.
    [topic] = synthesized.resources("AWS::SNS::Topic").values()
    assert "KmsMasterKeyId" in topic["Properties"]


def test_kms_key_context_takes_create_or_a_key_arn():
    arn = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    assert DeployContext.from_node(cdk.App(context={"kmsKey": arn}).node).kms_key == arn
    assert DeployContext.from_node(cdk.App(context={"kmsKey": "create"}).node).kms_key == "create"
    with pytest.raises(ValueError, match="kmsKey"):
        DeployContext.from_node(cdk.App(context={"kmsKey": "alias/mine"}).node)


def test_an_existing_key_arn_is_used_without_creating_one(variants):
    from tests.infrastructure.conftest import IMPORTED_KEY as arn

    imported = variants  # kmsKey: that key's ARN (conftest.VARIANTS_CONTEXT)
    assert not imported.resources("AWS::KMS::Key")
    for table in imported.resources("AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"]["KMSMasterKeyId"] == arn
    assert all(g["Properties"]["KmsKeyId"] == arn for g in imported.resources("AWS::Logs::LogGroup").values())


def test_ecs_task_roles_may_read_their_jobs_payload_attributes_and_nothing_else(hardened):
    # `ecs:` tasks are handed their job id, not their payload, and read it with the role they run as
    policy = hardened.resources("AWS::IAM::Policy")[hardened.logical_id(hardened.stack.task_payload_reads)]
    roles = json.dumps(policy["Properties"]["Roles"])
    assert "report-task" in roles and "export-task" in roles
    jobs_id = hardened.stack.get_logical_id(hardened.stack.storage.tables["jobs"].node.default_child)
    [read, decrypt] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert read["Action"] == "dynamodb:GetItem" and read["Resource"] == {"Fn::GetAtt": [jobs_id, "Arn"]}
    assert read["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:Attributes": ["jobId", "owner", "definition"]},
        "Null": {"dynamodb:Attributes": "false"},
        "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
    }
    assert decrypt["Action"] == "kms:Decrypt" and decrypt["Resource"] == {"Fn::GetAtt": [data_key_id(hardened), "Arn"]}
    # Issue 29: with ForAllValues alone a GetItem without a projection (no dynamodb:Attributes in its request
    # context: whole rows) was allowed. The keys a GetItem's request carries, as IAM evaluates them:
    projected = {"dynamodb:Attributes": ["jobId", "owner", "definition"]}
    assert _conditions_hold(read["Condition"], projected)
    assert not _conditions_hold(read["Condition"], {})  # no projection: the whole row
    assert not _conditions_hold(read["Condition"], {"dynamodb:Attributes": ["jobId", "definition", "result"]})
    assert not _conditions_hold(read["Condition"], {**projected, "dynamodb:Select": "ALL_ATTRIBUTES"})


def _conditions_hold(conditions: dict, request: dict) -> bool:
    """IAM's verdict on the condition operators the payload read uses, for a request with these keys (a key
    absent from the request is absent from its context)."""
    for operator, keys in conditions.items():
        for key, wanted in keys.items():
            present = request.get(key)
            allowed = wanted if isinstance(wanted, list) else [wanted]
            if operator == "ForAllValues:StringEquals":  # every value in the request allowed; none: true
                holds = all(value in allowed for value in present or [])
            elif operator == "StringEqualsIfExists":
                holds = present is None or present in allowed
            elif operator == "Null":  # "false": the key must be in the request
                holds = (present is None) == (wanted == "true")
            else:
                raise AssertionError(f"no model of {operator}")
            if not holds:
                return False
    return True


def test_per_owner_quotas_reach_the_api_function_from_context(synthesized):
    from duetime.definitions import DEFAULT_JOB_CREATES_PER_MINUTE, DEFAULT_MAX_ACTIVE_JOBS, DEFAULT_RUN_NOWS_PER_MINUTE

    api = synthesized.resources("AWS::Lambda::Function")[synthesized.logical_id(synthesized.stack.functions.api)]
    env = api["Properties"]["Environment"]["Variables"]
    assert env["DUETIME_MAX_ACTIVE_JOBS"] == str(DEFAULT_MAX_ACTIVE_JOBS)
    assert env["DUETIME_JOB_CREATES_PER_MINUTE"] == str(DEFAULT_JOB_CREATES_PER_MINUTE)
    assert env["DUETIME_RUN_NOWS_PER_MINUTE"] == str(DEFAULT_RUN_NOWS_PER_MINUTE)
    from duetime.definitions import DEFAULT_BACKFILL_SLOTS_PER_HOUR
    from duetime.domain.quotas import Quotas

    assert env["DUETIME_BACKFILL_SLOTS_PER_HOUR"] == str(DEFAULT_BACKFILL_SLOTS_PER_HOUR)
    ctx = DeployContext.from_node(cdk.App(context={"maxActiveJobs": "50", "runNowsPerMinute": 0}).node)
    assert (ctx.quotas.max_active_jobs, ctx.quotas.run_nows_per_minute) == (50, None)  # 0: unlimited
    assert ctx.quotas.job_creates_per_minute == DEFAULT_JOB_CREATES_PER_MINUTE
    assert DeployContext.from_node(cdk.App(context={"backfillSlotsPerHour": "300"}).node).quotas == Quotas(
        DEFAULT_MAX_ACTIVE_JOBS, DEFAULT_JOB_CREATES_PER_MINUTE, DEFAULT_RUN_NOWS_PER_MINUTE, 300
    )


def test_ecs_handler_tasks_run_in_a_group_of_their_own_with_https_out(hardened, synthesized):
    # Issue 29: RunTask without a group put the tasks in the VPC's default group, which
    # restrictDefaultSecurityGroup strips of every rule: no egress, the image could not be pulled.
    group = hardened.stack.workers.handler_tasks_group
    group_id = hardened.stack.get_logical_id(group.node.default_child)
    props = hardened.raw["Resources"][group_id]["Properties"]
    assert props["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": "HTTPS: ECR, S3, AWS APIs",
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        }
    ]
    assert "SecurityGroupIngress" not in props
    wanted = {"Fn::GetAtt": [group_id, "GroupId"]}
    for worker in hardened.stack.functions.workers.values():  # the Lambda workers start tasks too
        env = hardened.raw["Resources"][hardened.logical_id(worker)]["Properties"]["Environment"]["Variables"]
        assert env["DUETIME_ECS_SECURITY_GROUPS"] == wanted
    for task in hardened.resources("AWS::ECS::TaskDefinition").values():
        env = {e["Name"]: e["Value"] for e in task["Properties"]["ContainerDefinitions"][0]["Environment"]}
        assert env["DUETIME_ECS_SECURITY_GROUPS"] == wanted
    assert synthesized.stack.workers.handler_tasks_group is None  # no ecs: handlers, no group


def test_pass_role_covers_the_handler_tasks_execution_roles(hardened):
    # RunTask passes a task definition's execution role as well as its task role.
    for role in [fn.role for fn in hardened.stack.functions.workers.values()] + hardened.stack.workers.task_roles:
        [pass_role] = [s for s in statements_of(hardened, role) if s["Action"] == "iam:PassRole"]
        assert "role/report-execution" in json.dumps(pass_role["Resource"])


@pytest.mark.parametrize("variant", ["synthesized", "hardened"])
def test_the_capacity_plan_counts_exactly_the_concurrency_the_stack_reserves(variant, request):
    # `duetime capacity` tells a team, before a deploy, the account limit the stack's reservations need.
    from duetime.domain.capacity import Inputs, reserved_concurrency

    stack = request.getfixturevalue(variant)
    ours = {stack.logical_id(f) for f in stack.stack.functions.all}
    reserved = sum(
        f["Properties"].get("ReservedConcurrentExecutions", 0)
        for logical_id, f in stack.resources("AWS::Lambda::Function").items()
        if logical_id in ours
    )
    groups = stack.stack.ctx.preload_shard_groups
    assert reserved == reserved_concurrency(Inputs(rate=1, preload_shard_groups=groups)).total
