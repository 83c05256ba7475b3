"""The capacity model: duetime's measured AWS work per execution carried to a rate on AWS.

Pure arithmetic, no AWS calls. The per-execution figures are those `make bench` measures (bench/calls.py)
and tests/integration/test_call_counts.py pins; the limits and prices are AWS's published ones.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from duetime.definitions import PRELOAD_DISPATCH_THREADS, PRELOAD_THREADS, SQS_BATCH_SIZE

# --- AWS limits (docs/measured.md, AWS documentation) --------------------------------------------------------
PARTITION_WCU_PER_SECOND = 1000  # one partition key value: 1,000 write units/s
PARTITION_RCU_PER_SECOND = 3000  # and 3,000 read units/s
TABLE_ON_DEMAND_WRU_PER_SECOND = 40_000  # default per-table (and per-GSI) on-demand quota, adjustable
SQS_IN_FLIGHT_PER_QUEUE = 120_000  # standard queue
SQS_BATCH = 10
LAMBDA_SQS_MAX_CONCURRENT_BATCHES = 1000  # one SQS event source mapping

# --- Prices, us-east-1, as published on the AWS pricing pages; recorded 2026-11-29 ---------------------
PRICES_AS_OF = "2026-11-29"


@dataclass(frozen=True)
class Prices:
    """USD, us-east-1. DynamoDB on-demand rates are those since the 2024-11-01 reduction."""

    dynamodb_write_per_million: float = 0.625  # write request units, on-demand
    dynamodb_read_per_million: float = 0.125  # read request units, on-demand
    sqs_per_million: float = 0.40  # standard queue requests (first 100 billion a month), 64 KB each
    lambda_requests_per_million: float = 0.20
    lambda_gb_second_arm64: float = 0.0000133334
    api_gateway_rest_per_million: float = 3.50  # REST API, first 333 million a month
    as_of: str = PRICES_AS_OF


# --- What one execution costs, as measured --------------------------------------------------------------


@dataclass(frozen=True)
class CallProfile:
    """The AWS work of one successful execution without heartbeats (bench/calls.py measures it).

    Write units count 1 per KB started (rows are ~0.4 KB), doubled inside a transaction. The executions
    table's writes all land on the execution's `hour#shard` partition. Its indexes project keys only, so
    only writes that add or remove an entry cost index units: byJob (partitioned by jobId, spread out) at
    create, the sparse `open` index (partitioned by shard alone, every hour on one key) at create and at
    the end of the execution, and the sparse `openByJob` index (partitioned by jobId) at create and end.
    """

    name: str
    executions_writes: float  # write requests on the executions table
    executions_wcu: float  # their write units (the hot-partition figure)
    index_wcu: float  # index write units (byJob, open and openByJob)
    open_index_wcu: float  # of which on the execution's `open` index partition (its shard)
    jobs_wcu: float  # jobs table and its byOwner index
    read_units: float  # GetItem/BatchGetItem of the job, overlap Query, pre-load Query share
    partition_read_units: float  # of which on the hour#shard partition (the pre-load Query)
    sqs_requests: float  # SendMessageBatch, ReceiveMessage and DeleteMessageBatch shares at full batches
    api_requests: float  # API Gateway requests (POST /jobs for a one-off)


# A one-off job submitted through the API and due soon: one TransactWriteItems (job + execution, so the
# execution's create costs 2 units), a SendMessageBatch of one; at run time ReceiveMessage and
# DeleteMessageBatch (full batches at load), GetItem of the job, the claim and the finish.
ONE_OFF = CallProfile(
    name="one-off",
    executions_writes=3,
    executions_wcu=4,
    index_wcu=5,
    open_index_wcu=2,
    jobs_wcu=3,
    read_units=1,
    partition_read_units=0,
    sqs_requests=1 + 1 / SQS_BATCH + 1 / SQS_BATCH,
    api_requests=1,
)
# A cron run in steady state: the pre-loader creates the next slot (PutItem) and sends due runs in
# batches of 10; the claim reads the job's recent history for the overlap policy (a Query on byJob and a
# BatchGetItem of the rows behind it).
CRON_RUN = CallProfile(
    name="cron",
    executions_writes=3,
    executions_wcu=3,
    index_wcu=5,
    open_index_wcu=2,
    jobs_wcu=0,
    read_units=1 + 1 + 1 + 1 + 0.1,
    partition_read_units=0.1,
    sqs_requests=1 / SQS_BATCH + 1 / SQS_BATCH + 1 / SQS_BATCH,
    api_requests=0,
)
PROFILES = {p.name: p for p in (ONE_OFF, CRON_RUN)}


# --- What the pre-loader itself costs per cycle, as measured (bench/preloader.py) ------------------------


@dataclass(frozen=True)
class PreloadProfile:
    """The pre-loader's AWS calls in one cycle (python -m bench.preloader, 10,000 due on a shard: 1,230
    calls for one-offs, 11,230 for cron runs). Per shard: the lease and the cursor write (2 UpdateItem),
    the due hour's Query and the reconciler's page Query. Per dispatched execution: its job in a
    BatchGetItem of 100, its message in a SendMessageBatch of 10, and for a cron run the next slot's PutItem.
    The puts and sends of a shard run `dispatch_threads` at once; the rest of a shard's calls in turn."""

    name: str
    calls_per_shard: float
    serial_calls_per_execution: float  # job reads and the due Query's further pages (~1 MB, ~5,000 rows)
    parallel_calls_per_execution: float  # SendMessageBatch shares and next-slot PutItems


PRELOAD_PROFILES = {
    "one-off": PreloadProfile("one-off", 4, 1 / 100 + 1 / 5000, 1 / SQS_BATCH_SIZE),
    "cron": PreloadProfile("cron", 4, 1 / 100 + 1 / 5000, 1 / SQS_BATCH_SIZE + 1),
}
PRELOADER_MEMORY_GB = 0.5  # infra/functions.py: the pre-loader function's 512 MB

# A message is sent a second short of due and SQS delays are whole seconds, so a worker holds it 1-2 s
# before it may claim it (worker/runtime.py waits it out in the slot): 1.5 s on average.
EARLY_HOLD_SECONDS = 1.5
# One AWS call's round trip from Lambda or ECS in the same region (~5-10 ms): the upper figure.
AWS_CALL_SECONDS = 0.01
# The hot path's own AWS round trips on AWS (about five calls).
CALL_OVERHEAD_SECONDS = 5 * AWS_CALL_SECONDS
# Client CPU per execution in the worker (boto3 and duetime): five calls at the ~2.2 ms a call the bench's
# profile measures on this machine.
WORKER_CPU_MS_PER_EXECUTION = 11.0


@dataclass(frozen=True)
class Inputs:
    rate: float  # executions per second at peak
    shards: int = 32
    lease_seconds: int = 30
    avg_seconds: float = 2.0  # average run time of a job
    profile: str = "one-off"
    lambda_memory_gb: float = 1.0  # the worker function (infra/functions.py: 1024 MB, arm64)
    worker_concurrency: int = 8  # executions at once per ECS worker task (`duetime worker --concurrency`)
    preload_interval_seconds: int = 60  # EventBridge's minute
    preload_threads: int = PRELOAD_THREADS  # shards one pre-loader invocation works on at once
    preload_dispatch_threads: int = PRELOAD_DISPATCH_THREADS  # puts and sends in flight per shard
    preload_shard_groups: int = 1  # pre-loader invocations per tick (CDK context preloadShardGroups)


@dataclass
class Estimate:
    inputs: Inputs
    heartbeats_per_execution: int
    partition_wcu_per_second: float
    partition_wcu_share: float  # of 1,000
    partition_rcu_per_second: float
    open_index_wcu_per_second: float  # per shard, on the `open` index
    table_wru_per_second: float
    index_wru_per_second: float
    in_flight: float  # per queue, Little's law
    in_flight_share: float  # of 120,000
    worker_slots: float  # executions held by workers at once
    lambda_batches: float  # concurrent SQS event source batches of 10
    ecs_tasks: int
    worker_vcpus: float
    smallest_shards: int
    preload_calls_per_cycle: float  # every shard's calls in one pre-load cycle
    preload_seconds_per_shard: float  # one shard's cycle at AWS_CALL_SECONDS a call
    preload_cycle_seconds: float  # the invocation: shards `preload_threads` at a time
    preload_lambda_gb_seconds: float  # per cycle
    fits: bool
    cost_per_million: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def heartbeats(avg_seconds: float, lease_seconds: int) -> int:
    """Heartbeats a run of `avg_seconds` makes: one every lease/3 while it runs."""
    return max(0, math.ceil(avg_seconds / (lease_seconds / 3)) - 1)


def execution_partition_wcu(profile: CallProfile, beats: int) -> float:
    """Write units one execution puts on its hour#shard partition (each heartbeat is one more write)."""
    return profile.executions_wcu + beats


def smallest_shards(rate: float, profile: CallProfile, beats: int) -> int:
    """The fewest shards whose hour#shard partitions (and `open` index partitions) each stay within
    1,000 write units/s at `rate`."""
    hottest = max(execution_partition_wcu(profile, beats), profile.open_index_wcu)
    return max(1, math.ceil(rate * hottest / PARTITION_WCU_PER_SECOND))


def estimate(inputs: Inputs, prices: Prices | None = None) -> Estimate:
    """Partition load, queue depth, workers and cost for `inputs`; `fits` is False if a limit is exceeded."""
    if inputs.rate <= 0 or inputs.shards < 1 or inputs.lease_seconds < 3 or inputs.avg_seconds < 0:
        raise ValueError("rate must be > 0, shards >= 1, lease >= 3 s and avg-seconds >= 0")
    prices = prices or Prices()
    profile = PROFILES[inputs.profile]
    beats = heartbeats(inputs.avg_seconds, inputs.lease_seconds)
    per_partition = inputs.rate / inputs.shards
    partition_wcu = per_partition * execution_partition_wcu(profile, beats)
    partition_rcu = per_partition * profile.partition_read_units
    held = inputs.avg_seconds + EARLY_HOLD_SECONDS + CALL_OVERHEAD_SECONDS
    in_flight = inputs.rate * held  # Little's law: a message is in flight from receive to delete
    slots = in_flight
    lambda_batches = slots / SQS_BATCH
    write_units = profile.executions_wcu + profile.index_wcu + profile.jobs_wcu + beats
    sqs = profile.sqs_requests + beats  # each heartbeat also extends the message's visibility
    cost = {
        "dynamodbWrites": write_units * prices.dynamodb_write_per_million,
        "dynamodbReads": profile.read_units * prices.dynamodb_read_per_million,
        "sqs": sqs * prices.sqs_per_million,
        "lambdaRequests": prices.lambda_requests_per_million / SQS_BATCH,
        # Records of a batch run at once: the invocation lasts about as long as one record is held.
        "lambdaDuration": 1e6 * inputs.lambda_memory_gb * held / SQS_BATCH * prices.lambda_gb_second_arm64,
        "apiGateway": profile.api_requests * prices.api_gateway_rest_per_million,
    }
    preload = preload_estimate(inputs)
    cycles_per_million = 1e6 / (inputs.rate * inputs.preload_interval_seconds)
    cost["lambdaPreloader"] = cycles_per_million * (
        preload["gb_seconds"] * prices.lambda_gb_second_arm64 + prices.lambda_requests_per_million / 1e6
    )
    cost = {k: round(v, 4) for k, v in cost.items()}
    cost["total"] = round(sum(cost.values()), 4)
    result = Estimate(
        inputs=inputs,
        heartbeats_per_execution=beats,
        partition_wcu_per_second=round(partition_wcu, 1),
        partition_wcu_share=round(partition_wcu / PARTITION_WCU_PER_SECOND, 3),
        partition_rcu_per_second=round(partition_rcu, 1),
        open_index_wcu_per_second=round(per_partition * profile.open_index_wcu, 1),
        table_wru_per_second=round(inputs.rate * (execution_partition_wcu(profile, beats)), 1),
        index_wru_per_second=round(inputs.rate * profile.index_wcu, 1),
        in_flight=round(in_flight, 1),
        in_flight_share=round(in_flight / SQS_IN_FLIGHT_PER_QUEUE, 3),
        worker_slots=round(slots, 1),
        lambda_batches=round(lambda_batches, 1),
        ecs_tasks=math.ceil(slots / inputs.worker_concurrency),
        worker_vcpus=round(inputs.rate * WORKER_CPU_MS_PER_EXECUTION / 1000, 1),
        smallest_shards=smallest_shards(inputs.rate, profile, beats),
        preload_calls_per_cycle=round(preload["calls"], 0),
        preload_seconds_per_shard=round(preload["shard_seconds"], 1),
        preload_cycle_seconds=round(preload["cycle_seconds"], 1),
        preload_lambda_gb_seconds=round(preload["gb_seconds"], 1),
        fits=True,
        cost_per_million=cost,
    )
    if partition_wcu > PARTITION_WCU_PER_SECOND:
        result.warnings.append(
            f"{partition_wcu:,.0f} write units/s per hour#shard partition exceeds {PARTITION_WCU_PER_SECOND:,}: "
            f"use at least {result.smallest_shards} shards"
        )
    if per_partition * profile.open_index_wcu > PARTITION_WCU_PER_SECOND:
        result.warnings.append(
            f"{per_partition * profile.open_index_wcu:,.0f} write units/s per shard on the open index exceeds "
            f"{PARTITION_WCU_PER_SECOND:,}: add shards"
        )
    if partition_rcu > PARTITION_RCU_PER_SECOND:
        result.warnings.append(f"{partition_rcu:,.0f} read units/s per partition exceeds {PARTITION_RCU_PER_SECOND:,}")
    if in_flight > SQS_IN_FLIGHT_PER_QUEUE:
        result.warnings.append(
            f"{in_flight:,.0f} messages in flight exceeds SQS's {SQS_IN_FLIGHT_PER_QUEUE:,} per queue: "
            "split the job class over more queues"
        )
    result.fits = not result.warnings
    # Advisory, like the quotas below: more shard groups or calls at once fix it without a redesign.
    if preload["cycle_seconds"] > inputs.preload_interval_seconds:
        result.warnings.append(
            f"a pre-load cycle takes ~{preload['cycle_seconds']:,.0f} s, longer than its "
            f"{inputs.preload_interval_seconds} s interval (its Lambda timeout): fan it out over shard groups "
            f"(CDK context preloadShardGroups) or raise DUETIME_PRELOAD_DISPATCH_THREADS (calls at once per shard)"
            + (", or add shards" if preload["shard_seconds"] > inputs.preload_interval_seconds / 2 else "")
        )
    # Each index has its own quota; the busiest are `open` and `openByJob` (an entry added and removed).
    busiest_index = round(inputs.rate * profile.open_index_wcu, 1)
    for name, value in (("table", result.table_wru_per_second), ("busiest index", busiest_index)):
        if value > TABLE_ON_DEMAND_WRU_PER_SECOND:
            result.warnings.append(
                f"the executions {name} needs {value:,.0f} write units/s, above the default on-demand quota of "
                f"{TABLE_ON_DEMAND_WRU_PER_SECOND:,}/s: raise the quota first"
            )
    if lambda_batches > LAMBDA_SQS_MAX_CONCURRENT_BATCHES:
        result.warnings.append(
            f"{lambda_batches:,.0f} concurrent Lambda batches exceeds the SQS event source's "
            f"{LAMBDA_SQS_MAX_CONCURRENT_BATCHES:,}: run this class on ECS workers ({result.ecs_tasks:,} tasks "
            f"at concurrency {inputs.worker_concurrency}) or split it over more queues"
        )
    return result


def preload_estimate(inputs: Inputs) -> dict[str, float]:
    """The pre-loader's calls per cycle and how long its invocation takes at AWS_CALL_SECONDS a call."""
    profile = PRELOAD_PROFILES[inputs.profile]
    due_per_shard = inputs.rate * inputs.preload_interval_seconds / inputs.shards
    serial = profile.calls_per_shard + due_per_shard * profile.serial_calls_per_execution
    parallel = due_per_shard * profile.parallel_calls_per_execution
    shard_seconds = (serial + parallel / max(1, inputs.preload_dispatch_threads)) * AWS_CALL_SECONDS
    groups = max(1, inputs.preload_shard_groups)
    rounds = math.ceil(math.ceil(inputs.shards / groups) / max(1, inputs.preload_threads))
    cycle_seconds = rounds * shard_seconds
    return {
        "calls": inputs.shards * (serial + parallel),
        "shard_seconds": shard_seconds,
        "cycle_seconds": cycle_seconds,
        "gb_seconds": groups * cycle_seconds * PRELOADER_MEMORY_GB,
    }


def render(result: Estimate) -> str:
    i = result.inputs
    lines = [
        f"duetime capacity: {i.rate:,.0f} executions/s ({i.profile}), {i.shards} shards, lease {i.lease_seconds} s, "
        f"jobs {i.avg_seconds:g} s on average",
        f"  heartbeats per execution        {result.heartbeats_per_execution}",
        f"  writes per hour#shard partition {result.partition_wcu_per_second:,.1f} WCU/s "
        f"({result.partition_wcu_share:.0%} of {PARTITION_WCU_PER_SECOND:,})",
        f"  writes per shard, open index    {result.open_index_wcu_per_second:,.1f} WCU/s",
        f"  executions table / its indexes  {result.table_wru_per_second:,.0f} / {result.index_wru_per_second:,.0f} "
        f"WRU/s (default quota {TABLE_ON_DEMAND_WRU_PER_SECOND:,} each)",
        f"  in flight per queue             {result.in_flight:,.0f} ({result.in_flight_share:.1%} of "
        f"{SQS_IN_FLIGHT_PER_QUEUE:,}; Little's law, {i.avg_seconds:g} s run + {EARLY_HOLD_SECONDS:g} s early hold "
        f"+ {CALL_OVERHEAD_SECONDS:g} s calls)",
        f"  worker slots                    {result.worker_slots:,.0f} = {result.lambda_batches:,.0f} Lambda batches "
        f"of {SQS_BATCH} or {result.ecs_tasks:,} ECS tasks at concurrency {i.worker_concurrency} "
        f"(~{result.worker_vcpus:g} vCPU of client work)",
        f"  smallest shard count that fits {result.smallest_shards}",
        f"  pre-loader per cycle           {result.preload_calls_per_cycle:,.0f} calls, "
        f"{result.preload_seconds_per_shard:,.1f} s per shard, {result.preload_cycle_seconds:,.1f} s per "
        f"invocation ({i.preload_shard_groups} group(s), {i.preload_threads} shards x "
        f"{i.preload_dispatch_threads} calls at once), "
        f"{result.preload_lambda_gb_seconds:,.1f} GB-s",
        f"  cost per million executions    ${result.cost_per_million['total']:.2f} "
        + "("
        + ", ".join(f"{k} ${v:.2f}" for k, v in result.cost_per_million.items() if k != "total")
        + f"; us-east-1 prices as of {PRICES_AS_OF})",
        f"  fits                            {'yes' if result.fits else 'no'}",
    ]
    lines += [f"  ! {w}" for w in result.warnings]
    return "\n".join(lines)


def cmd_capacity(args: argparse.Namespace) -> int:
    inputs = Inputs(
        rate=args.rate,
        shards=args.shards,
        lease_seconds=args.lease,
        avg_seconds=args.avg_seconds,
        profile=args.profile,
        worker_concurrency=args.worker_concurrency,
        preload_threads=args.preload_threads,
        preload_dispatch_threads=args.preload_dispatch_threads,
        preload_shard_groups=args.preload_shard_groups,
    )
    try:
        result = estimate(inputs)
    except ValueError as exc:
        print(f"duetime capacity: {exc}")
        return 2
    print(json.dumps(result.to_dict(), indent=2) if args.json else render(result))
    return 0 if result.fits else 1


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register `duetime capacity` on the CLI's subparsers."""
    capacity = sub.add_parser("capacity", help="what a peak rate needs on AWS: partitions, queues, workers, cost")
    capacity.add_argument("--rate", type=float, required=True, help="executions per second at peak")
    capacity.add_argument("--shards", type=int, default=32)
    capacity.add_argument("--lease", type=int, default=30, help="lease seconds")
    capacity.add_argument("--avg-seconds", type=float, default=2.0, help="average run time of a job")
    capacity.add_argument("--profile", choices=sorted(PROFILES), default="one-off")
    capacity.add_argument("--worker-concurrency", type=int, default=8)
    capacity.add_argument("--preload-threads", type=int, default=PRELOAD_THREADS, help="shards at once")
    capacity.add_argument(
        "--preload-dispatch-threads", type=int, default=PRELOAD_DISPATCH_THREADS, help="calls at once per shard"
    )
    capacity.add_argument("--preload-shard-groups", type=int, default=1, help="pre-loader invocations per tick")
    capacity.add_argument("--json", action="store_true")
    capacity.set_defaults(fn=cmd_capacity)
    parser: argparse.ArgumentParser = capacity
    return parser
