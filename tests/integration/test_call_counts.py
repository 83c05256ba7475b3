"""What the hot path costs in AWS calls, counted with botocore hooks on the real adapters against moto:
the figures `make bench` reports and duetime.domain.capacity carries to AWS scale. Counts, not timings."""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from duetime.adapters.aws.store import DynamoStore
from duetime.definitions import EXECUTIONS_TABLE, MAX_BATCH_JOBS, RUNS_PER_MESSAGE, TABLES
from duetime.domain import capacity
from duetime.domain.keys import ExecutionKey, hour_bucket
from duetime.domain.models import JobSpec, format_time
from duetime.service import executions as cases
from duetime.service.batch import BatchItem, submit_jobs
from duetime.service.dispatch import preload, reconcile_after
from duetime.service.jobs import submit_job
from duetime.worker.runtime import Worker

from bench.common import changed_indexes, moto_index_entries, written_items, written_key

WRITES = {"PutItem", "UpdateItem", "DeleteItem"}


class Calls:
    """API calls by "service:Operation", items written per table as (table, transactional), and the entries
    each write added to or removed from the tables' indexes (index write units, read off moto's tables around
    each write by bench.common's helpers: an index projecting keys only takes a unit for each entry a write adds
    or removes)."""

    def __init__(self, ports: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.writes: Counter[tuple[str, bool]] = Counter()
        self.index_writes: Counter[str] = Counter()  # index name -> units
        self.batch_reads: Counter[tuple[str, bool]] = Counter()  # BatchGetItem keys by (table, strongly consistent)
        # The SQS messages sent, each as the shards of the runs it carries (adapters/aws/carriers.py)
        self.messages: list[list[int]] = []
        self.executions_table = ports.store.executions_table
        self.tables = {ports.settings.table_name(table): table for table in TABLES}
        self.pending = threading.local()
        for client in (ports.store.client, ports.queues.client):
            client.meta.events.register("before-parameter-build.*.*", self._count)
        ports.store.client.meta.events.register("after-call.dynamodb.*", self._after)

    def _count(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.calls[f"{model.service_model.service_id.hyphenize()}:{model.name}"] += 1
        if model.name == "SendMessageBatch":
            for entry in params["Entries"]:
                body = json.loads(entry["MessageBody"])
                self.messages.append(
                    [ExecutionKey(pk=run["pk"], sk=run["sk"]).shard for run in body.get("runs", [body])]
                )
        if model.name == "BatchGetItem":
            for table, request in params["RequestItems"].items():
                self.batch_reads[(table, bool(request.get("ConsistentRead")))] += len(request["Keys"])
        if model.name in WRITES:
            self.writes[(params["TableName"], False)] += 1
        elif model.name == "TransactWriteItems":
            for item in params["TransactItems"]:
                for body in item.values():
                    self.writes[(body["TableName"], True)] += 1
        if model.service_model.service_name == "dynamodb":
            self.pending.before = [
                (name, key, moto_index_entries(name, self.tables[name], key))
                for body, op, _ in written_items(model.name, params)
                for name in [body["TableName"]]
                for key in [written_key(self.tables[name], op, body)]
            ]

    def _after(self, **_: Any) -> None:
        for name, key, before in getattr(self.pending, "before", []):
            after = moto_index_entries(name, self.tables[name], key)
            self.index_writes.update(changed_indexes(before or {}, after or {}))
        self.pending.before = []

    def execution_index_units(self) -> int:
        """Index write units on the executions table's indexes (byJob, open, openByJob, deadByOwner)."""
        names = {index.name for index in EXECUTIONS_TABLE.indexes}
        return sum(n for name, n in self.index_writes.items() if name in names)

    def reset(self) -> None:
        self.calls.clear()
        self.writes.clear()
        self.index_writes.clear()
        self.batch_reads.clear()
        self.messages.clear()

    def sqs(self) -> int:
        return sum(n for name, n in self.calls.items() if name.startswith("sqs:"))

    def execution_writes(self) -> int:
        return sum(n for (table, _), n in self.writes.items() if table == self.executions_table)

    def job_and_control_write_units(self) -> int:
        """Write units on the jobs and control tables (one per write, two inside a transaction)."""
        return sum(n * (2 if tx else 1) for (table, tx), n in self.writes.items() if table != self.executions_table)

    def execution_write_units(self) -> int:
        """Rows are well under 1 KB: one unit per write, two inside a transaction."""
        return sum(n * (2 if tx else 1) for (table, tx), n in self.writes.items() if table == self.executions_table)


@pytest.fixture
def calls(ports):
    return Calls(ports)


def one_off(clock, **extra):
    body = {"name": "t", "handler": "demo.echo", "schedule": {"at": format_time(clock.now + timedelta(seconds=10))}}
    return JobSpec.model_validate({**body, **extra})


def run_next(ports, worker):
    [received] = ports.queues.receive("default", 1, 0, 30)
    return worker.process(received)


def test_a_successful_one_off_execution_costs_three_executions_table_writes_its_job_s_end_and_three_sqs_requests(
    ports, clock, calls
):
    # Given a one-off job due within the dispatch horizon, so it is sent at submit, in an hour whose shard
    # count this process knows already (read once per process and hour, fixed ahead by the pre-loader: the
    # one-time cost is pinned by the next test)
    worker = Worker(ports, "default", "w1", concurrency=1)
    ports.store.shards_of_bucket(hour_bucket(clock.now))
    calls.reset()
    job, _ = submit_job(ports, "alice", one_off(clock))
    # (the API function's calls, one after the other: the creation's transaction and the send)
    assert calls.calls == Counter({"dynamodb:TransactWriteItems": 1, "sqs:SendMessageBatch": 1})
    assert calls.calls.total() == capacity.ONE_OFF.api_calls
    clock.advance(10)
    # When a worker runs it to success
    assert run_next(ports, worker) == "succeeded"
    # Then create (in the job's transaction), claim and finish are its only executions-table writes; the
    # finish completes the job and gives its place in the owner's quota back in the same transaction, and
    # the row as written is read back (a transaction returns no values)
    assert calls.calls == Counter(
        {
            "dynamodb:TransactWriteItems": 2,
            "sqs:SendMessageBatch": 1,
            "sqs:ReceiveMessage": 1,
            "dynamodb:GetItem": 2,
            "dynamodb:UpdateItem": 1,
            "sqs:DeleteMessage": 1,
        }
    )
    assert calls.execution_writes() == 3 == capacity.ONE_OFF.executions_writes
    assert calls.execution_write_units() == 5 == capacity.ONE_OFF.executions_wcu
    # and its row's index entries: none. Not byJob, as its row is found by its slot's key (domain/history.py);
    # never openByJob, which a plain run claimed on time enters only if it heartbeats, nor the `open` index,
    # which a row enters only if the sweep finds it still open once overdue
    # (and the job's byOwner entry, which projects every attribute: written at create, rewritten at completion)
    assert calls.index_writes == Counter({"byOwner": 2})
    assert calls.execution_index_units() == 0 == capacity.ONE_OFF.index_wcu
    assert capacity.ONE_OFF.open_index_wcu == 0
    # jobs and control: the job's put and the counter's +1 at create, its completion and the -1 at the end,
    # each inside a transaction (the byOwner index's one unit at create is counted by the profile)
    assert calls.job_and_control_write_units() + calls.index_writes["byOwner"] == 10 == capacity.ONE_OFF.jobs_wcu
    assert ports.store.get_job(job.job_id).status == "completed"
    assert ports.store.active_jobs("alice") == 0


def test_an_hour_s_shard_count_costs_one_read_per_process_and_two_writes_once_per_deployment(ports, clock, calls):
    # Given an hour nobody has written to yet
    hour = hour_bucket(clock.now)
    # When the first process needs its shard count, it reads it and fixes it (the most-shards record, then
    # the hour's own record, each a conditional write)
    ports.store.shards_of_bucket(hour)
    assert calls.calls == Counter({"dynamodb:BatchGetItem": 1, "dynamodb:UpdateItem": 1, "dynamodb:PutItem": 1})
    # Then a later process reads it once, and every use after that is free
    calls.reset()
    later = DynamoStore(ports.store.client, ports.settings)  # a new process's store (on this counted client)
    for _ in range(3):
        later.shards_of_bucket(hour)
        ports.store.shards_of_bucket(hour)
    assert calls.calls == Counter({"dynamodb:BatchGetItem": 1})


def test_a_retried_failure_costs_a_move_transaction_and_a_second_claim_and_finish(ports, clock, calls):
    worker = Worker(ports, "default", "w1", concurrency=1)
    retry = {"maxAttempts": 3, "baseDelaySeconds": 1, "maxDelaySeconds": 1}
    submit_job(ports, "alice", one_off(clock, handler="demo.fail", payload={"times": 1}, retry=retry))
    clock.advance(10)
    assert run_next(ports, worker) == "failed"
    clock.advance(1)
    assert run_next(ports, worker) == "succeeded"
    # create, claim, move (delete + put in one transaction), claim, finish (in the transaction that
    # completes the one-off job: 2 units)
    assert calls.execution_writes() == 6
    assert calls.execution_write_units() == 10
    assert calls.calls["dynamodb:TransactWriteItems"] == 3  # create, move, and the finish that ends the job
    # the job at each claim (the worker knows the row it claimed), and the finished row read back once
    assert calls.calls["dynamodb:GetItem"] == 3
    assert calls.sqs() == 6  # the retry is sent at once (due within the horizon): send, receive, delete twice


def test_a_cron_run_in_steady_state_costs_three_executions_table_writes_and_one_delete_per_run(ports, clock, calls):
    # Given every-minute cron jobs whose runs the pre-loader dispatches
    jobs, minutes = 20, 2
    worker = Worker(ports, "default", "w1", concurrency=1)
    clock.now = clock.now.replace(second=0) + timedelta(minutes=1)
    for _ in range(jobs):
        submit_job(
            ports,
            "alice",
            JobSpec.model_validate({"name": "c", "handler": "demo.echo", "schedule": {"cron": "* * * * *"}}),
        )

    def one_minute() -> None:
        clock.advance(35)  # the next minute's runs enter the pre-load window
        preload(ports, "p1")
        clock.advance(25)
        # a worker with room for 100 runs: it asks for ten messages, and no run comes back for want of room
        batch = ports.queues.receive("default", 100, 0, 30)
        while batch:
            for received in batch:
                assert worker.process(received) == "succeeded"
            batch = ports.queues.receive("default", 100, 0, 30)

    one_minute()
    calls.reset()
    # When it runs for two more minutes
    for _ in range(minutes):
        one_minute()
    runs = jobs * minutes
    # Then each run costs its create (the pre-loader's PutItem of the next slot), claim and finish
    control = sum(n for (table, _), n in calls.writes.items() if table.endswith("-control"))
    assert control == 2 * ports.settings.shards * minutes  # the pre-loader's lease and cursor, per shard and cycle
    assert calls.execution_writes() == 3 * runs == capacity.CRON_RUN.executions_writes * runs
    assert calls.execution_write_units() == capacity.CRON_RUN.executions_wcu * runs
    # And no run's row takes an index entry: no byJob entry, as a plain run's row is found by its slot's key
    # (domain/history.py), no openByJob entry, as each was claimed on time with a short lease
    # (domain/job_index.py), and no `open` index entry, as every run ended before the sweep reached its time
    assert calls.index_writes == Counter()
    assert calls.execution_index_units() == capacity.CRON_RUN.index_wcu * runs
    # And a claim reads no row: its overlap check's Query of openByJob finds no entry, and no other slot of an
    # every-minute job is due within the window a run without an entry could be in (the job read is its
    # GetItem); every BatchGetItem is the pre-loader's, 100 jobs each
    assert calls.calls["dynamodb:BatchGetItem"] <= ports.settings.shards * minutes < runs
    # and reads each run's job once, eventually consistently (half a unit: service/dispatch.py says why)
    assert calls.batch_reads == Counter({(ports.store.jobs_table, False): runs})
    assert calls.calls["dynamodb:GetItem"] == runs + minutes  # the claims' job reads; a pre-load cycle's record
    # And a shard's runs due in the same second travel in one message (up to RUNS_PER_MESSAGE a message,
    # adapters/aws/carriers.py), sent ten messages to a request: here each shard's minute is one message
    assert sum(len(shards) for shards in calls.messages) == runs
    assert all(len(set(shards)) == 1 for shards in calls.messages)
    runs_per_shard = Counter(shards[0] for shards in calls.messages for _ in shards)
    per_minute = [n // minutes for n in runs_per_shard.values()]
    assert len(calls.messages) == sum(-(-n // RUNS_PER_MESSAGE) for n in per_minute) * minutes
    assert len(calls.messages) < runs
    assert calls.calls["sqs:SendMessageBatch"] <= ports.settings.shards * minutes
    # each message is received once and deleted once, when its last run is done (Worker.process outside the
    # receive loop deletes at once; the loop batches its deletes, tests/integration/test_worker_loop.py)
    assert calls.calls["sqs:DeleteMessage"] == len(calls.messages)
    assert calls.calls["sqs:ReceiveMessage"] <= len(calls.messages) + 2 * minutes


def test_a_run_still_running_when_the_sweep_passes_it_costs_the_sweep_s_write_and_an_open_entry(ports, clock, calls):
    # Given a run claimed at its time, still running (its lease kept live) once it is reconcile_after overdue
    submit_job(ports, "alice", one_off(clock))
    preload(ports, "p1")  # a first cycle records each shard's sweep
    clock.advance(10)
    [received] = ports.queues.receive("default", 1, 0, 30)
    claim = cases.claim_execution(ports, received.message, "w1")
    key, attempt, token = received.message.key, claim.execution.attempt, claim.execution.claim_token
    calls.reset()
    clock.advance(reconcile_after(ports).total_seconds() + 1)
    ports.store.heartbeat(key, attempt, clock.now + timedelta(seconds=30), token)
    # When the next cycle sweeps past its due time, and the run then ends
    assert preload(ports, "p1").swept == 1
    cases.complete(ports, key, attempt, succeeded=True, claim_token=token)
    # Then the sweep wrote its row once and its `open` entry came and went: the 1 + 2 units duetime capacity adds
    # for a run that outlives reconcile_after (capacity.SWEPT_OPEN_WRITES, SWEPT_OPEN_INDEX_WCU)
    assert calls.index_writes["open"] == capacity.SWEPT_OPEN_INDEX_WCU == 2
    # And its heartbeat entered it in openByJob, which its end left: the 2 units of a run that heartbeats
    # (capacity.open_by_job_share)
    assert calls.index_writes["openByJob"] == capacity.OPEN_BY_JOB_INDEX_WCU == 2
    sweep_writes = [n for (table, tx), n in calls.writes.items() if table == calls.executions_table and not tx]
    # the heartbeat, the sweep's UpdateItem (the finish ends the one-off job in a transaction)
    assert sum(sweep_writes) == 1 + capacity.SWEPT_OPEN_WRITES


def test_a_batch_of_one_offs_costs_a_transaction_per_49_jobs_and_a_send_per_ten(ports, clock, calls):
    # Given 100 one-off jobs due within the dispatch horizon, in an hour whose shard count is known
    ports.store.shards_of_bucket(hour_bucket(clock.now))
    calls.reset()
    # When they are created in one batch
    outcomes = submit_jobs(ports, "alice", [BatchItem(one_off(clock, name=f"b{n}")) for n in range(100)])
    assert all(o.created for o in outcomes)
    # Then they are written 49 a transaction (a job and its execution are two items, the owner's counter one
    # a group, within 100 items) and their first executions, all due in the same second, sent ten runs to a
    # message and ten messages to a request; nothing is read
    assert calls.calls == Counter({"dynamodb:TransactWriteItems": 3, "sqs:SendMessageBatch": 1})
    assert len(calls.messages) == 100 // RUNS_PER_MESSAGE
    # (the API function's calls: a transaction a group and a send a hundred jobs, as the profile counts 500's)
    batched = capacity.ONE_OFF_BATCH.api_calls
    assert calls.calls.total() == math.ceil(100 / capacity.BATCH_JOBS_PER_TRANSACTION) + math.ceil(100 / 100)
    assert batched * MAX_BATCH_JOBS == math.ceil(MAX_BATCH_JOBS / capacity.BATCH_JOBS_PER_TRANSACTION) + math.ceil(
        MAX_BATCH_JOBS / 100
    )
    assert calls.execution_writes() == 100
    # the jobs' puts and the counter's +1 once a transaction: 2 units each, against 4 a job one by one; the
    # byOwner entries (1 each) and the profile adds the run's end (the job's completion, its byOwner rewrite
    # and the counter's -1: 5)
    assert calls.job_and_control_write_units() == 2 * 100 + 2 * 3
    assert calls.index_writes["byOwner"] == 100
    assert 100 // capacity.BATCH_JOBS_PER_TRANSACTION + 1 == 3
    assert capacity.ONE_OFF_BATCH.jobs_wcu == 2 + 1 + 2 / capacity.BATCH_JOBS_PER_TRANSACTION + 5
    assert calls.sqs() / 100 == pytest.approx(capacity.ONE_OFF_BATCH.sqs_requests / 3)  # the send, of three
    assert ports.store.active_jobs("alice") == 100

    # And items' idempotencyKeys cost their records' puts in the jobs' transactions and one read a hundred keys
    # (a replay's check)
    calls.reset()
    submit_jobs(ports, "alice", [BatchItem(one_off(clock, name=f"k{n}"), f"k{n}") for n in range(150)])
    assert calls.calls == Counter(
        {"dynamodb:BatchGetItem": 2, "dynamodb:TransactWriteItems": 5, "sqs:SendMessageBatch": 2}
    )


def test_a_lateness_budget_costs_one_counter_write_a_run_and_a_late_run_a_mark_a_count_and_a_notice(
    ports, clock, calls
):
    # Given two one-offs with a 5 s budget: one run in time, one claimed 20 s after its dueAt
    worker = Worker(ports, "default", "w1", concurrency=1)
    ports.store.shards_of_bucket(hour_bucket(clock.now))
    submit_job(ports, "alice", one_off(clock, lateAfterSeconds=5))
    clock.advance(10)
    calls.reset()
    assert run_next(ports, worker) == "succeeded"
    in_time = calls.calls.copy()
    # Then the run in time costs what a one-off's run does, plus one UpdateItem: its day's counter
    assert in_time["dynamodb:UpdateItem"] == 2 and calls.job_and_control_write_units() == 4 + 1
    assert capacity.lateness_units(1.0)[0] == pytest.approx(1 + 0.01 * 1)
    submit_job(ports, "alice", one_off(clock, lateAfterSeconds=5))
    clock.advance(10 + 20)
    calls.reset()
    assert run_next(ports, worker) == "succeeded"
    # And the late run adds its mark and its count (two UpdateItems beside the claim) and a DLQ send
    assert calls.calls["dynamodb:UpdateItem"] == 3 and calls.calls["sqs:SendMessage"] == 1
