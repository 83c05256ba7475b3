"""Start lateness and executions/s of one-off jobs on `duetime local`: steady rates and a burst.

Jobs are submitted through the service (duetime.service.jobs.submit_job) with ports of their own, wired
to the running system the way `duetime worker --data-dir` wires itself, so the submitter's AWS calls
are counted apart from the system's. The HTTP API is left out: it adds a request and a JWT check per
submit, not work on the execution path. Lateness is startedAt - scheduledAt of each execution, read
back from the executions table after the run.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.items import execution_from_item
from duetime.adapters.aws.queue import DueQueues
from duetime.adapters.aws.store import DynamoStore
from duetime.domain.models import JobSpec, format_time, to_ms
from duetime.local.backends import MOTO
from duetime.local.moto_server import served_calls
from duetime.local.system import LocalSystem
from duetime.notify import ConsoleNotifier
from duetime.service.context import Ports
from duetime.service.jobs import submit_job

from bench.common import REGION, CallCounter, lateness_summary, percentile, scan_all, unique_prefix
from bench.hotpath import TimedApp

OWNER = "bench"
SUBMITTERS = 4
# A steady run stops submitting once it falls this far behind its plan: the rate is beyond what this
# machine can take, and the figures of what was submitted already say so.
GIVE_UP_LAG_SECONDS = 10.0
# Scheduled-ahead runs and the burst start once every job is in, judged by this submit rate unless the
# run's backend ceiling measured a rate (`set_submit_rate`); jobs still submitted late are counted.
submit_rate = {"perSecond": 15.0}


def set_submit_rate(per_second: float) -> None:
    submit_rate["perSecond"] = max(5.0, per_second)


class BenchSystem:
    """A `duetime local --backend moto` (moto, API, pre-loader, worker threads) in this process, counted."""

    def __init__(
        self, name: str, workers: int, lease_seconds: int = 30, shards: int = 8, window: int | None = None
    ) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="duetime-bench-")
        self.system = LocalSystem(
            Path(self.tmp.name),
            port=0,
            workers=workers,
            lease_seconds=lease_seconds,
            shards=shards,
            prefix=unique_prefix(name),
            backend=MOTO,  # these parts count AWS calls: the moto backend (the side-by-side part runs both)
        ).start()
        assert self.system.ports is not None
        self.ports: Ports = self.system.ports
        if window is not None:
            # An experiment on the running system, not a change to it: the pre-loader timer and the
            # dispatch horizon read these settings on every cycle.
            self.ports.settings = replace(self.ports.settings, preload_window_seconds=window)
        # moto runs in a process of its own, as `duetime local` runs it, so its service time per request
        # is not visible here; `bench.hotpath` profiles it in-process instead.
        self.server: TimedApp | None = None
        self.counter = CallCounter().attach(self.ports.store.client, self.ports.settings)
        self.counter.attach(self.ports.queues.client)
        self.submit_ports = self._own_ports()
        self.submit_counter = CallCounter().attach(self.submit_ports.store.client, self.submit_ports.settings)
        self.submit_counter.attach(self.submit_ports.queues.client)
        self.reader = self._own_ports().store  # reads results back: counted to leave its calls out of the system's
        self.reader_counter = CallCounter().attach(self.reader.client)
        self._at_reset: tuple[Counter[str], Counter[str], Counter[str]] = (Counter(), Counter(), Counter())

    def _own_ports(self) -> Ports:
        """Ports with clients of their own on the same tables and queues (as a separate process has)."""
        assert self.system.moto is not None
        endpoint, settings = self.system.moto.endpoint_url, self.ports.settings
        store = DynamoStore(make_client("dynamodb", REGION, endpoint), settings)
        queues = DueQueues.resolve(make_client("sqs", REGION, endpoint), settings)
        return Ports(store=store, queues=queues, settings=settings, notifier=ConsoleNotifier())

    def executions(self) -> list[Any]:
        return [execution_from_item(i) for i in scan_all(self.reader.client, self.reader.executions_table)]

    def waiting(self) -> int:
        client, table = self.reader.client, self.reader.executions_table
        count, kwargs = (
            0,
            {
                "TableName": table,
                "Select": "COUNT",
                "FilterExpression": "#s IN (:a, :b)",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {":a": {"S": "scheduled"}, ":b": {"S": "running"}},
            },
        )
        while True:
            page = client.scan(**kwargs)
            count += page["Count"]
            if "LastEvaluatedKey" not in page:
                return count
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def reset_counts(self) -> None:
        self.counter.reset()
        self._at_reset = self._call_totals()

    def _call_totals(self) -> tuple[Counter[str], Counter[str], Counter[str]]:
        """(every call the moto server served, the submitters', the reader's) so far."""
        assert self.system.moto is not None
        served = Counter(served_calls(self.system.moto.endpoint_url))
        return served, self.submit_counter.snapshot()[0], self.reader_counter.snapshot()[0]

    def system_calls(self) -> Counter[str]:
        """The calls the system made since reset_counts, whoever made them (the emulated functions call moto with
        clients of their own, out of this process's reach): the server's count, less the submitters' and the
        reader's."""
        served, submitted, read = (now - then for now, then in zip(self._call_totals(), self._at_reset, strict=True))
        return served - submitted - read

    def server_ms_per_call(self) -> dict[str, float]:
        """moto's own milliseconds per request, by operation (only when moto runs in this process)."""
        if self.server is None:
            return {}
        with self.server.lock:
            return {op: round(s * 1000 / self.server.calls[op], 2) for op, s in self.server.seconds.most_common()}

    def stop(self) -> None:
        self.system.stop()
        self.tmp.cleanup()


def echo_spec(due: datetime, index: int) -> JobSpec:
    return JobSpec.model_validate(
        {"name": f"bench-{index}", "handler": "demo.echo", "schedule": {"at": format_time(due)}}
    )


def submit_all(
    bench: BenchSystem,
    plan: list[tuple[float, datetime]],
    give_up_lag: float | None = None,
    due_margin: float = 0.0,
) -> dict[str, Any]:
    """Submit one job per (monotonic submit instant, due time) from SUBMITTERS threads, each job at or
    after its instant; returns the job ids and how far behind plan submission ran. With `give_up_lag`,
    submission stops once it runs that many seconds behind plan (the system is saturated)."""
    job_ids: list[str] = []
    late = [0]  # jobs submitted less than `due_margin` s before they were due
    gave_up = threading.Event()
    lags: list[float] = []
    errors: list[str] = []
    cursor = iter(range(len(plan)))
    lock = threading.Lock()

    def submitter() -> None:
        while True:
            with lock:
                index = next(cursor, None)
            if index is None or gave_up.is_set():
                return
            at_mono, due = plan[index]
            pause = at_mono - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            lag = time.monotonic() - at_mono
            if give_up_lag is not None and lag > give_up_lag:
                gave_up.set()
                return
            if due_margin and (due - datetime.now(UTC)).total_seconds() < due_margin:
                with lock:
                    late[0] += 1
            try:
                job, _ = submit_job(bench.submit_ports, OWNER, echo_spec(due, index))
            except Exception as exc:  # a refused submit is a finding, not a crash of the benchmark
                with lock:
                    errors.append(repr(exc))
                continue
            with lock:
                job_ids.append(job.job_id)
                lags.append(lag)

    threads = [threading.Thread(target=submitter, daemon=True) for _ in range(SUBMITTERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"jobIds": job_ids, "lags": lags, "errors": errors, "gaveUp": gave_up.is_set(), "late": late[0]}


def wait_drained(bench: BenchSystem, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if bench.waiting() == 0:
            return True
        time.sleep(1.0)
    return bench.waiting() == 0


def account(bench: BenchSystem, job_ids: list[str], errors: list[str]) -> dict[str, Any]:
    """Every submitted job's execution found and counted by status; lateness of those that started."""
    rows = [e for e in bench.executions() if e.job_id in set(job_ids)]
    by_job = Counter(e.job_id for e in rows)
    statuses = Counter(e.status.value for e in rows)
    lateness = [float(to_ms(e.attempts[0].started_at) - to_ms(e.scheduled_at)) for e in rows if e.attempts]
    starts = sorted(to_ms(e.attempts[0].started_at) for e in rows if e.attempts)
    finishes = sorted(to_ms(e.finished_at) for e in rows if e.finished_at)
    return {
        "submitted": len(job_ids) + len(errors),
        "accepted": len(job_ids),
        "refused": len(errors),
        "executionsFound": len(rows),
        "missing": len(set(job_ids) - set(by_job)),
        "duplicates": sum(c - 1 for c in by_job.values() if c > 1),
        "statuses": dict(statuses),
        "retriedAttempts": sum(max(0, e.attempt - 1) for e in rows),
        "unfinished": len(job_ids) - statuses.get("succeeded", 0),
        "lateness": lateness_summary(lateness),
        "starts": starts,
        "finishes": finishes,
        "firstScheduledMs": min((to_ms(e.scheduled_at) for e in rows), default=0),
    }


def per_execution(calls: Counter[str], executions: int) -> dict[str, float]:
    return {name: round(count / max(1, executions), 3) for name, count in sorted(calls.items())}


def steady(
    rate: float, seconds: float, workers: int, ahead: bool = True, lead: float = 3.0, window: int | None = None
) -> dict[str, Any]:
    """`rate` one-off executions due per second for `seconds`.

    ahead=True: every job is submitted before the run, due at its slot of the steady rate (scheduled
    ahead, the scheduler's own work: the pre-loader sends what falls in its window). ahead=False: each job
    is submitted at its planned instant and due `lead` s later (submission and execution both load the
    machine; a submit falling 10 s behind plan ends submission: saturated).
    """
    bench = BenchSystem(f"steady{int(rate)}", workers, window=window)
    try:
        time.sleep(1.0)  # let the pre-loader's first cycle and the workers' first polls pass
        bench.reset_counts()
        count = int(rate * seconds)
        now_mono, now_wall = time.monotonic(), datetime.now(UTC)
        if ahead:
            first_due = now_wall + timedelta(seconds=count / submit_rate["perSecond"] + 8)
            plan = [(now_mono, first_due + timedelta(seconds=i / rate)) for i in range(count)]
            submitted = submit_all(bench, plan, due_margin=2.0)
        else:
            start_mono, start_wall = now_mono + 0.5, now_wall + timedelta(seconds=0.5)
            plan = [(start_mono + i / rate, start_wall + timedelta(seconds=lead + i / rate)) for i in range(count)]
            submitted = submit_all(bench, plan, give_up_lag=GIVE_UP_LAG_SECONDS)
        last_due = max(due for _, due in plan)
        drain_deadline = time.monotonic() + (last_due - datetime.now(UTC)).total_seconds() + 60
        drained = wait_drained(bench, drain_deadline)
        result = account(bench, submitted["jobIds"], submitted["errors"])
        starts = result.pop("starts")
        result.pop("finishes")
        result.pop("firstScheduledMs")
        span = (starts[-1] - starts[0]) / 1000 if len(starts) > 1 else 0.0
        result.update(
            {
                "name": f"{rate:g}/s {'scheduled ahead' if ahead else 'submit-and-run'}"
                + (f", {window} s window" if window else ""),
                "preloadWindowSeconds": bench.ports.settings.preload_window_seconds,
                "serverMsPerCall": bench.server_ms_per_call(),
                "rate": rate,
                "seconds": seconds,
                "mode": "ahead" if ahead else "submit",
                "workers": workers,
                "drained": drained,
                "saturated": submitted["gaveUp"],
                "planned": count,
                "submittedLate": submitted["late"],
                "executionsPerSecond": round((len(starts) - 1) / span, 1) if span > 0 else 0.0,
                "submitLagP99Ms": round(percentile(submitted["lags"], 99) * 1000, 1) if submitted["lags"] else 0.0,
                "systemCallsPerExecution": per_execution(bench.system_calls(), result["accepted"]),
                "submitCallsPerExecution": per_execution(bench.submit_counter.snapshot()[0], result["accepted"]),
            }
        )
        return result
    finally:
        bench.stop()


def burst(count: int, workers: int) -> dict[str, Any]:
    """`count` one-off jobs all due at one instant `lead` s ahead: submitted beyond the dispatch horizon,
    so the pre-loader sends them in batches, then the workers drain them."""
    bench = BenchSystem(f"burst{count}", workers)
    try:
        # Due beyond the dispatch horizon even for the last job submitted: all go through the pre-loader.
        lead = count / submit_rate["perSecond"] + bench.ports.settings.preload_window_seconds + 10
        due = (datetime.now(UTC) + timedelta(seconds=lead)).replace(microsecond=0)
        now_mono = time.monotonic()
        submitted = submit_all(bench, [(now_mono, due)] * count)
        submit_seconds = time.monotonic() - now_mono
        bench.reset_counts()
        due_mono = now_mono + (due - datetime.now(UTC)).total_seconds() + (time.monotonic() - now_mono)
        drained = wait_drained(bench, due_mono + 120)
        result = account(bench, submitted["jobIds"], submitted["errors"])
        starts = result.pop("starts")
        finishes = result.pop("finishes")
        due_ms = result.pop("firstScheduledMs")
        drain_seconds = (finishes[-1] - due_ms) / 1000 if finishes else float("nan")
        result.update(
            {
                "name": f"burst of {count}",
                "count": count,
                "workers": workers,
                "drained": drained,
                "submitSeconds": round(submit_seconds, 1),
                "firstStartAfterDueMs": (starts[0] - due_ms) if starts else None,
                "drainSeconds": round(drain_seconds, 2),
                "leadSeconds": round(lead, 1),
                "serverMsPerCall": bench.server_ms_per_call(),
                "executionsPerSecond": round(len(finishes) / drain_seconds, 1) if drain_seconds > 0 else 0.0,
                "systemCallsPerExecution": per_execution(bench.system_calls(), result["accepted"]),
            }
        )
        return result
    finally:
        bench.stop()
