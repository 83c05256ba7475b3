"""The SQLite due queues: per job class a queue and a DLQ in one table, with SQS's semantics in milliseconds.

A message is a row: its queue (the name of the SQS queue or DLQ it stands for), body, `visible_at_ms` (wall-clock
epoch ms, shared by every process on the file), receive count and current receipt. Sending makes a
message visible AT its due instant (no whole-second delays, no sending a second early); receiving hides
it for the visibility timeout and counts the receive; a message received MAX_RECEIVE_COUNT times moves to
the DLQ on its next receive, as SQS redrive does. A receipt names one receive: after the message was
received again, an old receipt deletes or extends nothing.

Waiting receives sleep until the earliest message of the queue becomes visible (not a fixed poll), and
are woken early by any commit that may have made one visible: at once from this process, within a few
milliseconds from another (see db.py). A receiver killed (SIGKILL) or stopped (SIGSTOP) holds nothing but
its messages' visibility: they reappear when it ends.

A class spread over several due queues (JobClassDef.queues) keeps each message under the name of the
queue `shard % queues` it was sent to, as SQS would; a receive of the class reads all of them in one
query (so the wake-at-due wait covers every queue), and a receipt names its queue (ports.queue_receipt).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from duetime.adapters.sqlite.db import Database, earliest_visible_ms
from duetime.definitions import MAX_RECEIVE_COUNT, SQS_BATCH_SIZE, SQS_MAX_VISIBILITY_SECONDS, Settings
from duetime.service.ports import DueMessage, Received, queue_index, queue_receipt, split_receipt

# SQS's default visibility timeout, which the DLQs keep: a notice being handled is hidden this long.
DLQ_VISIBILITY_SECONDS = 30


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class SqliteQueues:
    """The due queue and dead-letter queue of every job class; implements service.ports.Queues."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        max_delay_seconds: float | None = None,
        wall_ms: Callable[[], int] = _wall_ms,
    ) -> None:
        self.db = db
        self.class_queue_names = {n: c.queue_names(settings.prefix) for n, c in settings.job_classes.items()}
        # Each class's queue 0: the one queue of a class that is not spread.
        self.queue_names = {n: names[0] for n, names in self.class_queue_names.items()}
        self.dlq_names = {n: c.dlq_name(settings.prefix) for n, c in settings.job_classes.items()}
        # None: a message becomes visible at its due instant. Tests that drive a hand clock set 0 (the
        # queue runs on the real clock), as they do for SQS.
        self.max_delay_seconds = max_delay_seconds
        self.wall_ms = wall_ms

    # -- sending ---------------------------------------------------------------------------------------

    def send(self, messages: Iterable[DueMessage], now: datetime) -> int:
        """Queue each message on its class's queue, visible at its due instant (or at once if that has
        passed, or within `max_delay_seconds`); returns the number sent. One transaction for all."""
        rows = []
        sent_ms = self.wall_ms()
        for message in messages:
            names = self.class_queue_names[message.job_class]
            queue = names[queue_index(message, len(names))]
            visible = message.visible_ms
            if self.max_delay_seconds is not None:
                visible = min(visible, sent_ms + round(self.max_delay_seconds * 1000))
            rows.append((queue, message.to_body(), visible, sent_ms))
        if not rows:
            return 0
        with self.db.write(wakes=True, visible_at_ms=min(row[2] for row in rows)) as conn:
            conn.executemany("INSERT INTO messages (queue, body, visible_at_ms, sent_ms) VALUES (?, ?, ?, ?)", rows)
        return len(rows)

    def dead_letter(self, job_class: str, body: dict[str, Any]) -> None:
        """Record an exhausted or permanently failed execution on the class's DLQ."""
        now = self.wall_ms()
        with self.db.write(wakes=True) as conn:
            conn.execute(
                "INSERT INTO messages (queue, body, visible_at_ms, sent_ms) VALUES (?, ?, ?, ?)",
                (self.dlq_names[job_class], json.dumps(body), now, now),
            )

    # -- receiving -------------------------------------------------------------------------------------

    def receive(self, job_class: str, max_messages: int, wait_seconds: float, visibility: float) -> list[Received]:
        """Up to `max_messages` visible messages, each hidden for `visibility` seconds; waits up to
        `wait_seconds` for one, waking when the earliest becomes visible or a send may have made one so."""
        taken = self._receive(
            self.class_queue_names[job_class], max_messages, wait_seconds, visibility, self.dlq_names[job_class]
        )
        return [Received(DueMessage.from_body(body), receipt, count) for body, receipt, count in taken]

    def receive_dead_letters(self, job_class: str, wait_seconds: float = 0) -> list[tuple[dict[str, Any], str]]:
        taken = self._receive([self.dlq_names[job_class]], SQS_BATCH_SIZE, wait_seconds, DLQ_VISIBILITY_SECONDS, None)
        return [(json.loads(body), receipt) for body, receipt, _ in taken]

    def _receive(
        self, queues: list[str], max_messages: int, wait_seconds: float, visibility: float, redrive_to: str | None
    ) -> list[tuple[str, str, int]]:
        deadline = time.monotonic() + max(0.0, wait_seconds)
        while True:
            seen = self.db.generation
            taken = self._take(queues, max(1, max_messages), visibility, redrive_to)
            remaining = deadline - time.monotonic()
            if taken or remaining <= 0:
                return taken
            with self.db.read() as conn:
                earliest = earliest_visible_ms(conn, queues)
            if earliest is not None:
                remaining = min(remaining, max(0.0, (earliest - self.wall_ms()) / 1000))
            self.db.wait_for_change(seen, remaining, queues)

    def _take(
        self, queues: list[str], limit: int, visibility: float, redrive_to: str | None
    ) -> list[tuple[str, str, int]]:
        """Receive what is visible now in one transaction (looking first without the write lock)."""
        among = _among(queues)
        probe = self.db.query_one(
            f"SELECT 1 FROM messages WHERE queue {among} AND visible_at_ms <= ? LIMIT 1", (*queues, self.wall_ms())
        )
        if probe is None:
            return []
        taken: list[tuple[str, str, int]] = []
        redriven = False
        with self.db.write() as conn:
            now = self.wall_ms()
            rows = conn.execute(
                f"SELECT id, body, receive_count, queue FROM messages WHERE queue {among} AND visible_at_ms <= ? "
                "ORDER BY visible_at_ms, id LIMIT ?",
                (*queues, now, limit),
            ).fetchall()
            hidden_until = now + round(max(0.0, min(SQS_MAX_VISIBILITY_SECONDS, visibility)) * 1000)
            for message_id, body, count, queue in rows:
                if redrive_to is not None and count >= MAX_RECEIVE_COUNT:
                    conn.execute(
                        "UPDATE messages SET queue = ?, visible_at_ms = ?, receive_count = 0, receipt = NULL "
                        "WHERE id = ?",
                        (redrive_to, now, message_id),
                    )
                    redriven = True
                    continue
                receipt = f"{message_id}.{secrets.token_hex(8)}"
                conn.execute(
                    "UPDATE messages SET visible_at_ms = ?, receive_count = ?, receipt = ? WHERE id = ?",
                    (hidden_until, count + 1, receipt, message_id),
                )
                taken.append((body, queue_receipt(queues.index(queue), receipt), count + 1))
        if redriven:
            self.db.notify_local()
        return taken

    # -- handling received messages ----------------------------------------------------------------------

    @staticmethod
    def _message_id(receipt: str) -> int | None:
        head = receipt.split(".", 1)[0]
        return int(head) if head.isdigit() else None

    def extend(self, job_class: str, receipt: str, seconds: float) -> None:
        """Hide a received message for `seconds` from now (0: visible at once), within SQS's 12-hour cap.
        A receipt of an earlier receive changes nothing."""
        self._set_visibility(*self._queue_of_receipt(job_class, receipt), seconds)

    def runs_per_message(self, job_class: str) -> int:
        return 1  # a message carries one run here

    def hold(self, job_class: str, receipt: str, seconds: float) -> None:
        """Keep a received message hidden for `seconds` while this worker holds its run (one run a message)."""
        self.extend(job_class, receipt, seconds)

    def settle(self, job_class: str, receipt: str) -> str | None:
        """The receipt to delete for a handled message: its own (a message carries one run here)."""
        return receipt

    def _queue_of_receipt(self, job_class: str, receipt: str) -> tuple[str, str]:
        """(queue name, the row's receipt) of a receipt this adapter gave out for a message of `job_class`."""
        index, own = split_receipt(receipt)
        names = self.class_queue_names[job_class]
        return (names[index] if index < len(names) else names[0]), own

    def _set_visibility(self, queue: str, receipt: str, seconds: float) -> None:
        message_id = self._message_id(receipt)
        if message_id is None:
            return
        until = self.wall_ms() + round(max(0.0, min(SQS_MAX_VISIBILITY_SECONDS, seconds)) * 1000)
        with self.db.write(wakes=seconds <= 0, visible_at_ms=until) as conn:
            conn.execute(
                "UPDATE messages SET visible_at_ms = ? WHERE id = ? AND queue = ? AND receipt = ?",
                (until, message_id, queue, receipt),
            )

    def delete(self, job_class: str, receipt: str) -> None:
        self.delete_batch(job_class, [receipt])

    def delete_batch(self, job_class: str, receipts: list[str]) -> None:
        """Delete handled messages in one transaction; a receipt of an earlier receive deletes nothing."""
        self._delete([self._queue_of_receipt(job_class, r) for r in receipts])

    def _delete(self, receipts: list[tuple[str, str]]) -> None:
        """Delete the messages of (queue name, receipt) pairs whose receipt is still current."""
        rows = [(i, queue, r) for queue, r in receipts if (i := self._message_id(r)) is not None]
        if rows:
            with self.db.write() as conn:
                conn.executemany("DELETE FROM messages WHERE id = ? AND queue = ? AND receipt = ?", rows)

    def delete_dead_letter(self, job_class: str, receipt: str) -> None:
        self._delete([(self.dlq_names[job_class], receipt)])

    def dead_letter_depth(self, job_class: str) -> int:
        """Messages on the class's DLQ, visible or in flight."""
        row = self.db.query_one("SELECT COUNT(*) FROM messages WHERE queue = ?", (self.dlq_names[job_class],))
        return int(row[0])

    def depth(self, job_class: str, index: int | None = None) -> int:
        """Messages on the class's due queues (or on its queue `index` alone), visible, delayed or in flight
        (for tests and the bench)."""
        names = self.class_queue_names[job_class]
        queues = names if index is None else [names[index]]
        row = self.db.query_one(f"SELECT COUNT(*) FROM messages WHERE queue {_among(queues)}", tuple(queues))
        return int(row[0])


def _among(queues: list[str]) -> str:
    """The SQL test of a message's queue against `queues` (one placeholder each): `= ?` for one queue."""
    return "= ?" if len(queues) == 1 else f"IN ({', '.join('?' * len(queues))})"
