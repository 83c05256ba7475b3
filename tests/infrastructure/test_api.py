"""API: Cognito-authorized owner routes, IAM-authorized worker routes, validated, throttled, access-logged."""

from __future__ import annotations

from aws_cdk.assertions import Match
from duetime.api.openapi import gateway_request_schemas

OWNER_ROUTES = {
    ("GET", "jobs"),
    ("POST", "jobs"),
    ("POST", "batch"),
    ("GET", "{jobId}"),
    ("PATCH", "{jobId}"),
    ("DELETE", "{jobId}"),
    ("GET", "executions"),
    ("POST", "run"),
    ("POST", "preview"),
    ("GET", "calendars"),
    ("GET", "{name}"),
    ("PUT", "{name}"),
    ("DELETE", "{name}"),
    ("POST", "retry"),
    ("GET", "dead-letters"),
    ("POST", "redrive"),
    ("POST", "backfill"),
    ("POST", "bulk"),
    ("GET", "limits"),
    ("GET", "{executionId}"),
}
WORKER_ROUTES = {("POST", "heartbeat"), ("POST", "complete")}


def _methods(synthesized) -> dict[tuple[str, str], dict]:
    resources = synthesized.resources("AWS::ApiGateway::Resource")
    methods = {}
    for method in synthesized.resources("AWS::ApiGateway::Method").values():
        props = method["Properties"]
        path_part = resources[props["ResourceId"]["Ref"]]["Properties"]["PathPart"]
        methods[(props["HttpMethod"], path_part)] = props
    return methods


def test_every_route_of_api_md_exists_and_proxies_to_the_api_function(synthesized):
    methods = _methods(synthesized)
    assert set(methods) == OWNER_ROUTES | WORKER_ROUTES
    api_id = synthesized.logical_id(synthesized.stack.functions.api)
    for props in methods.values():
        assert props["Integration"]["Type"] == "AWS_PROXY"
        assert api_id in str(props["Integration"]["Uri"])


def test_owner_routes_need_a_cognito_token(synthesized):
    authorizers = synthesized.resources("AWS::ApiGateway::Authorizer")
    assert len(authorizers) == 1
    authorizer_id, authorizer = next(iter(authorizers.items()))
    assert authorizer["Properties"]["Type"] == "COGNITO_USER_POOLS"
    pool_id = synthesized.logical_id(synthesized.stack.api.user_pool)
    assert authorizer["Properties"]["ProviderARNs"] == [{"Fn::GetAtt": [pool_id, "Arn"]}]
    methods = _methods(synthesized)
    for route in OWNER_ROUTES:
        assert methods[route]["AuthorizationType"] == "COGNITO_USER_POOLS", route
        assert methods[route]["AuthorizerId"] == {"Ref": authorizer_id}


def test_worker_routes_are_authorized_by_iam(synthesized):
    methods = _methods(synthesized)
    for route in WORKER_ROUTES:
        assert methods[route]["AuthorizationType"] == "AWS_IAM", route
        assert "AuthorizerId" not in methods[route]


def test_request_bodies_and_parameters_are_validated(synthesized):
    validators = synthesized.resources("AWS::ApiGateway::RequestValidator")
    assert len(validators) == 1
    validator_id, validator = next(iter(validators.items()))
    assert validator["Properties"]["ValidateRequestBody"] is True
    assert validator["Properties"]["ValidateRequestParameters"] is True
    methods = _methods(synthesized)
    for props in methods.values():
        assert props["RequestValidatorId"] == {"Ref": validator_id}
    models = {
        m["Properties"]["Name"]: m["Properties"] for m in synthesized.resources("AWS::ApiGateway::Model").values()
    }
    # One model per request body, generated from the pydantic models the handler validates with
    generated = gateway_request_schemas()
    assert set(models) == {
        "PostJobs",
        "PostJobsBatch",
        "PatchJobsJobid",
        "PostSchedulesPreview",
        "PutCalendarsName",
        "PostExecutionsExecutionidHeartbeat",
        "PostExecutionsExecutionidComplete",
        "PostDeadlettersRedrive",
        "PostJobsJobidBackfill",
        "PutLimitsName",
        "PostJobsBulk",
    }
    assert models["PostJobs"]["Schema"]["required"] == ["name", "handler", "schedule"]
    assert models["PostJobs"]["Schema"]["properties"] == generated["POST /jobs"]["properties"]
    assert models["PostJobs"]["Schema"]["additionalProperties"] is False
    for route, model in {
        ("POST", "jobs"): "PostJobs",
        ("POST", "heartbeat"): "PostExecutionsExecutionidHeartbeat",
        ("PUT", "{name}"): "PutCalendarsName",
    }.items():
        assert "application/json" in methods[route]["RequestModels"], model


def test_a_body_refused_at_the_edge_answers_in_the_apis_error_shape(synthesized):
    [response] = [
        r["Properties"]
        for r in synthesized.resources("AWS::ApiGateway::GatewayResponse").values()
        if r["Properties"]["ResponseType"] == "BAD_REQUEST_BODY"
    ]
    assert response["StatusCode"] == "400"
    template = response["ResponseTemplates"]["application/json"]
    assert '"code": "invalid_input"' in template and '"field": "body"' in template


def test_stage_is_throttled_traced_and_access_logged(synthesized):
    stage = next(iter(synthesized.resources("AWS::ApiGateway::Stage").values()))["Properties"]
    assert stage["TracingEnabled"] is True
    assert stage["AccessLogSetting"]["DestinationArn"]["Fn::GetAtt"][1] == "Arn"
    assert "$context.requestId" in stage["AccessLogSetting"]["Format"]
    settings = stage["MethodSettings"][0]
    assert settings["ThrottlingRateLimit"] == 1000
    assert settings["ThrottlingBurstLimit"] == 2000
    assert settings["LoggingLevel"] == "ERROR"
    assert settings["DataTraceEnabled"] is False


def test_user_pool_is_invitation_only_with_a_strong_password_policy(synthesized):
    synthesized.template.has_resource_properties(
        "AWS::Cognito::UserPool",
        {
            "AdminCreateUserConfig": {"AllowAdminCreateUserOnly": True},
            "Policies": {"PasswordPolicy": Match.object_like({"MinimumLength": 12, "RequireSymbols": True})},
            "DeletionProtection": "ACTIVE",
        },
    )
    synthesized.template.has_resource_properties(
        "AWS::Cognito::UserPoolClient",
        {"ExplicitAuthFlows": Match.array_with(["ALLOW_USER_PASSWORD_AUTH"]), "PreventUserExistenceErrors": "ENABLED"},
    )


def test_outputs_give_what_the_deploy_guide_needs(synthesized):
    outputs = synthesized.raw["Outputs"]
    for wanted in ("ApiUrl", "UserPoolId", "UserPoolClientId"):
        assert any(key.endswith(wanted) or wanted in key for key in outputs), wanted
