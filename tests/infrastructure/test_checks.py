"""Checks a platform team runs: cdk-nag AwsSolutions (at synth) and cfn-lint on the template; context defaults."""

from __future__ import annotations

import json
import subprocess

import aws_cdk as cdk
import pytest
from duetime.definitions import Settings

from infra.build_layers import RUNTIME_PYTHON_VERSION, layer_requirements, runtime_python
from infra.context import DeployContext
from tests.infrastructure.helpers import cfn_lint_errors


def test_cdk_nag_aws_solutions_runs_and_reports_nothing_unacknowledged(synthesized):
    # The plugin runs inside app.synth() (the session fixture) and fails it on any unacknowledged finding;
    # the synthesis always writes its validation report, and no plugin in it may conclude `failure`.
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())
    assert [r["pluginName"] for r in report["pluginReports"] if r["conclusion"] != "success"] == []
    assert [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions" and r["violations"]] == []
    acknowledged = json.dumps(synthesized.raw)  # acknowledgments are construct metadata, not template content
    assert "AwsSolutions" not in acknowledged or "rules_to_suppress" in acknowledged


def test_the_app_fails_synthesis_on_an_unacknowledged_aws_solutions_finding(synthesized, tmp_path):
    # The app `cdk synth` runs, with one more stack holding a queue that allows plain HTTP (AwsSolutions-SQS4):
    # the synthesis must fail and its report name the finding, so cdk-nag is on the app, not only in a test.
    from aws_cdk import aws_sqs as sqs

    from app import build_app

    context = json.loads((synthesized_root() / "cdk.json").read_text())["context"]
    app = cdk.App(outdir=str(tmp_path), context={**context, "alarmEmail": "oncall@example.com"})
    build_app(app)
    sqs.Queue(cdk.Stack(app, "Careless"), "PlainHttp")
    with pytest.raises(Exception, match="AwsSolutions-SQS4"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    [nag] = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "failure"
    assert {v["ruleName"] for v in nag["violations"]} >= {"AwsSolutions-SQS4"}
    paths = {c["constructPath"] for v in nag["violations"] for c in v["violatingConstructs"]}
    assert all(path.startswith("Careless/") for path in paths), paths


def test_cfn_lint_reports_no_errors(synthesized, tmp_path):
    errors, output = cfn_lint_errors(synthesized, tmp_path)
    assert not errors, output


def test_context_defaults_are_the_shared_settings():
    ctx = DeployContext.from_node(cdk.App().node)
    assert ctx.settings == Settings()
    assert ctx.lease_seconds is None and ctx.alarm_email is None and ctx.jwt_issuer is None


def test_context_overrides_and_validates():
    app = cdk.App(context={"shards": "64", "leaseSeconds": 45, "preloadWindowSeconds": 600, "alarmEmail": "a@b.c"})
    ctx = DeployContext.from_node(app.node)
    assert ctx.settings.shards == 64 and ctx.settings.preload_window_seconds == 600
    assert {c.lease_seconds for c in ctx.settings.job_classes.values()} == {45}
    assert ctx.alarm_email == "a@b.c"
    with pytest.raises(ValueError, match="preloadWindowSeconds"):
        DeployContext.from_node(cdk.App(context={"preloadWindowSeconds": 900}).node)
    # A window the one-minute tick cannot serve (it must cover the interval plus slack) is refused
    with pytest.raises(ValueError, match="preloadWindowSeconds 60 must cover"):
        DeployContext.from_node(cdk.App(context={"preloadWindowSeconds": 60}).node)
    with pytest.raises(ValueError, match="preloadShardGroups"):
        DeployContext.from_node(cdk.App(context={"shards": "4", "preloadShardGroups": 5}).node)
    assert DeployContext.from_node(cdk.App(context={"preloadShardGroups": 4}).node).preload_shard_groups == 4
    with pytest.raises(ValueError, match="jwtAudience"):
        DeployContext.from_node(cdk.App(context={"jwtIssuer": "https://id.example.com"}).node)


def test_dependency_layer_leaves_boto_out_and_pins_dateutil_below_3():
    requirements = layer_requirements()
    names = {r.split("=")[0].split("<")[0].split("[")[0].lower() for r in requirements}
    assert {"pydantic", "pydantic-settings", "aws-lambda-powertools", "pyjwt", "tzdata", "python-dateutil"} <= names
    # boto3 comes with the runtime; croniter is for tests only; moto never runs in production
    assert not {"boto3", "botocore", "croniter", "moto"} & names
    dateutil = next(r for r in requirements if r.lower().startswith("python-dateutil"))
    assert dateutil.split("==")[-1].startswith("2.") or "<3" in dateutil


def test_core_layer_ships_the_runtime_without_the_command_line(synthesized):
    # The staged core layer asset: what Lambda puts on sys.path. The CLI (with the capacity planner) stays out.
    cores = [p.parent for p in synthesized.outdir.glob("asset.*/python/duetime/definitions.py")]
    assert len(cores) == 1
    core = cores[0]
    assert (core / "worker" / "runtime.py").is_file() and (core / "targets" / "aws.py").is_file()
    assert not (core / "cli").exists()


def synthesized_root():
    from tests.infrastructure.conftest import ROOT

    return ROOT


def test_the_layers_ship_bytecode_for_the_runtimes_python_that_needs_no_source_mtime(synthesized):
    # Issue 29: /opt is read-only, so without bytecode every cold start compiled what it imported (the API:
    # 3.3 s of CPU instead of 1.1 s). Unchecked-hash .pyc (PEP 552): CDK's asset zips keep no source mtime.
    python = runtime_python()
    if python is None:
        pytest.skip(f"no python{RUNTIME_PYTHON_VERSION} on this machine to check the bytecode against")
    magic = bytes.fromhex(
        subprocess.run(
            [python, "-c", "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    tag = "cpython-" + RUNTIME_PYTHON_VERSION.replace(".", "")
    [core] = [p.parents[1] for p in synthesized.outdir.glob("asset.*/python/duetime/definitions.py")]
    [deps] = [p.parents[1] for p in synthesized.outdir.glob("asset.*/python/pydantic/__init__.py")]
    modules = [*core.rglob("*.py"), deps / "pydantic" / "__init__.py", deps / "aws_lambda_powertools" / "__init__.py"]
    assert len(modules) > 50
    for module in modules:
        compiled = module.parent / "__pycache__" / f"{module.stem}.{tag}.pyc"
        header = compiled.read_bytes()[:8]
        assert header[:4] == magic, compiled
        assert int.from_bytes(header[4:8], "little") == 0b01, compiled  # hash-based, source never checked
