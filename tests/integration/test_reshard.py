"""Changing the shard count on a running system (issue 18): every execution created before and after the
change is found, runs once, and the audit is clean, on every adapter."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from duetime.adapters.aws.store import DynamoStore
from duetime.adapters.sqlite.store import SqliteStore
from duetime.definitions import Settings
from duetime.domain.keys import ExecutionKey, hour_bucket, shard_of, shard_of_partition
from duetime.domain.models import ExecutionStatus, JobSpec, format_time
from duetime.service import executions as cases
from duetime.service.audit import audit
from duetime.service.context import Ports
from duetime.service.dispatch import preload
from duetime.service.jobs import submit_job
from duetime.service.reshard import record_current

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS


@pytest.fixture
def test_settings():
    # Ten-minute cycles, so hours of scheduled time pass in few calls.
    return Settings(shards=4, preload_interval_seconds=600, preload_window_seconds=610).with_lease_seconds(30)


def restarted(ports: Ports, shards: int) -> Ports:
    """The running system's data seen by processes restarted with `shards` (a redeploy with a new
    `-c shards=`, `duetime local --shards`): the same tables or file, a fresh process-wide cache."""
    settings = replace(ports.settings, shards=shards)
    store = ports.store
    if isinstance(store, SqliteStore):
        fresh: object = SqliteStore(store.db, settings, store.epoch_seconds)
    else:
        assert isinstance(store, DynamoStore)
        fresh = DynamoStore(store.client, settings)
    return replace(ports, store=fresh, settings=settings)


def one_off(ports: Ports, at: datetime, name: str) -> str:
    spec = {"name": name, "handler": "demo.echo", "schedule": {"at": format_time(at)}}
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(spec))
    return job.job_id


def every_20_minutes(ports: Ports, name: str) -> str:
    spec = {"name": name, "handler": "demo.echo", "schedule": {"cron": "*/20 * * * *"}}
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(spec))
    return job.job_id


class Runner:
    """The pre-loader each cycle and a worker that runs each delivered execution once it is due."""

    def __init__(self) -> None:
        self.held: list = []
        self.claims: Counter[str] = Counter()

    def run_until(self, ports: Ports, clock, until: datetime) -> None:
        while clock.now < until:
            preload(ports, "p1")
            while batch := ports.queues.receive("default", 10, 0, 3600):
                self.held += batch
            due = [r for r in self.held if r.message.due_ms <= int(clock.now.timestamp() * 1000)]
            self.held = [r for r in self.held if r not in due]
            for received in due:
                claim = cases.claim_execution(ports, received.message, "w1")
                if claim.verdict == cases.ClaimVerdict.CLAIMED:
                    self.claims[received.message.execution_id] += 1
                    cases.complete(ports, received.message.key, claim.execution.attempt, succeeded=True)
                ports.queues.delete("default", received.receipt)
            clock.advance(ports.settings.preload_interval_seconds)


def test_resharding_up_then_down_between_buckets_loses_nothing_and_runs_everything_once(ports, clock):
    start = clock.now  # 09:00
    runner = Runner()
    # Given a system on 4 shards with one-offs this hour and in three hours, and a cron every 20 minutes
    jobs = [one_off(ports, start + timedelta(minutes=10 + i), f"a{i}") for i in range(6)]
    jobs += [one_off(ports, start + timedelta(hours=3, minutes=10 + i), f"far{i}") for i in range(6)]
    jobs.append(every_20_minutes(ports, "cron-before"))
    runner.run_until(ports, clock, start + timedelta(minutes=30))
    # When it restarts on 7 shards and takes more work, this hour (fixed at 4) and two hours on (not fixed)
    wider = restarted(ports, 7)
    jobs += [one_off(wider, start + timedelta(minutes=45 + i), f"b{i}") for i in range(6)]
    jobs += [one_off(wider, start + timedelta(hours=2, minutes=10 + i), f"c{i}") for i in range(6)]
    jobs.append(every_20_minutes(wider, "cron-wider"))
    runner.run_until(wider, clock, start + timedelta(hours=1, minutes=30))
    # And then on 2 shards, with work in four hours (not fixed yet)
    narrower = restarted(ports, 2)
    jobs += [one_off(narrower, start + timedelta(hours=4, minutes=10 + i), f"d{i}") for i in range(6)]
    runner.run_until(narrower, clock, start + timedelta(hours=4, minutes=40))

    # Then each hour kept the count it was first written with
    counts = narrower.store.recorded_shards([hour_bucket(start + timedelta(hours=h)) for h in range(5)])
    assert [counts[hour_bucket(start + timedelta(hours=h))] for h in range(5)] == [4, 4, 7, 4, 2]
    # ...rows of the 7-shard hours sit in shards the 2-shard system would never derive, and were still run
    executions = [e for job in jobs for e in narrower.store.executions_of_job(job, limit=100)]
    keys = {e.execution_id: narrower.store.key_of(e) for e in executions}
    wide_hour = hour_bucket(start + timedelta(hours=2))
    assert any(shard_of_partition(k.pk) >= 4 for k in keys.values() if k.pk.startswith(wide_hour))
    for execution in executions:
        count = narrower.store.shards_of_bucket(hour_bucket(execution.due_at))
        assert keys[execution.execution_id] == ExecutionKey.for_due(
            execution.job_id, execution.execution_id, execution.due_at, count
        )
        assert shard_of(execution.job_id, count) == shard_of_partition(keys[execution.execution_id].pk)
    # ...every execution is found by id, and every due one ran exactly once, on its first attempt
    due = [e for e in executions if e.due_at <= clock.now - timedelta(minutes=10)]
    for execution in executions:
        assert narrower.store.find_execution(execution.job_id, execution.execution_id) == execution
    assert len([e for e in due if e.kind != "catchup"]) >= 6 * 5 + 2 * 10
    assert all(e.status == ExecutionStatus.SUCCEEDED and e.attempt == 1 for e in due), [
        (e.execution_id, e.status) for e in due if e.status != ExecutionStatus.SUCCEEDED
    ]
    assert all(runner.claims[e.execution_id] == 1 for e in due)
    # ...and the audit finds nothing wrong, whichever shard count the auditing process is configured with
    for seen_by in (ports, wider, narrower):
        report = audit(restarted(seen_by, seen_by.settings.shards), clock.now)
        assert report.findings == [], report.findings


def forget_shard_counts(ports: Ports) -> None:
    """Make the stored rows look as a deployment from before issue 18 left them: no hour's count recorded,
    open rows indexed under their bare shard (then every open row was indexed from its write)."""
    store = ports.store
    legacy = [(stored.key, stored.key.pk.rsplit("#", 1)[1]) for stored in store.scan_open_executions()]
    if isinstance(store, SqliteStore):
        with store.db.write() as conn:
            conn.execute("DELETE FROM control WHERE key LIKE 'shards#%'")
            for key, shard in legacy:
                conn.execute("UPDATE executions SET open_shard = ? WHERE pk = ? AND sk = ?", (shard, key.pk, key.sk))
        return
    for item in store.client.scan(TableName=store.control_table)["Items"]:
        if item["key"]["S"].startswith("shards#"):
            store.client.delete_item(TableName=store.control_table, Key={"key": item["key"]})
    for key, shard in legacy:
        store.client.update_item(
            TableName=store.executions_table,
            Key={"pk": {"S": key.pk}, "sk": {"S": key.sk}},
            UpdateExpression="SET openShard = :s",
            ExpressionAttributeValues={":s": {"S": shard}},
        )


def test_a_deployment_from_before_recorded_counts_is_migrated_once_then_reshards_safely(ports, clock):
    start = clock.now
    # Given rows written before shard counts were recorded per hour (4 shards, the old open index keys)
    jobs = [one_off(ports, start + timedelta(hours=h, minutes=5 + i), f"old{h}{i}") for h in (0, 2) for i in range(5)]
    jobs.append(every_20_minutes(ports, "cron-old"))
    forget_shard_counts(ports)
    before = restarted(ports, 4)
    assert [f.check for f in audit(before, clock.now).findings] == ["not in the open index"] * 11
    # When the migration runs (with `shards` still what the rows were written with)
    report = record_current(before, clock.now)
    assert report.reindexed == 11 and report.recorded == 2
    assert audit(restarted(ports, 4), clock.now).findings == []
    assert record_current(restarted(ports, 4), clock.now).reindexed == 0  # a second run changes nothing
    # Then a system restarted on 7 shards finds and runs every one of them once, and the audit stays clean
    wider = restarted(ports, 7)
    jobs.append(one_off(wider, start + timedelta(hours=3, minutes=5), "new"))
    runner = Runner()
    runner.run_until(wider, clock, start + timedelta(hours=3, minutes=30))
    executions = [e for job in jobs for e in wider.store.executions_of_job(job, limit=100)]
    due = [e for e in executions if e.due_at <= clock.now - timedelta(minutes=10)]
    assert len(due) >= 11 + 9
    assert all(e.status == ExecutionStatus.SUCCEEDED and runner.claims[e.execution_id] == 1 for e in due)
    assert wider.store.recorded_shards([hour_bucket(start + timedelta(hours=3))]) == {
        hour_bucket(start + timedelta(hours=3)): 7
    }
    assert audit(restarted(ports, 7), clock.now).findings == []
