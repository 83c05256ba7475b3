"""`duetime smoke`: a post-deploy smoke test of a deployed stack, run by a team against its own account.

It finds the stack's functions (CloudFormation ListStackResources, each function's configuration for what it
runs), invokes each once with an event it accepts harmlessly, and then exercises the paths a deploy is most
likely to break, each through the deployed functions with their own roles:

- cold start: every function imports (a module missing from a layer is `Runtime.ImportModuleError`);
- pre-load: one pre-load cycle (the pre-loader's own scheduled event) reports no shard error and moves every
  shard's cursor; the `ShardErrors` metric stays 0 over the smoke's span;
- a `maxRuns: 2` cron job (every 5 s, results of 128 KB) runs twice and completes, and
  `GET /jobs/{id}/executions` returns both runs;
- `demo.fail` with `pauseAfterFailures: 1` fails for good and pauses its job;
- a bounded job paused before its `endAt` and resumed after it ends `completed`;
- a message redriven to a DLQ (a waiting run's due message, put on its class's DLQ as SQS's redrive puts it)
  is handled by the DLQ notifier: the run ends `failed` and is listed by `GET /dead-letters`;
- a `lambda:` target that sleeps 60 s (the stack's smoke target, stack output SmokeTargetFunction; context
  smokeTarget=false leaves it out and the check is skipped) succeeds in one attempt and was invoked exactly
  once: the target logs a line per invocation naming the run, counted in its log events;
- the console's paths through CloudFront (when the stack has a console): each path the console calls that must
  reach the API, requested without a token, is answered by API Gateway (401 with a JSON body), not by the S3
  origin (403, an XML AccessDenied); /openapi.json is the console's file (200, JSON);
- no call was denied: AccessDenied in an invocation's error, an API response, or the functions' log events
  (CloudWatch Logs, when readable).

The API function is invoked directly with an API Gateway event that carries a user pool's claims (owner
`smoke-<random>`), as the gateway's authorizer passes them on: no user or token is needed, only
`lambda:InvokeFunction`. What it reads besides (the executions and control tables, the DLQ, the metric) it
reads with the caller's credentials (boto3's default chain). Every job it creates is deleted at the end.

The AWS calls go through `Deployment`: `AwsDeployment` on AWS (or `--endpoint-url`), and duetime's local
deployment of the synthesized stack in tests (duetime.local.deployed), whose functions run as processes from
the cloud assembly with their roles' policies enforced.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import secrets
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from duetime.adapters.aws.client import make_client
from duetime.config import RuntimeConfig, build_ports
from duetime.definitions import (
    DEFAULT_REGION,
    MAX_RESULT_BYTES,
    METRIC_NAMESPACE,
    METRIC_SHARD_ERRORS,
    PRELOADER_METRICS_SERVICE,
    SMOKE_OWNER_PREFIX,
)
from duetime.domain.keys import preload_record_key
from duetime.service.context import Ports
from duetime.service.ports import DueMessage

EXIT_FAILED = 1
DEFAULT_STACK = "DuetimeStack"
SERVICES = ("api", "preloader", "worker", "dlq_notifier")
# How a denied call reads: DynamoDB's and STS's AccessDeniedException, SQS's AccessDenied, SNS's
# AuthorizationError, and the message every service gives ("... is not authorized to perform: ...").
DENIED = re.compile(r"AccessDenied|AuthorizationError|is not authorized to perform")
# What a run's result carries in the cron job (demo.echo returns its payload): the most a result may be, less
# the JSON around the string.
RESULT_BYTES = MAX_RESULT_BYTES - 100
DEFAULT_WAIT_SECONDS = 180
# The smoke target's sleep: twice the 30 s read timeout of the clients whose retries invoked a target up to five
# times an attempt (issue 29, defect 2).
DEFAULT_TARGET_SECONDS = 60.0
SMOKE_TARGET = "smoke_target"  # the smoke target's label (it runs no duetime service)
SMOKE_TARGET_OUTPUT = "SmokeTargetFunction"  # the stack output that names it (infra/smoke_target.py)
# What the console calls that must reach the API through its distribution (console.js), with the answer API
# Gateway gives without a token; /openapi.json is a file of the console's own origin.
CONSOLE_API_PATHS = (
    ("GET", "/jobs"),
    ("GET", "/jobs/{id}/executions"),
    ("POST", "/schedules/preview"),
    ("GET", "/dead-letters"),
    ("POST", "/dead-letters/redrive"),
    ("POST", "/executions/{id}/retry"),
)
CONSOLE_FILE = "/openapi.json"
LAMBDA_MAX_SECONDS = 900  # the longest a Lambda invocation runs


@dataclass(frozen=True)
class Function:
    """One deployed duetime function: its name and what it runs ("api", "worker"...), and its environment."""

    name: str
    service: str
    environment: Mapping[str, str]

    @property
    def job_class(self) -> str | None:
        return self.environment.get("DUETIME_JOB_CLASS")

    @property
    def label(self) -> str:
        return f"{self.service}:{self.job_class}" if self.job_class else self.service


@dataclass(frozen=True)
class Invocation:
    """A synchronous invocation's outcome: the handler's result, or its error (FunctionError on AWS)."""

    payload: Any
    error: Mapping[str, Any] | None = None
    log: str = ""  # the invocation's log tail, when given

    @property
    def error_text(self) -> str:
        if self.error is None:
            return ""
        return f"{self.error.get('errorType')}: {self.error.get('errorMessage')}"


@dataclass(frozen=True)
class Answer:
    """An HTTP answer as a browser gets it: its status, content type and body text."""

    status: int
    content_type: str
    body: str


class Deployment(Protocol):
    """What the smoke test reads and calls."""

    region: str

    def functions(self) -> list[Function]: ...

    def invoke(self, function: Function, event: Mapping[str, Any]) -> Invocation: ...

    def log_lines(self, function: Function, since: datetime) -> list[str] | None:
        """The function's log events since `since`; None if they cannot be read (and why is in `log_error`)."""
        ...

    def metric_sum(self, metric: str, service: str, since: datetime) -> float | None:
        """The sum of duetime's `metric` emitted by `service` since `since`; None if it cannot be read."""
        ...

    def ports(self, function: Function) -> Ports:
        """duetime's store and queues as `function`'s environment configures them, with the caller's
        credentials (not the function's role)."""
        ...

    def through_console(self, method: str, path: str) -> Answer | None:
        """A request without a token to the console's distribution; None if the stack has no console."""
        ...


# --- on AWS -----------------------------------------------------------------------------------------------


def _config(service: str) -> Any:
    """Lambda's client waits out a function's whole timeout and never retries (an invocation the SDK retried
    would run twice); the others are botocore's defaults."""
    from botocore.config import Config

    if service == "lambda":
        return Config(read_timeout=LAMBDA_MAX_SECONDS + 10, retries={"max_attempts": 1, "mode": "standard"})
    return Config()


class AwsDeployment:
    """A stack deployed by `cdk deploy`, through boto3 (the default credential chain, or `endpoint_url`)."""

    def __init__(self, stack_name: str, region: str, endpoint_url: str | None = None) -> None:
        self.stack_name, self.region, self.endpoint_url = stack_name, region, endpoint_url
        self._clients: dict[str, Any] = {}
        self.log_groups: dict[str, str] = {}
        self.log_error = ""
        self.outputs: dict[str, str] = {}
        self.distributions: list[str] = []  # the stack's CloudFront distributions' ids
        self._console_domain: str | None = None

    def client(self, service: str) -> Any:
        if service not in self._clients:
            if self.endpoint_url:
                self._clients[service] = make_client(service, self.region, self.endpoint_url, _config(service))
            else:
                import boto3  # the default credential chain: the team's own profile, role or keys

                self._clients[service] = boto3.client(service, region_name=self.region, config=_config(service))
        return self._clients[service]

    def functions(self) -> list[Function]:
        cloudformation = self.client("cloudformation")
        [stack] = cloudformation.describe_stacks(StackName=self.stack_name)["Stacks"]
        self.outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        names = []
        for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=self.stack_name):
            for resource in page["StackResourceSummaries"]:
                if resource["ResourceType"] == "AWS::Lambda::Function":
                    names.append(str(resource["PhysicalResourceId"]))
                elif resource["ResourceType"] == "AWS::CloudFront::Distribution":
                    self.distributions.append(str(resource["PhysicalResourceId"]))
        found = []
        for name in names:
            configuration = self.client("lambda").get_function_configuration(FunctionName=name)
            variables = dict((configuration.get("Environment") or {}).get("Variables") or {})
            smoke_target = name == self.outputs.get(SMOKE_TARGET_OUTPUT)
            if variables.get("POWERTOOLS_SERVICE_NAME") in SERVICES or smoke_target:
                log_group = (configuration.get("LoggingConfig") or {}).get("LogGroup") or f"/aws/lambda/{name}"
                self.log_groups[name] = str(log_group)
                service = SMOKE_TARGET if smoke_target else str(variables["POWERTOOLS_SERVICE_NAME"])
                found.append(Function(name, service, variables))
        return found

    def invoke(self, function: Function, event: Mapping[str, Any]) -> Invocation:
        response = self.client("lambda").invoke(
            FunctionName=function.name, Payload=json.dumps(dict(event)).encode(), LogType="Tail"
        )
        raw = response["Payload"].read()
        payload = json.loads(raw) if raw else None
        log = base64.b64decode(response.get("LogResult") or b"").decode("utf-8", "replace")
        if response.get("FunctionError"):
            error = payload if isinstance(payload, dict) else {"errorType": "Unhandled", "errorMessage": str(payload)}
            return Invocation(None, error, log)
        return Invocation(payload, None, log)

    def log_lines(self, function: Function, since: datetime) -> list[str] | None:
        from botocore.exceptions import ClientError

        lines: list[str] = []
        try:
            paginator = self.client("logs").get_paginator("filter_log_events")
            group = self.log_groups.get(function.name, f"/aws/lambda/{function.name}")
            for page in paginator.paginate(logGroupName=group, startTime=int(since.timestamp() * 1000)):
                lines += [str(event["message"]) for event in page.get("events", [])]
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ResourceNotFoundException":
                return []  # no log group yet: the function has not logged anything
            self.log_error = str(exc)
            return None
        return lines

    def metric_sum(self, metric: str, service: str, since: datetime) -> float | None:
        from botocore.exceptions import ClientError

        try:
            response = self.client("cloudwatch").get_metric_statistics(
                Namespace=METRIC_NAMESPACE,
                MetricName=metric,
                Dimensions=[{"Name": "service", "Value": service}],
                StartTime=since - timedelta(minutes=1),
                EndTime=datetime.now(UTC) + timedelta(minutes=1),
                Period=60,
                Statistics=["Sum"],
            )
        except ClientError:
            return None
        return float(sum(point["Sum"] for point in response.get("Datapoints", [])))

    def through_console(self, method: str, path: str) -> Answer | None:
        """Over HTTPS to the console's distribution (its domain from cloudfront:GetDistribution)."""
        if not self.distributions:
            return None
        if self._console_domain is None:
            distribution = self.client("cloudfront").get_distribution(Id=self.distributions[0])["Distribution"]
            self._console_domain = str(distribution["DomainName"])
        return http_answer(f"https://{self._console_domain}{path}", method)

    def ports(self, function: Function) -> Ports:
        config = RuntimeConfig.from_env(function.environment)
        if self.endpoint_url:
            config = config.model_copy(update={"endpoint_url": self.endpoint_url})
        return build_ports(config)


def http_answer(url: str, method: str) -> Answer:
    """One request without credentials (a JSON body of `{}` for a POST), its answer whatever the status."""
    import urllib.error
    import urllib.request

    data = b"{}" if method == "POST" else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return Answer(response.status, response.headers.get("Content-Type", ""), response.read().decode())
    except urllib.error.HTTPError as error:
        return Answer(error.code, error.headers.get("Content-Type", ""), error.read().decode("utf-8", "replace"))


# --- the checks -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str
    skipped: bool = False  # not run, for the reason in `detail` (a part the stack does not deploy)

    @property
    def result(self) -> str:
        return "SKIP" if self.skipped else "PASS" if self.passed else "FAIL"


class PathFailed(Exception):
    """A waited-on path has failed for good (its run failed): no use waiting on it longer."""


@dataclass(frozen=True)
class Waited:
    """A path the smoke test waits on (its check): `condition` says whether it is there yet (and what it sees), `passed`
    what the table says when it is; `then` is checked once it is done (or given up on)."""

    name: str
    condition: Callable[[], tuple[bool, str]]
    passed: str
    then: Callable[[], None] | None = None
    extra_seconds: float = 0.0  # waited beyond `wait_seconds` (a path that takes that long on purpose)


@dataclass
class Smoke:
    """One run of the smoke test over `deployment` (module docstring)."""

    deployment: Deployment
    wait_seconds: float = DEFAULT_WAIT_SECONDS
    poll_seconds: float = 2.0
    # How long the smoke target sleeps; tests use less (still above the old 30 s read timeout).
    target_seconds: float = DEFAULT_TARGET_SECONDS
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
    checks: list[Check] = field(default_factory=list)
    owner: str = field(default_factory=lambda: f"{SMOKE_OWNER_PREFIX}{secrets.token_hex(4)}")
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    created_jobs: list[str] = field(default_factory=list)
    found: dict[str, Function] = field(default_factory=dict)
    # Every denial seen in an invocation's error or an API response: (function, text).
    denials: list[tuple[str, str]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def record(self, name: str, passed: bool, detail: str, skipped: bool = False) -> bool:
        check = Check(name, passed, detail, skipped)
        self.checks.append(check)
        self.say(f"{check.result} {name}: {detail}")
        return passed

    def run(self) -> bool:
        self.started = datetime.now(UTC) - timedelta(seconds=5)  # log events' times are the functions' clocks
        if not self.find_functions():
            return False
        imported = self.cold_starts()
        if imported.get("preloader"):
            self.pre_load()
        if imported.get("api") and imported.get("worker:default"):
            try:
                self.job_paths(dlq_notifier=imported.get("dlq_notifier", False))
            finally:
                self.delete_jobs()
        else:
            self.record("job paths", False, "not run: the API or the default class's worker does not start")
        self.console_paths()
        self.shard_errors_metric()
        self.no_access_denied()
        return self.passed

    # --- the stack and its functions ---------------------------------------------------------------------

    def find_functions(self) -> bool:
        try:
            functions = self.deployment.functions()
        except Exception as exc:  # no such stack, no credentials, not allowed to read it: the table says which
            return self.record("stack", False, f"{type(exc).__name__}: {exc}")
        self.found = {f.label: f for f in functions}
        missing = [s for s in SERVICES if not any(f.service == s for f in functions)]
        if missing:
            return self.record("stack", False, f"no function runs {', '.join(missing)}: is this duetime's stack?")
        return self.record("stack", True, ", ".join(f"{f.label}={f.name}" for f in functions))

    def cold_starts(self) -> dict[str, bool]:
        """Invoke each function once with an event it accepts and does nothing harmful with."""
        events: dict[str, Mapping[str, Any]] = {
            "api": self.api_event("GET", "/openapi.json"),
            "worker": {"Records": []},  # an empty batch: the cold start, and no work
            "dlq_notifier": {},  # its schedule's event: a drain (nothing on the DLQs, nothing done)
            SMOKE_TARGET: {"payload": {"seconds": 0}},  # no run: no sleep
        }
        imported: dict[str, bool] = {}
        for label, function in sorted(self.found.items()):
            if function.service == "preloader":  # its cold start is the pre-load check's invocation
                imported[label] = True
                continue
            invocation = self.invoke(function, events[function.service])
            if invocation.error is not None:
                imported[label] = self.record(f"cold start {function.name}", False, invocation.error_text)
            elif function.service == "api" and (invocation.payload or {}).get("statusCode") != 200:
                status = (invocation.payload or {}).get("statusCode")
                imported[label] = self.record(f"cold start {function.name}", False, f"GET /openapi.json: {status}")
            else:
                imported[label] = self.record(f"cold start {function.name}", True, "imports and answers")
        return imported

    def invoke(self, function: Function, event: Mapping[str, Any]) -> Invocation:
        invocation = self.deployment.invoke(function, event)
        if invocation.error is not None and DENIED.search(invocation.error_text):
            self.denials.append((function.name, invocation.error_text))
        return invocation

    # --- pre-load ----------------------------------------------------------------------------------------

    def pre_load(self) -> None:
        """One pre-load cycle: the pre-loader's invocation must report no shard error and move every shard's
        cursor (one that does not move is never dispatched from again)."""
        preloader = next(f for f in self.found.values() if f.service == "preloader")
        ports = self.deployment.ports(preloader)
        shards = ports.store.most_shards()
        keys = [preload_record_key(shard) for shard in range(shards)]
        before = {key: int(record.get("cursorMs", 0)) for key, record in ports.store.get_controls(keys).items()}
        invocation = self.invoke(preloader, {"source": "aws.events", "detail-type": "Scheduled Event"})
        if invocation.error is not None:
            self.record(f"cold start {preloader.name}", False, invocation.error_text)
            return
        self.record(f"cold start {preloader.name}", True, "imports and runs a cycle")
        report = dict(invocation.payload or {})
        errors = int(report.get("errors", 0))
        self.record(
            "pre-load ShardErrors",
            errors == 0,
            f"{errors} of {shards} shards failed in the cycle (their logs say why)" if errors else "0 in the cycle",
        )
        # A shard leased by the scheduled cycle of the same minute ("busy") moves when that cycle ends.
        deadline = time.monotonic() + self.wait_seconds
        while True:
            after = {key: int(record.get("cursorMs", 0)) for key, record in ports.store.get_controls(keys).items()}
            stuck = [key for key in keys if after.get(key, 0) <= before.get(key, 0)]
            if not stuck or time.monotonic() > deadline:
                break
            time.sleep(self.poll_seconds)
        self.record(
            "pre-load cursors",
            not stuck,
            f"{len(stuck)} of {shards} shards' cursors did not move: {', '.join(stuck[:4])}"
            if stuck
            else f"all {shards} moved",
        )

    def shard_errors_metric(self) -> None:
        total = self.deployment.metric_sum(METRIC_SHARD_ERRORS, PRELOADER_METRICS_SERVICE, self.started)
        if total is None:
            self.record("ShardErrors metric", True, "not readable (cloudwatch:GetMetricStatistics): not checked")
        else:
            self.record("ShardErrors metric", total <= 0, f"sum {total:g} since the smoke started")

    # --- jobs through the API ----------------------------------------------------------------------------

    def api_event(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        """A REST API proxy event as API Gateway passes it on after the user pool authorizer."""
        path_only, _, query = path.partition("?")
        parameters = dict(p.split("=", 1) for p in query.split("&") if "=" in p) or None
        return {
            "resource": "/{proxy+}",
            "path": path_only,
            "httpMethod": method,
            "headers": {"Content-Type": "application/json"},
            "multiValueHeaders": {},
            "queryStringParameters": parameters,
            "multiValueQueryStringParameters": {k: [v] for k, v in parameters.items()} if parameters else None,
            "pathParameters": {"proxy": path_only.lstrip("/")},
            "stageVariables": None,
            "requestContext": {
                "resourcePath": "/{proxy+}",
                "httpMethod": method,
                "path": path_only,
                "stage": "v1",
                "requestId": str(uuid.uuid4()),
                "identity": {"sourceIp": "127.0.0.1"},
                "authorizer": {"claims": {"sub": self.owner}},
            },
            "body": json.dumps(body) if body is not None else None,
            "isBase64Encoded": False,
        }

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        api = self.found["api"]
        invocation = self.invoke(api, self.api_event(method, path, body))
        if invocation.error is not None:
            return 599, {"error": invocation.error_text}
        response = dict(invocation.payload or {})
        text = response.get("body") or ""
        try:
            answer = json.loads(text) if text else None
        except ValueError:
            answer = text
        if int(response.get("statusCode", 0)) >= 500 and DENIED.search(str(text)):
            self.denials.append((api.name, f"{method} {path}: {str(text)[:300]}"))
        return int(response.get("statusCode", 0)), answer

    def create(self, spec: dict[str, Any]) -> str | None:
        status, answer = self.call("POST", "/jobs", spec)
        if status != 201:
            self.record(f"create {spec['name']}", False, f"POST /jobs: {status} {str(answer)[:300]}")
            return None
        job_id = str(answer["jobId"])
        self.created_jobs.append(job_id)
        return job_id

    def wait_for(self, paths: list[Waited]) -> None:
        """Poll every path until each has what it waits for or `wait_seconds` have passed; record each."""
        started = time.monotonic()
        waiting = list(paths)
        while waiting:
            for path in list(waiting):
                try:
                    done, detail = path.condition()
                    over = time.monotonic() > started + self.wait_seconds + path.extra_seconds
                except PathFailed as failed:
                    done, detail, over = False, str(failed), True
                if done or over:
                    self.record(path.name, done, path.passed if done and path.passed else detail)
                    waiting.remove(path)
                    if path.then is not None:
                        path.then()
            if waiting:
                time.sleep(self.poll_seconds)

    def job_and_runs(self, job_id: str) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        status, job = self.call("GET", f"/jobs/{job_id}")
        listed, page = self.call("GET", f"/jobs/{job_id}/executions")
        runs = list((page or {}).get("executions", [])) if listed == 200 else []
        problem = "" if status == 200 and listed == 200 else f"GET: {status}, executions: {listed} {str(page)[:200]}"
        return (job if isinstance(job, dict) else {}), runs, problem

    def job_paths(self, dlq_notifier: bool) -> None:
        bounded = self.create(
            {
                "name": "smoke-max-runs",
                "handler": "demo.echo",
                "payload": {"result": "x" * RESULT_BYTES},
                "schedule": {"cron": "*/5 * * * * *", "maxRuns": 2},
                # Every slot runs, however late it is picked up: under `latest`, a run claimed after the next
                # slot was due is skipped, and a worker slow to start (a cold start on a loaded machine) ended
                # the job with two skipped runs. What this path checks is the worker and maxRuns, not lateness.
                "catchUp": "all",
            }
        )
        first = datetime.now(UTC) + timedelta(seconds=4)
        failing = self.create(
            {
                "name": "smoke-pause-after-failures",
                "handler": "demo.fail",
                "payload": {"times": 1000, "permanent": True},
                # Daily, its first slot in a few seconds: pause_if_failing reads the job's newest rows, and a
                # frequent schedule's are the slots created ahead within the pre-load window, not its runs.
                "schedule": {"cron": f"{first.second} {first.minute} {first.hour} * * *"},
                "retry": {"maxAttempts": 1},
                "pauseAfterFailures": 1,
            }
        )
        end_at = datetime.now(UTC) + timedelta(seconds=8)
        resumed = self.create(
            {
                "name": "smoke-resumed-past-end",
                "handler": "demo.echo",
                "schedule": {"cron": "*/5 * * * * *", "endAt": _iso(end_at)},
            }
        )
        if resumed:
            status, answer = self.call("PATCH", f"/jobs/{resumed}", {"status": "paused"})
            if status != 200:
                self.record("bounded job resumed past endAt", False, f"pause: {status} {str(answer)[:300]}")
                resumed = None
        later = _iso(datetime.now(UTC) + timedelta(days=1))
        redriven = self.create({"name": "smoke-redriven", "handler": "demo.echo", "schedule": {"at": later}})
        paths = [self.bounded(bounded)] if bounded else []
        paths += [self.paused(failing)] if failing else []
        paths += [self.resumed_past_end(resumed, end_at)] if resumed else []
        if redriven and dlq_notifier:
            paths.append(self.redriven(redriven))
        elif redriven:
            self.record("DLQ redrive", False, "not run: the DLQ notifier does not start")
        target = self.target_path()
        self.wait_for([*paths, *([target] if target else [])])

    def bounded(self, job_id: str) -> Waited:
        """Both runs succeed and the job completes; then its executions page lists both."""

        def completed() -> tuple[bool, str]:
            job, runs, problem = self.job_and_runs(job_id)
            statuses = sorted(str(r.get("status")) for r in runs)
            done = job.get("status") == "completed" and statuses == ["succeeded", "succeeded"]
            return done, problem or f"job {job.get('status')}, runs {statuses}"

        def executions() -> None:
            status, page = self.call("GET", f"/jobs/{job_id}/executions")
            runs = (page or {}).get("executions", []) if status == 200 else []
            self.record(
                "GET /jobs/{id}/executions",
                status == 200 and len(runs) == 2,
                f"{status}, {len(runs)} runs of {RESULT_BYTES // 1024} KB results"
                if status == 200
                else f"{status} {str(page)[:300]}",
            )

        return Waited("maxRuns: 2 cron job", completed, "2 runs succeeded, job completed", executions)

    def paused(self, job_id: str) -> Waited:
        def paused() -> tuple[bool, str]:
            job, runs, problem = self.job_and_runs(job_id)
            statuses = sorted(str(r.get("status")) for r in runs)
            return job.get("status") == "paused", problem or f"job {job.get('status')}, runs {statuses}"

        return Waited("demo.fail, pauseAfterFailures: 1", paused, "a run failed for good, the job paused")

    def resumed_past_end(self, job_id: str, end_at: datetime) -> Waited:
        """A bounded job paused before its endAt and resumed after it: its waiting run goes through the catch-up
        policy and the job ends `completed` (else it stays active for good, counted against its owner's
        active jobs)."""
        resumed: list[str] = []

        def completed() -> tuple[bool, str]:
            if not resumed:
                if datetime.now(UTC) < end_at + timedelta(seconds=1):
                    return False, "paused, waiting for its endAt to pass"
                status, answer = self.call("PATCH", f"/jobs/{job_id}", {"status": "active"})
                if status != 200:
                    return False, f"resume: {status} {str(answer)[:300]}"
                resumed.append(str(answer.get("status")))
            job, runs, problem = self.job_and_runs(job_id)
            statuses = sorted(str(r.get("status")) for r in runs)
            return job.get("status") == "completed", problem or f"resumed; job {job.get('status')}, runs {statuses}"

        return Waited("bounded job resumed past endAt", completed, "resumed after its endAt, the job completed")

    def redriven(self, job_id: str) -> Waited:
        """The waiting run of a one-off job a day ahead, its due message on its class's DLQ as SQS's redrive
        leaves a message received too often: the DLQ notifier ends the run `failed` and tells its owner, and
        the run is among the owner's dead letters."""
        api = self.found["api"]
        ports = self.deployment.ports(api)
        [execution] = ports.store.executions_of_job(job_id)
        message = DueMessage.for_execution(execution, ports.store.key_of(execution))
        ports.queues.dead_letter(message.job_class, json.loads(message.to_body()))
        notifier = next(f for f in self.found.values() if f.service == "dlq_notifier")

        def handled() -> tuple[bool, str]:
            invocation = self.invoke(notifier, {})
            if invocation.error is not None:
                return False, f"{notifier.name}: {invocation.error_text}"
            status, page = self.call("GET", "/dead-letters")
            listed = [d.get("executionId") for d in (page or {}).get("executions", [])] if status == 200 else []
            found = execution.execution_id in listed
            return found, f"notifier handled {invocation.payload}; GET /dead-letters: {status}, {len(listed)} listed"

        return Waited("DLQ redrive", handled, "the run ended failed and is listed in /dead-letters")

    def target_path(self) -> Waited | None:
        """A one-off job of `lambda:<smoke target>` sleeping `target_seconds`, due now (invoked_once); None, and
        the check recorded as skipped, when the stack has no smoke target."""
        target = self.found.get(SMOKE_TARGET)
        if target is None:
            why = "skipped: the stack has no smoke target (context smokeTarget=false)"
            self.record(TARGET_CHECK, True, why, skipped=True)
            return None
        job_id = self.create(
            {
                "name": "smoke-lambda-target",
                "handler": f"lambda:{target.name}",
                "payload": {"seconds": self.target_seconds},
                "schedule": {"at": _iso(datetime.now(UTC) + timedelta(seconds=2))},
                "timeoutSeconds": int(self.target_seconds) + 60,
                "retry": {"maxAttempts": 1},
            }
        )
        return self.invoked_once(job_id, target) if job_id else None

    def invoked_once(self, job_id: str, target: Function) -> Waited:
        """The one-off run of `lambda:<smoke target>`, sleeping `target_seconds`: it succeeds in one attempt, and
        the target logged one invocation for it (a client that gave up waiting and retried, as the shared
        clients' 30 s read timeout did, invokes it again: each invocation logs a line naming the run)."""

        def once() -> tuple[bool, str]:
            _, runs, problem = self.job_and_runs(job_id)
            if problem or not runs:
                return False, problem or "no run yet"
            [run, *_] = runs
            status = str(run.get("status"))
            if status in ("scheduled", "running"):
                return False, f"the run is {status}"
            request_ids = self.target_invocations(target, str(run.get("executionId")))
            counted = "" if request_ids is None else f"; {target.name} was invoked {len(request_ids)} times for it"
            if status != "succeeded":
                raise PathFailed(f"the run {status}{counted}: {str(run.get('error'))[:300]}")
            attempts = int(run.get("attempt") or 0)
            if attempts != 1:
                raise PathFailed(f"the run succeeded in attempt {attempts}, not 1{counted}")
            if request_ids is None:
                return True, "invocations not counted: log events not readable (logs:FilterLogEvents)"
            result = _result_of(run, self)
            if result.get("requestId") not in request_ids:
                return False, f"succeeded; waiting for its invocation's log line ({len(request_ids)} seen)"
            if len(request_ids) != 1:
                raise PathFailed(f"{target.name} was invoked {len(request_ids)} times for one attempt")
            return True, f"one attempt, one invocation of {target.name} ({result.get('slept')} s)"

        return Waited(TARGET_CHECK, once, "", extra_seconds=self.target_seconds)

    def target_invocations(self, target: Function, execution_id: str) -> list[str] | None:
        """The request ids of the smoke target's invocations for one run, from the line each logs; None if its
        log events cannot be read."""
        lines = self.deployment.log_lines(target, self.started)
        if lines is None:
            return None
        invocations = [_json_line(line) for line in lines if execution_id in line]
        return [str(i.get("requestId")) for i in invocations if i.get("smokeTarget") == "invoked"]

    def delete_jobs(self) -> None:
        for job_id in self.created_jobs:
            self.call("DELETE", f"/jobs/{job_id}")

    # --- the console's distribution ----------------------------------------------------------------------

    def console_paths(self) -> None:
        """Each path the console calls that must reach the API, through its distribution without a token: API
        Gateway answers 401 with a JSON body; the S3 origin (no cache behaviour routes the path to the API)
        answers 403 with an XML AccessDenied, which the console shows as a failed page or action."""
        some_id = secrets.token_hex(8)  # no such job or run: the authorizer answers before the API looks
        for method, route in CONSOLE_API_PATHS:
            name = f"console {method} {route}"
            try:
                answer = self.deployment.through_console(method, route.replace("{id}", some_id))
            except Exception as exc:  # the distribution cannot be read or reached: the table says why
                self.record(name, False, f"{type(exc).__name__}: {exc}")
                continue
            if answer is None:
                self.record("console through CloudFront", True, "skipped: the stack has no console", skipped=True)
                return
            body = _json_or_none(answer.body)
            if answer.status == 401 and isinstance(body, dict):
                self.record(name, True, f"API Gateway: 401 {json.dumps(body)}")
            elif answer.status == 403 and "AccessDenied" in answer.body:
                self.record(name, False, "403 AccessDenied from the S3 origin: no cache behaviour sends it to the API")
            else:
                self.record(name, False, f"{answer.status} {answer.content_type}: {answer.body[:200]}")
        answer = self.deployment.through_console("GET", CONSOLE_FILE)
        document = _json_or_none(answer.body) if answer is not None else None
        if answer is not None:
            self.record(
                f"console GET {CONSOLE_FILE}",
                answer.status == 200 and isinstance(document, dict) and "openapi" in document,
                f"{answer.status} {answer.content_type}" + ("" if answer.status == 200 else f": {answer.body[:200]}"),
            )

    # --- denied calls ------------------------------------------------------------------------------------

    def no_access_denied(self) -> None:
        for function in sorted(self.found.values(), key=lambda f: f.label):
            seen = [text for name, text in self.denials if name == function.name]
            lines = self.deployment.log_lines(function, self.started)
            if lines is not None:
                seen += [line.strip() for line in lines if DENIED.search(line)]
            name = f"no AccessDenied {function.name}"
            if seen:
                self.record(name, False, f"{len(seen)} denied: {_denied_call(seen[0])}")
            elif lines is None:
                self.record(name, True, "invocations clean; log events not readable (logs:FilterLogEvents)")
            else:
                self.record(name, True, f"invocations and {len(lines)} log events clean")


TARGET_CHECK = "lambda: target invoked once"


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _json_line(line: str) -> dict[str, Any]:
    """A log line's JSON object (the smoke target prints one per invocation), or {}."""
    found = _json_or_none(line[line.find("{") :] if "{" in line else "")
    return found if isinstance(found, dict) else {}


def _result_of(run: Mapping[str, Any], smoke: Smoke) -> dict[str, Any]:
    """A run's result, from its executions page entry or, when the page leaves it out, its own page."""
    result = run.get("result")
    if result is None:
        status, execution = smoke.call("GET", f"/executions/{run.get('executionId')}")
        result = (execution or {}).get("result") if status == 200 else None
    return dict(result) if isinstance(result, dict) else {}


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _denied_call(text: str) -> str:
    """The line of a log event or error that names the denied call (a JSON log line's traceback has its line
    breaks escaped)."""
    for line in text.replace("\\n", "\n").splitlines():
        if match := DENIED.search(line):
            # Where the denial is: a long line (a run's error in a JSON log event) names it far from its start.
            return line[max(0, match.start() - 150) :].strip(' "')[:400]
    return text[:400]


def table(checks: list[Check]) -> Iterator[str]:
    """The per-check PASS/FAIL table."""
    width = max([len(c.name) for c in checks] + [5])
    yield f"{'check':<{width}}  result  detail"
    for check in checks:
        yield f"{check.name:<{width}}  {check.result:<6}  {check.detail}"


def run_smoke(
    deployment: Deployment,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
    quiet: bool = False,
    target_seconds: float = DEFAULT_TARGET_SECONDS,
) -> Smoke:
    smoke = Smoke(deployment, wait_seconds=wait_seconds, target_seconds=target_seconds)
    if quiet:
        smoke.say = lambda line: None
    smoke.run()
    return smoke


def cmd_smoke(args: argparse.Namespace) -> int:
    region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
    deployment = AwsDeployment(args.stack_name, region, args.endpoint_url)
    smoke = run_smoke(deployment, wait_seconds=args.wait_seconds, quiet=args.quiet)
    print("\n".join(table(smoke.checks)), flush=True)
    return 0 if smoke.passed else EXIT_FAILED


def add_smoke_command(sub: Any) -> None:
    """Register `smoke` on the `duetime` command's subparsers."""
    command = sub.add_parser(
        "smoke", help="smoke-test a deployed stack: every function imports, the key paths work, nothing is denied"
    )
    command.add_argument(
        "--stack-name", default=DEFAULT_STACK, help=f"the CloudFormation stack (default {DEFAULT_STACK})"
    )
    command.add_argument(
        "--region", default=None, help=f"its region (default: AWS_REGION, AWS_DEFAULT_REGION, else {DEFAULT_REGION})"
    )
    command.add_argument("--endpoint-url", default=None, help="an AWS endpoint other than AWS's own (tests)")
    command.add_argument(
        "--wait-seconds",
        type=float,
        default=DEFAULT_WAIT_SECONDS,
        help=f"how long each path may take before it fails (default {DEFAULT_WAIT_SECONDS})",
    )
    command.add_argument("--quiet", action="store_true", help="print only the table")
    command.set_defaults(fn=cmd_smoke)
