"""AWS calls and DynamoDB write units per execution, counted with botocore hooks on the real adapters.

Each scenario runs duetime's own code (service.jobs.submit_job, service.dispatch.preload, Worker.process)
against an embedded moto server, with a hand clock so the counts do not depend on timing; only the
30-second job runs on the real clock, for its heartbeats.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.adapters.aws.items import execution_from_item
from duetime.adapters.aws.queue import Received
from duetime.api.app import build_app
from duetime.definitions import EXECUTIONS_TABLE, JOBS_TABLE
from duetime.domain.costs import API_CPU_SECONDS_ALONE, API_CPU_SECONDS_BATCHED
from duetime.domain.models import JobSpec, format_time, to_ms
from duetime.local.http_bridge import to_event
from duetime.service.dispatch import preload
from duetime.service.jobs import submit_job
from duetime.worker.runtime import Worker

from bench.common import HandClock, Harness, Write, item_size, write_units
from bench.sidebyside import host_probe_ms

OWNER = "bench"


def spec(handler: str, at: Any = None, cron: str | None = None, **extra: Any) -> JobSpec:
    schedule = {"cron": cron} if cron else {"at": format_time(at)}
    return JobSpec.model_validate({"name": "bench", "handler": handler, "schedule": schedule, **extra})


def receive_one(harness: Harness, timeout: float = 5.0) -> Received:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = harness.ports.queues.receive("default", 1, 0, harness.settings.job_class("default").lease_seconds)
        if batch:
            return batch[0]
        time.sleep(0.05)
    raise RuntimeError("no message arrived")


def summarize(
    harness: Harness, calls: Counter[str], writes: list[Write], executions: int, label: str
) -> dict[str, Any]:
    """Per-execution calls by service and operation, and write units by table: executions-table writes and
    the index writes they cause (by duetime.definitions' indexes and what each request changes) apart."""
    rows = harness.scan_table(harness.settings.table_name(EXECUTIONS_TABLE))
    jobs = harness.scan_table(harness.settings.table_name(JOBS_TABLE))
    row_bytes = max((item_size(r) for r in rows), default=0)
    job_bytes = max((item_size(j) for j in jobs), default=0)
    per = {name: round(count / executions, 3) for name, count in sorted(calls.items())}
    by_service: Counter[str] = Counter()
    for name, count in calls.items():
        by_service[name.split(":")[0]] += count
    table_writes: Counter[str] = Counter()
    units: Counter[str] = Counter()
    for write in writes:
        size = row_bytes if write.table == "executions" else job_bytes if write.table == "jobs" else 100
        table_writes[write.table] += 1
        units[write.table] += write_units(size, write.transactional)
        for index in write.indexes:  # an index entry is keys only or the whole item: at most the item's size
            table_writes[f"{write.table}.{index}"] += 1
            units[f"{write.table}.{index}"] += write_units(size, False)
    return {
        "scenario": label,
        "executions": executions,
        "callsPerExecution": per,
        "requestsPerExecution": {s: round(c / executions, 3) for s, c in sorted(by_service.items())},
        "writesPerExecution": {t: round(c / executions, 3) for t, c in sorted(table_writes.items())},
        "writeUnitsPerExecution": {t: round(c / executions, 3) for t, c in sorted(units.items())},
        "transactionalWritesPerExecution": round(sum(w.transactional for w in writes) / executions, 3),
        "executionRowBytes": row_bytes,
        "jobItemBytes": job_bytes,
    }


def one_off_success() -> dict[str, Any]:
    """A one-off job submitted 10 s ahead (so it is sent at submit), run once, succeeding."""
    clock = HandClock()
    harness = Harness("calls-ok", clock=clock)
    try:
        worker = Worker(harness.ports, "default", "bench-worker", concurrency=1)
        submit_job(harness.ports, OWNER, spec("demo.echo", at=clock.now + timedelta(seconds=10)))
        clock.advance(10)
        outcome = worker.process(receive_one(harness))
        assert outcome == "succeeded", outcome
        calls, writes = harness.counter.snapshot()
        return summarize(harness, calls, writes, 1, "one-off success")
    finally:
        harness.stop()


def retried_failure() -> dict[str, Any]:
    """A one-off job whose first attempt fails (retryable) and whose second succeeds."""
    clock = HandClock()
    harness = Harness("calls-retry", clock=clock)
    try:
        worker = Worker(harness.ports, "default", "bench-worker", concurrency=1)
        retry = {"maxAttempts": 3, "baseDelaySeconds": 1, "maxDelaySeconds": 1}
        body = spec("demo.fail", at=clock.now + timedelta(seconds=10), payload={"times": 1}, retry=retry)
        submit_job(harness.ports, OWNER, body)
        clock.advance(10)
        first = worker.process(receive_one(harness))
        clock.advance(1)
        second = worker.process(receive_one(harness))
        assert (first, second) == ("failed", "succeeded"), (first, second)
        calls, writes = harness.counter.snapshot()
        return summarize(harness, calls, writes, 1, "retried failure (2 attempts)")
    finally:
        harness.stop()


def heartbeating_job(seconds: float = 30.0, lease_seconds: int = 30) -> dict[str, Any]:
    """A job running `seconds` under a `lease_seconds` lease: heartbeats every lease/3 (real clock)."""
    harness = Harness("calls-heartbeat", lease_seconds=lease_seconds, max_delay_seconds=900)
    try:
        worker = Worker(harness.ports, "default", "bench-worker", concurrency=1)
        due = harness.ports.clock() + timedelta(seconds=1.5)
        body = spec("demo.sleep", at=due, payload={"seconds": seconds}, timeoutSeconds=int(seconds) + 60)
        submit_job(harness.ports, OWNER, body)
        outcome = worker.process(receive_one(harness, timeout=10))
        assert outcome == "succeeded", outcome
        calls, writes = harness.counter.snapshot()
        return summarize(harness, calls, writes, 1, f"{seconds:.0f}-second job, lease {lease_seconds} s")
    finally:
        harness.stop()


def cron_runs(jobs: int = 100, minutes: int = 2) -> dict[str, Any]:
    """`jobs` every-minute cron jobs in steady state: the pre-loader dispatches each minute's runs (and
    creates the next ones); a worker's own receive loop (Worker.run, with its batched deletes) claims and
    completes them. Counted over `minutes` minutes after the first; the pre-loader's per-shard work
    (lease, range query, cursor) is counted apart, per cycle."""
    clock = HandClock()
    clock.now = clock.now.replace(second=0) + timedelta(minutes=1)
    harness = Harness("calls-cron", clock=clock)
    try:
        for _ in range(jobs):
            submit_job(harness.ports, OWNER, spec("demo.echo", cron="* * * * *"))
        executions_table = harness.settings.table_name(EXECUTIONS_TABLE)
        cycles = 0

        def one_minute() -> None:
            nonlocal cycles
            ahead = harness.settings.preload_window_seconds - 5
            clock.advance(60 - ahead)  # the next minute's runs enter the pre-load window
            preload(harness.ports, "bench-preloader")
            cycles += 1
            clock.advance(ahead)  # they are due: a worker's receive loop runs them (the hand clock stands still)
            slot = to_ms(clock.now)
            worker = Worker(harness.ports, "default", "bench-worker", concurrency=10)
            loop = threading.Thread(target=worker.run, kwargs={"grace_seconds": 1}, daemon=True)
            loop.start()
            deadline = time.monotonic() + 60
            try:
                while time.monotonic() < deadline:
                    rows = [execution_from_item(i) for i in harness.scan_table(executions_table)]
                    done = [e for e in rows if to_ms(e.scheduled_at) == slot and e.status.value == "succeeded"]
                    if len(done) == jobs:
                        return
                    time.sleep(0.2)
                raise RuntimeError("the cron runs did not finish")
            finally:
                worker.stopping.set()
                loop.join(timeout=15)  # its last batched deletes are flushed as it stops

        one_minute()
        harness.counter.reset()
        cycles = 0
        for _ in range(minutes):
            one_minute()
        calls, writes = harness.counter.snapshot()
        shards = harness.settings.shards
        # Per cycle and shard the pre-loader takes its lease, queries the shard and moves its cursor: not
        # per-execution work, so it is taken out and reported on its own.
        overhead = Counter({"dynamodb:UpdateItem": 2 * shards * cycles, "dynamodb:Query": shards * cycles})
        overhead_writes = [w for w in writes if w.table == "control"]
        result = summarize(
            harness, calls - overhead, [w for w in writes if w.table != "control"], jobs * minutes, "cron run"
        )
        result["preloaderPerCycle"] = {
            "shards": shards,
            "dynamodb:UpdateItem (control lease + cursor)": 2 * shards,
            "dynamodb:Query (executions, one per shard-hour)": shards,
            "controlWrites": len(overhead_writes) // max(1, cycles),
        }
        result["jobsPerMinute"] = jobs
        return result
    finally:
        harness.stop()


def api_cpu(alone: int = 300, batches: int = 5, batch_jobs: int = 100) -> dict[str, Any]:
    """The API function's own CPU a job, on one core of this machine (the capacity model's
    API_CPU_SECONDS_ALONE and API_CPU_SECONDS_BATCHED): its app answering API Gateway events in this process,
    moto in a process of its own, so the process's CPU time is the function's (the event, validation, the
    items, boto3's requests) without its calls' waits. One-offs due in half a minute, so each is sent at
    its POST as the model's one-off is. A batch is `batch_jobs` of them, not MAX_BATCH_JOBS: moto takes
    seconds a transaction of 49 jobs once the tables fill, and the CPU a job is the same at 100, 200 and 500 a
    request (0.49, 0.45 and 0.65 ms, measured 2026-12-04)."""
    harness = Harness("calls-api-cpu", separate_process=True)
    app = build_app(harness.ports, local_secret=None)
    due = itertools.count()

    def post(path: str, body: dict[str, Any]) -> None:
        event = to_event("POST", path, {"Content-Type": "application/json"}, json.dumps(body).encode())
        event["requestContext"]["authorizer"] = {"claims": {"sub": OWNER}}
        answer = app.resolve(event, None)
        assert answer["statusCode"] in (200, 201), answer

    def job() -> dict[str, Any]:
        at = datetime.now(UTC) + timedelta(seconds=30, milliseconds=next(due) % 1000)
        return {"name": "bench", "handler": "demo.echo", "schedule": {"at": format_time(at)}}

    def batch() -> dict[str, Any]:
        return {"jobs": [job() for _ in range(batch_jobs)]}

    def cpu_ms(requests: int, body: Callable[[], dict[str, Any]], path: str, jobs: int) -> float:
        started = time.process_time()
        for _ in range(requests):
            post(path, body())
        return round((time.process_time() - started) * 1000 / (requests * jobs), 3)

    try:
        cpu_ms(30, job, "/jobs", 1)  # warm: the first requests build the app's models
        alone_ms = cpu_ms(alone, job, "/jobs", 1)
        cpu_ms(1, batch, "/jobs/batch", batch_jobs)
        batched_ms = cpu_ms(batches, batch, "/jobs/batch", batch_jobs)
    finally:
        harness.stop()
    return {
        "cpuMsAlone": alone_ms,
        "cpuMsBatched": batched_ms,
        "batchJobs": batch_jobs,
        "modelCpuMsAlone": API_CPU_SECONDS_ALONE * 1000,
        "modelCpuMsBatched": API_CPU_SECONDS_BATCHED * 1000,
        "hostProbeMs": host_probe_ms(),
    }


def run(include_heartbeat: bool = True) -> dict[str, Any]:
    scenarios = [one_off_success(), retried_failure(), cron_runs()]
    if include_heartbeat:
        scenarios.append(heartbeating_job())
    return {"scenarios": scenarios, "apiCpu": api_cpu()}
