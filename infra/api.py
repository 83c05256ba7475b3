"""API: a REST API in front of the api function; owners sign in with the Cognito user pool (optionally
federated to any OIDC issuer), workers' routes are IAM-authorized; bodies validated, throttled, logged."""

from __future__ import annotations

import json
import re
from typing import Any

from aws_cdk import CfnOutput, Duration, RemovalPolicy, SecretValue
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct
from duetime.api.openapi import gateway_request_schemas
from duetime.api.routes import ROUTES
from duetime.api.routing import Access

from infra.common import hosted_ui_domain_prefix, log_group, suppress
from infra.context import DeployContext

# Request bodies are validated at the edge against the schemas generated from the same pydantic models
# the handler validates with (duetime.api.openapi), so the two can never disagree.
REQUEST_SCHEMAS = gateway_request_schemas()
# The gateway serves every route of the API's table that takes a token (the public /openapi.json is
# served by `duetime local`; on AWS it would be a route open to anyone for a document in the repository).
GATEWAY_ROUTES = [route for route in ROUTES if route.access is not Access.PUBLIC]
WORKER_ROUTES = [route for route in GATEWAY_ROUTES if route.access is Access.WORKER]
# WAF counts rate-based rules over this window (seconds); context callerRateLimit is per window.
RATE_WINDOW_SECONDS = 300
# Requests without a token, per source address and window: they are refused (401) whatever their number; this
# only keeps a flood of them off the stage. Callers with a token are limited per token (callerRateLimit), not per
# address: the console's users all reach the API from CloudFront's few edge addresses.
ANONYMOUS_RATE_LIMIT = 1000
# A rate rule answers as a quota does (429, Retry-After, the API's error body), so clients back off instead of
# taking WAF's default 403 for a refusal.
RATE_LIMITED_BODY = "rate-limited"
RATE_LIMITED_RETRY_AFTER_SECONDS = 60


class Api(Construct):
    """The REST API, its user pool and its access logs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        ctx: DeployContext,
        function: lambda_.IFunction,
        key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.ctx = ctx
        self.user_pool = cognito.UserPool(
            self,
            "Users",
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(email=True, username=True),
            password_policy=cognito.PasswordPolicy(
                min_length=12, require_digits=True, require_lowercase=True, require_uppercase=True, require_symbols=True
            ),
            mfa=cognito.Mfa.OPTIONAL,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            feature_plan=cognito.FeaturePlan.PLUS,
            standard_threat_protection_mode=cognito.StandardThreatProtectionMode.FULL_FUNCTION,
            deletion_protection=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        suppress(
            self.user_pool,
            {
                "AwsSolutions-COG2": "MFA is offered (TOTP) but optional: duetime users are team members whose IdP "
                "may already enforce MFA through federation (context jwtIssuer).",
            },
        )
        providers = [cognito.UserPoolClientIdentityProvider.COGNITO]
        oauth = None
        if ctx.jwt_issuer:
            oidc = cognito.UserPoolIdentityProviderOidc(
                self,
                "Issuer",
                user_pool=self.user_pool,
                name="oidc",
                issuer_url=ctx.jwt_issuer,
                client_id=ctx.jwt_audience,  # type: ignore[arg-type]
                client_secret=SecretValue.secrets_manager(ctx.jwt_client_secret_name).unsafe_unwrap(),  # type: ignore[arg-type]
                scopes=["openid", "email", "profile"],
                attribute_mapping=cognito.AttributeMapping(email=cognito.ProviderAttribute.other("email")),
            )
            providers.append(cognito.UserPoolClientIdentityProvider.custom(oidc.provider_name))
            oauth = cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=[cognito.OAuthScope.OPENID, cognito.OAuthScope.EMAIL, cognito.OAuthScope.PROFILE],
                callback_urls=[ctx.callback_url],
            )
            self.user_pool.add_domain(
                "Domain",
                cognito_domain=cognito.CognitoDomainOptions(
                    domain_prefix=hosted_ui_domain_prefix(self, ctx.settings.prefix)
                ),
            )
        self.client = self.user_pool.add_client(
            "Client",
            auth_flows=cognito.AuthFlow(user_password=True, user_srp=True),
            supported_identity_providers=providers,
            o_auth=oauth,
            id_token_validity=Duration.hours(1),
            access_token_validity=Duration.hours(1),
            prevent_user_existence_errors=True,
        )

        access_logs = log_group(self, "AccessLogs", ctx.log_retention_days, key)
        self.rest_api = apigw.RestApi(
            self,
            "Rest",
            rest_api_name=f"{ctx.settings.prefix}-api",
            description="duetime: jobs for owners, heartbeat and complete for workers",
            cloud_watch_role=True,
            cloud_watch_role_removal_policy=RemovalPolicy.DESTROY,
            endpoint_types=[apigw.EndpointType.REGIONAL],
            deploy_options=apigw.StageOptions(
                stage_name="v1",
                throttling_rate_limit=ctx.api_rate_limit,
                throttling_burst_limit=ctx.api_burst_limit,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                tracing_enabled=True,
                metrics_enabled=True,
            ),
        )
        self.authorizer = apigw.CognitoUserPoolsAuthorizer(
            self, "Owners", cognito_user_pools=[self.user_pool], results_cache_ttl=Duration.minutes(5)
        )
        self.validator = self.rest_api.add_request_validator(
            "Validate", validate_request_body=True, validate_request_parameters=True
        )
        # A body refused at the edge answers in the API's own error shape (docs/api.md), not API Gateway's.
        self.rest_api.add_gateway_response(
            "BadBody",
            type=apigw.ResponseType.BAD_REQUEST_BODY,
            status_code="400",
            templates={
                "application/json": '{"error": {"code": "invalid_input", '
                '"message": "$util.escapeJavaScript($context.error.validationErrorString)", "field": "body"}}'
            },
        )
        integration = apigw.LambdaIntegration(function, proxy=True)  # type: ignore[arg-type]
        owner = {"authorizer": self.authorizer, "authorization_type": apigw.AuthorizationType.COGNITO}

        def model(route: str) -> dict[str, apigw.IModel]:
            # API Gateway model names are alphanumeric: /dead-letters/redrive -> PostDeadlettersRedrive
            parts = (part.strip("{}").capitalize() for part in route.replace("/", " ").split())
            name = re.sub("[^A-Za-z0-9]", "", "".join(parts))
            created = self.rest_api.add_model(
                name, content_type="application/json", model_name=name, schema=_schema(REQUEST_SCHEMAS[route])
            )
            return {"application/json": created}

        def method(
            resource: apigw.IResource, verb: str, body: dict[str, apigw.IModel] | None = None, **auth: Any
        ) -> None:
            auth = auth or owner
            resource.add_method(
                verb,
                integration,
                request_validator=self.validator,
                request_models=body,
                **auth,
            )

        def resource(path: str) -> apigw.IResource:
            node = self.rest_api.root
            for part in path.strip("/").split("/"):
                node = node.get_resource(part) or node.add_resource(part)
            return node

        for route in GATEWAY_ROUTES:
            # An optional body (run now's) is left to the API: the gateway would refuse an empty one.
            body = model(f"{route.method} {route.path}") if route.body is not None and route.body_required else None
            route_resource = resource(route.path)
            if route.access is Access.WORKER:
                method(route_resource, route.method, body, authorization_type=apigw.AuthorizationType.IAM)
                suppress(
                    route_resource,
                    {
                        "AwsSolutions-COG4": "Worker-facing route: workers are AWS principals, so SigV4 (IAM) "
                        "authorizes it instead of an owner's Cognito token.",
                    },
                )
            else:  # an owner's route, or one any caller may use: only owners hold Cognito tokens on AWS
                method(route_resource, route.method, body)

        self.web_acl = self._web_acl(ctx)
        suppress(
            self.rest_api,
            {
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AmazonAPIGatewayPushToCloudWatchLogs]": "API Gateway's account-level CloudWatch role uses the AWS "
                "managed policy made for it, the documented way to let API Gateway write execution logs.",
            },
        )
        CfnOutput(self, "ApiUrl", value=self.rest_api.url, description="duetime API base URL")
        CfnOutput(self, "UserPoolId", value=self.user_pool.user_pool_id)
        CfnOutput(self, "UserPoolClientId", value=self.client.user_pool_client_id)

    def admit_workers(self, worker_roles: list[iam.IRole]) -> None:
        """The resource policy: owners' routes open to callers with a Cognito token (the authorizer decides);
        the worker routes to the worker roles (and context workerRoleArns) only, whatever else IAM allows."""
        principal_arns = [role.role_arn for role in worker_roles] + self.ctx.worker_role_arns
        # The "execute-api:/<stage>/<verb>/<path>" shorthand of resource policies: the API's own ARN would make
        # the policy depend on the API it belongs to.
        every_route = "execute-api:/*"
        worker_routes = [f"execute-api:/*/{route.method}{_wildcard(route.path, '*')}" for route in WORKER_ROUTES]
        # Without an explicit Allow, a resource policy would refuse the Cognito-authorized routes.
        self.rest_api.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.AnyPrincipal()], actions=["execute-api:Invoke"], resources=[every_route]
            )
        )
        # SigV4 proves who calls; this Deny makes any principal but a worker role unable to call heartbeat or
        # complete, even one whose own IAM policy allows execute-api:Invoke on "*".
        self.rest_api.add_to_resource_policy(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["execute-api:Invoke"],
                resources=worker_routes,
                conditions={"ArnNotEquals": {"aws:PrincipalArn": principal_arns}},
            )
        )

    def _web_acl(self, ctx: DeployContext) -> wafv2.CfnWebACL:
        """A regional web ACL on the stage: AWS's known-bad-inputs rules, and rate limits on the owners' routes: per
        token (callerRateLimit, above what the owner quotas allow), and per source address for requests without
        one. Workers' routes are left out of the rate rules: ECS workers share one NAT address, and the resource
        policy already admits only worker roles there. A limited caller gets 429 with Retry-After, as from a quota.

        WAF rather than usage plans: a usage plan meters API keys, which owners signing in with Cognito do not
        carry (and an API key is no identity); a rate-based rule keys on what each caller does send, synthesizes
        offline and is the web ACL cdk-nag's AwsSolutions-APIG3 asks for."""
        owners_routes_only = wafv2.CfnWebACL.StatementProperty(
            not_statement=wafv2.CfnWebACL.NotStatementProperty(
                statement=wafv2.CfnWebACL.StatementProperty(
                    regex_match_statement=wafv2.CfnWebACL.RegexMatchStatementProperty(
                        field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(uri_path={}),
                        # Unanchored at the start: the URI WAF sees begins with the stage (/v1/executions/...).
                        regex_string=f"({'|'.join(_wildcard(route.path, '[^/]+') for route in WORKER_ROUTES)})$",
                        text_transformations=[wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")],
                    )
                )
            )
        )

        without_token = wafv2.CfnWebACL.StatementProperty(
            and_statement=wafv2.CfnWebACL.AndStatementProperty(
                statements=[
                    owners_routes_only,
                    wafv2.CfnWebACL.StatementProperty(
                        not_statement=wafv2.CfnWebACL.NotStatementProperty(
                            # A header WAF does not find matches no size: this holds for requests that carry one.
                            statement=wafv2.CfnWebACL.StatementProperty(
                                size_constraint_statement=wafv2.CfnWebACL.SizeConstraintStatementProperty(
                                    field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(
                                        single_header={"Name": "authorization"}
                                    ),
                                    comparison_operator="GT",
                                    size=0,
                                    text_transformations=[
                                        wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")
                                    ],
                                )
                            )
                        )
                    ),
                ]
            )
        )

        def rate_rule(
            name: str,
            priority: int,
            limit: int,
            keys: list[wafv2.CfnWebACL.RateBasedStatementCustomKeyProperty],
            scope: wafv2.CfnWebACL.StatementProperty,
        ) -> Any:
            return wafv2.CfnWebACL.RuleProperty(
                name=name,
                priority=priority,
                action=wafv2.CfnWebACL.RuleActionProperty(
                    block=wafv2.CfnWebACL.BlockActionProperty(
                        custom_response=wafv2.CfnWebACL.CustomResponseProperty(
                            response_code=429,
                            custom_response_body_key=RATE_LIMITED_BODY,
                            response_headers=[
                                wafv2.CfnWebACL.CustomHTTPHeaderProperty(
                                    name="Retry-After", value=str(RATE_LIMITED_RETRY_AFTER_SECONDS)
                                )
                            ],
                        )
                    )
                ),
                statement=wafv2.CfnWebACL.StatementProperty(
                    rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                        limit=limit,
                        evaluation_window_sec=RATE_WINDOW_SECONDS,
                        aggregate_key_type="CUSTOM_KEYS",
                        custom_keys=keys,
                        scope_down_statement=scope,
                    )
                ),
                visibility_config=visibility(name),
            )

        def visibility(name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
            return wafv2.CfnWebACL.VisibilityConfigProperty(
                cloud_watch_metrics_enabled=True,
                metric_name=f"{ctx.settings.prefix}-{name}",
                sampled_requests_enabled=True,
            )

        acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            scope="REGIONAL",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=visibility("api"),
            custom_response_bodies={
                RATE_LIMITED_BODY: wafv2.CfnWebACL.CustomResponseBodyProperty(
                    content_type="APPLICATION_JSON",
                    content=json.dumps(
                        {
                            "error": {
                                "code": "rate_limited",
                                "message": f"too many requests from this caller in {RATE_WINDOW_SECONDS // 60} "
                                "minutes; try again later",
                            }
                        }
                    ),
                )
            },
            rules=[
                wafv2.CfnWebACL.RuleProperty(
                    name="known-bad-inputs",
                    priority=0,
                    override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                            vendor_name="AWS", name="AWSManagedRulesKnownBadInputsRuleSet"
                        )
                    ),
                    visibility_config=visibility("known-bad-inputs"),
                ),
                rate_rule(
                    "rate-per-ip",
                    1,
                    ANONYMOUS_RATE_LIMIT,
                    [wafv2.CfnWebACL.RateBasedStatementCustomKeyProperty(ip={})],
                    without_token,
                ),
                rate_rule(
                    "rate-per-token",
                    2,
                    ctx.caller_rate_limit,
                    [
                        wafv2.CfnWebACL.RateBasedStatementCustomKeyProperty(
                            header=wafv2.CfnWebACL.RateLimitHeaderProperty(
                                name="authorization",
                                text_transformations=[
                                    wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")
                                ],
                            )
                        )
                    ],
                    owners_routes_only,
                ),
            ],
        )
        wafv2.CfnWebACLAssociation(
            self, "WebAclStage", resource_arn=self.rest_api.deployment_stage.stage_arn, web_acl_arn=acl.attr_arn
        )
        return acl

    def worker_route_arns(self) -> list[str]:
        """execute-api ARNs of the IAM-authorized worker routes, for granting a worker principal."""
        return [
            self.rest_api.arn_for_execute_api(
                route.method, _wildcard(route.path, "*"), self.rest_api.deployment_stage.stage_name
            )
            for route in WORKER_ROUTES
        ]


def _wildcard(path: str, any_segment: str) -> str:
    """A route's path with each {parameter} as `any_segment` (a policy's "*", a regex's "[^/]+")."""
    return re.sub(r"{\w+}", lambda _: any_segment, path)


# JSON Schema keywords the generated schemas use, as apigw.JsonSchema's snake_case arguments.
_KEYWORDS = {
    "required": "required",
    "enum": "enum",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minimum": "minimum",
    "maximum": "maximum",
    "format": "format",
    "pattern": "pattern",
    "default": "default",
    "minItems": "min_items",
    "maxItems": "max_items",
}


def _schema(schema: dict[str, Any], top: bool = True) -> apigw.JsonSchema:
    """A plain draft-4 dict as apigw.JsonSchema (which wants snake_case keywords and enum types)."""
    converted: dict[str, Any] = {"schema": apigw.JsonSchemaVersion.DRAFT4} if top else {}
    for key, value in schema.items():
        if key == "$schema":
            continue
        if key == "type":
            kinds = [apigw.JsonSchemaType[v.upper()] for v in (value if isinstance(value, list) else [value])]
            converted["type"] = kinds[0] if len(kinds) == 1 else kinds
        elif key == "properties":
            converted["properties"] = {name: _schema(sub, top=False) for name, sub in value.items()}
        elif key == "additionalProperties":
            converted["additional_properties"] = value if isinstance(value, bool) else _schema(value, top=False)
        elif key in ("anyOf", "allOf", "oneOf"):
            converted[{"anyOf": "any_of", "allOf": "all_of", "oneOf": "one_of"}[key]] = [
                _schema(sub, top=False) for sub in value
            ]
        elif key == "items":
            converted["items"] = _schema(value, top=False)
        elif key in _KEYWORDS:
            converted[_KEYWORDS[key]] = value
        else:
            raise ValueError(f"unsupported JSON schema keyword {key!r}")
    return apigw.JsonSchema(**converted)
