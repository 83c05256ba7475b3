"""Several runs in one SQS message (adapters/aws/carriers.py): what the worker sees of each run, what becomes
of the message, and what it costs in requests. On moto, on the real clock (SQS's visibility is)."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from duetime.adapters.aws.carriers import HOLD_SLACK_SECONDS
from duetime.adapters.aws.queue import SPARE_SECONDS, DueQueues
from duetime.definitions import RUNS_PER_MESSAGE
from duetime.service.ports import DueMessage

from tests.contract.test_queue_contract import message


def due_now(count: int, first: int = 1) -> list[DueMessage]:
    return [message(n) for n in range(first, first + count)]


class Requests:
    """SQS requests by operation, and the messages each send carried."""

    def __init__(self, client: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        client.meta.events.register("before-parameter-build.sqs.*", self._count)

    def _count(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.calls[model.name] += 1
        if model.name == "SendMessageBatch":
            self.bodies += [json.loads(e["MessageBody"]) for e in params["Entries"]]


def another_adapter(ports) -> DueQueues:
    """An adapter of its own on the tests' queues (another process's), with real delays."""
    return DueQueues(ports.queues.client, ports.queues.queue_urls, ports.queues.dlq_urls)


def ids(items: Any) -> list[str]:
    """The execution ids of received runs or sent messages, sorted."""
    return sorted(getattr(item, "message", item).execution_id for item in items)


@pytest.fixture
def sqs(ports):
    """A second adapter on the tests' queues, with real delays, and its requests counted."""
    return another_adapter(ports), Requests(ports.queues.client)


def depth(queues: DueQueues) -> int:
    """Messages on the default due queue, visible, delayed or in flight."""
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    attributes = queues.client.get_queue_attributes(QueueUrl=queues.queue_urls["default"], AttributeNames=names)
    return sum(int(v) for v in attributes["Attributes"].values())


def receive_all(queues: DueQueues, want: int, visibility: float = 30, room: int = 100) -> list:
    got: list = []
    deadline = time.monotonic() + 10
    while len(got) < want and time.monotonic() < deadline:
        got += queues.receive("default", room, 1, visibility)
    return got


def test_runs_due_in_the_same_second_travel_in_one_message_and_are_received_each_as_its_own(sqs):
    queues, requests = sqs
    # Given 25 runs due now, to one queue
    sent = due_now(25)
    # When they are sent
    assert queues.send(sent, datetime.now(UTC)) == 25
    # Then they go as three messages (10, 10 and 5 runs) in one request
    assert requests.calls["SendMessageBatch"] == 1
    assert [len(b.get("runs", [b])) for b in requests.bodies] == [RUNS_PER_MESSAGE, RUNS_PER_MESSAGE, 5]
    # And each run is received as a message of its own, once
    got = receive_all(queues, 25)
    assert ids(got) == ids(sent)
    assert {r.receive_count for r in got} == {1} and len({r.receipt for r in got}) == 25
    assert requests.calls["ReceiveMessage"] <= 2


def test_a_carrier_is_deleted_with_its_last_run_and_not_before(sqs):
    queues, requests = sqs
    queues.send(due_now(10), datetime.now(UTC))
    got = receive_all(queues, 10)
    # When nine of its runs are deleted, one by one and in a batch
    for received in got[:4]:
        queues.delete("default", received.receipt)
    queues.delete_batch("default", [r.receipt for r in got[4:9]])
    # Then the message stays (in flight) and nothing was deleted from SQS
    assert requests.calls["DeleteMessage"] + requests.calls["DeleteMessageBatch"] == 0
    assert depth(queues) == 1
    # And the last run's delete deletes it, in one request
    queues.delete_batch("default", [got[9].receipt])
    assert requests.calls["DeleteMessageBatch"] == 1 and depth(queues) == 0


def test_runs_held_together_cost_one_visibility_change_and_keep_the_carrier_hidden(sqs):
    queues, requests = sqs
    queues.send(due_now(10), datetime.now(UTC))
    got = receive_all(queues, 10, visibility=2)
    # When each run is held for 3 s (its claim), within a moment of the others
    for received in got:
        queues.hold("default", received.receipt, 3)
    # Then one visibility change covered them all, with the slack that covers the next holds
    assert requests.calls["ChangeMessageVisibility"] == 1
    # And the carrier is still hidden after the receive's 2 s had ended
    time.sleep(2.5)
    assert queues.receive("default", 100, 0, 30) == []
    # And a hold past what the carrier is hidden for changes it again
    queues.hold("default", got[0].receipt, 3 + HOLD_SLACK_SECONDS + 2)
    assert requests.calls["ChangeMessageVisibility"] == 2


def test_a_run_given_back_comes_back_alone_and_the_others_are_not_hurried(sqs):
    queues, requests = sqs
    sent = due_now(3)
    queues.send(sent, datetime.now(UTC))
    got = {r.message.execution_id: r for r in receive_all(queues, 3, visibility=30)}
    first, second, third = (got[m.execution_id] for m in sent)
    # When one run is given back at once (a worker that cannot run it passes it on)
    queues.extend("default", first.receipt, 0)
    # Then it is received again at once, alone, counted as received a second time
    [again] = receive_all(queues, 1)
    assert again.message == first.message and again.receive_count == 2
    assert "runs" not in requests.bodies[-1]
    # And the others stay with the carrier: done with, they delete it
    queues.delete("default", second.receipt)
    queues.delete("default", third.receipt)
    queues.delete("default", again.receipt)
    assert depth(queues) == 0


def test_a_carrier_that_comes_back_is_split_into_the_runs_its_receiver_left_open(sqs):
    queues, requests = sqs
    sent = due_now(4)
    queues.send(sent, datetime.now(UTC))
    got = {r.message.execution_id: r for r in receive_all(queues, 4, visibility=1)}
    # Given a receiver that handled two of the carrier's runs and left two open (their handling failed)
    queues.delete("default", got[sent[0].execution_id].receipt)
    queues.delete("default", got[sent[1].execution_id].receipt)
    # When the carrier's visibility ends and it is received again
    back = receive_all(queues, 2)
    # Then the two open runs come back, each alone, received a second time; the carrier is gone
    assert ids(back) == ids(sent[2:])
    assert {r.receive_count for r in back} == {2}
    assert all("runs" not in body for body in requests.bodies[1:])
    for received in back:
        queues.delete("default", received.receipt)
    assert depth(queues) == 0


def test_a_carrier_another_process_received_is_split_into_all_its_runs(sqs, ports):
    queues, _ = sqs
    sent = due_now(4)
    queues.send(sent, datetime.now(UTC))
    got = receive_all(queues, 4, visibility=1)
    queues.delete("default", got[0].receipt)  # this process handled one run, then died
    # When another process receives the carrier after its visibility
    other = another_adapter(ports)
    back = receive_all(other, 4)
    # Then it knows nothing of what was handled: every run comes back alone (the handled one is dropped at claim)
    assert ids(back) == ids(sent)


def test_a_receive_never_brings_more_runs_than_asked_and_the_rest_wait_for_the_next(sqs):
    queues, requests = sqs
    sent = due_now(10)
    queues.send(sent, datetime.now(UTC))
    # When a worker with room for 4 runs receives the carrier of 10
    first = receive_all(queues, 1, room=4)
    # Then it gets 4, and its next receive (room for 6) the other 6, without asking SQS
    assert len(first) == 4
    asked = requests.calls["ReceiveMessage"]
    rest = queues.receive("default", 6, 0, 30)
    assert len(rest) == 6 and requests.calls["ReceiveMessage"] == asked
    assert ids(first + rest) == ids(sent)
    for received in first + rest:
        queues.delete("default", received.receipt)
    assert depth(queues) == 0


def test_runs_no_receive_takes_in_time_are_given_back_for_any_worker(sqs, ports):
    queues, _ = sqs
    sent = due_now(10)
    queues.send(sent, datetime.now(UTC))
    first = receive_all(queues, 1, room=4)
    # When this worker does not receive again within SPARE_SECONDS
    time.sleep(SPARE_SECONDS + 0.5)
    # Then the 6 it had no room for are on the queue, each alone, for another worker
    other = another_adapter(ports)
    rest = receive_all(other, 6)
    assert ids(first + rest) == ids(sent)
    assert {r.receive_count for r in rest} == {1}  # they were never handed to a worker
    assert queues.receive("default", 10, 0, 30) == []  # and the first worker keeps none of them


def test_a_carrier_on_the_dead_letter_queue_is_read_run_by_run_and_deleted_with_its_last(sqs):
    queues, _ = sqs
    # Given a carrier of three runs that SQS redrove to the DLQ
    runs = [json.loads(m.to_body()) for m in due_now(3)]
    queues.client.send_message(QueueUrl=queues.dlq_urls["default"], MessageBody=json.dumps({"runs": runs}))
    # When the DLQ is read
    letters = queues.receive_dead_letters("default")
    # Then each run is a letter of its own
    assert [body for body, _ in letters] == runs
    for _, receipt in letters[:2]:
        queues.delete_dead_letter("default", receipt)
    assert queues.dead_letter_depth("default") == 1
    queues.delete_dead_letter("default", letters[2][1])
    assert queues.dead_letter_depth("default") == 0


def test_runs_of_an_ecs_class_travel_alone(ports):
    # Given the queues as a deployment wires them: a Lambda class packs, an ECS class (whose `duetime worker`
    # takes no more runs than it has free slots) does not
    queues = DueQueues.resolve(ports.queues.client, ports.settings)
    requests = Requests(ports.queues.client)
    assert ports.settings.job_class("long").worker_kind == "ecs"
    long_runs = [replace(m, job_class="long") for m in due_now(3)]
    # When three runs of each are sent
    queues.send(due_now(3, first=10) + long_runs, datetime.now(UTC))
    # Then the default class's go as one message, the long class's as three
    assert sorted(len(b.get("runs", [b])) for b in requests.bodies) == [1, 1, 1, 3]
    assert all(b["jobClass"] == "long" for b in requests.bodies if "runs" not in b)
