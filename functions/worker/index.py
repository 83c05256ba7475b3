"""SQS event source -> run each due execution under its lease (a record may carry several); partial batch
failures are reported."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.data_classes import SQSEvent
from duetime.adapters.aws.queue import DueQueues, Received
from duetime.config import RuntimeConfig, build_ports, build_targets
from duetime.domain.models import ExecutionStatus
from duetime.service.outcomes import RunOutcome
from duetime.service.ports import queue_receipt
from duetime.worker.registry import load_modules
from duetime.worker.runtime import HandlerAnnouncer, Worker

logger = Logger(service="duetime-worker")
tracer = Tracer(service="duetime-worker")
CONFIG = RuntimeConfig.from_env()  # checked at cold start
PORTS = build_ports(CONFIG)
TARGETS = build_targets(CONFIG)
load_modules(CONFIG.handler_module_names())
JOB_CLASS = CONFIG.job_class
# A class spread over several due queues has a worker function per queue: a record's deletes and visibility
# changes go to the queue it came from, known by name from its eventSourceARN.
QUEUE_INDEX = {
    name: index for index, name in enumerate(CONFIG.settings().job_class(JOB_CLASS).queue_names(CONFIG.prefix))
}
# This container's handlers, announced at cold start and renewed by invocations (the API of a deployment
# reads the synth-time manifest too, so this matters for workers whose code changed since).
ANNOUNCER = HandlerAnnouncer(PORTS, JOB_CLASS, f"lambda-{uuid.uuid4().hex[:12]}")
ANNOUNCER.announce()


def sqs_queues(queues: object) -> DueQueues:
    """The SQS adapter the worker function's ports hold (its records' carriers are unpacked by it)."""
    if not isinstance(queues, DueQueues):
        raise RuntimeError("the worker function's queues are not SQS's")
    return queues


QUEUES = sqs_queues(PORTS.queues)
# Handlers run in child processes at once, at most (Worker's children_at_once).
HANDLER_CHILDREN_AT_ONCE = 10
# A record that failed before its claim comes back after 1, 2, 4 ... seconds (at most this), not after
# the queue's visibility timeout (the function's timeout, up to 15 minutes).
MAX_RETRY_BACKOFF_SECONDS = 60


def record_receipt(record: Any) -> str:
    """The receipt the queue adapter takes for `record`: its handle, marked with its queue's index."""
    queue_name = str(record.event_source_arn).rsplit(":", 1)[-1]
    index = QUEUE_INDEX.get(queue_name)
    if index is None:  # not one of this class's queues: the configuration is wrong; queue 0 is the best guess
        logger.error("a record from a queue of another class", extra={"eventSourceARN": record.event_source_arn})
        index = 0
    return queue_receipt(index, record.receipt_handle)


def retry_backoff_seconds(receive_count: int) -> int:
    return int(min(MAX_RETRY_BACKOFF_SECONDS, 2 ** min(max(receive_count, 1) - 1, 16)))


def return_for_retry(record: Any, received: Received | None, worker_id: str) -> None:
    """Make a failed record's run visible again soon, unless this invocation claimed its row: then its
    visibility already ends with the lease it took, and the next claim takes the row as that lease ends.
    `received` is the run as unpacked from the record, None if the record could not be."""
    try:
        if received is None:
            raise ValueError("the record's body is not a due message")
        row = PORTS.store.get_execution(received.message.key)
        if row is not None and row.status == ExecutionStatus.RUNNING and row.worker_id == worker_id:
            return
    except Exception:  # unreadable, or the store is down: back soon all the same (redrive ends a poison)
        logger.warning("could not read the row of a failed record", extra={"messageId": record.message_id})
    backoff = retry_backoff_seconds(int(record.attributes.approximate_receive_count))
    try:
        # A run of a carrier goes back alone (its carrier's other runs are not hurried back with it).
        QUEUES.extend(JOB_CLASS, record_receipt(record) if received is None else received.receipt, backoff)
    except Exception:
        logger.exception("could not shorten a failed record's visibility", extra={"messageId": record.message_id})


def runs_of(record: Any) -> list[Received] | None:
    """The runs a record brings (a carrier brings several; one that came back, none: they were sent again
    alone), or None if its body is not a due message."""
    try:
        count = int(record.attributes.approximate_receive_count)
        return QUEUES.unpack(JOB_CLASS, record.body, record_receipt(record), record.message_id, count)
    except Exception:
        logger.exception("a record that is no due message", extra={"messageId": record.message_id})
        return None


@logger.inject_lambda_context
# Nothing a worker returns or runs belongs in X-Ray: handlers' results stay in the executions table.
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    """Run the batch's executions concurrently (a long one must not delay the others) and report the
    records whose message must stay queued as batch item failures (ReportBatchItemFailures)."""
    ANNOUNCER.announce_if_due()
    records = list(SQSEvent(event).records)
    worker_id = f"lambda-{context.aws_request_id}"
    runs: list[tuple[Any, Received | None]] = []
    for record in records:
        unpacked = runs_of(record)
        runs += [(record, None)] if unpacked is None else [(record, r) for r in unpacked]
    worker = Worker(
        PORTS,
        JOB_CLASS,
        worker_id,
        concurrency=max(1, len(runs)),
        lease_visibility_on_claim=True,
        targets=TARGETS,
        deletes_by_event_source=True,
        # A batch may be 100 runs (ten a record): targets and in-process handlers run all at once, in threads,
        # but no more Python interpreters of handlers than a batch of single runs started.
        children_at_once=HANDLER_CHILDREN_AT_ONCE,
    )

    def run(item: tuple[Any, Received | None]) -> tuple[Any, Received | None, RunOutcome]:
        record, received = item
        try:
            if received is None:
                raise ValueError("the record's body is not a due message")
            return record, received, worker.process(received)
        except Exception:
            logger.exception("execution failed to process", extra={"messageId": record.message_id})
            return_for_retry(record, received, worker_id)
            return record, received, RunOutcome.ERROR

    with ThreadPoolExecutor(max_workers=max(1, len(runs))) as pool:
        outcomes = list(pool.map(run, runs))
    worker.flush_events()  # the batch's terminal runs and job changes: one PutEvents request per ten
    # A message kept on purpose (hidden until due, or until a live lease ends) is reported as a failure, so
    # the event source leaves it queued; the others it deletes. A carrier is kept while a run of it is
    # (a run given back went alone, and no longer needs it).
    kept = {
        record.message_id
        for record, received, outcome in outcomes
        if outcome.keeps_message and (received is None or QUEUES.still_open(received.receipt))
    }
    QUEUES.forget(received.receipt for _, received, _ in outcomes if received is not None)
    return {"batchItemFailures": [{"itemIdentifier": r.message_id} for r in records if r.message_id in kept]}
