"""SQS adapter: due messages sent with DelaySeconds in batches of 10, received, extended and deleted; runs due
in the same second travel together, up to RUNS_PER_MESSAGE a message (carriers.py)."""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from duetime.adapters.aws.carriers import (
    RECEIVED_BEFORE_FIELD,
    Carrier,
    Carriers,
    packed,
    part_receipt,
    runs_of,
    split_part,
)
from duetime.definitions import (
    RUNS_PER_MESSAGE,
    SQS_BATCH_SIZE,
    SQS_MAX_DELAY_SECONDS,
    SQS_MAX_VISIBILITY_SECONDS,
    Settings,
)
from duetime.domain.models import to_ms
from duetime.service.ports import DueMessage, Queues, Received, queue_index, queue_receipt, split_receipt

__all__ = ["DeleteBatcher", "DueMessage", "DueQueues", "Received", "delay_seconds", "packing"]

log = logging.getLogger("duetime.queue")

# Send at least a second short of due: SQS delays are whole seconds and a delayed message can surface up to
# a second late (moto's long poll re-checks once a second), so the delay is the whole seconds left after
# that second, and the message surfaces one to two seconds early; the worker waits out the rest itself.
EARLY_SECONDS = 1
# How long runs a carrier brought beyond what a receive asked for wait for the next receive before they are given
# back (a worker receives again the moment a slot is free). A message surfaces one to two seconds before its
# runs are due, so a run that waits here no longer than that starts no later for it.
SPARE_SECONDS = 2.0
# SQS's default visibility timeout, which the DLQs keep: a dead letter being handled is hidden this long.
DLQ_VISIBILITY_SECONDS = 30


def delay_seconds(due_ms: int, now: datetime, cap: int = SQS_MAX_DELAY_SECONDS) -> int:
    """DelaySeconds for a message due at `due_ms`: whole seconds, one to two seconds early, within 0..900."""
    remaining = (due_ms - to_ms(now)) / 1000 - EARLY_SECONDS
    return max(0, min(cap, math.floor(remaining)))


def packing(settings: Settings) -> dict[str, int]:
    """The runs a message of each job class carries at most (JobClassDef.runs_per_message)."""
    return {name: c.runs_per_message for name, c in settings.job_classes.items()}


class DueQueues:
    """The due queues and dead-letter queue of every job class.

    `queue_urls` gives each class its queue's URL, or the URLs of its queues by index when the class is
    spread over several (JobClassDef.queues): a message goes to queue `shard % queues` of its class, a
    receive reads them all, and a received message's receipt names its queue (ports.queue_receipt).

    Runs sent together with the same delay travel up to `runs_per_message` to a message; each is received as
    a message of its own, with a part receipt, and the carrier is kept here until its parts are done with
    (carriers.py says how).
    """

    def __init__(
        self,
        client: Any,
        queue_urls: Mapping[str, str | Sequence[str]],
        dlq_urls: Mapping[str, str],
        max_delay_seconds: int = SQS_MAX_DELAY_SECONDS,
        runs_per_message: int | Mapping[str, int] = RUNS_PER_MESSAGE,
        wall: Callable[[], float] = time.time,
        spare_timer: bool = True,
    ) -> None:
        """`wall` is SQS's clock, epoch seconds (the simulation's is virtual); without `spare_timer` the runs a
        receive did not ask for are given back by the next receive only (the simulation runs one thread)."""
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
        # Runs a message of each class carries at most (JobClassDef.runs_per_message): one number for all, or
        # by class (a class not named: one).
        self.packing = (
            {name: runs_per_message for name in self.class_queue_urls}
            if isinstance(runs_per_message, int)
            else dict(runs_per_message)
        )
        self.wall = wall
        self.carriers = Carriers(wall)  # the carriers received from the due queues, not done with
        # Runs a carrier brought beyond what its receive asked for, by class, with when they came: the next
        # receive takes them first; what waits longer than SPARE_SECONDS is given back (_give_back_spares).
        self._spares: dict[str, list[tuple[float, Received]]] = {}
        self._spares_lock = threading.Lock()
        self.spare_timer = spare_timer
        self.dead_carriers = Carriers(wall)  # and from the DLQs
        # Runs a received message of each class has carried lately (a moving average, from the most it may):
        # a receive asks for as many messages as bring about the runs wanted.
        self._runs_per_received = {name: float(n) for name, n in self.packing.items()}

    def runs_per_message(self, job_class: str) -> int:
        """How many runs a message of the class carries at most (JobClassDef.runs_per_message)."""
        return self.packing.get(job_class, 1)

    def runtime_queue_urls(self) -> dict[str, str | list[str]]:
        """The queue URLs as RuntimeConfig.queue_urls holds them: one URL, or a spread class's list."""
        return {name: urls[0] if len(urls) == 1 else urls for name, urls in self.class_queue_urls.items()}

    @classmethod
    def resolve(
        cls,
        client: Any,
        settings: Settings,
        max_delay_seconds: int = SQS_MAX_DELAY_SECONDS,
        wall: Callable[[], float] = time.time,
        spare_timer: bool = True,
    ) -> DueQueues:
        """Look up every class's queue URLs by name (the local runtime and tests)."""
        urls = {
            n: [client.get_queue_url(QueueName=name)["QueueUrl"] for name in c.queue_names(settings.prefix)]
            for n, c in settings.job_classes.items()
        }
        dlqs = {
            n: client.get_queue_url(QueueName=c.dlq_name(settings.prefix))["QueueUrl"]
            for n, c in settings.job_classes.items()
        }
        return cls(client, urls, dlqs, max_delay_seconds, packing(settings), wall, spare_timer)

    # -- sending -------------------------------------------------------------------------------------

    def send(self, messages: Iterable[DueMessage], now: datetime) -> int:
        """Send each message to its class's queue (`shard % queues` of a spread class) with its delay, runs
        with the same delay together up to `runs_per_message` a message, 10 messages to a call; returns the
        number of runs sent."""
        by_queue: dict[tuple[str, int], list[DueMessage]] = {}
        for message in messages:
            index = queue_index(message, len(self.class_queue_urls[message.job_class]))
            by_queue.setdefault((message.job_class, index), []).append(message)
        sent = 0
        for (job_class, index), items in by_queue.items():

            def delay(m: DueMessage) -> int:
                return delay_seconds(m.visible_ms, now, self.max_delay_seconds)

            bodies = list(packed(items, self.runs_per_message(job_class), delay))
            sent += self._send_bodies(job_class, self.class_queue_urls[job_class][index], bodies)
        return sent

    def _send_bodies(self, job_class: str, url: str, bodies: list[tuple[int, str, int]]) -> int:
        """Send (delay seconds, body, runs) to `url`, 10 to a request, retrying what SQS refuses; returns the
        runs sent. Raises RuntimeError if some are still refused after five tries."""
        sent = 0
        for start in range(0, len(bodies), SQS_BATCH_SIZE):
            batch = bodies[start : start + SQS_BATCH_SIZE]
            runs = {str(i): n for i, (_, _, n) in enumerate(batch)}
            pending: list[dict[str, Any]] = [
                {"Id": str(i), "MessageBody": body, "DelaySeconds": d} for i, (d, body, _) in enumerate(batch)
            ]
            for _ in range(5):
                response = self.client.send_message_batch(QueueUrl=url, Entries=pending)
                failed = {f["Id"] for f in response.get("Failed", [])}
                sent += sum(runs[e["Id"]] for e in pending if e["Id"] not in failed)
                pending = [e for e in pending if e["Id"] in failed]
                if not pending:
                    break
            if pending:
                raise RuntimeError(f"SQS refused {len(pending)} messages for {job_class}")
        return sent

    def _send_alone(
        self, job_class: str, url: str, runs: list[dict[str, Any]], received: int, delay: int | None = None
    ) -> None:
        """Send each of `runs` (a carrier's, received `received` times) as a message of its own to `url`:
        visible when it is due, or after `delay` seconds."""
        now = datetime.fromtimestamp(self.wall(), UTC)

        def delay_of(fields: dict[str, Any]) -> int:
            if delay is not None:
                return max(0, min(SQS_MAX_DELAY_SECONDS, delay))
            return delay_seconds(DueMessage.from_fields(fields).visible_ms, now, self.max_delay_seconds)

        def body_of(fields: dict[str, Any]) -> str:
            return json.dumps({**fields, RECEIVED_BEFORE_FIELD: received}, separators=(",", ":"))

        self._send_bodies(job_class, url, [(delay_of(f), body_of(f), 1) for f in runs])

    # -- receiving -----------------------------------------------------------------------------------

    def receive(self, job_class: str, max_messages: int, wait_seconds: float, visibility: float) -> list[Received]:
        """Up to `max_messages` runs; SQS counts waits and visibility in whole seconds, so both are rounded up.

        A spread class's queues are read in turn from the one after the last that gave messages: each
        without waiting but the last, which waits, so a message on any queue is received within one wait
        (an empty receive costs one request per queue).

        A receive asks for as many messages as bring the runs wanted, at the runs a message has carried lately;
        while a queue gives all it was asked for and more runs are wanted, it asks again without waiting. A
        worker never holds more runs than it asked for: the runs a carrier brought beyond that wait here for the
        next receive (a worker receives again as soon as a slot is free), and those that wait SPARE_SECONDS
        are given back, each a message of its own, visible at once."""
        received = self._take_spares(job_class, max_messages, visibility)
        if len(received) >= max_messages:
            return received
        wanted = max_messages - len(received)
        urls = self.class_queue_urls[job_class]
        start = self._next_queue.get(job_class, 0)
        # Asked again only while what was received stays hidden well beyond it (with no visibility, the same
        # messages would come back).
        top_up_until = self.wall() + visibility / 2
        for step in range(len(urls)):
            index = (start + step) % len(urls)
            last = step == len(urls) - 1
            wait = 0 if received else math.ceil(wait_seconds) if last else 0
            fetched, got, full = self._fetch(job_class, index, wanted, wait, visibility)
            for _ in range(SQS_BATCH_SIZE):  # what came was carriers back again, split: their runs are there now
                if fetched or not got:
                    break
                fetched, got, full = self._fetch(job_class, index, wanted, 0, visibility)
            if fetched or last:
                self._next_queue[job_class] = (index + 1) % len(urls)
                for _ in range(SQS_BATCH_SIZE):
                    if not full or len(fetched) >= wanted or self.wall() >= top_up_until:
                        break
                    more, _, full = self._fetch(job_class, index, wanted - len(fetched), 0, visibility)
                    fetched += more
                if len(fetched) > wanted:
                    self._keep_spares(job_class, fetched[wanted:])
                    fetched = fetched[:wanted]
                return received + fetched
        return received

    def _keep_spares(self, job_class: str, spares: list[Received]) -> None:
        """Keep runs a receive did not ask for, for the next; give them back if none takes them in time."""
        now = self.wall()
        with self._spares_lock:
            self._spares.setdefault(job_class, []).extend((now, r) for r in spares)
        if self.spare_timer:
            timer = threading.Timer(SPARE_SECONDS + 0.05, self._give_back_spares, args=(job_class,))
            timer.daemon = True
            timer.start()

    def _take_spares(self, job_class: str, max_runs: int, visibility: float) -> list[Received]:
        """Up to `max_runs` of the runs waiting here, each now held as a fresh receive would be (`visibility`
        from now: the worker's lease ends then); the rest keep waiting."""
        self._give_back_spares(job_class)
        with self._spares_lock:
            waiting = self._spares.get(job_class, [])
            taken, self._spares[job_class] = waiting[: max(0, max_runs)], waiting[max(0, max_runs) :]
        for _, received in taken:
            try:
                self.hold(job_class, received.receipt, visibility)  # one change covers a carrier's runs
            except Exception:  # its carrier may come back before the lease ends: a duplicate, dropped at claim
                log.exception("could not hold %s's carrier for its new receive", received.message.execution_id)
        return [received for _, received in taken]

    def _give_back_spares(self, job_class: str) -> None:
        """Give back the runs that waited here SPARE_SECONDS for a receive that did not come."""
        stale_before = self.wall() - SPARE_SECONDS
        with self._spares_lock:
            waiting = self._spares.get(job_class, [])
            stale = [r for at, r in waiting if at <= stale_before]
            self._spares[job_class] = [(at, r) for at, r in waiting if at > stale_before]
        if stale:
            try:
                self._give_back(job_class, [r.receipt for r in stale], 0, handed=False)
            except Exception:  # their carrier comes back when its visibility ends, and is split then
                log.exception("giving back %d runs of %s failed", len(stale), job_class)

    def _fetch(
        self, job_class: str, index: int, runs: int, wait: int, visibility: float
    ) -> tuple[list[Received], int, bool]:
        """One ReceiveMessage on queue `index` of the class for about `runs` runs: (the runs, the messages it gave,
        whether it gave all it asked for, so the queue may hold more)."""
        expected = self._runs_per_received.get(job_class, 1.0)
        wanted = max(1, min(SQS_BATCH_SIZE, int(runs / expected)))
        response = self.client.receive_message(
            QueueUrl=self.class_queue_urls[job_class][index],
            MaxNumberOfMessages=wanted,
            WaitTimeSeconds=wait,
            VisibilityTimeout=math.ceil(visibility),
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        messages = response.get("Messages", [])
        hidden_until = self.wall() + math.ceil(visibility)
        received: list[Received] = []
        for m in messages:
            receipt = queue_receipt(index, m["ReceiptHandle"])
            count = int(m.get("Attributes", {}).get("ApproximateReceiveCount", "1"))
            received += self._unpack(job_class, m["Body"], receipt, m["MessageId"], count, hidden_until, deletes=True)
        if received:  # a message split on its way back brings no run, and says nothing of the others
            per_message = max(1.0, len(received) / len(messages))
            self._runs_per_received[job_class] = 0.7 * expected + 0.3 * per_message
        return received, len(messages), bool(messages) and len(messages) == wanted

    def unpack(self, job_class: str, body: str, receipt: str, message_id: str, receive_count: int) -> list[Received]:
        """The runs of a message an SQS event source delivered (the worker function's records): a plain
        message's one run, a carrier's parts, or none for a carrier that came back (its runs were sent again,
        each alone: the record is done with). The event source deletes the record; it is not deleted here."""
        return self._unpack(job_class, body, receipt, message_id, receive_count, hidden_until=0.0, deletes=False)

    def _unpack(
        self,
        job_class: str,
        body: str,
        receipt: str,
        message_id: str,
        count: int,
        hidden_until: float,
        deletes: bool,
    ) -> list[Received]:
        fields = json.loads(body)
        runs = runs_of(fields)
        if runs is None:
            before = int(fields.get(RECEIVED_BEFORE_FIELD, 0)) if isinstance(fields, dict) else 0
            return [Received(DueMessage.from_fields(fields), receipt, count + before)]
        messages = [DueMessage.from_fields(fields) for fields in runs]  # a malformed run fails the carrier here
        if count > 1:  # back again: each run still open goes on alone (carriers.py says why)
            known = self.carriers.take_back(message_id)
            still_open = runs if known is None else [runs[i] for i in sorted(known.open)]
            url, handle = self._queue_of_receipt(job_class, receipt)
            if still_open:
                self._send_alone(job_class, url, still_open, received=count - 1)  # this receive gave none
            if deletes:
                self.client.delete_message(QueueUrl=url, ReceiptHandle=handle)
            return []
        self.carriers.keep(Carrier(receipt, message_id, runs, count, hidden_until))
        return [
            Received(message=message, receipt=part_receipt(receipt, i), receive_count=count)
            for i, message in enumerate(messages)
        ]

    def still_open(self, receipt: str) -> bool:
        """Whether the message of `receipt` is still this receiver's to keep: a plain message always, a part
        until it is settled (deleted or given back)."""
        carrier, part = split_part(receipt)
        return part is None or self.carriers.is_open(carrier, part)

    def forget(self, receipts: Iterable[str]) -> None:
        """Forget the carriers of `receipts` (an event source's batch is over: it deletes or keeps them)."""
        self.carriers.forget(receipts)

    # -- handling received messages ------------------------------------------------------------------

    def _queue_of_receipt(self, job_class: str, receipt: str) -> tuple[str, str]:
        """(queue URL, SQS receipt handle) of a receipt this adapter gave out (a carrier's, not a part's)."""
        index, handle = split_receipt(receipt)
        return self.class_queue_urls[job_class][index], handle

    def extend(self, job_class: str, receipt: str, seconds: float) -> None:
        """Hide a received message for `seconds` from now (0: visible at once), within SQS's 12-hour cap
        (in whole seconds, rounded up): it is received again then. A part of a carrier is sent again as a
        message of its own with that delay (at most SQS's 900 s: one given back for longer comes back early
        and is hidden again) and settled."""
        if split_part(receipt)[1] is not None:
            self._give_back(job_class, [receipt], seconds)
            return
        whole = max(0, min(SQS_MAX_VISIBILITY_SECONDS, math.ceil(seconds)))
        url, handle = self._queue_of_receipt(job_class, receipt)
        self.client.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=whole)

    def _give_back(self, job_class: str, receipts: list[str], seconds: float, handed: bool = True) -> None:
        """Send the runs of these parts again, each a message of its own visible in `seconds`, and settle
        them (a carrier's in one call). A part of a carrier no longer kept comes back with its carrier. Not
        `handed` (a receive's surplus), this receive does not count as one of the run's."""
        by_carrier: dict[str, list[tuple[int, str]]] = {}
        for receipt in receipts:
            carrier_receipt, part = split_part(receipt)
            if part is not None:
                by_carrier.setdefault(carrier_receipt, []).append((part, receipt))
        for carrier_receipt, parts in by_carrier.items():
            carrier = self.carriers.get(carrier_receipt)
            if carrier is None:
                continue
            url, _ = self._queue_of_receipt(job_class, carrier_receipt)
            runs = [carrier.runs[part] for part, _ in parts]
            received = carrier.receive_count if handed else carrier.receive_count - 1
            self._send_alone(job_class, url, runs, received=received, delay=math.ceil(seconds))
            for _, receipt in parts:
                self.delete(job_class, receipt)  # settled: the carrier goes with its last part

    def hold(self, job_class: str, receipt: str, seconds: float) -> None:
        """Keep a received message hidden for `seconds` from now while this worker holds its run (at claim and
        with each heartbeat). A part keeps its carrier hidden at least that long: one visibility change covers
        the holds of the carrier's parts that end within a moment of it."""
        carrier_receipt, part = split_part(receipt)
        if part is None:
            self.extend(job_class, receipt, seconds)
            return
        visibility = self.carriers.hold(carrier_receipt, min(seconds, SQS_MAX_VISIBILITY_SECONDS - 60))
        if visibility is not None:
            url, handle = self._queue_of_receipt(job_class, carrier_receipt)
            try:
                self.client.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=math.ceil(visibility)
                )
            except Exception:
                self.carriers.hold_failed(carrier_receipt)
                raise

    def settle(self, job_class: str, receipt: str) -> str | None:
        """The message is handled: the receipt to delete now (a plain message's own; a carrier's once its last
        part is settled), or None while other parts of its carrier are open."""
        carrier_receipt, part = split_part(receipt)
        if part is None:
            return receipt
        done = self.carriers.settle(carrier_receipt, part)
        return None if done is None else done.receipt

    def delete(self, job_class: str, receipt: str) -> None:
        to_delete = self.settle(job_class, receipt)
        if to_delete is not None:
            url, handle = self._queue_of_receipt(job_class, to_delete)
            self.client.delete_message(QueueUrl=url, ReceiptHandle=handle)

    def delete_batch(self, job_class: str, receipts: list[str]) -> None:
        """Delete up to 10 messages in one request per queue they came from (parts settled, carriers deleted
        once all their parts are). One that fails to delete comes back later and is dropped at claim (its
        execution has ended), so failures are logged, not retried."""
        by_url: dict[str, list[str]] = {}
        for receipt in receipts:
            to_delete = self.settle(job_class, receipt)
            if to_delete is None:
                continue
            url, handle = self._queue_of_receipt(job_class, to_delete)
            by_url.setdefault(url, []).append(handle)
        for url, handles in by_url.items():
            for start in range(0, len(handles), SQS_BATCH_SIZE):
                entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles[start : start + 10])]
                response = self.client.delete_message_batch(QueueUrl=url, Entries=entries)
                for failure in response.get("Failed", []):
                    log.warning("could not delete a message of %s: %s", job_class, failure.get("Message"))

    # -- dead letters ----------------------------------------------------------------------------------

    def dead_letter(self, job_class: str, body: dict[str, Any]) -> None:
        """Record an exhausted or permanently failed execution on the class's DLQ (alarmed on AWS)."""
        self.client.send_message(QueueUrl=self.dlq_urls[job_class], MessageBody=json.dumps(body))

    def dead_letter_depth(self, job_class: str) -> int:
        """Messages on the class's DLQ, visible or in flight (SQS's approximate counts)."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        response = self.client.get_queue_attributes(QueueUrl=self.dlq_urls[job_class], AttributeNames=names)
        return sum(int(response.get("Attributes", {}).get(name, 0)) for name in names)

    def receive_dead_letters(self, job_class: str, wait_seconds: float = 0) -> list[tuple[dict[str, Any], str]]:
        """Up to 10 messages of the DLQ as (body, receipt); a carrier SQS redrove there is one entry a run,
        each with a part receipt, and is deleted once every part is."""
        response = self.client.receive_message(
            QueueUrl=self.dlq_urls[job_class],
            MaxNumberOfMessages=SQS_BATCH_SIZE,
            WaitTimeSeconds=math.ceil(wait_seconds),
        )
        letters: list[tuple[dict[str, Any], str]] = []
        for m in response.get("Messages", []):
            body = json.loads(m["Body"])
            runs = runs_of(body)
            if runs is None:
                letters.append((body, m["ReceiptHandle"]))
                continue
            hidden_until = self.wall() + DLQ_VISIBILITY_SECONDS
            carrier = Carrier(m["ReceiptHandle"], m["MessageId"], runs, 1, hidden_until)
            self.dead_carriers.keep(carrier)
            letters += [(fields, part_receipt(m["ReceiptHandle"], i)) for i, fields in enumerate(runs)]
        return letters

    def delete_dead_letter(self, job_class: str, receipt: str) -> None:
        carrier_receipt, part = split_part(receipt)
        if part is not None:
            done = self.dead_carriers.settle(carrier_receipt, part)
            if done is None:
                return
            receipt = done.receipt
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
        to_delete = self.queues.settle(self.job_class, receipt)  # a part of a carrier: its last deletes it
        if to_delete is None:
            return
        with self._lock:
            self._pending.append(to_delete)
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
