"""Adapters for handler kinds that run elsewhere: a target Lambda function, or an ECS task."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from botocore.config import Config

from duetime.definitions import LAMBDA_MAX_TIMEOUT_SECONDS

# A synchronous invoke holds its connection for as long as the target function runs (up to Lambda's 15 minutes):
# the shared clients' 30 s read timeout, with retries, gave up on a longer handler and invoked it again, up to five
# times an attempt. The read timeout outlasts any function (so any job's timeout: the worker stops waiting for a
# run at its job's timeout itself), and the SDK never retries: an invoke that failed is the run's failure, retried
# by the job's own retry policy, so a target runs once per attempt.
LAMBDA_INVOKE_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 1},
    max_pool_connections=64,
    connect_timeout=5,
    read_timeout=LAMBDA_MAX_TIMEOUT_SECONDS + 60,
)


@dataclass(frozen=True)
class Invocation:
    """How a target Lambda invocation ended: its returned payload, or its error and whether it is final."""

    succeeded: bool
    payload: Any = None
    error: str | None = None
    permanent: bool = False


class LambdaTarget:
    """Invokes a function synchronously with {executionId, attempt, scheduledAt, payload}."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def invoke(self, function: str, event: dict[str, Any]) -> Invocation:
        response = self.client.invoke(
            FunctionName=function, InvocationType="RequestResponse", Payload=json.dumps(event).encode()
        )
        raw = response["Payload"].read()
        try:
            payload = json.loads(raw) if raw else None
        except ValueError:
            payload = raw.decode("utf-8", errors="replace")
        if response.get("FunctionError"):
            error_type = payload.get("errorType", "") if isinstance(payload, dict) else ""
            message = payload.get("errorMessage", "") if isinstance(payload, dict) else str(payload)
            return Invocation(
                False, error=f"{error_type}: {message}".strip(": "), permanent=error_type == "PermanentFailure"
            )
        return Invocation(True, payload=payload)


@dataclass(frozen=True)
class EcsSettings:
    cluster: str
    subnets: list[str] = field(default_factory=list)
    security_groups: list[str] = field(default_factory=list)
    launch_type: str = "FARGATE"
    # Where the task reads its payload (duetime.ecs_task): the deployment's prefix and region.
    prefix: str = "duetime"
    region: str = "us-east-1"


class EcsTarget:
    """Starts a task with the run's references in its environment (never its payload: see duetime.ecs_task),
    watches it, stops it, reads its exit code."""

    def __init__(self, client: Any, settings: EcsSettings) -> None:
        self.client = client
        self.settings = settings
        self._containers: dict[str, str] = {}  # task definition -> the container its overrides address

    def container_of(self, task_definition: str) -> str:
        """The first container of `task_definition`, asked once per process (DescribeTaskDefinition)."""
        if task_definition not in self._containers:
            definition = self.client.describe_task_definition(taskDefinition=task_definition)["taskDefinition"]
            self._containers[task_definition] = str(definition["containerDefinitions"][0]["name"])
        return self._containers[task_definition]

    def start(self, task_definition: str, environment: dict[str, str], started_by: str) -> str:
        container = self.container_of(task_definition)
        kwargs: dict[str, Any] = {
            "cluster": self.settings.cluster,
            "taskDefinition": task_definition,
            "count": 1,
            "startedBy": started_by[:36],
            "overrides": {
                "containerOverrides": [
                    {"name": container, "environment": [{"name": k, "value": v} for k, v in environment.items()]}
                ]
            },
        }
        if self.settings.launch_type:
            kwargs["launchType"] = self.settings.launch_type
        if self.settings.subnets:
            kwargs["networkConfiguration"] = {
                "awsvpcConfiguration": {
                    "subnets": self.settings.subnets,
                    "securityGroups": self.settings.security_groups,
                    "assignPublicIp": "DISABLED",
                }
            }
        response = self.client.run_task(**kwargs)
        failures = response.get("failures") or []
        if failures or not response.get("tasks"):
            raise RuntimeError(f"ECS could not start {task_definition}: {failures}")
        return str(response["tasks"][0]["taskArn"])

    def status(self, task_arn: str) -> tuple[str, int | None]:
        """(lastStatus, exit code of the first container once stopped)."""
        tasks = self.client.describe_tasks(cluster=self.settings.cluster, tasks=[task_arn]).get("tasks") or []
        if not tasks:
            return "STOPPED", None
        task = tasks[0]
        containers = task.get("containers") or [{}]
        exit_code = containers[0].get("exitCode")
        return str(task.get("lastStatus", "UNKNOWN")), None if exit_code is None else int(exit_code)

    def stop(self, task_arn: str, reason: str) -> None:
        self.client.stop_task(cluster=self.settings.cluster, task=task_arn, reason=reason[:255])
