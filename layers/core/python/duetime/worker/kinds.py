"""Handler kinds: a registered Python function, `lambda:<function>`, `ecs:<task family>`, `https:` webhooks."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from duetime.definitions import WEBHOOK_MAX_REPLY_BYTES
from duetime.domain.models import format_time
from duetime.domain.webhooks import Reply, classify_status, is_webhook
from duetime.targets.aws import EcsTarget, LambdaTarget
from duetime.targets.webhook import WebhookRefused, WebhookTarget
from duetime.worker.registry import HandlerFn, JobContext, PermanentFailure, get_handler

ECS_POLL_SECONDS = 2.0


@dataclass
class Targets:
    """Where non-Python handler kinds run; a worker without them refuses those kinds permanently."""

    lambda_target: LambdaTarget | None = None
    ecs_target: EcsTarget | None = None
    webhook_target: WebhookTarget | None = None


def run_values(ctx: JobContext) -> dict[str, Any]:
    """What every kind hands its handler: the executionId is the idempotency key of every attempt, the
    owner is whom the job runs for."""
    return {
        "executionId": ctx.execution_id,
        "jobId": ctx.job_id,
        "attempt": ctx.attempt,
        "scheduledAt": format_time(ctx.scheduled_at),
        "payload": ctx.payload,
        "owner": ctx.owner,
    }


def claim_values(ctx: JobContext) -> dict[str, Any]:
    """What lets a target in the account (a Lambda function, an ECS task) heartbeat and complete the attempt
    itself over the worker routes: the claimer's id and the claim's token; and where it may resume: the
    state the execution's last checkpoint recorded (null if none did; a heartbeat with `checkpoint`
    records a new one). Never sent to a webhook."""
    return {"workerId": ctx.worker_id, "claimToken": ctx.claim_token, "lastCheckpoint": ctx.last_checkpoint}


def resolve_handler(name: str, targets: Targets | None) -> HandlerFn | None:
    """The callable that runs handler `name`. A function registered under the full name wins, which is
    how `duetime local` stands in for `lambda:` targets it cannot invoke."""
    registered = get_handler(name)
    if registered is not None:
        return registered
    if name.startswith("lambda:") and targets and targets.lambda_target:
        return _lambda_handler(targets.lambda_target, name.removeprefix("lambda:"))
    if name.startswith("ecs:") and targets and targets.ecs_target:
        return _ecs_handler(targets.ecs_target, name.removeprefix("ecs:"))
    if is_webhook(name) and targets and targets.webhook_target:
        return _webhook_handler(targets.webhook_target, name)
    return None


def _lambda_handler(target: LambdaTarget, function: str) -> HandlerFn:
    def run(ctx: JobContext) -> Any:
        outcome = target.invoke(function, {**run_values(ctx), **claim_values(ctx)})
        if outcome.succeeded:
            return outcome.payload
        if outcome.permanent:
            raise PermanentFailure(outcome.error or "the target function failed permanently")
        raise RuntimeError(outcome.error or "the target function failed")

    return run


def ecs_task_environment(ctx: JobContext, prefix: str, region: str) -> dict[str, str]:
    """What an `ecs:` task is told: which run it is and where to read its payload, never the payload itself.

    RunTask's overrides are visible to anyone who may DescribeTasks in the account and are recorded by
    CloudTrail (and capped at 8 KiB): the task reads the payload from the jobs table instead
    (duetime.ecs_task.current_run, with a task role limited to that read)."""
    return {
        "DUETIME_EXECUTION_ID": ctx.execution_id,
        "DUETIME_JOB_ID": ctx.job_id,
        "DUETIME_ATTEMPT": str(ctx.attempt),
        "DUETIME_SCHEDULED_AT": format_time(ctx.scheduled_at),
        "DUETIME_OWNER": ctx.owner,
        "DUETIME_PREFIX": prefix,
        "DUETIME_REGION": region,
    }


def _ecs_handler(target: EcsTarget, task_definition: str) -> HandlerFn:
    def run(ctx: JobContext) -> Any:
        environment = ecs_task_environment(ctx, target.settings.prefix, target.settings.region)
        task_arn = target.start(task_definition, environment, started_by=f"duetime-{ctx.attempt}")
        while True:
            status, exit_code = target.status(task_arn)
            if status == "STOPPED":
                if exit_code == 0:
                    return {"taskArn": task_arn, "exitCode": 0}
                raise RuntimeError(f"task {task_arn} exited with code {exit_code}")
            if ctx.cancelled.wait(ECS_POLL_SECONDS):
                # Timeout, lost lease or `replace`: the container must not run on unsupervised.
                target.stop(task_arn, f"duetime stopped attempt {ctx.attempt} of {ctx.execution_id}")
                raise InterruptedError(f"task {task_arn} stopped: the run was told to stop")

    return run


def _webhook_handler(target: WebhookTarget, url: str) -> HandlerFn:
    """POST the run's values; 2xx succeeds with the reply's JSON as the result (its text if it is not JSON,
    None if empty), 408/429/5xx and connection failures retry, any other answer fails for good."""

    def run(ctx: JobContext) -> Any:
        values = {**run_values(ctx), "owner": ctx.owner}
        body = json.dumps(values, separators=(",", ":"), ensure_ascii=False).encode()
        try:
            delivery = target.deliver(url, ctx.owner, ctx.execution_id, ctx.attempt, body, ctx.cancelled)
        except WebhookRefused as exc:
            raise PermanentFailure(str(exc)) from exc
        text = delivery.body.decode("utf-8", errors="replace")
        verdict = classify_status(delivery.status)
        if verdict == Reply.SUCCEEDED:
            if delivery.too_large:
                raise PermanentFailure(f"the webhook's reply exceeds {WEBHOOK_MAX_REPLY_BYTES} bytes")
            if not text.strip():
                return None
            try:
                return json.loads(text)
            except ValueError:
                return text
        error = f"webhook answered HTTP {delivery.status}: {text[:200]}".rstrip(": ")
        if verdict == Reply.PERMANENT:
            raise PermanentFailure(error)
        raise RuntimeError(error)

    return run
