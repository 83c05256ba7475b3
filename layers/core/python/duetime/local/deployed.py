"""The synthesized stack deployed locally, for `duetime smoke` to test as it tests a deployed one.

`LocalDeployment(template, outdir)` starts a moto server (a process of its own), creates the template's
tables, queues, topics, bus, keys and roles in it (duetime.local.template_stack), gives the server the
functions' roles to enforce, each statement resolved to those local resources (duetime.local.iam: a call its
role's policies do not allow is AccessDenied), and runs every duetime function of the cloud assembly as Lambda
runs it: processes whose sys.path is the function's asset, its layers and the runtime's boto3
(duetime.local.lambda_process), with the template's environment resolved to the local stack and the role's
identity. Each worker function is fed by an SQS event source on its due queue, as its event source mapping
feeds it on AWS; nothing runs the pre-loader or the DLQ notifier on a schedule (the smoke test invokes them).
The functions' log lines (stdout and stderr) are kept per function, as their log groups keep them, and a
metric is read back from the embedded metric format lines Powertools writes there, which is where CloudWatch
reads it from on AWS.

It implements duetime.cli.smoke.Deployment. What it cannot stand for: Lambda's own service (its invoke API,
throttles, timeouts enforced from outside), API Gateway and its authorizer, CloudFront, the metric pipeline
(read here from the log lines it starts from), and the resource types template_stack does not create.
`layers` replaces the layer folders of the functions (a test's layer with a module taken out).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from duetime.adapters.aws.client import make_client
from duetime.cli.smoke import Function, Invocation
from duetime.config import RuntimeConfig, build_ports
from duetime.definitions import FUNCTION_MEMORY_MB, METRIC_NAMESPACE, WORKER_BATCH_SIZE
from duetime.local.lambda_mode import SqsEventSource
from duetime.local.lambda_process import (
    ColdStartFailed,
    DeployedFunction,
    InstanceDied,
    InvocationFailed,
    ProcessFunction,
    deployed_functions,
    lambda_path,
)
from duetime.local.moto_server import MotoProcess, enforce_roles
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
        event_source_pollers: int = 2,
    ) -> None:
        self.template, self.outdir, self.layers, self.region = dict(template), outdir, layers, region
        self.event_source_pollers = event_source_pollers
        self.moto: MotoProcess | None = None
        self.stack: LocalStack | None = None
        self.processes: dict[str, ProcessFunction] = {}
        self.event_sources: list[SqsEventSource] = []
        self.logs: dict[str, list[tuple[datetime, str]]] = {}
        self._logs_lock = threading.Lock()

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
        return self

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
                pollers=self.event_source_pollers,
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
