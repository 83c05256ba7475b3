"""The web console on AWS: its static files in a private bucket behind CloudFront (origin access control, HTTPS
only, security headers), the API on the same distribution, and sign-in through the user pool's hosted UI."""

from __future__ import annotations

import json

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct
from duetime.api.openapi import openapi_document
from duetime.console import SECURITY_HEADERS, STATIC_DIR

from infra.api import GATEWAY_ROUTES, WORKER_ROUTES
from infra.common import hosted_ui_domain_prefix, suppress
from infra.context import DeployContext


def api_path_patterns(paths: list[str]) -> tuple[str, ...]:
    """CloudFront path patterns that send each of `paths` (routes as "/jobs/{jobId}/run") to the API: "/jobs"
    for a route that is its first segment alone, "/jobs/*" for those below it."""
    patterns: set[str] = set()
    for path in paths:
        first = path.split("/")[1]
        patterns.add(f"/{first}" if path == f"/{first}" else f"/{first}/*")
    return tuple(sorted(patterns))


# Every route of the API's table an owner may call (the console calls most; a team's own pages behind the same
# distribution may call any), served by the same distribution: same origin, so no CORS and the page's CSP keeps
# connect-src to 'self' and the hosted UI's token endpoint. Derived from the table, so a new route is routed
# (a hand-kept list missed /dead-letters and /executions: the console's dead-letters page, retry and redrive got
# the S3 origin's 403). Workers call the API directly with SigV4, never through the distribution.
API_PATHS = api_path_patterns([route.path for route in GATEWAY_ROUTES if route not in WORKER_ROUTES])
# The OpenAPI document (which the gateway does not serve: it takes no token) is a file beside the console's.
OPENAPI_FILE = "openapi.json"
HSTS_SECONDS = 2 * 365 * 24 * 3600
# How cdk-nag names what CDK's BucketDeployment handler is granted (the default bootstrap's asset bucket).
BASIC_EXECUTION_ROLE = "arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
CDK_ASSETS = "arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*"


class Console(Construct):
    """Bucket, distribution, the console's user pool client and its config.json (where to sign in)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        ctx: DeployContext,
        user_pool: cognito.UserPool,
        rest_api: apigw.RestApi,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Files",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,
        )
        # The user pool's hosted UI; a pool federated to an OIDC issuer (context jwtIssuer) already has one.
        existing = user_pool.node.try_find_child("Domain")
        self.domain = (
            existing
            if isinstance(existing, cognito.UserPoolDomain)
            else user_pool.add_domain(
                "ConsoleDomain",
                cognito_domain=cognito.CognitoDomainOptions(
                    domain_prefix=hosted_ui_domain_prefix(self, f"{ctx.settings.prefix}-console")
                ),
            )
        )
        hosted_ui = self.domain.base_url()
        csp = SECURITY_HEADERS["Content-Security-Policy"].replace(
            "connect-src 'self'", f"connect-src 'self' {hosted_ui}"
        )
        headers = cloudfront.ResponseHeadersPolicy(
            self,
            "Headers",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=csp, override=True
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True
                ),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.NO_REFERRER, override=True
                ),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=Duration.seconds(HSTS_SECONDS), include_subdomains=True, override=True
                ),
            ),
        )
        api_behavior = cloudfront.BehaviorOptions(
            origin=origins.RestApiOrigin(rest_api),
            viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
            allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
            cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
            origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
            response_headers_policy=headers,
        )
        self.distribution = cloudfront.Distribution(
            self,
            "Site",
            comment=f"{ctx.settings.prefix} web console",
            default_root_object="index.html",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=headers,
            ),
            additional_behaviors=dict.fromkeys(API_PATHS, api_behavior),
            minimum_protocol_version=cloudfront.SecurityPolicyProtocol.TLS_V1_2_2021,
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
        )
        self.url = f"https://{self.distribution.distribution_domain_name}/"
        # A public client (no secret): the page signs in with the authorization code and PKCE.
        self.client = user_pool.add_client(
            "ConsoleClient",
            generate_secret=False,
            auth_flows=cognito.AuthFlow(user_srp=True),
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=[cognito.OAuthScope.OPENID, cognito.OAuthScope.EMAIL, cognito.OAuthScope.PROFILE],
                callback_urls=[self.url],
                logout_urls=[self.url],
            ),
            id_token_validity=Duration.hours(1),
            access_token_validity=Duration.hours(1),
            prevent_user_existence_errors=True,
        )
        s3deploy.BucketDeployment(
            self,
            "Deploy",
            destination_bucket=self.bucket,
            sources=[
                s3deploy.Source.asset(str(STATIC_DIR)),
                # As text: json_data would lose the document's nulls on their way to CDK's JavaScript side.
                s3deploy.Source.data(OPENAPI_FILE, json.dumps(openapi_document(), indent=1)),
                s3deploy.Source.json_data(
                    "config.json",
                    {"signIn": {"hostedUi": hosted_ui, "clientId": self.client.user_pool_client_id}},
                ),
            ],
            distribution=self.distribution,
            distribution_paths=["/*"],
            memory_limit=256,
        )
        CfnOutput(self, "ConsoleUrl", value=self.url, description="the web console")
        suppress(
            self.bucket,
            {
                "AwsSolutions-S1": "The console's files are the repository's static files, written only by the "
                "stack's deployment; reads go through CloudFront, whose requests API Gateway logs where they "
                "reach the API.",
            },
        )
        suppress(
            self.distribution,
            {
                "AwsSolutions-CFR1": "A team's console for its own users; the user pool decides who signs in.",
                "AwsSolutions-CFR2": "The API behind it has its WAF web ACL (regional); the static files are public "
                "code with nothing to protect.",
                "AwsSolutions-CFR3": "Static files and the API, whose own access log records every call.",
                "AwsSolutions-CFR4": "The default *.cloudfront.net certificate; with it CloudFront negotiates TLS "
                "1.2 or later only with viewers that offer it. A custom domain sets TLSv1.2_2021.",
            },
        )
        # CDK's one handler of every BucketDeployment in the stack lives at the stack's root.
        stack = Stack.of(self)
        bucket_id = stack.get_logical_id(self.bucket.node.default_child)  # type: ignore[arg-type]
        copy = "CDK's BucketDeployment handler copies the console's files from CDK's asset bucket into the console "
        deployment_reasons = {
            f"AwsSolutions-IAM4[Policy::{BASIC_EXECUTION_ROLE}]": (
                "CDK's BucketDeployment handler writes its logs with the AWS managed basic execution role."
            ),
            **{
                f"AwsSolutions-IAM5[Action::s3:{action}]": copy + "bucket with the S3 action groups CDK grants."
                for action in ("GetBucket*", "GetObject*", "List*", "Abort*", "DeleteObject*")
            },
            f"AwsSolutions-IAM5[Resource::{CDK_ASSETS}]": (copy + "bucket: it reads the assets' objects."),
            f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]": copy + "bucket: it writes every object of it.",
            "AwsSolutions-L1": "CDK's BucketDeployment handler runs on the runtime CDK picks and updates.",
            "AwsSolutions-IAM5[Resource::*]": "CloudFront invalidations take no resource ARN narrower than the "
            "distribution's account (cloudfront:CreateInvalidation after each deploy).",
        }
        for child in stack.node.children:
            if child.node.id.startswith("Custom::CDKBucketDeployment"):
                suppress(child, deployment_reasons)
