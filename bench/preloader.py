"""The pre-loader's own cost per cycle: `python -m bench.preloader [--due 10000] [--profile one-off|cron]`.

One shard holds `--due` waiting executions due within the next minute (the load of 10,000 executions/s
spread over 32 shards is ~18,750 a shard a minute; the default is the issue's 10,000), written straight
into in-process moto. One real pre-load cycle (service.dispatch.preload) then runs over them; every AWS
call it makes is counted with botocore hooks. SQS SendMessageBatch is answered by a stub that accepts
every entry: moto keeps a queue in one list and scans it on every call (docs/measured.md), which would time moto,
not duetime. Prints calls by operation, the cycle's time on moto, and what the same calls take on AWS at
duetime.domain.capacity.AWS_CALL_SECONDS each (calls within one shard run one after another).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "core" / "python"))

from duetime.adapters.aws.client import make_client  # noqa: E402
from duetime.adapters.aws.items import _ser, execution_to_item, job_to_item  # noqa: E402
from duetime.adapters.aws.provision import create_queues  # noqa: E402
from duetime.adapters.aws.queue import DueQueues  # noqa: E402
from duetime.adapters.aws.store import DynamoStore  # noqa: E402
from duetime.definitions import PRELOAD_DISPATCH_THREADS, Settings  # noqa: E402
from duetime.domain.capacity import AWS_CALL_SECONDS  # noqa: E402
from duetime.domain.keys import shard_of  # noqa: E402
from duetime.domain.models import Job, JobStatus  # noqa: E402
from duetime.notify import ConsoleNotifier  # noqa: E402
from duetime.service.context import Ports  # noqa: E402
from duetime.service.dispatch import new_execution, preload  # noqa: E402


class AcceptingSqs:
    """Answers SendMessageBatch with every entry sent (see the module docstring)."""

    def __init__(self, client: Any) -> None:
        self.entries: list[str] = []
        client.meta.events.register("before-parameter-build.sqs.SendMessageBatch", self._remember)
        client.meta.events.register("before-call.sqs.SendMessageBatch", self._answer)

    def _remember(self, params: dict[str, Any], **_: Any) -> None:
        self.entries = [e["Id"] for e in params["Entries"]]

    def _answer(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        parsed = {"Successful": [{"Id": i, "MessageId": i, "MD5OfMessageBody": ""} for i in self.entries]}
        return AWSResponse(url="", status_code=200, headers=HTTPHeaders(), raw=None), parsed


def jobs_on_shard(count: int, shards: int, shard: int, cron: bool, now: datetime) -> list[Job]:
    jobs: list[Job] = []
    i = 0
    while len(jobs) < count:
        job_id = f"j_{i:016x}"
        i += 1
        if shard_of(job_id, shards) != shard:
            continue
        schedule = {"cron": "* * * * *"} if cron else {"at": now}
        jobs.append(
            Job(
                name="bench",
                handler="demo.echo",
                schedule=schedule,
                job_id=job_id,
                owner="bench",
                status=JobStatus.ACTIVE,
                created_at=now - timedelta(hours=1),
                updated_at=now - timedelta(hours=1),
            )
        )
    return jobs


def measure(due: int, profile: str) -> dict[str, Any]:
    from moto import mock_aws
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    settings = Settings(prefix="bench", shards=32, preload_interval_seconds=60, preload_window_seconds=300)
    now = datetime(2026, 12, 1, 9, 0, 10, tzinfo=UTC)
    with mock_aws():
        dynamodb, sqs = make_client("dynamodb", "us-east-1"), make_client("sqs", "us-east-1")
        from duetime.adapters.aws.provision import create_tables

        create_tables(dynamodb, settings)
        create_queues(sqs, settings)
        ports = Ports(
            store=DynamoStore(dynamodb, settings),
            queues=DueQueues.resolve(sqs, settings),
            settings=settings,
            notifier=ConsoleNotifier(),
            clock=lambda: now,
        )
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        jobs = jobs_on_shard(due, settings.shards, 0, profile == "cron", now)
        # Steady state: the last cycle loaded up to its window's end (now + window - interval); this cycle's
        # new minute holds the shard's due executions (one slot each; a cron job's next slot lies beyond).
        cursor = now + timedelta(seconds=settings.preload_window_seconds - settings.preload_interval_seconds)
        slot = cursor.replace(second=0) + timedelta(minutes=1)
        for job in jobs:
            backend.put_item(ports.store.jobs_table, _ser(job_to_item(job)))
            row = new_execution(job, slot)
            item = execution_to_item(row, ports.store.key_of(row), None, False)  # due ahead: out of the `open` index
            backend.put_item(ports.store.executions_table, _ser(item))
        # Every shard's cursor sits at the last cycle's window end, as in steady state.
        for shard in range(settings.shards):
            backend.put_item(
                ports.store.control_table,
                _ser({"key": f"preload#{shard:03d}", "cursorMs": int(cursor.timestamp() * 1000)}),
            )
        calls: Counter[str] = Counter()
        AcceptingSqs(sqs)
        for client in (dynamodb, sqs):
            client.meta.events.register("before-parameter-build.*.*", lambda model, **_: calls.update([model.name]))
        started = time.monotonic()
        report = preload(ports, "bench-preloader")  # one call at a time: in-process moto is not thread-safe
        moto_seconds = time.monotonic() - started
    total = sum(calls.values())
    parallel = calls["PutItem"] + calls["SendMessageBatch"]  # the calls a shard makes PRELOAD_DISPATCH_THREADS at once
    return {
        "dueOnShard": due,
        "profile": profile,
        "sent": report.sent,
        "created": report.created,
        "callsByOperation": dict(sorted(calls.items())),
        "callsPerCycle": total,
        "callsPerDueExecution": round(total / due, 4),
        "motoSeconds": round(moto_seconds, 2),
        "awsSecondsOneShard": round(total * AWS_CALL_SECONDS, 1),
        "awsSecondsOneShardDispatchThreads": round(
            (total - parallel + parallel / PRELOAD_DISPATCH_THREADS) * AWS_CALL_SECONDS, 1
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--due", type=int, default=10_000, help="executions due on the measured shard this cycle")
    parser.add_argument("--profile", choices=("one-off", "cron"), default="one-off")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.due, args.profile)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"pre-load cycle, {result['dueOnShard']:,} {result['profile']} executions due on one shard")
    for name, count in result["callsByOperation"].items():
        print(f"  {name:<22} {count:>7,}")
    ms = AWS_CALL_SECONDS * 1000
    print(
        f"  calls per cycle        {result['callsPerCycle']:>7,} "
        f"(all 32 shards; {result['callsPerDueExecution']} per due)"
    )
    print(f"  time on moto           {result['motoSeconds']:>7} s (in-process, SQS sends stubbed)")
    print(f"  time on AWS (model)    {result['awsSecondsOneShard']:>7} s: every call in turn at {ms:g} ms")
    print(
        f"                         {result['awsSecondsOneShardDispatchThreads']:>7} s: puts and sends "
        f"{PRELOAD_DISPATCH_THREADS} at once (DUETIME_PRELOAD_DISPATCH_THREADS)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
