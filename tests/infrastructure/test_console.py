"""The web console's deployment (context console=true): a private bucket read only through CloudFront's origin
access control, HTTPS only with security headers, and a user pool client whose callback is the console."""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any

from aws_cdk.assertions import Match

from infra.checkov_skips import CONSOLE, skipped
from tests.infrastructure.conftest import Synthesized
from tests.infrastructure.helpers import CheckovReport, verdict


def only(synthesized: Synthesized, resource_type: str) -> dict[str, Any]:
    found = synthesized.resources(resource_type)
    assert len(found) == 1, list(found)
    return next(iter(found.values()))["Properties"]


def test_the_console_is_off_unless_asked_for(synthesized: Synthesized) -> None:
    assert synthesized.resources("AWS::CloudFront::Distribution") == {}
    assert synthesized.stack.console is None


def test_the_bucket_is_private_and_readable_only_by_the_distribution(with_console: Synthesized) -> None:
    bucket = only(with_console, "AWS::S3::Bucket")
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert "WebsiteConfiguration" not in bucket
    statements = only(with_console, "AWS::S3::BucketPolicy")["PolicyDocument"]["Statement"]
    allowed = [s for s in statements if s["Effect"] == "Allow"]
    # Only CloudFront may read, and only for this distribution; anyone else is only ever denied (plain HTTP).
    assert allowed and all(s["Principal"] == {"Service": "cloudfront.amazonaws.com"} for s in allowed)
    assert all("AWS:SourceArn" in json.dumps(s["Condition"]) for s in allowed)
    assert all(s["Action"] == "s3:GetObject" for s in allowed)


def test_cloudfront_uses_origin_access_control_and_https_only(with_console: Synthesized) -> None:
    control = only(with_console, "AWS::CloudFront::OriginAccessControl")["OriginAccessControlConfig"]
    assert control["OriginAccessControlOriginType"] == "s3" and control["SigningBehavior"] == "always"
    config = only(with_console, "AWS::CloudFront::Distribution")["DistributionConfig"]
    behaviors = [config["DefaultCacheBehavior"], *config["CacheBehaviors"]]
    assert {b["ViewerProtocolPolicy"] for b in behaviors} == {"https-only"}
    s3_origin = next(o for o in config["Origins"] if "S3OriginConfig" in o)
    assert "OriginAccessControlId" in s3_origin and s3_origin["S3OriginConfig"].get("OriginAccessIdentity", "") == ""
    assert {b["PathPattern"] for b in config["CacheBehaviors"]} >= {"/jobs", "/jobs/*", "/schedules/*"}


def test_every_answer_carries_the_security_headers(with_console: Synthesized) -> None:
    policy = only(with_console, "AWS::CloudFront::ResponseHeadersPolicy")["ResponseHeadersPolicyConfig"]
    headers = policy["SecurityHeadersConfig"]
    assert "script-src 'self'" in json.dumps(headers["ContentSecurityPolicy"])
    assert headers["FrameOptions"]["FrameOption"] == "DENY"
    assert headers["StrictTransportSecurity"]["AccessControlMaxAgeSec"] >= 31536000
    assert headers["ContentTypeOptions"]["Override"] is True
    config = only(with_console, "AWS::CloudFront::Distribution")["DistributionConfig"]
    for behavior in [config["DefaultCacheBehavior"], *config["CacheBehaviors"]]:
        assert "ResponseHeadersPolicyId" in behavior


def test_the_console_signs_in_with_a_public_client_whose_callback_is_the_console(with_console: Synthesized) -> None:
    with_console.template.has_resource_properties(
        "AWS::Cognito::UserPoolClient",
        {
            "GenerateSecret": False,
            "AllowedOAuthFlows": ["code"],
            "AllowedOAuthFlowsUserPoolClient": True,
            "CallbackURLs": [{"Fn::Join": ["", ["https://", {"Fn::GetAtt": [Match.any_value(), "DomainName"]}, "/"]]}],
        },
    )
    with_console.template.resource_count_is("AWS::Cognito::UserPoolDomain", 1)
    deployment = json.dumps(with_console.resources("Custom::CDKBucketDeployment"))
    assert "DistributionId" in deployment  # a deploy invalidates what CloudFront cached


def test_checkov_finds_nothing_in_the_console_that_is_not_skipped_with_a_reason(checkov: CheckovReport) -> None:
    unexpected, skips = verdict(checkov.failed["with console"], {**skipped(with_data_key=False), **CONSOLE})
    assert not unexpected, "\n".join(unexpected)
    assert set(CONSOLE) <= set(skips), set(CONSOLE) - set(skips)  # no stale excuse


def _console_calls() -> set[str]:
    """Every API path the console's modules call (their `api(method, path ...)` calls), with each `${...}` a
    placeholder."""
    from duetime.console import STATIC_DIR

    script = "\n".join(module.read_text() for module in sorted(STATIC_DIR.glob("*.js")))
    calls = re.findall(r"""\bapi\(\s*"[A-Z]+",\s*[`"](/[^`"]*)[`"]""", script)
    return {re.sub(r"\$\{[^}]*\}", "x", call).split("?")[0] for call in calls}


def test_every_path_the_console_calls_reaches_the_api_through_the_distribution(with_console: Synthesized) -> None:
    # Issue 29: /dead-letters and /executions/* were missing; the dead-letters page, retry and redrive got the
    # S3 origin's 403.
    config = only(with_console, "AWS::CloudFront::Distribution")["DistributionConfig"]
    s3_origin = next(o["Id"] for o in config["Origins"] if "S3OriginConfig" in o)
    to_api = [b["PathPattern"] for b in config["CacheBehaviors"] if b["TargetOriginId"] != s3_origin]
    calls = _console_calls()
    assert {"/dead-letters", "/dead-letters/redrive", "/executions/x/retry", "/jobs"} <= calls
    for call in calls:
        assert any(fnmatch.fnmatchcase(call, pattern) for pattern in to_api), call
    # The console's own files stay with the bucket.
    from duetime.console import STATIC_DIR

    modules = [f"/{module.name}" for module in STATIC_DIR.glob("*.js")]
    for name in ("/index.html", *modules, "/console.css", "/config.json", "/openapi.json"):
        assert not any(fnmatch.fnmatchcase(name, pattern) for pattern in to_api), name


def test_the_openapi_document_is_served_beside_the_console(with_console: Synthesized) -> None:
    # The gateway does not serve /openapi.json (it takes no token): the deployment writes it to the bucket.
    from duetime.api.openapi import openapi_document

    documents = list(with_console.outdir.glob("asset.*/openapi.json"))
    assert len(documents) == 1
    assert json.loads(documents[0].read_text()) == openapi_document()


def test_the_hosted_ui_domain_prefix_is_the_accounts_own(with_console: Synthesized) -> None:
    # Issue 29: a prefix is taken per region across every account; a bare "duetime-console" deploys only once.
    [domain] = with_console.resources("AWS::Cognito::UserPoolDomain").values()
    assert domain["Properties"]["Domain"] == {"Fn::Join": ["", ["duetime-console-", {"Ref": "AWS::AccountId"}]]}


def test_the_api_user_pools_hosted_ui_prefix_is_the_accounts_own_too() -> None:
    import aws_cdk as cdk

    from infra.common import hosted_ui_domain_prefix

    stack = cdk.Stack(cdk.App(), "Prefixes")
    assert stack.resolve(hosted_ui_domain_prefix(stack, "duetime")) == {
        "Fn::Join": ["", ["duetime-", {"Ref": "AWS::AccountId"}]]
    }
    pinned = cdk.Stack(cdk.App(), "Pinned", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    assert hosted_ui_domain_prefix(pinned, "duetime") == "duetime-123456789012"
