"""The due queues' contract (delay, visibility, receive counts, deletes, redrive, DLQ), on every adapter.

These run on the real clock: times are a `timing.unit` apart, whole seconds for SQS, tenths for SQLite.
"""

from __future__ import annotations

import threading
import time

from duetime.definitions import MAX_RECEIVE_COUNT
from duetime.domain.keys import ExecutionKey
from duetime.service.ports import DueMessage

from tests.contract.conftest import receive_within, wall_ms, wall_now


def message(n: int = 1, due_in: float = 0.0, job_class: str = "default") -> DueMessage:
    due = wall_ms() + round(due_in * 1000)
    execution_id = f"j_{n:016x}.{due:013d}"
    return DueMessage(
        key=ExecutionKey(pk="2026113009#001", sk=f"{due:013d}#{execution_id}"),
        execution_id=execution_id,
        job_id=f"j_{n:016x}",
        due_ms=due,
        job_class=job_class,
    )


def test_a_sent_message_is_received_with_its_body_and_hidden_while_in_flight(queues, timing):
    sent = message()
    assert queues.send([sent], wall_now()) == 1
    [received] = receive_within(queues, "default", 3 * timing.unit, 10 * timing.unit)
    assert received.message == sent and received.receive_count == 1 and received.receipt
    assert queues.receive("default", 10, 0, 10 * timing.unit) == []


def test_a_message_not_deleted_reappears_after_its_visibility_and_deleted_ones_never_do(queues, timing):
    sent = [message(n) for n in (1, 2, 3)]
    queues.send(sent, wall_now())
    got: list = []
    receiving_from = time.monotonic()  # each visibility below starts after this
    while len(got) < 3:
        batch = receive_within(queues, "default", 3 * timing.unit, timing.unit)
        assert batch, "every sent message is received"
        got += batch
    by_id = {r.message.execution_id: r for r in got}
    queues.delete("default", by_id[sent[0].execution_id].receipt)
    queues.delete_batch("default", [by_id[sent[1].execution_id].receipt])
    time.sleep(max(0.0, receiving_from + timing.unit / 2 - time.monotonic()))
    assert queues.receive("default", 10, 0, timing.unit) == []  # still hidden half-way
    [again] = receive_within(queues, "default", timing.unit + timing.late, 10 * timing.unit)
    assert again.message == sent[2] and again.receive_count == 2
    assert time.monotonic() - receiving_from >= timing.unit
    assert receive_within(queues, "default", timing.unit, 10 * timing.unit) == []


def test_extend_hides_a_message_longer_or_shows_it_at_once(queues, timing):
    queues.send([message()], wall_now())
    [first] = receive_within(queues, "default", 3 * timing.unit, 10 * timing.unit)
    queues.extend("default", first.receipt, 0)
    [second] = receive_within(queues, "default", timing.late + 1, timing.unit)
    assert second.receive_count == 2
    queues.extend("default", second.receipt, 3 * timing.unit)
    time.sleep(1.5 * timing.unit)
    assert queues.receive("default", 10, 0, timing.unit) == []  # past the first visibility, still hidden
    [third] = receive_within(queues, "default", 2 * timing.unit + timing.late, timing.unit)
    assert third.receive_count == 3


def test_a_delayed_message_is_delivered_at_its_due_instant(queues, timing):
    sent = message(due_in=2 * timing.unit)
    queues.send([sent], wall_now())
    time.sleep(max(0.0, (sent.due_ms - wall_ms()) / 1000 - timing.early - 0.25 * timing.unit))
    # Not before its time: a receive that ends before the message is due (less the queue's tolerance) is
    # empty. (A test process the machine starved past that instant may receive it here, on time.)
    early = queues.receive("default", 10, 0, 10 * timing.unit)
    looked_until = wall_ms()
    assert early == [] or looked_until >= sent.due_ms - timing.early * 1000, (early, looked_until)
    if early:
        [received], arrived = early, looked_until
    else:
        [received] = receive_within(queues, "default", 2 * timing.unit + timing.late, 10 * timing.unit)
        arrived = wall_ms()
    assert received.message == sent
    assert sent.due_ms - timing.early * 1000 <= arrived <= sent.due_ms + timing.late * 1000


def test_a_waiting_receive_returns_a_message_sent_meanwhile_by_another_thread(queues, timing):
    sent = message()

    def send_later() -> None:
        time.sleep(timing.unit / 2)
        queues.send([sent], wall_now())

    sender = threading.Thread(target=send_later)
    started = time.monotonic()
    sender.start()
    got = queues.receive("default", 10, 10, 10 * timing.unit)
    sender.join()
    assert [r.message for r in got] == [sent]
    assert time.monotonic() - started < 9  # woken by the send, not by the end of the wait


def test_each_job_class_has_its_own_queue_and_a_receive_takes_at_most_what_it_asks(queues, timing):
    queues.send([message(1, job_class="long")] + [message(n) for n in range(2, 7)], wall_now())
    first = receive_within(queues, "default", 3 * timing.unit, 10 * timing.unit, n=2)
    assert 1 <= len(first) <= 2
    seen = {r.message.execution_id for r in first}
    while len(seen) < 5:
        batch = receive_within(queues, "default", 3 * timing.unit, 10 * timing.unit)
        assert batch
        seen |= {r.message.execution_id for r in batch}
    assert all(m.startswith("j_") and not m.startswith("j_0000000000000001") for m in seen)
    [long] = receive_within(queues, "long", 3 * timing.unit, 10 * timing.unit)
    assert long.message.job_id == "j_0000000000000001"


def test_a_message_received_too_often_moves_to_the_dead_letter_queue(queues, timing):
    sent = message()
    queues.send([sent], wall_now())
    counts = []
    while len(counts) < MAX_RECEIVE_COUNT:
        batch = receive_within(queues, "default", 3 * timing.unit, 0)
        assert len(batch) == 1
        counts.append(batch[0].receive_count)
    assert counts == list(range(1, MAX_RECEIVE_COUNT + 1))
    assert receive_within(queues, "default", timing.late, 0) == []  # redriven on the next receive
    assert queues.dead_letter_depth("default") == 1
    [(body, receipt)] = queues.receive_dead_letters("default")
    assert DueMessage.from_body(_compact(body)) == sent
    queues.delete_dead_letter("default", receipt)
    assert queues.dead_letter_depth("default") == 0


def test_a_dead_letter_is_counted_until_deleted_and_hidden_while_handled(queues):
    notice = {"kind": "failed", "executionId": "j_0000000000000001.1796115600000", "owner": "alice"}
    queues.dead_letter("long", notice)
    assert queues.dead_letter_depth("long") == 1 and queues.dead_letter_depth("default") == 0
    [(body, receipt)] = queues.receive_dead_letters("long")
    assert body == notice
    assert queues.receive_dead_letters("long") == []  # in flight
    assert queues.dead_letter_depth("long") == 1
    queues.delete_dead_letter("long", receipt)
    assert queues.dead_letter_depth("long") == 0


def _compact(body: dict) -> str:
    import json

    return json.dumps(body, separators=(",", ":"))
