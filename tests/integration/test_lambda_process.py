"""Functions run from the synthesized cloud assembly, each instance a process whose sys.path is exactly its
asset, its layers (pins reinstalled for this machine), the standard library and the runtime's boto3
(duetime.local.lambda_process): the API answers from there, imports nothing from anywhere else, a layer that
lacks a module fails the cold start, as on AWS, and `duetime local --backend moto` runs every function so."""

from __future__ import annotations

import json
import shutil
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from duetime.cli.smoke import SMOKE_TARGET, SMOKE_TARGET_OUTPUT
from duetime.local.backends import MOTO
from duetime.local.lambda_process import (
    ColdStartFailed,
    DeployedFunction,
    Instance,
    ProcessFunction,
    deployed_function,
    deployed_functions,
    lambda_path,
    resolved_environment,
)
from duetime.local.synth import TEMPLATE_FILE, synthesized
from duetime.local.system import LocalSystem
from duetime.local.template_stack import LocalStack
from duetime.worker.handler_api import JobContext
from duetime.worker.kinds import claim_values, run_values

from tests.e2e.helpers import iso_in, submit, wait_for, wait_terminal
from tests.http_client import Api
from tests.integration.test_entry_points import api_event

REGION = "us-east-1"


@pytest.fixture(scope="module")
def assembly() -> tuple[dict[str, Any], Path]:
    outdir = synthesized()  # kept under build/synth/ for these sources: one synth for every test that needs it
    return json.loads((outdir / TEMPLATE_FILE).read_text()), outdir


def the_api(assembly: tuple[dict[str, Any], Path]) -> DeployedFunction:
    template, outdir = assembly
    return next(f for f in deployed_functions(template, outdir) if f.service == "api")


def process_function(
    deployed: DeployedFunction, template: dict[str, Any], layers: tuple[Path, ...] = (), **environment: str
) -> ProcessFunction:
    """The function (the API, say) with the template's environment resolved to a local stack, an endpoint nothing
    listens on (no call is made by what is asked of it), a token secret of its own, and `environment` over it."""
    variables = resolved_environment(deployed, LocalStack(template, REGION, "123456789012", "DuetimeStack"))
    variables.update(
        DUETIME_ENDPOINT_URL="http://127.0.0.1:9/nothing",
        DUETIME_JWT_SECRET="s" * 32,
        POWERTOOLS_TRACE_DISABLED="true",
        **environment,
    )
    if layers:
        deployed = DeployedFunction(**{**deployed.__dict__, "layers": layers})
    return ProcessFunction(
        name=deployed.service,
        function_name=f"duetime-{deployed.service}",
        environment=variables,
        timeout_seconds=29,
        memory_mb=1024,
        region=REGION,
        deployed=deployed,
        lambda_path=lambda_path(deployed),
        max_instances=1,
    )


def test_the_api_answers_from_its_asset_and_layers_only(assembly: tuple[dict[str, Any], Path]) -> None:
    template, _ = assembly
    function = process_function(the_api(assembly), template)
    try:
        response = function.invoke(api_event("GET", "/openapi.json"))
        assert response["statusCode"] == 200, response
        assert json.loads(response["body"])["openapi"].startswith("3.")
        [instance] = function.instances
        report = instance.report()
        assert tuple(report["path"]) == function.lambda_path.path  # sys.path, exactly
        outside = [f for f in report["files"] if not any(f.startswith(f"{root}/") for root in report["path"])]
        assert not outside, outside[:5]
        # duetime from the core layer's asset, botocore from the runtime's folder, nothing from the venv.
        assert any("/asset." in f and f.endswith("/duetime/__init__.py") for f in report["files"])
        assert any(f.startswith(f"{function.lambda_path.runtime_dir}/botocore/") for f in report["files"])
        assert not any("/.venv/" in f or "site-packages" in f for f in report["files"])
        assert function.invoke(api_event("GET", "/openapi.json"))["statusCode"] == 200
        assert len(function.instances) == 1  # the warm instance served the second invocation
    finally:
        function.stop()


def test_a_report_asked_while_an_invocation_runs_on_the_instance_gets_its_own_answer(
    assembly: tuple[dict[str, Any], Path],
) -> None:
    """An instance answers one question at a time, as Lambda's takes one invocation at a time: a report asked of
    it (a test looking at what it imported) while the function's invocations run waits its turn. Both reading the
    one pipe, the invocation's thread took the first part of the report's answer line (a fresh-clone run failed on
    the rest, `JSONDecodeError`, in test_duetime_local_runs_every_function_from_the_cloud_assembly)."""
    template, _ = assembly
    function = process_function(the_api(assembly), template)
    try:
        assert function.invoke(api_event("GET", "/openapi.json"))["statusCode"] == 200
        [instance] = function.instances
        reports: list[dict[str, Any]] = []
        failures: list[BaseException] = []

        def keep_reporting() -> None:
            try:
                for _ in range(10):
                    reports.append(instance.report())
            except BaseException as exc:  # the test's thread: carried to the assert below
                failures.append(exc)

        reporter = threading.Thread(target=keep_reporting)
        reporter.start()
        answers = [function.invoke(api_event("GET", "/openapi.json"))["statusCode"] for _ in range(10)]
        reporter.join(timeout=120)
        assert not failures, failures
        assert answers == [200] * 10
        assert len(reports) == 10 and all(tuple(r["path"]) == function.lambda_path.path for r in reports)
    finally:
        function.stop()


def test_a_module_missing_from_a_layer_fails_the_cold_start(
    assembly: tuple[dict[str, Any], Path], tmp_path: Path
) -> None:
    """The core layer without duetime/notify.py (which duetime.config imports): the API's cold start fails with
    the import error Lambda reports, though this machine's venv has the module."""
    template, _ = assembly
    api = the_api(assembly)
    core, *others = api.layers
    crippled = tmp_path / "core"
    shutil.copytree(core, crippled)
    (crippled / "python" / "duetime" / "notify.py").unlink()
    function = process_function(api, template, layers=(crippled, *others))
    try:
        with pytest.raises(ColdStartFailed, match=r"No module named 'duetime\.notify'"):
            function.invoke(api_event("GET", "/openapi.json"))
        assert function.instances == []
    finally:
        function.stop()


def test_duetime_local_runs_every_function_from_the_cloud_assembly(tmp_path: Path) -> None:
    """`duetime local --backend moto` (function_processes): each function is a process of the cloud assembly's
    asset and layers; a job submitted to the API is run by the worker and its run recorded."""
    system = LocalSystem(tmp_path, backend=MOTO, port=0, workers=1, shards=2, function_processes=True).start()
    try:
        api = Api(system.api_url, system.token("alice"))
        job = submit(api, handler="demo.echo", payload={"hello": 1}, schedule={"at": iso_in(1)})
        [execution] = wait_terminal(api, job["jobId"], timeout=60)
        assert execution["status"] == "succeeded", execution
        assert {name for name in system.functions} >= {"duetime-api", "duetime-worker-default"}
        for function in system.functions.values():
            assert isinstance(function, ProcessFunction), function.function_name
        # The worker runs as many instances as its event source invokes batches at once (`--workers`): no batch is
        # received for an invocation that cannot start
        assert system.functions["duetime-worker-default"].max_instances == 1
        assert [source.concurrency for source in system.event_sources] == [1]
        assembly = synthesized()
        for name in ("duetime-api", "duetime-worker-default"):
            [instance, *_] = system.functions[name].instances
            assert isinstance(instance, Instance)
            report = instance.report()
            assert report["path"][0].startswith(f"{assembly}/asset."), report["path"]
            assert any(f.endswith("/index.py") and f.startswith(report["path"][0]) for f in report["files"])
    finally:
        system.stop()


def test_a_stopped_system_ends_its_function_processes_at_once_though_a_handler_is_sleeping(tmp_path: Path) -> None:
    """Stopping ends each instance with SIGTERM, then SIGKILL after a moment, as Lambda ends an environment: an
    instance inside an invocation (a handler sleeping a minute) is not waited for. Closing its pipes first waited
    for the invocation reading them: a stop took as long as the sleep."""
    system = LocalSystem(tmp_path, backend=MOTO, port=0, workers=1, shards=2, function_processes=True).start()
    try:
        api = Api(system.api_url, system.token("alice"))
        job = submit(
            api, handler="demo.sleep", payload={"seconds": 120}, timeoutSeconds=300, schedule={"at": iso_in(1)}
        )

        def running() -> bool:
            page = api.get(f"/jobs/{job['jobId']}/executions").json()["executions"]
            return bool(page) and page[0]["status"] == "running"

        wait_for(running, timeout=60, what="the sleeping run to start")
        processes = [i.process for f in system.functions.values() for i in f.instances]
    finally:
        began = time.monotonic()
        system.stop()
        took = time.monotonic() - began
    assert all(process.poll() is not None for process in processes)
    # The handler sleeps two minutes: a stop that waited for it takes that long; one that does not, seconds.
    assert took < 60, took


def test_the_smoke_target_runs_from_the_assembly_on_the_event_a_workers_lambda_target_sends(
    assembly: tuple[dict[str, Any], Path],
) -> None:
    """functions/smoke_target as Lambda runs it: its asset alone on the path (it needs no layer), invoked with
    the event the worker's `lambda:` handler kind builds for a run; it logs one line naming the run and returns
    what it slept with its request id."""
    template, outdir = assembly
    logical_id = template["Outputs"][SMOKE_TARGET_OUTPUT]["Value"]["Ref"]  # as duetime smoke finds it
    deployed = deployed_function(template, outdir, logical_id, SMOKE_TARGET)
    lines: list[bytes] = []
    function = ProcessFunction(
        name=SMOKE_TARGET,
        function_name="duetime-smoke-target",
        environment={},
        timeout_seconds=120,
        memory_mb=128,
        region=REGION,
        deployed=deployed,
        lambda_path=lambda_path(deployed),
        max_instances=1,
        log_sink=lines.append,
    )
    ctx = JobContext("j_1.1796169600000", "j_1", 1, datetime(2026, 12, 2, tzinfo=UTC), {"seconds": 0.2}, "smoke-1")
    try:
        result = function.invoke({**run_values(ctx), **claim_values(ctx)})
    finally:
        function.stop()
    assert result["slept"] == 0.2 and result["requestId"], result
    logged = [json.loads(line) for line in b"".join(lines).splitlines() if b"smokeTarget" in line]
    assert [(entry["executionId"], entry["attempt"], entry["requestId"]) for entry in logged] == [
        ("j_1.1796169600000", 1, result["requestId"])
    ]
