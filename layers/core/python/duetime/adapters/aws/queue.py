"""SQS adapter: due messages sent with DelaySeconds in batches of 10, received, extended and deleted."""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from duetime.definitions import SQS_BATCH_SIZE, SQS_MAX_DELAY_SECONDS, SQS_MAX_VISIBILITY_SECONDS, Settings
from duetime.domain.models import to_ms
from duetime.service.ports import DueMessage, Queues, Received, queue_index, queue_receipt, split_receipt

__all__ = ["DeleteBatcher", "DueMessage", "DueQueues", "Received", "delay_seconds"]

log = logging.getLogger("duetime.queue")

# Send at least a second short of due: SQS delays are whole seconds and a delayed message can surface up to
# a second late (moto's long poll re-checks once a second), so the delay is the whole seconds left after
# that second, and the message surfaces one to two seconds early; the worker waits out the rest itself.
EARLY_SECONDS = 1


def delay_seconds(due_ms: int, now: datetime, cap: int = SQS_MAX_DELAY_SECONDS) -> int:
    """DelaySeconds for a message due at `due_ms`: whole seconds, one to two seconds early, within 0..900."""
    remaining = (due_ms - to_ms(now)) / 1000 - EARLY_SECONDS
    return max(0, min(cap, math.floor(remaining)))


class DueQueues:
    """The due queues and dead-letter queue of every job class.

    `queue_urls` gives each class its queue's URL, or the URLs of its queues by index when the class is
    spread over several (JobClassDef.queues): a message goes to queue `shard % queues` of its class, a
    receive reads them all, and a received message's receipt names its queue (ports.queue_receipt).
    """

    def __init__(
        self,
        client: Any,
        queue_urls: Mapping[str, str | Sequence[str]],
        dlq_urls: Mapping[str, str],
        max_delay_seconds: int = SQS_MAX_DELAY_SECONDS,
    ) -> None:
        self.client = client
        self.class_queue_urls = {
            name: [urls] if isinstance(urls, str) else list(urls) for name, urls in queue_urls.items()
        }
        # Each class's queue 0: the one queue of a class that is not spread.
        self.queue_urls = {name: urls[0] for name, urls in self.class_queue_urls.items()}
        self.dlq_urls = dict(dlq_urls)
        # The queue of each class that the next receive waits on: a spread class's queues take turns.
        self._next_queue: dict[str, int] = {}
        # Tests that drive a hand clock set 0: SQS's delays run on the real clock.
        self.max_delay_seconds = max_delay_seconds

    def runtime_queue_urls(self) -> dict[str, str | list[str]]:
        """The queue URLs as RuntimeConfig.queue_urls holds them: one URL, or a spread class's list."""
        return {name: urls[0] if len(urls) == 1 else urls for name, urls in self.class_queue_urls.items()}

    @classmethod
    def resolve(cls, client: Any, settings: Settings, max_delay_seconds: int = SQS_MAX_DELAY_SECONDS) -> DueQueues:
        """Look up every class's queue URLs by name (the local runtime and tests)."""
        urls = {
            n: [client.get_queue_url(QueueName=name)["QueueUrl"] for name in c.queue_names(settings.prefix)]
            for n, c in settings.job_classes.items()
        }
        dlqs = {
            n: client.get_queue_url(QueueName=c.dlq_name(settings.prefix))["QueueUrl"]
            for n, c in settings.job_classes.items()
        }
        return cls(client, urls, dlqs, max_delay_seconds)

    def send(self, messages: Iterable[DueMessage], now: datetime) -> int:
        """Send each message to its class's queue (`shard % queues` of a spread class) with its delay, 10 to a
        call; returns the number sent."""
        by_queue: dict[tuple[str, int], list[DueMessage]] = {}
        for message in messages:
            index = queue_index(message, len(self.class_queue_urls[message.job_class]))
            by_queue.setdefault((message.job_class, index), []).append(message)
        sent = 0
        for (job_class, index), items in by_queue.items():
            url = self.class_queue_urls[job_class][index]
            for start in range(0, len(items), SQS_BATCH_SIZE):
                batch = items[start : start + SQS_BATCH_SIZE]
                entries = [
                    {
                        "Id": str(i),
                        "MessageBody": m.to_body(),
                        "DelaySeconds": delay_seconds(m.visible_ms, now, self.max_delay_seconds),
                    }
                    for i, m in enumerate(batch)
                ]
                pending = entries
                for _ in range(5):
                    response = self.client.send_message_batch(QueueUrl=url, Entries=pending)
                    failed = {f["Id"] for f in response.get("Failed", [])}
                    sent += len(pending) - len(failed)
                    pending = [e for e in pending if e["Id"] in failed]
                    if not pending:
                        break
                if pending:
                    raise RuntimeError(f"SQS refused {len(pending)} messages for {job_class}")
        return sent

    def receive(self, job_class: str, max_messages: int, wait_seconds: float, visibility: float) -> list[Received]:
        """Up to 10 messages; SQS counts waits and visibility in whole seconds, so both are rounded up.

        A spread class's queues are read in turn from the one after the last that gave messages: each
        without waiting but the last, which waits, so a message on any queue is received within one wait
        (an empty receive costs one request per queue)."""
        urls = self.class_queue_urls[job_class]
        start = self._next_queue.get(job_class, 0)
        for step in range(len(urls)):
            index = (start + step) % len(urls)
            last = step == len(urls) - 1
            response = self.client.receive_message(
                QueueUrl=urls[index],
                MaxNumberOfMessages=max(1, min(SQS_BATCH_SIZE, max_messages)),
                WaitTimeSeconds=math.ceil(wait_seconds) if last else 0,
                VisibilityTimeout=math.ceil(visibility),
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            )
            messages = response.get("Messages", [])
            if messages or last:
                self._next_queue[job_class] = (index + 1) % len(urls)
                return [
                    Received(
                        message=DueMessage.from_body(m["Body"]),
                        receipt=queue_receipt(index, m["ReceiptHandle"]),
                        receive_count=int(m.get("Attributes", {}).get("ApproximateReceiveCount", "1")),
                    )
                    for m in messages
                ]
        return []

    def _queue_of_receipt(self, job_class: str, receipt: str) -> tuple[str, str]:
        """(queue URL, SQS receipt handle) of a receipt this adapter gave out."""
        index, handle = split_receipt(receipt)
        return self.class_queue_urls[job_class][index], handle

    def extend(self, job_class: str, receipt: str, seconds: float) -> None:
        """Hide a received message for `seconds` from now (0: visible at once), within SQS's 12-hour cap
        (in whole seconds, rounded up)."""
        whole = max(0, min(SQS_MAX_VISIBILITY_SECONDS, math.ceil(seconds)))
        url, handle = self._queue_of_receipt(job_class, receipt)
        self.client.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=whole)

    def delete(self, job_class: str, receipt: str) -> None:
        url, handle = self._queue_of_receipt(job_class, receipt)
        self.client.delete_message(QueueUrl=url, ReceiptHandle=handle)

    def delete_batch(self, job_class: str, receipts: list[str]) -> None:
        """Delete up to 10 messages in one request per queue they came from. One that fails to delete comes
        back later and is dropped at claim (its execution has ended), so failures are logged, not retried."""
        by_url: dict[str, list[str]] = {}
        for receipt in receipts:
            url, handle = self._queue_of_receipt(job_class, receipt)
            by_url.setdefault(url, []).append(handle)
        for url, handles in by_url.items():
            entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles)]
            response = self.client.delete_message_batch(QueueUrl=url, Entries=entries)
            for failure in response.get("Failed", []):
                log.warning("could not delete a message of %s: %s", job_class, failure.get("Message"))

    def dead_letter(self, job_class: str, body: dict[str, Any]) -> None:
        """Record an exhausted or permanently failed execution on the class's DLQ (alarmed on AWS)."""
        self.client.send_message(QueueUrl=self.dlq_urls[job_class], MessageBody=json.dumps(body))

    def dead_letter_depth(self, job_class: str) -> int:
        """Messages on the class's DLQ, visible or in flight (SQS's approximate counts)."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        response = self.client.get_queue_attributes(QueueUrl=self.dlq_urls[job_class], AttributeNames=names)
        return sum(int(response.get("Attributes", {}).get(name, 0)) for name in names)

    def receive_dead_letters(self, job_class: str, wait_seconds: float = 0) -> list[tuple[dict[str, Any], str]]:
        response = self.client.receive_message(
            QueueUrl=self.dlq_urls[job_class],
            MaxNumberOfMessages=SQS_BATCH_SIZE,
            WaitTimeSeconds=math.ceil(wait_seconds),
        )
        return [(json.loads(m["Body"]), m["ReceiptHandle"]) for m in response.get("Messages", [])]

    def delete_dead_letter(self, job_class: str, receipt: str) -> None:
        self.client.delete_message(QueueUrl=self.dlq_urls[job_class], ReceiptHandle=receipt)


class DeleteBatcher:
    """Collects the receipts of handled messages and deletes them 10 to a request, at most `interval`
    seconds after the first one: a worker's deletes cost a tenth of a request each."""

    def __init__(self, queues: Queues, job_class: str, interval: float = 1.0) -> None:
        self.queues, self.job_class, self.interval = queues, job_class, interval
        self._pending: list[str] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"deletes-{job_class}", daemon=True)
        self._thread.start()

    def add(self, receipt: str) -> None:
        with self._lock:
            self._pending.append(receipt)
            if len(self._pending) >= SQS_BATCH_SIZE:
                self._wake.set()

    def _take(self) -> list[str]:
        with self._lock:
            batch, self._pending = self._pending[:SQS_BATCH_SIZE], self._pending[SQS_BATCH_SIZE:]
            return batch

    def flush(self) -> None:
        while batch := self._take():
            try:
                self.queues.delete_batch(self.job_class, batch)
            except Exception:  # the messages come back and are dropped at claim
                log.exception("batched delete failed")

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            self.flush()

    def close(self) -> None:
        self._stopped.set()
        self._wake.set()
        self._thread.join(timeout=5)
        self.flush()
