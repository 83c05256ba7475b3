"""The synthesized stack deployed locally, for `duetime smoke` to test as it tests a deployed one.

`LocalDeployment(template, outdir)` starts a moto server (a process of its own), creates the template's
tables, queues, topics, bus, keys and roles in it (duetime.local.template_stack), gives the server the
functions' roles to enforce, each statement resolved to those local resources (duetime.local.iam: a call its
role's policies do not allow is AccessDenied), and runs every duetime function of the cloud assembly as Lambda
runs it: processes whose sys.path is the function's asset, its layers and the runtime's boto3
(duetime.local.lambda_process), with the template's environment resolved to the local stack and the role's
identity. Each worker function is fed by an SQS event source on its due queue, as its event source mapping
feeds it on AWS; nothing runs the pre-loader or the DLQ notifier on a schedule (the smoke test invokes them).
The smoke target (stack output SmokeTargetFunction) runs the same way, and a worker's `lambda:` invocation of it
reaches it through the moto server, which checks the worker's role first and relays the Invoke here
(duetime.local.moto_server.LambdaRelay): what the worker's target client does is what it does on AWS.
The functions' log lines (stdout and stderr) are kept per function, as their log groups keep them, and a
metric is read back from the embedded metric format lines Powertools writes there, which is where CloudWatch
reads it from on AWS.

The console's distribution (context console=true) is stood in for by `LocalConsole`, built from the template's
CloudFront distribution alone: its cache behaviours' path patterns, in order, matched as CloudFront matches them,
each sending a request to the origin it names: the API origin answers as API Gateway does without a token (from
the template's REST API resources and methods: 401 for an owner's route, 403 "Missing Authentication Token" for
no route), the S3 origin as S3 does behind origin access control (the files the stack's BucketDeployment puts,
else 403 AccessDenied).

It implements duetime.cli.smoke.Deployment. What it cannot stand for: Lambda's own service (throttles, timeouts
enforced from outside), API Gateway beyond the answer of its authorizer to a request without a token, CloudFront
beyond its routing, the metric pipeline (read here from the log lines it starts from), and the resource types
template_stack does not create.
`layers` replaces the layer folders of the functions (a test's layer with a module taken out).
"""

from __future__ import annotations

import json
import mimetypes
import re
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from duetime.adapters.aws.client import make_client
from duetime.cli.smoke import SMOKE_TARGET, SMOKE_TARGET_OUTPUT, Answer, Function, Invocation
from duetime.config import RuntimeConfig, build_ports
from duetime.definitions import FUNCTION_MEMORY_MB, METRIC_NAMESPACE, WORKER_BATCH_SIZE
from duetime.local.http_bridge import to_event
from duetime.local.iam_requests import LAMBDA_INVOKE
from duetime.local.lambda_mode import SqsEventSource
from duetime.local.lambda_process import (
    ColdStartFailed,
    DeployedFunction,
    InstanceDied,
    InvocationFailed,
    ProcessFunction,
    deployed_function,
    deployed_functions,
    lambda_path,
)
from duetime.local.moto_server import MotoProcess, enforce_roles, function_name_of, relay_lambda
from duetime.local.stack_roles import function_roles, policy_table, role_key
from duetime.local.template_stack import LocalStack, provision_template
from duetime.service.context import Ports

REGION = "us-east-1"
# What the functions' environments name that the local stack does not run: the ECS cluster and its network
# (an `ecs:` target's), the handler manifest made for another handler folder.
NOT_RUN_LOCALLY = {"DUETIME_ECS_CLUSTER", "DUETIME_ECS_SUBNETS", "DUETIME_ECS_SECURITY_GROUPS"}


class LocalDeployment:
    """The stack of `template` (its cloud assembly in `outdir`) on a moto server (module docstring)."""

    def __init__(
        self,
        template: Mapping[str, Any],
        outdir: Path,
        layers: tuple[Path, ...] | None = None,
        region: str = REGION,
        event_source_concurrency: int = 2,
    ) -> None:
        self.template, self.outdir, self.layers, self.region = dict(template), outdir, layers, region
        self.event_source_concurrency = event_source_concurrency
        self.moto: MotoProcess | None = None
        self.stack: LocalStack | None = None
        self.processes: dict[str, ProcessFunction] = {}
        self.event_sources: list[SqsEventSource] = []
        self.logs: dict[str, list[tuple[datetime, str]]] = {}
        self._logs_lock = threading.Lock()
        self.invoke_server: ThreadingHTTPServer | None = None
        self._console: LocalConsole | None = None

    @property
    def endpoint_url(self) -> str:
        assert self.moto is not None
        return self.moto.endpoint_url

    def client(self, service: str) -> Any:
        """A client with the developer's identity (unchecked), as the smoke test's caller."""
        return make_client(service, self.region, self.endpoint_url)

    def start(self) -> LocalDeployment:
        # In a process of its own: moto's backends are shared by every server of one process, and its CPU
        # work then runs beside the functions'.
        self.moto = MotoProcess().start()
        self.stack = stack = provision_template(self.template, self.client, region=self.region)
        roles = function_roles(self.template)
        enforce_roles(self.endpoint_url, policy_table(stack))
        for deployed in deployed_functions(self.template, self.outdir):
            label = f"worker:{deployed.job_class}" if deployed.service == "worker" else deployed.service
            if self.layers is not None:
                deployed = DeployedFunction(**{**deployed.__dict__, "layers": self.layers})
            name = str(stack.resolve({"Ref": deployed.logical_id}))
            environment = {k: v for k, v in stack.environment(deployed.logical_id).items() if k not in NOT_RUN_LOCALLY}
            environment.update(
                RuntimeConfig(endpoint_url=self.endpoint_url, local_identity=role_key(roles[label])).to_env()
            )
            environment["POWERTOOLS_TRACE_DISABLED"] = "true"  # no X-Ray daemon
            properties = self.template["Resources"][deployed.logical_id]["Properties"]
            self.logs[name] = []
            self.processes[name] = ProcessFunction(
                name=deployed.service,
                function_name=name,
                environment=environment,
                timeout_seconds=int(properties.get("Timeout", 3)),
                memory_mb=int(properties.get("MemorySize", FUNCTION_MEMORY_MB.get(deployed.service, 128))),
                region=self.region,
                deployed=deployed,
                lambda_path=lambda_path(deployed),
                log_sink=self._sink(name),
            )
            if deployed.service == "worker":
                self._feed(self.processes[name], environment, roles[label])
        target = ((self.template.get("Outputs") or {}).get(SMOKE_TARGET_OUTPUT) or {}).get("Value") or {}
        if isinstance(target, dict) and "Ref" in target:
            self._run_smoke_target(str(target["Ref"]))
        self.invoke_server = _invoke_server(self)
        threading.Thread(target=self.invoke_server.serve_forever, name="lambda-invoke", daemon=True).start()
        relay_lambda(self.endpoint_url, f"http://127.0.0.1:{self.invoke_server.server_port}", self.processes)
        return self

    def _run_smoke_target(self, logical_id: str) -> None:
        """The smoke target, from the cloud assembly as the others; it calls nothing (no identity)."""
        assert self.stack is not None
        deployed = deployed_function(self.template, self.outdir, logical_id, SMOKE_TARGET)
        name = str(self.stack.resolve({"Ref": logical_id}))
        properties = self.template["Resources"][logical_id]["Properties"]
        self.logs[name] = []
        self.processes[name] = ProcessFunction(
            name=SMOKE_TARGET,
            function_name=name,
            environment=self.stack.environment(logical_id),
            timeout_seconds=int(properties.get("Timeout", 3)),
            memory_mb=int(properties.get("MemorySize", 128)),
            region=self.region,
            deployed=deployed,
            lambda_path=lambda_path(deployed),
            log_sink=self._sink(name),
        )

    def _feed(self, function: ProcessFunction, environment: Mapping[str, str], role_id: str) -> None:
        """The worker's event source mapping: its class's due queue(s), polled with its role."""
        assert function.deployed.job_class is not None
        config = RuntimeConfig.from_env(environment)
        urls = (config.queue_urls or {}).get(function.deployed.job_class)
        poller = make_client("sqs", self.region, self.endpoint_url, identity=role_key(role_id))
        for url in [urls] if isinstance(urls, str) else list(urls or []):
            source = SqsEventSource(
                poller,
                url,
                function.invoke,
                batch_size=WORKER_BATCH_SIZE,
                concurrency=self.event_source_concurrency,
                region=self.region,
                name=function.function_name,
            )
            self.event_sources.append(source.start())

    def _sink(self, name: str) -> Callable[[bytes], None]:
        def keep(line: bytes) -> None:
            with self._logs_lock:
                self.logs[name].append((datetime.now(UTC), line.decode("utf-8", "replace").rstrip("\n")))

        return keep

    def stop(self) -> None:
        if self.invoke_server is not None:
            self.invoke_server.shutdown()
        for source in self.event_sources:
            source.stop(timeout=5)
        for function in self.processes.values():
            function.stop()
        if self.moto is not None:
            self.moto.stop()

    # --- duetime.cli.smoke.Deployment --------------------------------------------------------------------

    def functions(self) -> list[Function]:
        return [Function(name, f.deployed.service, f.environment) for name, f in self.processes.items()]

    def invoke(self, function: Function, event: Mapping[str, Any]) -> Invocation:
        """A synchronous invocation, its failures in the shapes Lambda's Invoke gives them."""
        try:
            return Invocation(self.processes[function.name].invoke(dict(event)))
        except ColdStartFailed as exc:
            return Invocation(None, {"errorType": "Runtime.ImportModuleError", "errorMessage": str(exc)})
        except InvocationFailed as exc:
            return Invocation(None, exc.error)
        except InstanceDied as exc:
            return Invocation(None, {"errorType": "Runtime.ExitError", "errorMessage": str(exc)})

    def log_lines(self, function: Function, since: datetime) -> list[str] | None:
        with self._logs_lock:
            return [line for at, line in self.logs.get(function.name, []) if at >= since]

    def metric_sum(self, metric: str, service: str, since: datetime) -> float | None:
        """The metric's values in the embedded metric format lines of the functions' logs."""
        total = 0.0
        for name in self.processes:
            with self._logs_lock:
                lines = [line for at, line in self.logs[name] if at >= since]
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(record, dict) or "_aws" not in record or record.get("service") != service:
                    continue
                namespaces = {m.get("Namespace") for m in record["_aws"].get("CloudWatchMetrics", [])}
                if METRIC_NAMESPACE in namespaces and isinstance(record.get(metric), (int, float, list)):
                    value = record[metric]
                    total += float(sum(value) if isinstance(value, list) else value)
        return total

    def ports(self, function: Function) -> Ports:
        config = RuntimeConfig.from_env(function.environment).model_copy(update={"local_identity": None})
        return build_ports(config)

    def through_console(self, method: str, path: str) -> Answer | None:
        if not any(r["Type"] == DISTRIBUTION for r in self.template["Resources"].values()):
            return None
        if self._console is None:
            self._console = LocalConsole(self.template, self.outdir, self._api_answer)
        return self._console.answer(method, path)

    def _api_answer(self, method: str, path: str) -> Answer:
        """The API function's answer to a request API Gateway lets through."""
        api = next(f for f in self.functions() if f.service == "api")
        invocation = self.invoke(api, to_event(method, path, {}, b""))
        if invocation.error is not None:
            return Answer(502, "application/json", json.dumps({"message": "Internal server error"}))
        response = dict(invocation.payload or {})
        headers = {k.lower(): str(v) for k, v in (response.get("headers") or {}).items()}
        return Answer(int(response.get("statusCode", 502)), headers.get("content-type", ""), response.get("body") or "")


def _invoke_server(deployment: LocalDeployment) -> ThreadingHTTPServer:
    """Lambda's Invoke for the functions the deployment runs, as the moto server relays it (LambdaRelay): the
    payload, or the error with X-Amz-Function-Error, as Lambda answers a synchronous invocation."""

    class Invoke(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            match = LAMBDA_INVOKE.match(self.path)
            process = deployment.processes.get(function_name_of(match.group(1))) if match else None
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if process is None:
                self._send(404, {"Type": "User", "message": "Function not found"}, "ResourceNotFoundException")
                return
            function = Function(process.function_name, process.deployed.service, process.environment)
            invocation = deployment.invoke(function, json.loads(body or b"null"))
            if invocation.error is not None:
                self._send(200, dict(invocation.error), function_error="Unhandled")
            else:
                self._send(200, invocation.payload)

        def _send(self, status: int, payload: Any, error_type: str = "", function_error: str = "") -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Amz-Executed-Version", "$LATEST")
            if error_type:
                self.send_header("X-Amzn-ErrorType", error_type)
            if function_error:
                self.send_header("X-Amz-Function-Error", function_error)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # no line per invocation

    return ThreadingHTTPServer(("127.0.0.1", 0), Invoke)


# --- the console's distribution --------------------------------------------------------------------------

DISTRIBUTION = "AWS::CloudFront::Distribution"
# What CloudFront answers a method its cache behaviour does not allow (before any origin sees it).
METHOD_NOT_ALLOWED = (
    "<HTML><BODY><H1>403 ERROR</H1>This distribution is not configured to allow the HTTP request method that was "
    "used for this request.</BODY></HTML>"
)
S3_ACCESS_DENIED = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>'
)


def path_pattern(pattern: str) -> re.Pattern[str]:
    """CloudFront's path pattern as a regular expression: case-sensitive, `*` any run of characters (`/` too),
    `?` exactly one, every other character itself; the leading `/` optional in the pattern."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern.lstrip("/"))
    return re.compile(f"/{body}")


class LocalConsole:
    """The template's (first) CloudFront distribution as it answers a request without credentials (module
    docstring). `api` answers what API Gateway lets through (a method without authorization)."""

    def __init__(self, template: Mapping[str, Any], outdir: Path, api: Callable[[str, str], Answer]) -> None:
        resources = template["Resources"]
        [config, *_] = [r["Properties"]["DistributionConfig"] for r in resources.values() if r["Type"] == DISTRIBUTION]
        default = config["DefaultCacheBehavior"]
        # In order: the first behaviour whose pattern matches the path serves it; the default one last.
        self.behaviours = [
            (path_pattern(b["PathPattern"]), str(b["TargetOriginId"]), set(b.get("AllowedMethods", ["GET", "HEAD"])))
            for b in config.get("CacheBehaviors") or []
        ] + [(path_pattern("*"), str(default["TargetOriginId"]), set(default.get("AllowedMethods", ["GET", "HEAD"])))]
        self.s3_origins = {str(o["Id"]) for o in config["Origins"] if "S3OriginConfig" in o}
        self.root_object = str(config.get("DefaultRootObject") or "")
        self.objects = _bucket_files(resources, outdir)
        self.routes = _api_routes(resources)
        self.api = api

    def answer(self, method: str, path: str) -> Answer:
        only_path = path.partition("?")[0]
        origin, allowed = next((o, m) for pattern, o, m in self.behaviours if pattern.fullmatch(only_path))
        if method not in allowed:
            return Answer(403, "text/html", METHOD_NOT_ALLOWED)
        if origin in self.s3_origins:
            key = only_path.lstrip("/") or self.root_object
            if key in self.objects:
                return Answer(200, mimetypes.guess_type(key)[0] or "binary/octet-stream", self.objects[key].read_text())
            return Answer(403, "application/xml", S3_ACCESS_DENIED)
        authorization = self._authorization(method, only_path)
        if authorization is None or authorization == "AWS_IAM":  # no route, or one signed requests alone reach
            return Answer(403, "application/json", json.dumps({"message": "Missing Authentication Token"}))
        if authorization != "NONE":  # COGNITO_USER_POOLS, CUSTOM: the authorizer refuses a request without a token
            return Answer(401, "application/json", json.dumps({"message": "Unauthorized"}))
        return self.api(method, path)

    def _authorization(self, method: str, path: str) -> str | None:
        """The AuthorizationType of the REST API's method for `path` (the most literal resource that matches)."""
        segments = [s for s in path.split("/") if s]
        best: tuple[int, str] | None = None
        for parts, methods in self.routes.items():
            literal = _matches(parts, segments)
            found = methods.get(method) or methods.get("ANY")
            if literal is not None and found is not None and (best is None or literal > best[0]):
                best = (literal, found)
        return best[1] if best else None


def _matches(parts: tuple[str, ...], segments: list[str]) -> int | None:
    """How many of `parts` (a resource's path parts) matched literally, or None if they do not match."""
    literal = 0
    for index, part in enumerate(parts):
        if part.startswith("{") and part.endswith("+}"):
            return literal if len(segments) > index else None
        if index >= len(segments):
            return None
        if part.startswith("{") and part.endswith("}"):
            continue
        if part != segments[index]:
            return None
        literal += 1
    return literal if len(parts) == len(segments) else None


def _api_routes(resources: Mapping[str, Any]) -> dict[tuple[str, ...], dict[str, str]]:
    """Each REST API resource's path parts with its methods' AuthorizationType, from the template."""
    parents = {
        logical_id: (r["Properties"].get("ParentId"), str(r["Properties"]["PathPart"]))
        for logical_id, r in resources.items()
        if r["Type"] == "AWS::ApiGateway::Resource"
    }

    def parts(reference: Any) -> tuple[str, ...]:
        if isinstance(reference, dict) and "Ref" in reference and reference["Ref"] in parents:
            parent, part = parents[reference["Ref"]]
            return (*parts(parent), part)
        return ()  # the root resource (Fn::GetAtt RootResourceId)

    routes: dict[tuple[str, ...], dict[str, str]] = {}
    for resource in resources.values():
        if resource["Type"] == "AWS::ApiGateway::Method":
            props = resource["Properties"]
            methods = routes.setdefault(parts(props.get("ResourceId")), {})
            methods[str(props["HttpMethod"])] = str(props.get("AuthorizationType") or "NONE")
    return routes


def _bucket_files(resources: Mapping[str, Any], outdir: Path) -> dict[str, Path]:
    """The objects the stack's BucketDeployments put: the files of their sources' assets in the cloud assembly."""
    files: dict[str, Path] = {}
    for resource in resources.values():
        if resource["Type"] != "Custom::CDKBucketDeployment":
            continue
        for key in resource["Properties"].get("SourceObjectKeys") or []:
            folder = outdir / f"asset.{str(key).removesuffix('.zip')}"
            for file in sorted(folder.rglob("*")) if folder.is_dir() else []:
                if file.is_file():
                    files[str(file.relative_to(folder))] = file
    return files
