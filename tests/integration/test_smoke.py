"""`duetime smoke` against the synthesized stack deployed locally (duetime.local.deployed): the template's
tables, queues, topic, bus and roles in moto, each role's policies enforced on every call, and every function
run as a process from the cloud assembly (its asset, its layers, the runtime's boto3). The smoke passes on the
stack as synthesized, and fails, naming the cause, on one with a grant taken out, on one whose layer lacks
a module, on one whose workers may not invoke the smoke target, and on a console distribution without one of
the API's path patterns. What it does on AWS that these tests cannot reach (Lambda's Invoke API, CloudWatch
Logs and metrics, CloudFormation's DescribeStacks, CloudFront itself) is AwsDeployment's part, outside them."""

from __future__ import annotations

import copy
import json
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import duetime.cli.smoke as smoke_module
import pytest
from duetime.cli.main import main
from duetime.cli.smoke import AwsDeployment, Check, Smoke, run_smoke, table
from duetime.local.deployed import LocalDeployment
from duetime.local.lambda_process import deployed_functions
from duetime.local.synth import TEMPLATE_FILE, synthesized
from moto import mock_aws

from tests.integration.test_local_iam import without_grant

# Long enough for a path to finish on a loaded machine; the failing stacks wait it out on the paths they break.
WAIT_SECONDS = 45
# The smoke target's sleep here: above the 30 s read timeout whose retries invoked a target again (60 s on AWS).
TARGET_SECONDS = 35


@pytest.fixture(scope="module")
def assembly() -> tuple[dict[str, Any], Path]:
    outdir = synthesized()  # kept under build/synth/ for these sources: one synth for every test that needs it
    return json.loads((outdir / TEMPLATE_FILE).read_text()), outdir


def smoke_of(deployment: LocalDeployment, wait_seconds: float = WAIT_SECONDS) -> Smoke:
    deployment.start()
    try:
        return run_smoke(deployment, wait_seconds=wait_seconds, quiet=True, target_seconds=TARGET_SECONDS)
    finally:
        deployment.stop()


def failed(smoke: Smoke) -> dict[str, Check]:
    return {check.name: check for check in smoke.checks if not check.passed}


def shown(smoke: Smoke) -> str:
    return "\n".join(table(smoke.checks))


def test_the_smoke_passes_against_the_locally_deployed_stack(assembly: tuple[dict[str, Any], Path]) -> None:
    template, outdir = assembly
    deployment = LocalDeployment(template, outdir)
    smoke = smoke_of(deployment)
    assert smoke.passed, shown(smoke)
    names = [check.name for check in smoke.checks]
    for expected in (
        "pre-load ShardErrors",
        "pre-load cursors",
        "maxRuns: 2 cron job",
        "GET /jobs/{id}/executions",
        "demo.fail, pauseAfterFailures: 1",
        "bounded job resumed past endAt",
        "DLQ redrive",
        "lambda: target invoked once",
        "ShardErrors metric",
    ):
        assert expected in names, shown(smoke)
    checks = {check.name: check for check in smoke.checks}
    assert not checks["lambda: target invoked once"].skipped, shown(smoke)
    assert "one attempt, one invocation of duetime-smoke-target" in checks["lambda: target invoked once"].detail
    # The stack as synthesized by default has no console: that check says so.
    assert checks["console through CloudFront"].skipped, shown(smoke)
    # Every function was started and checked, from the cloud assembly (each a process of its own).
    functions = {f"DuetimeStack-{f.logical_id}" for f in deployed_functions(template, outdir)}
    functions.add("duetime-smoke-target")
    assert {f"cold start {name}" for name in functions} <= set(names)
    assert {f"no AccessDenied {name}" for name in functions} <= set(names)
    worker = next(name for name in functions if "Worker" in name)
    assert deployment.logs[worker], "the worker's log lines were read"


def test_the_smoke_fails_naming_the_call_a_removed_grant_denies(assembly: tuple[dict[str, Any], Path]) -> None:
    """The default class's worker without dynamodb:UpdateItem on the jobs table (the issue's own defect): the
    bounded job never completes, the failing one never pauses, and the worker's log names the denied call."""
    template, outdir = assembly
    crippled = without_grant(template, "FunctionsWorkerdefaultRole", "dynamodb:UpdateItem", "StorageJobs")
    smoke = smoke_of(LocalDeployment(crippled, outdir), wait_seconds=20)
    failures = failed(smoke)
    worker = next(name for name in failures if name.startswith("no AccessDenied") and "Worker" in name)
    assert "dynamodb:UpdateItem" in failures[worker].detail, shown(smoke)
    assert "AccessDenied" in failures[worker].detail
    assert "maxRuns: 2 cron job" in failures, shown(smoke)
    assert "demo.fail, pauseAfterFailures: 1" in failures, shown(smoke)
    # What the grant does not touch still passes: the cold starts, the pre-load, the other functions' calls.
    assert not any(name.startswith("cold start") or name.startswith("pre-load") for name in failures), shown(smoke)
    assert [name for name in failures if name.startswith("no AccessDenied")] == [worker], shown(smoke)


def test_the_smoke_fails_naming_the_functions_whose_layer_lacks_a_module(
    assembly: tuple[dict[str, Any], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The core layer without duetime/notify.py (which duetime.config imports): every function's cold start
    fails with the import error, though this machine's venv has the module. Run as `duetime smoke` (the
    command's deployment is the local one): the table names each function, and the command exits 1."""
    template, outdir = assembly
    [api] = [f for f in deployed_functions(template, outdir) if f.service == "api"]
    core, *others = api.layers
    crippled = tmp_path / "core"
    shutil.copytree(core, crippled)
    (crippled / "python" / "duetime" / "notify.py").unlink()
    deployment = LocalDeployment(template, outdir, layers=(crippled, *others)).start()
    given: list[tuple[str, str]] = []

    def local(stack_name: str, region: str, endpoint_url: str | None = None) -> LocalDeployment:
        given.append((stack_name, region))
        return deployment

    monkeypatch.setattr(smoke_module, "AwsDeployment", local)
    try:
        code = main(["smoke", "--stack-name", "Mine", "--region", "eu-west-1", "--wait-seconds", "5", "--quiet"])
    finally:
        deployment.stop()
    assert code == 1
    assert given == [("Mine", "eu-west-1")]
    rows = [line.split(None, 4) for line in capsys.readouterr().out.splitlines()]  # cold start NAME FAIL DETAIL
    failures = {" ".join(row[:3]): row[4] for row in rows if len(row) == 5 and row[3] == "FAIL"}
    for logical_id in (f.logical_id for f in deployed_functions(template, outdir)):
        detail = failures[f"cold start DuetimeStack-{logical_id}"]
        assert "Runtime.ImportModuleError" in detail and "No module named 'duetime.notify'" in detail, rows


def test_on_aws_the_functions_logs_and_metric_come_from_cloudformation_lambda_logs_and_cloudwatch() -> None:
    """AwsDeployment's reads, against in-process moto: the stack's duetime functions and its smoke target (a
    function of another kind in the stack is left out), their log events since a time (none yet: an empty
    list), and the metric's sum. (Invoking needs Lambda itself, which moto runs only in Docker: the tests above
    invoke locally.)"""
    region = "eu-west-1"
    with mock_aws():
        role = boto3.client("iam", region_name=region).create_role(RoleName="r", AssumeRolePolicyDocument="{}")
        function = {
            "Runtime": "python3.12",
            "Handler": "index.handler",
            "Role": role["Role"]["Arn"],
            "Code": {"ZipFile": "def handler(event, context): return None"},
        }
        template = {
            "Resources": {
                "Api": {
                    "Type": "AWS::Lambda::Function",
                    "Properties": {
                        **function,
                        "FunctionName": "duetime-api",
                        "Environment": {"Variables": {"POWERTOOLS_SERVICE_NAME": "api", "DUETIME_PREFIX": "duetime"}},
                    },
                },
                "Provider": {"Type": "AWS::Lambda::Function", "Properties": {**function, "FunctionName": "provider"}},
                "Target": {
                    "Type": "AWS::Lambda::Function",
                    "Properties": {**function, "FunctionName": "duetime-smoke-target"},
                },
            },
            "Outputs": {"SmokeTargetFunction": {"Value": {"Ref": "Target"}}},
        }
        cloudformation = boto3.client("cloudformation", region_name=region)
        cloudformation.create_stack(StackName="Mine", TemplateBody=json.dumps(template))
        deployment = AwsDeployment("Mine", region)
        api, target = sorted(deployment.functions(), key=lambda f: f.name)
        assert (api.name, api.service, api.environment["DUETIME_PREFIX"]) == ("duetime-api", "api", "duetime")
        # The smoke target, by the output that names it; no console (no distribution): nothing to request.
        assert (target.name, target.label) == ("duetime-smoke-target", "smoke_target")
        assert deployment.through_console("GET", "/jobs") is None
        since = datetime.now(UTC) - timedelta(minutes=1)
        assert deployment.log_lines(api, since) == []
        logs = boto3.client("logs", region_name=region)
        logs.create_log_group(logGroupName="/aws/lambda/duetime-api")
        logs.create_log_stream(logGroupName="/aws/lambda/duetime-api", logStreamName="one")
        now_ms = int(datetime.now(UTC).timestamp() * 1000)
        events = [{"timestamp": now_ms - 120_000, "message": "before"}, {"timestamp": now_ms, "message": "denied"}]
        logs.put_log_events(logGroupName="/aws/lambda/duetime-api", logStreamName="one", logEvents=events)
        assert deployment.log_lines(api, since) == ["denied"]
        metric = {"MetricName": "ShardErrors", "Dimensions": [{"Name": "service", "Value": "preloader"}]}
        other = {"MetricName": "ShardErrors", "Dimensions": [{"Name": "service", "Value": "worker"}]}
        boto3.client("cloudwatch", region_name=region).put_metric_data(
            Namespace="duetime", MetricData=[{**metric, "Value": 3}, {**other, "Value": 5}]
        )
        assert deployment.metric_sum("ShardErrors", "preloader", since) == 3.0


def test_a_stack_that_is_not_there_fails_the_first_check_and_the_command(capsys: Any) -> None:
    with mock_aws():
        code = main(["smoke", "--stack-name", "Nowhere", "--region", "eu-west-1", "--quiet"])
    assert code == 1
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("stack ")]
    assert row.split()[1] == "FAIL" and "Nowhere" in row, row


def test_the_smoke_fails_when_the_workers_may_not_invoke_the_smoke_target(
    assembly: tuple[dict[str, Any], Path],
) -> None:
    """The default class's worker without lambda:InvokeFunction on the smoke target: the worker's invocation
    goes through the moto server, which refuses it, so the run fails (one attempt) and the check names the
    denied call; the worker's log has it too. Only the target's path is run (smoke_of runs them all)."""
    template, outdir = assembly
    crippled = without_grant(template, "FunctionsWorkerdefaultRole", "lambda:InvokeFunction", "smoke-target")
    deployment = LocalDeployment(crippled, outdir).start()
    try:
        smoke = Smoke(deployment, wait_seconds=WAIT_SECONDS, target_seconds=1, say=lambda line: None)
        assert smoke.find_functions() and smoke.cold_starts()["smoke_target"], shown(smoke)
        path = smoke.target_path()
        assert path is not None
        smoke.wait_for([path])
        smoke.delete_jobs()
        smoke.no_access_denied()
    finally:
        deployment.stop()
    failures = failed(smoke)
    detail = failures["lambda: target invoked once"].detail
    assert "the run failed" in detail and "lambda:InvokeFunction" in detail, shown(smoke)
    worker = next(name for name in failures if name.startswith("no AccessDenied") and "Worker" in name)
    assert "lambda:InvokeFunction" in failures[worker].detail, shown(smoke)


def test_the_smoke_fails_counting_the_invocations_of_a_target_client_that_retries(
    assembly: tuple[dict[str, Any], Path], tmp_path: Path
) -> None:
    """Defect 2 put back: the core layer's target client with a 3 s read timeout and the SDK's standard retries
    (3 attempts), the target sleeping 5 s. The client gives up on each invocation while it still runs and
    invokes the target again: one attempt of the run invokes it three times, and the check says so."""
    template, outdir = assembly
    worker = next(f for f in deployed_functions(template, outdir) if f.service == "worker")
    layers = list(worker.layers)
    [index] = [i for i, layer in enumerate(layers) if (layer / "python/duetime/targets/aws.py").is_file()]
    crippled = tmp_path / "core"
    shutil.copytree(layers[index], crippled)
    client = crippled / "python" / "duetime" / "targets" / "aws.py"
    fixed = ('"total_max_attempts": 1}', "read_timeout=LAMBDA_MAX_TIMEOUT_SECONDS + 60")
    source = client.read_text()
    assert all(text in source for text in fixed)
    client.write_text(source.replace(fixed[0], '"total_max_attempts": 3}').replace(fixed[1], "read_timeout=3"))
    for compiled in (client.parent / "__pycache__").glob("aws.*"):
        compiled.unlink()
    layers[index] = crippled
    deployment = LocalDeployment(template, outdir, layers=tuple(layers)).start()
    try:
        smoke = Smoke(deployment, wait_seconds=WAIT_SECONDS, target_seconds=5, say=lambda line: None)
        assert smoke.find_functions() and all(smoke.cold_starts().values()), shown(smoke)
        path = smoke.target_path()
        assert path is not None
        smoke.wait_for([path])
        smoke.delete_jobs()
    finally:
        deployment.stop()
    detail = failed(smoke)["lambda: target invoked once"].detail
    counted = re.search(r"duetime-smoke-target was invoked (\d+) times", detail)
    assert counted is not None and int(counted.group(1)) >= 2, shown(smoke)
    assert "Read timeout" in detail, shown(smoke)


@pytest.fixture(scope="module")
def console_assembly() -> tuple[dict[str, Any], Path]:
    outdir = synthesized({"console": "true"})
    return json.loads((outdir / TEMPLATE_FILE).read_text()), outdir


def console_checks(template: dict[str, Any], outdir: Path) -> Smoke:
    """The smoke's console check alone, through the local stand-in of the template's distribution (it needs no
    running stack: API Gateway's authorizer answers a request without a token before the API function)."""
    smoke = Smoke(LocalDeployment(template, outdir), say=lambda line: None)
    smoke.console_paths()
    return smoke


def test_the_console_paths_reach_the_api_through_the_distribution(
    console_assembly: tuple[dict[str, Any], Path],
) -> None:
    smoke = console_checks(*console_assembly)
    assert smoke.passed and not any(check.skipped for check in smoke.checks), shown(smoke)
    names = {check.name for check in smoke.checks}
    assert {
        "console GET /dead-letters",
        "console POST /dead-letters/redrive",
        "console POST /executions/{id}/retry",
    } <= names
    assert "console GET /openapi.json" in names
    assert all("API Gateway: 401" in c.detail for c in smoke.checks if c.name != "console GET /openapi.json")


@pytest.mark.parametrize(
    ("pattern", "broken"),
    [
        ("/dead-letters/*", "console POST /dead-letters/redrive"),
        ("/executions/*", "console POST /executions/{id}/retry"),
        ("/jobs/*", "console GET /jobs/{id}/executions"),
    ],
)
def test_the_smoke_fails_naming_a_path_the_distribution_does_not_send_to_the_api(
    console_assembly: tuple[dict[str, Any], Path], pattern: str, broken: str
) -> None:
    """The distribution without one of its API path patterns (the issue's defect 4): that path falls through to
    the default behaviour, the S3 origin, which allows GET and HEAD only and answers 403 for what it lacks."""
    template, outdir = console_assembly
    crippled = copy.deepcopy(template)
    [distribution] = [r for r in crippled["Resources"].values() if r["Type"] == "AWS::CloudFront::Distribution"]
    behaviours = distribution["Properties"]["DistributionConfig"]["CacheBehaviors"]
    behaviours[:] = [b for b in behaviours if b["PathPattern"] != pattern]
    smoke = console_checks(crippled, outdir)
    failures = failed(smoke)
    assert broken in failures, shown(smoke)
    assert "403" in failures[broken].detail, shown(smoke)
    # What the other patterns route still passes.
    assert "console GET /jobs" not in failures and "console GET /openapi.json" not in failures, shown(smoke)
