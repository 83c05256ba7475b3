"""One profile of the hot path: where a one-off execution's time goes, client side and server side.

The main thread submits and runs executions one after another (service.jobs.submit_job, then
Worker.process) under cProfile; every request the embedded moto server handles is profiled too (a
profiler per request, merged), so the report splits the time between duetime's own code, boto3/botocore
on the client, and moto + werkzeug on the server.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from duetime.service.jobs import submit_job
from duetime.worker.runtime import Worker

from bench.calls import OWNER, receive_one, spec
from bench.common import HandClock, Harness


class ProfiledApp:
    """WSGI middleware: each request under its own profiler, merged into one stats object at the end."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.profiles: list[cProfile.Profile] = []
        self.seconds: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        try:
            return list(self.app(environ, start_response))
        finally:
            profile.disable()
            target = environ.get("HTTP_X_AMZ_TARGET") or "sqs"
            with self.lock:
                self.profiles.append(profile)
                self.seconds[target.split(".")[-1]] += time.perf_counter() - started
                self.calls[target.split(".")[-1]] += 1


def _bucket(filename: str) -> str:
    for marker, name in (
        ("/duetime/", "duetime"),
        ("/moto/", "moto"),
        ("/werkzeug/", "werkzeug"),
        ("/botocore/", "botocore"),
        ("/boto3/", "boto3"),
        ("/urllib3/", "urllib3"),
        ("/pydantic", "pydantic"),
        ("/jinja2/", "jinja2"),
        ("/xmltodict", "moto"),
        ("/json/", "json"),
        ("/email/", "stdlib http"),
        ("/http/", "stdlib http"),
        ("socket", "socket"),
        ("~", "builtins (socket waits, locks)"),
    ):
        if marker in filename:
            return name
    return "other"


def by_package(stats: pstats.Stats) -> dict[str, float]:
    """Own (tottime) seconds per package: where the CPU went."""
    totals: Counter[str] = Counter()
    for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        totals[_bucket(filename)] += tottime
    return {k: round(v, 3) for k, v in totals.most_common()}


def top(stats: pstats.Stats, count: int = 12, key: str = "tottime") -> list[str]:
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats(key).print_stats(count)
    return [line for line in out.getvalue().splitlines() if line.strip()][-count:]


class TimedApp:
    """WSGI middleware: server-side seconds per operation, without a profiler's overhead."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.seconds: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = time.perf_counter()
        try:
            return list(self.app(environ, start_response))
        finally:
            op = (environ.get("HTTP_X_AMZ_TARGET") or "sqs").split(".")[-1]
            with self.lock:
                self.seconds[op] += time.perf_counter() - started
                self.calls[op] += 1


def _sequential(harness: Harness, clock: HandClock, worker: Worker, executions: int) -> float:
    """Submit and run `executions` one-off jobs one after another; returns the wall seconds."""
    started = time.perf_counter()
    for _ in range(executions):
        submit_job(harness.ports, OWNER, spec("demo.echo", at=clock.now + timedelta(seconds=10)))
        clock.advance(10)
        worker.process(receive_one(harness))
    return time.perf_counter() - started


def run(executions: int = 150) -> dict[str, Any]:
    clock = HandClock()
    harness = Harness("profile", clock=clock)
    app = harness.moto.server.app
    try:
        worker = Worker(harness.ports, "default", "bench-profiler", concurrency=1)
        # Unprofiled first: the real cost per execution and per call, client CPU included.
        timed = TimedApp(app)
        harness.moto.server.app = timed
        cpu_started = time.process_time()
        plain_wall = _sequential(harness, clock, worker, executions)
        cpu = time.process_time() - cpu_started
        server_seconds_plain = sum(timed.seconds.values())
        # Then under cProfile, client and server, for where the time goes.
        profiled = ProfiledApp(app)
        harness.moto.server.app = profiled
        client = cProfile.Profile()
        client.enable()
        started = time.perf_counter()
        for _ in range(executions):
            submit_job(harness.ports, OWNER, spec("demo.echo", at=clock.now + timedelta(seconds=10)))
            clock.advance(10)
            worker.process(receive_one(harness))
        wall = time.perf_counter() - started
        client.disable()
        client_stats = pstats.Stats(client)
        server_stats = pstats.Stats(profiled.profiles[0])
        for profile in profiled.profiles[1:]:
            server_stats.add(profile)
        server_seconds = sum(profiled.seconds.values())
        return {
            "executions": executions,
            "wallMsPerExecution": round(plain_wall * 1000 / executions, 2),
            "processCpuMsPerExecution": round(cpu * 1000 / executions, 2),
            "serverMsPerExecution": round(server_seconds_plain * 1000 / executions, 2),
            # The process runs client and server: what is not server time is the client's (boto3, duetime).
            "clientCpuMsPerCall": round((cpu - server_seconds_plain) * 1000 / sum(timed.calls.values()), 2),
            "serverMsPerCall": {
                op: round(seconds * 1000 / timed.calls[op], 2) for op, seconds in timed.seconds.most_common()
            },
            "profiledWallMsPerExecution": round(wall * 1000 / executions, 2),
            "profiledServerMsPerExecution": round(server_seconds * 1000 / executions, 2),
            "clientSecondsByPackage": by_package(client_stats),
            "serverSecondsByPackage": by_package(server_stats),
            "clientTop": top(client_stats),
            "serverTop": top(server_stats),
        }
    finally:
        harness.stop()
