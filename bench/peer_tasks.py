"""The Celery peer's app and its one task: it records when it started and ended, in Redis, under its key.

The worker process imports this module (`celery -A bench.peer_tasks worker`) with the broker's URL in
BENCH_REDIS_URL; the benchmark builds the same app with `make_app(url)` to send tasks and read results.
"""

from __future__ import annotations

import os
import secrets
import time

import redis
from celery import Celery

from bench.outcome import Outcome

URL_VARIABLE = "BENCH_REDIS_URL"
TASK = "bench.record"
STARTED, FINISHED, DUE, RUNS = "bench:started", "bench:finished", "bench:due", "bench:runs"


def make_app(url: str) -> Celery:
    celery = Celery("bench", broker=url)
    celery.conf.update(
        task_serializer="json",
        accept_content=["json"],
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        task_ignore_result=True,
        # Celery's documented default; ETA tasks are held by the worker whatever the prefetch.
        worker_prefetch_multiplier=4,
    )
    return celery


app = make_app(os.environ.get(URL_VARIABLE, "redis://127.0.0.1:6379/0"))
_clients: list[redis.Redis] = []  # the worker process's own client, made at its first task


def redis_client(url: str) -> redis.Redis:
    """A redis-py client on the broker's Redis (the results live beside the queue)."""
    return redis.Redis.from_url(url)


def _redis() -> redis.Redis:
    if not _clients:
        _clients.append(redis_client(app.conf.broker_url))
    return _clients[0]


@app.task(name=TASK)
def record(key: str, due_ms: int) -> None:
    started = int(time.time() * 1000)
    client = _redis()
    pipe = client.pipeline(transaction=False)
    pipe.hsetnx(STARTED, key, started)
    pipe.hset(DUE, key, due_ms)
    pipe.hincrby(RUNS, key, 1)
    pipe.hset(FINISHED, key, int(time.time() * 1000))
    pipe.execute()


def probe_key() -> str:
    return f"probe-{secrets.token_hex(4)}"


def read_outcomes(url: str, keys: list[str]) -> dict[str, Outcome]:
    client = redis_client(url)
    found: dict[str, Outcome] = {}
    for start in range(0, len(keys), 1000):
        chunk = keys[start : start + 1000]
        pipe = client.pipeline(transaction=False)
        for name in (STARTED, FINISHED, DUE, RUNS):
            pipe.hmget(name, chunk)
        started, finished, due, runs = pipe.execute()
        for key, s, f, d, r in zip(chunk, started, finished, due, runs, strict=True):
            if s is not None:
                found[key] = Outcome(int(d), int(s), int(f) if f else None, "succeeded", int(r or 1))
    client.close()
    return found
