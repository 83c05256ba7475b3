"""The embedded backend's own ceiling: duetime's per-execution AWS calls replayed raw (pre-built requests,
no duetime code between them) against a fresh embedded moto server, as fast as the server allows.

Phase "create" replays what submitting a one-off job due now costs (TransactWriteItems of job + execution,
BatchGetItem of the job at dispatch, SendMessageBatch); phase "run" what a worker does per execution
(ReceiveMessage of up to 10, GetItem of the job, the claim UpdateItem, the finish UpdateItem,
DeleteMessage), with the same condition expressions as duetime.adapters.aws.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from typing import Any

from boto3.dynamodb.types import TypeSerializer
from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.items import execution_key, execution_to_item, job_to_item
from duetime.adapters.aws.queue import DueMessage
from duetime.definitions import EXECUTIONS_TABLE, JOBS_TABLE
from duetime.domain.keys import execution_id
from duetime.domain.models import Execution, Job, JobSpec, to_ms

from bench.common import REGION, Harness

_ser = TypeSerializer()


def typed(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in values.items() if v is not None}


def _work(count: int, threads: int, fn: Any) -> float:
    """Run fn(index) for index in range(count) from `threads` threads; returns the wall seconds."""
    cursor = iter(range(count))
    lock = threading.Lock()

    def loop() -> None:
        while True:
            with lock:
                index = next(cursor, None)
            if index is None:
                return
            fn(index)

    pool = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    start = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return time.perf_counter() - start


def measure(count: int = 600, threads: int = 8) -> dict[str, Any]:
    harness = Harness("ceiling", shards=8, separate_process=True)
    try:
        settings = harness.settings
        endpoint = harness.moto.endpoint_url
        dynamodb = make_client("dynamodb", REGION, endpoint)
        sqs = make_client("sqs", REGION, endpoint)
        queue_url = harness.ports.queues.queue_urls["default"]
        jobs_table = settings.table_name(JOBS_TABLE)
        executions_table = settings.table_name(EXECUTIONS_TABLE)
        now = datetime.now(UTC)
        jobs, executions = [], []
        for i in range(count):
            spec = JobSpec.model_validate({"name": f"c{i}", "handler": "demo.echo", "schedule": {"at": now}})
            job = Job(**spec.model_dump(), job_id=f"j_ceiling{i:08d}", owner="bench", created_at=now, updated_at=now)
            jobs.append(job)
            executions.append(
                Execution(execution_id=execution_id(job.job_id, now), job_id=job.job_id, scheduled_at=now, due_at=now)
            )

        def create(i: int) -> None:
            job, execution = jobs[i], executions[i]
            dynamodb.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": jobs_table,
                            "Item": typed(job_to_item(job)),
                            "ConditionExpression": "attribute_not_exists(jobId)",
                        }
                    },
                    {
                        "Put": {
                            "TableName": executions_table,
                            # due ahead: written out of the `open` index, as DynamoTables._indexed_at_create does
                            "Item": typed(
                                execution_to_item(execution, execution_key(execution, settings.shards), None, False)
                            ),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                ]
            )
            dynamodb.batch_get_item(
                RequestItems={jobs_table: {"Keys": [typed({"jobId": job.job_id})], "ConsistentRead": True}}
            )
            body = DueMessage.for_execution(execution, execution_key(execution, settings.shards)).to_body()
            sqs.send_message_batch(QueueUrl=queue_url, Entries=[{"Id": "0", "MessageBody": body, "DelaySeconds": 0}])

        create_seconds = _work(count, threads, create)
        done = [0, 0]  # executions run, duplicate deliveries refused by the claim
        lock = threading.Lock()

        def run_one(message: dict[str, Any]) -> None:
            body = json.loads(message["Body"])
            key = typed({"pk": body["pk"], "sk": body["sk"]})
            dynamodb.get_item(TableName=jobs_table, Key=typed({"jobId": body["jobId"]}), ConsistentRead=True)
            at = to_ms(datetime.now(UTC))
            try:
                dynamodb.update_item(**claim_request(executions_table, key, at))
            except dynamodb.exceptions.ConditionalCheckFailedException:
                # moto's SQS takes no locks: two concurrent receives can return one message. The claim
                # refuses the second, as it does in duetime.
                with lock:
                    done[1] += 1
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
                return
            dynamodb.update_item(**finish_request(executions_table, key, at))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            with lock:
                done[0] += 1

        def runner(_: int) -> None:
            empty = 0
            while empty < 3 and done[0] < count:
                messages = sqs.receive_message(
                    QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=30
                ).get("Messages", [])
                empty = 0 if messages else empty + 1
                for message in messages:
                    run_one(message)

        run_seconds = _work(threads, threads, runner)
        return {
            "executions": count,
            "threads": threads,
            "createPerSecond": round(count / create_seconds, 1),
            "runPerSecond": round(done[0] / run_seconds, 1),
            "fullPathPerSecond": round(done[0] / (create_seconds + run_seconds), 1),
            "ran": done[0],
            "duplicateDeliveries": done[1],
        }
    finally:
        harness.stop()


def claim_request(table: str, key: dict[str, Any], at: int) -> dict[str, Any]:
    """The claim of duetime.adapters.aws.store.DynamoStore.claim, for attempt 1."""
    return {
        "TableName": table,
        "Key": key,
        "UpdateExpression": (
            "SET #s = :running, attempt = if_not_exists(attempt, :zero) + :one, workerId = :w, "
            "leaseUntilMs = :lease, startedMs = :now, "
            "attempts = list_append(if_not_exists(attempts, :empty), :entry)"
        ),
        "ConditionExpression": (
            "attribute_exists(pk) AND (#s = :scheduled OR (#s = :running AND leaseUntilMs <= :now))"
        ),
        "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": typed(
            {
                ":running": "running",
                ":scheduled": "scheduled",
                ":zero": 0,
                ":one": 1,
                ":w": "ceiling",
                ":lease": at + 30000,
                ":now": at,
                ":empty": [],
                ":entry": [{"workerId": "ceiling", "startedMs": at}],
            }
        ),
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def finish_request(table: str, key: dict[str, Any], at: int) -> dict[str, Any]:
    """The success of duetime.adapters.aws.store.DynamoStore.finish, for attempt 1."""
    return {
        "TableName": table,
        "Key": key,
        "UpdateExpression": (
            "SET #s = :status, finishedMs = :now, attempts[0].finishedMs = :now, "
            "attempts[0].outcome = :status, expiresAt = :expires, #r = :result REMOVE leaseUntilMs, #e"
        ),
        "ConditionExpression": "attribute_exists(pk) AND #s = :running AND attempt = :a",
        "ExpressionAttributeNames": {"#s": "status", "#e": "error", "#r": "result"},
        "ExpressionAttributeValues": typed(
            {
                ":status": "succeeded",
                ":now": at,
                ":running": "running",
                ":a": 1,
                ":expires": at // 1000 + 86400,
                ":result": "{}",
            }
        ),
        "ReturnValues": "ALL_NEW",
    }
