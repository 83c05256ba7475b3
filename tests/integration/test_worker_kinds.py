"""Handler kinds against moto: `lambda:` invokes a function, `ecs:` starts, watches and stops a task;
handler error classes become retryable or permanent failures."""

from __future__ import annotations

import io
import json
import threading
import zipfile
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from botocore.exceptions import ClientError
from duetime.adapters.aws.client import make_client
from duetime.config import RuntimeConfig, build_targets
from duetime.definitions import LAMBDA_MAX_TIMEOUT_SECONDS
from duetime.targets.aws import EcsSettings, EcsTarget, LambdaTarget
from duetime.worker.kinds import Targets, claim_values, resolve_handler, run_values
from duetime.worker.registry import JobContext, PermanentFailure
from moto import mock_aws

from tests.conftest import serialise_moto


def context(**payload) -> JobContext:
    scheduled = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    return JobContext("j_1.1796169600000", "j_1", 2, scheduled, payload, "alice", "w-1", claim_token="claim-secret")


@mock_aws(config={"lambda": {"use_docker": False}})
def test_a_lambda_handler_invokes_its_function_with_the_run_values():
    iam = make_client("iam", "us-east-1")
    role = iam.create_role(RoleName="fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("index.py", "def handler(event, context):\n    return event\n")
    client = make_client("lambda", "us-east-1")
    client.create_function(
        FunctionName="billing",
        Runtime="python3.12",
        Role=role,
        Handler="index.handler",
        Code={"ZipFile": code.getvalue()},
    )
    run = resolve_handler("lambda:billing", Targets(lambda_target=LambdaTarget(client)))
    ctx = context(region="IN")
    # moto without Docker answers with the event it was sent: the handler returns what the function returned,
    # and the function got the claim too, to heartbeat or complete the attempt itself
    assert run(ctx) == {**run_values(ctx), **claim_values(ctx)}
    assert run(ctx)["claimToken"] == "claim-secret" and run(ctx)["workerId"] == "w-1"
    assert run_values(ctx)["executionId"] == ctx.execution_id and run_values(ctx)["payload"] == {"region": "IN"}
    assert run_values(ctx)["owner"] == "alice"


class _FailingLambda:
    """The one Lambda reply moto cannot give: a function error (pure mapping of the reply to a failure)."""

    def __init__(self, error_type: str) -> None:
        self.error_type = error_type

    def invoke(self, **_: object) -> dict[str, object]:
        body = json.dumps({"errorType": self.error_type, "errorMessage": "bad input"}).encode()
        return {"FunctionError": "Unhandled", "Payload": io.BytesIO(body)}


def test_a_function_error_is_retryable_unless_the_function_raised_permanent_failure():
    retryable = resolve_handler("lambda:f", Targets(lambda_target=LambdaTarget(_FailingLambda("ValueError"))))
    with pytest.raises(RuntimeError, match="ValueError: bad input"):
        retryable(context())
    permanent = resolve_handler("lambda:f", Targets(lambda_target=LambdaTarget(_FailingLambda("PermanentFailure"))))
    with pytest.raises(PermanentFailure):
        permanent(context())


@mock_aws
def test_an_ecs_handler_starts_a_task_with_the_run_references_and_stops_it_when_told():
    serialise_moto()  # the run's thread polls ECS while this one reads it
    ecs = make_client("ecs", "us-east-1")
    ecs.create_cluster(clusterName="jobs")
    ecs.register_task_definition(
        family="report", containerDefinitions=[{"name": "job", "image": "report:1", "memory": 512}]
    )
    target = EcsTarget(ecs, EcsSettings(cluster="jobs", subnets=["subnet-1"], security_groups=["sg-1"]))
    run = resolve_handler("ecs:report", Targets(ecs_target=target))
    ctx = context(apiKey="payload-secret-7f3a")
    failure: list[BaseException] = []

    def go() -> None:
        try:
            run(ctx)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    try:
        arns: list[str] = []
        for _ in range(50):
            arns = ecs.list_tasks(cluster="jobs")["taskArns"]
            if arns:
                break
            threading.Event().wait(0.1)
        [task] = ecs.describe_tasks(cluster="jobs", tasks=arns)["tasks"]
        environment = {e["name"]: e["value"] for e in task["overrides"]["containerOverrides"][0]["environment"]}
        assert environment["DUETIME_EXECUTION_ID"] == ctx.execution_id and environment["DUETIME_ATTEMPT"] == "2"
        assert environment["DUETIME_OWNER"] == "alice"
        # The payload is not among them (DescribeTasks and CloudTrail show overrides): the task reads it itself,
        # and neither is the claim's token: the worker that started the task heartbeats and completes for it.
        assert "DUETIME_PAYLOAD" not in environment and "payload-secret-7f3a" not in json.dumps(task)
        assert "DUETIME_CLAIM_TOKEN" not in environment and "claim-secret" not in json.dumps(task)
    finally:
        # When the run is told to stop (timeout, lost lease, replace), the task is stopped. In `finally`:
        # however the checks above end, the run must not go on polling ECS once mock_aws has ended.
        ctx.cancelled.set()
        thread.join(timeout=10)
    assert failure and isinstance(failure[0], InterruptedError)
    [stopped] = ecs.describe_tasks(cluster="jobs", tasks=arns)["tasks"]
    assert stopped["lastStatus"] == "STOPPED" and "duetime stopped attempt 2" in stopped["stoppedReason"]


def test_an_unknown_kind_without_targets_resolves_to_nothing():
    assert resolve_handler("lambda:anything", None) is None
    assert resolve_handler("ecs:anything", Targets()) is None
    assert resolve_handler("demo.echo", None) is not None


def test_an_ecs_task_reads_its_payload_by_the_job_id_it_was_started_with(ports, clock):
    # Given a job stored as the API stores it, and the environment an `ecs:` run of it is started with
    from duetime.domain.models import JobSpec, format_time
    from duetime.ecs_task import current_run
    from duetime.service.jobs import submit_job
    from duetime.worker.kinds import ecs_task_environment

    spec = {"name": "r", "handler": "demo.echo", "payload": {"day": "2026-12-01"}, "schedule": {"cron": "0 9 * * *"}}
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(spec))
    ctx = JobContext(f"{job.job_id}.1796169600000", job.job_id, 1, clock(), job.payload, owner="alice")
    environment = ecs_task_environment(ctx, ports.settings.prefix, "us-east-1")
    # When the task asks for its run
    run = current_run(environment, ports.store)
    # Then it has the run values a `lambda:` target gets, its payload read from the jobs table
    assert run == {**run_values(ctx), "scheduledAt": format_time(ctx.scheduled_at)}
    # And a task told another owner, or another job, gets nothing
    with pytest.raises(LookupError):
        current_run({**environment, "DUETIME_OWNER": "mallory"}, ports.store)
    with pytest.raises(LookupError):
        current_run({**environment, "DUETIME_JOB_ID": "j_00000000000000ff"}, ports.store)
    with pytest.raises(LookupError, match="DUETIME_JOB_ID"):
        current_run({k: v for k, v in environment.items() if k != "DUETIME_JOB_ID"}, ports.store)


@mock_aws
def test_an_ecs_target_asks_for_a_familys_container_once_per_process():
    ecs = make_client("ecs", "us-east-1")
    ecs.create_cluster(clusterName="jobs")
    ecs.register_task_definition(family="report", containerDefinitions=[{"name": "job", "image": "r:1", "memory": 512}])
    asked: list[str] = []
    ecs.meta.events.register("provide-client-params.ecs.DescribeTaskDefinition", lambda **_: asked.append("once"))
    target = EcsTarget(ecs, EcsSettings(cluster="jobs"))
    first = target.start("report", {"DUETIME_ATTEMPT": "1"}, "duetime-1")
    second = target.start("report", {"DUETIME_ATTEMPT": "2"}, "duetime-2")
    assert first != second and asked == ["once"]


@mock_aws(config={"lambda": {"use_docker": False}})
def test_a_lambda_function_is_told_the_last_checkpoint_to_resume_from():
    iam = make_client("iam", "us-east-1")
    role = iam.create_role(RoleName="fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("index.py", "def handler(event, context):\n    return event\n")
    client = make_client("lambda", "us-east-1")
    client.create_function(
        FunctionName="transcode",
        Runtime="python3.12",
        Role=role,
        Handler="index.handler",
        Code={"ZipFile": code.getvalue()},
    )
    run = resolve_handler("lambda:transcode", Targets(lambda_target=LambdaTarget(client)))
    # A first attempt has none; a later one gets the state the last checkpoint recorded
    assert run(context())["lastCheckpoint"] is None
    resumed = context()
    resumed.last_checkpoint = {"segments": 41}
    assert run(resumed)["lastCheckpoint"] == {"segments": 41}


class _BusyLambda(BaseHTTPRequestHandler):
    """A Lambda endpoint that answers every Invoke with a 503 (retryable for the SDK's standard mode) and counts
    the requests it got."""

    invokes: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.invokes.append(self.path)
        body = json.dumps({"Type": "Service", "message": "busy"}).encode()
        self.send_response(503)
        self.send_header("x-amzn-ErrorType", "ServiceException")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def test_a_lambda_target_is_invoked_once_an_attempt_and_waited_for_longer_than_any_function_runs():
    # Issue 29: with the shared client (read timeout 30 s, standard retries of up to 5 attempts) a function
    # longer than 30 s, or a failed invoke, ran again up to five times per attempt.
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BusyLambda)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = RuntimeConfig(region="us-east-1", endpoint_url=f"http://127.0.0.1:{server.server_port}")
        target = build_targets(config).lambda_target
        assert target is not None
        client_config = target.client.meta.config
        assert client_config.read_timeout > LAMBDA_MAX_TIMEOUT_SECONDS
        run = resolve_handler("lambda:billing", Targets(lambda_target=target))
        with pytest.raises(ClientError):
            run(context())
        assert len(_BusyLambda.invokes) == 1
        assert _BusyLambda.invokes[0].endswith("/functions/billing/invocations")
    finally:
        server.shutdown()
        server.server_close()
