"""The pre-loader as EventBridge drives it: a fresh request id every tick, every shard pre-loaded every
tick, one shard's failure isolated, a window the interval cannot serve refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from duetime.config import RuntimeConfig
from duetime.definitions import Settings
from duetime.domain.models import JobSpec, format_time, to_ms
from duetime.service.dispatch import preload
from duetime.service.jobs import submit_job
from duetime.worker.observe import CountingObserver
from duetime.worker.runtime import Worker
from pydantic import ValidationError


def one_off(at) -> JobSpec:
    return JobSpec.model_validate({"name": "t", "handler": "demo.echo", "schedule": {"at": format_time(at)}})


class TestMinuteTicks:
    """AWS's defaults: a tick every 60 s loading 300 s ahead."""

    @pytest.fixture
    def test_settings(self) -> Settings:
        return Settings(shards=4, preload_interval_seconds=60, preload_window_seconds=300)

    def test_three_consecutive_ticks_with_new_request_ids_each_preload_every_shard(self, ports, clock):
        start = clock.now
        # Jobs beyond the dispatch horizon at submit: only a tick can send them, one per tick's new window
        jobs = [submit_job(ports, "alice", one_off(start + timedelta(seconds=s)))[0] for s in (330, 390, 450)]
        assert ports.queues.receive("default", 10, 0, 0) == []
        for tick, job in enumerate(jobs, start=1):
            clock.advance(60)
            report = preload(ports, owner=f"request-{tick}")
            [received] = ports.queues.receive("default", 10, 0, 900)
            assert received.message.job_id == job.job_id
            assert (report.shards, report.busy, report.errors) == (ports.settings.shards, 0, 0)
            window_end = to_ms(clock.now + timedelta(seconds=300))
            assert all(ports.store.get_control(f"preload#{s:03d}")["cursorMs"] == window_end for s in range(4))

    def test_one_failing_shard_is_counted_and_the_others_still_run_and_the_start_rotates(
        self, ports, clock, monkeypatch
    ):
        acquired: list[str] = []
        real_acquire = ports.store.acquire_lease
        real_query = ports.store.query_due

        def acquire(key: str, *args):
            acquired.append(key)
            return real_acquire(key, *args)

        def query_due(partition: str, *args):
            if partition.endswith("#001"):
                raise ConnectionError("throttled")
            return real_query(partition, *args)

        monkeypatch.setattr(ports.store, "acquire_lease", acquire)
        monkeypatch.setattr(ports.store, "query_due", query_due)
        report = preload(ports, "request-1")
        assert (report.shards, report.errors) == (3, 1)
        # The failed shard's lease went back: the next tick tries it again at once
        assert "leaseOwner" not in ports.store.get_control("preload#001")
        first_tick = list(acquired)
        clock.advance(60)
        acquired.clear()
        assert preload(ports, "request-2").errors == 1
        assert sorted(first_tick) == sorted(acquired) and first_tick[0] != acquired[0]

    def test_a_window_the_interval_cannot_serve_is_refused_at_cold_start(self):
        with pytest.raises(ValidationError, match="preloadWindowSeconds 60 must cover"):
            RuntimeConfig(preload_interval_seconds=60, preload_window_seconds=60)
        assert RuntimeConfig(preload_interval_seconds=60, preload_window_seconds=65).preload_window_seconds == 65


class TestShortWindow:
    """A 60 s window served by a tick every 50 s."""

    @pytest.fixture
    def test_settings(self) -> Settings:
        return Settings(shards=4, preload_interval_seconds=50, preload_window_seconds=60)

    def test_a_job_created_ten_minutes_ahead_starts_on_time(self, ports, clock):
        due = clock.now + timedelta(minutes=10)
        job, _ = submit_job(ports, "alice", one_off(due))
        worker = Worker(ports, "default", "w1", concurrency=1, observer=CountingObserver())
        started = None
        for tick in range(1, 14):
            clock.advance(50)
            preload(ports, owner=f"request-{tick}")
            # SQS delays run on the real clock, so the tests' queues deliver at once: a message received
            # at or before its due time is one the pre-loader sent in time
            for received in ports.queues.receive("default", 10, 0, 0):
                assert received.message.job_id == job.job_id
                clock.now, sent_at = due, clock.now
                assert worker.process(received) == "succeeded"
                started = sent_at
                break
            if started:
                break
        assert started is not None and started <= due
        [execution] = ports.store.executions_of_job(job.job_id)
        assert execution.started_at == due


class TestFanOut:
    @pytest.fixture
    def test_settings(self) -> Settings:
        return Settings(shards=4, preload_interval_seconds=60, preload_window_seconds=300)

    def test_shards_and_their_calls_at_once_send_each_due_run_once_and_create_each_next_slot(self, ports, clock):
        # Given 40 every-minute jobs whose first slots the pre-loader dispatches
        clock.now = clock.now.replace(second=0) + timedelta(seconds=30)
        spec = JobSpec.model_validate({"name": "c", "handler": "demo.echo", "schedule": {"cron": "* * * * *"}})
        jobs = {submit_job(ports, "alice", spec)[0].job_id for _ in range(40)}
        submitted = ports.queues.receive("default", 10, 0, 900)
        while batch := ports.queues.receive("default", 10, 0, 900):
            submitted += batch
        # When a cycle runs with 4 shards at once, each with 4 puts and sends at once
        clock.advance(60)
        report = preload(ports, "request-1", threads=4, dispatch_threads=4)
        # Then every slot in the window was sent once and each chain goes on past the window
        sent = []
        while batch := ports.queues.receive("default", 10, 0, 900):
            sent += batch
        ids = [r.message.execution_id for r in sent]
        assert len(ids) == len(set(ids)) and {r.message.job_id for r in sent} == jobs
        assert set(ids) > {r.message.execution_id for r in submitted}
        assert report.errors == 0 and report.sent == len(sent) and report.created == len(jobs)
        horizon = ports.dispatch_horizon(clock.now)
        for job_id in jobs:
            waiting = [e for e in ports.store.open_executions_of_job(job_id) if e.scheduled_at > horizon]
            assert len(waiting) == 1

    def test_a_shard_group_covers_only_its_shards(self, ports, clock):
        assert preload(ports, "g0", group=0, groups=2).shards == 2
        assert "leaseOwner" not in ports.store.get_control("preload#000")
        assert ports.store.get_control("preload#001") is None  # group 1's shard: untouched
        with pytest.raises(ValueError, match="shard group 2"):
            preload(ports, "g2", group=2, groups=2)
