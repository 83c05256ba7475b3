"""The capacity model: duetime's measured AWS work per execution carried to a rate on AWS.

Pure arithmetic, no AWS calls, no printing: `estimate(Inputs)` answers an `Estimate`, whose figures are typed
records (`ClassPlan`, `HerdPlan`, `ReservedConcurrency`, ...) that `duetime capacity` (cli/capacity.py) prints
and its tests read alone. The per-execution figures are those `make bench` measures (bench/calls.py) and
tests/integration/test_call_counts.py pins; the limits and prices are AWS's published ones (domain/costs.py).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from duetime.definitions import (
    DEFAULT_API_RESERVED_CONCURRENCY,
    DEFAULT_JOB_CLASS,
    DEFAULT_WORKER_MAX_CONCURRENCY,
    JOB_CLASSES,
    LAMBDA_UNRESERVED_CONCURRENCY,
    MAX_METRIC_OWNERS,
    OPEN_INDEX_SPREAD,
    PRELOAD_DISPATCH_THREADS,
    PRELOAD_SLACK_SECONDS,
    PRELOAD_THREADS,
    RUNS_PER_MESSAGE,
    RUNS_PER_SCHEDULE,
    SQS_BATCH_SIZE,
    SQS_MAX_DELAY_SECONDS,
    Settings,
    reconcile_after_seconds,
)
from duetime.domain.costs import API_TYPES as API_TYPES
from duetime.domain.costs import AWS_CALL_SECONDS as AWS_CALL_SECONDS
from duetime.domain.costs import BATCH_JOBS_PER_TRANSACTION as BATCH_JOBS_PER_TRANSACTION
from duetime.domain.costs import BILLINGS as BILLINGS
from duetime.domain.costs import BY_JOB_INDEX_WCU as BY_JOB_INDEX_WCU

# The cost figures under the model's name too (the report and the tests read them here; the `as` forms export them).
from duetime.domain.costs import CLOUDWATCH_PRICES_AS_OF as CLOUDWATCH_PRICES_AS_OF
from duetime.domain.costs import CRON_RUN as CRON_RUN
from duetime.domain.costs import DEFAULT_UTILISATION as DEFAULT_UTILISATION
from duetime.domain.costs import EMF_BYTES_PER_COUNTED_RUN as EMF_BYTES_PER_COUNTED_RUN
from duetime.domain.costs import LATENESS_METRICS_PER_OWNER as LATENESS_METRICS_PER_OWNER
from duetime.domain.costs import ON_DEMAND as ON_DEMAND
from duetime.domain.costs import ONE_OFF as ONE_OFF
from duetime.domain.costs import ONE_OFF_BATCH as ONE_OFF_BATCH
from duetime.domain.costs import OPEN_BY_JOB_INDEX_WCU as OPEN_BY_JOB_INDEX_WCU
from duetime.domain.costs import PRICES_AS_OF as PRICES_AS_OF
from duetime.domain.costs import PROFILES as PROFILES
from duetime.domain.costs import PROVISIONED as PROVISIONED
from duetime.domain.costs import SQS_BATCH as SQS_BATCH
from duetime.domain.costs import CallProfile as CallProfile
from duetime.domain.costs import Prices as Prices
from duetime.domain.costs import lateness_units as lateness_units
from duetime.domain.interval import parse_every
from duetime.domain.job_index import BY_JOB_LEASE_SECONDS, MIN_UNINDEXED_PERIOD

# --- AWS limits (docs/measured.md, AWS documentation) --------------------------------------------------------
PARTITION_WCU_PER_SECOND = 1000  # one partition key value: 1,000 write units/s
PARTITION_RCU_PER_SECOND = 3000  # and 3,000 read units/s
TABLE_ON_DEMAND_WRU_PER_SECOND = 40_000  # default per-table (and per-GSI) on-demand quota, adjustable
SQS_IN_FLIGHT_PER_QUEUE = 120_000  # standard queue
LAMBDA_SQS_MAX_CONCURRENT_BATCHES = 1000  # one function's SQS event sources together (NOTES.md, AWS limits)
LAMBDA_ACCOUNT_CONCURRENCY = 1000  # concurrent executions per account and region, default quota (adjustable)
LAMBDA_MAX_RUN_SECONDS = JOB_CLASSES[DEFAULT_JOB_CLASS].max_timeout_seconds  # a run on Lambda: 15 min less 1
# More queues than this for one class (each with a worker function of its own) and ECS is the simpler fix.
MAX_SPILL_QUEUES = 4
# The target the plan is held to (docs/architecture.md): an execution starts within 2 s of its time at p99.
START_TARGET_SECONDS = 2.0
# The average month, as the schedule preview's forecast counts it (a 365-day year over 12): AWS's volume tiers
# count a month's requests.
MONTH_SECONDS = 365 * 86_400 / 12

# --- Prices and what one execution costs, as measured: duetime.domain.costs (the schedule preview's forecast
# counts them too) ----------------------------------------------------------------------------------------


# --- What the pre-loader itself costs per cycle, as measured (bench/preloader.py) ------------------------


@dataclass(frozen=True)
class PreloadProfile:
    """The pre-loader's AWS calls in one cycle (python -m bench.preloader, 10,000 due on a shard: 1,230
    calls for one-offs, 11,230 for cron runs while each run was a message of its own; packed, the sends are a
    tenth: 330 and 10,330). Per shard: the lease and the cursor write (2 UpdateItem), the due hour's Query, the
    sweep's Query (service/dispatch.py, sweep) and the reconciler's page Query. Per dispatched execution: its
    job in a BatchGetItem of 100, its share of a SendMessageBatch of 10 messages of up to RUNS_PER_MESSAGE runs
    (what the pre-loader sends is due at the same seconds: the messages are full at load, one-offs due later
    as much as cron runs), and for a cron run the next slot's PutItem; the due and sweep Queries read ~1 MB
    (~2,500 rows) a page.
    The puts and sends of a shard run `dispatch_threads` at once; the rest of a shard's calls in turn."""

    name: str
    calls_per_shard: float
    serial_calls_per_execution: float  # job reads and the due Query's further pages (~1 MB, ~5,000 rows)
    parallel_calls_per_execution: float  # SendMessageBatch shares and next-slot PutItems


# A pre-loaded run's share of a SendMessageBatch: 10 messages of RUNS_PER_MESSAGE runs.
PRELOAD_SENDS_PER_RUN = 1 / (SQS_BATCH_SIZE * RUNS_PER_MESSAGE)
PRELOAD_PROFILES = {
    "one-off": PreloadProfile("one-off", 5, 1 / 100 + 2 / 5000, PRELOAD_SENDS_PER_RUN),
    "cron": PreloadProfile("cron", 5, 1 / 100 + 2 / 5000, PRELOAD_SENDS_PER_RUN + 1),
    "one-off-batch": PreloadProfile("one-off-batch", 5, 1 / 100 + 2 / 5000, PRELOAD_SENDS_PER_RUN),
}
PRELOADER_MEMORY_GB = 0.5  # infra/functions.py: the pre-loader function's 512 MB

# How `--mix` names the profiles (oneoff=0.8,cron=0.2).
MIX_NAMES = {"oneoff": "one-off", "one-off": "one-off", "cron": "cron"}


def parse_mix(text: str) -> tuple[tuple[str, float], ...]:
    """`oneoff=0.8,cron=0.2` as ((profile, share), ...) with the shares scaled to sum to 1."""
    parts: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if name.strip() not in MIX_NAMES:
            raise ValueError(f"mix: unknown kind {name.strip()!r} (oneoff or cron)")
        try:
            share = float(value)
        except ValueError as exc:
            raise ValueError(f"mix: {item!r} is not kind=share") from exc
        if share < 0:
            raise ValueError(f"mix: {item!r} has a negative share")
        parts[MIX_NAMES[name.strip()]] = parts.get(MIX_NAMES[name.strip()], 0.0) + share
    total = sum(parts.values())
    if total <= 0:
        raise ValueError("mix: the shares must add up to more than 0")
    return tuple((name, share / total) for name, share in sorted(parts.items()) if share > 0)


def blend_calls(mix: tuple[tuple[str, float], ...]) -> CallProfile:
    """The per-execution work of a mix: each measured profile weighted by its share. What a run shares with
    the runs of its message is weighted as messages a run, so the runs a message carries are the shares'
    harmonic mean (80% sent alone and 20% ten to a message: 0.82 messages a run)."""
    if len(mix) == 1:
        return PROFILES[mix[0][0]]
    numbers = {
        name: sum(getattr(PROFILES[kind], name) * share for kind, share in mix)
        for name in CallProfile.__dataclass_fields__
        if name not in ("name", "runs_per_message")
    }
    numbers["runs_per_message"] = 1 / sum(share / PROFILES[kind].runs_per_message for kind, share in mix)
    label = " + ".join(f"{share:.0%} {kind}" for kind, share in mix)
    return CallProfile(name=label, **numbers)


def blend_preload(mix: tuple[tuple[str, float], ...]) -> PreloadProfile:
    """The pre-loader's calls for a mix: per shard as measured, per execution weighted by share."""
    if len(mix) == 1:
        return PRELOAD_PROFILES[mix[0][0]]
    return PreloadProfile(
        name=" + ".join(f"{share:.0%} {kind}" for kind, share in mix),
        calls_per_shard=max(PRELOAD_PROFILES[kind].calls_per_shard for kind, _ in mix),
        serial_calls_per_execution=sum(PRELOAD_PROFILES[k].serial_calls_per_execution * w for k, w in mix),
        parallel_calls_per_execution=sum(PRELOAD_PROFILES[k].parallel_calls_per_execution * w for k, w in mix),
    )


@dataclass(frozen=True)
class ClassLoad:
    """A job class's part of the load: its share of the rate, its average run and where it runs."""

    name: str
    share: float
    avg_seconds: float
    worker_kind: str  # "lambda" (the SQS event source of functions/worker) or "ecs" (`duetime worker`)


def parse_class(text: str) -> ClassLoad:
    """`NAME:SHARE:AVG_SECONDS[:lambda|ecs]`, e.g. `long:0.1:300:ecs`; the kind defaults to the class's own
    (definitions.JOB_CLASSES), else lambda."""
    fields = text.split(":")
    if len(fields) not in (3, 4):
        raise ValueError(f"job class {text!r}: give NAME:SHARE:AVG_SECONDS[:lambda|ecs]")
    try:
        share, avg = float(fields[1]), float(fields[2])
    except ValueError as exc:
        raise ValueError(f"job class {text!r}: SHARE and AVG_SECONDS are numbers") from exc
    known = JOB_CLASSES.get(fields[0])
    kind = fields[3] if len(fields) == 4 else (known.worker_kind if known else "lambda")
    if kind not in ("lambda", "ecs") or share < 0 or avg < 0:
        raise ValueError(f"job class {text!r}: the kind is lambda or ecs, SHARE and AVG_SECONDS >= 0")
    return ClassLoad(fields[0], share, avg, kind)


# A message is sent a second short of due and SQS delays are whole seconds, so a worker holds it 1-2 s
# before it may claim it (worker/runtime.py waits it out in the slot): 1.5 s on average.
EARLY_HOLD_SECONDS = 1.5
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
    # Kinds of execution and their shares (parse_mix); empty: `profile` alone.
    mix: tuple[tuple[str, float], ...] = ()
    # Keys the sparse `open` index is spread over; 0: one per shard (the index partitioned by shard alone).
    open_index_keys: int = 0
    # The job classes the rate is split over; empty: all of it in the default class at `avg_seconds`.
    classes: tuple[ClassLoad, ...] = ()
    herd: int = 0  # executions on one cron instant (e.g. 1,000,000 jobs at `0 0 * * *`), beside `rate`
    jitter_seconds: int = 0  # the herd's jobs' jitterSeconds (domain/spread.py): due over this many seconds
    preload_window_seconds: int = Settings().preload_window_seconds  # sent this far ahead at most
    lambda_account_concurrency: int = LAMBDA_ACCOUNT_CONCURRENCY
    # What the stack reserves (CDK context apiReservedConcurrency, workerMaxConcurrency).
    api_reserved_concurrency: int = DEFAULT_API_RESERVED_CONCURRENCY
    worker_max_concurrency: int = DEFAULT_WORKER_MAX_CONCURRENCY
    # Due queues per class as deployed (CDK context classQueues; JobClassDef.queues), e.g. (("default", 4),).
    class_queues: tuple[tuple[str, int], ...] = ()
    billing: str = ON_DEMAND  # the tables' (CDK context billing): on demand, or provisioned with auto-scaling
    utilisation: float = DEFAULT_UTILISATION  # provisioned: the auto-scaling target
    api: str = "rest"  # the API Gateway type the one-off submissions go through (prices differ)
    late_budgets: float = 0.0  # the share of runs whose jobs have a lateAfterSeconds (a counter write each)
    # Index write units a run makes beyond its profile's (job_index_units: the claim of a job repeating faster
    # than once a minute enters its run in `openByJob`).
    extra_index_wcu: float = 0.0
    # Owners the stack names in its lateness metrics (CDK context metricOwners): each one's own series and
    # alarm, beside the one `other` series of every owner not named.
    metric_owners: int = 0


@dataclass(frozen=True)
class ReservedConcurrency:
    """What the stack reserves by function (infra/functions.py), its total and the account limit that needs."""

    api: int
    workers: int  # each Lambda worker function's, one per due queue of each Lambda class
    preloader: int  # per shard group
    dlq_notifier: int
    total: int
    account_needed: int  # the total and Lambda's minimum unreserved


@dataclass(frozen=True)
class PreloadCycle:
    """One pre-load cycle: its calls and how long it takes at AWS_CALL_SECONDS a call."""

    calls: float  # every shard's
    shard_seconds: float
    cycle_seconds: float  # the invocation: shards `preload_threads` at a time
    gb_seconds: float
    due_per_shard: float
    serial_calls_per_shard: float
    parallel_calls_per_shard: float


@dataclass(frozen=True)
class PreloadShardDetail:
    """One shard's share of a pre-load cycle: what it sends, reads and writes, and at what rate it sends."""

    due: float
    send_message_batches: float  # 10 messages of up to RUNS_PER_MESSAGE runs each
    job_reads: float  # BatchGetItem of 100
    follower_writes: float  # a cron run's next slot, PutItem
    control_writes: int  # the shard's lease and cursor
    queries: int  # the due hour's, the sweep's and the reconciler's
    sends_per_second: float
    follower_wcu_per_second: float


@dataclass(frozen=True)
class ClassPlan:
    """Where a job class's runs execute, and the fix when Lambda's SQS event source cannot carry them."""

    name: str
    rate: float
    avg_seconds: float
    held_seconds: float
    slots: float  # runs in progress at once (Little's law)
    lambda_batches: float
    queues: int
    ecs_tasks: int
    runs_on: str  # "lambda" or "ecs"
    fix: str
    fits: bool
    warnings: list[str]


@dataclass(frozen=True)
class HerdPlan:
    """`runs` runs of one cron instant: the pre-load that sends them, their writes and the drain."""

    runs: int
    per_shard: float
    preload_calls: float
    preload_send_seconds: float
    preload_seconds_ahead: int
    send_message_batches_per_second: float
    follower_wcu_per_partition_per_second: float
    spread_seconds: int
    due_per_second: float
    drain_per_second: float
    partition_wcu_per_second: float
    unthrottled_partition_wcu_per_second: float
    in_flight: float  # SQS messages: the runs in flight over the runs a message carries
    in_flight_runs: float
    backlog: float  # runs
    drain_seconds: float
    last_start_late_seconds: float
    jitter_needed_seconds: int
    fits: bool
    warnings: list[str]


@dataclass(frozen=True)
class ScheduleCost:
    """What `jobs` jobs repeating `every` come to a month (schedule_cost)."""

    every: str
    jobs: int
    runs_per_month: int
    runs_per_month_per_job: int
    scheduler_cost_per_month: float  # all but the runs' Lambda time
    total_cost_per_month: float
    total_cost_per_month_per_job: float


@dataclass(frozen=True)
class OwnerMetrics:
    """The per-owner lateness metrics on CloudWatch (definitions.METRIC_RUNS_LATE): a fixed count, since the
    `Owner` values are the named owners and `other`, and what they cost beside the runs' own cost."""

    named_owners: int
    metrics: int  # RunsOnTime and RunsLate for each named owner and for `other`
    alarms: int  # one per named owner (infra/monitoring.py)
    cost_per_month: float  # the metrics and alarms, whatever the rate
    log_bytes_per_counted_run: int  # each budgeted run's EMF document
    logs_cost_per_million: float  # per million executions, at the inputs' share of budgeted runs
    prices_as_of: str


@dataclass(kw_only=True)
class Estimate:
    """The figures for one `Inputs`; `to_dict` is what `duetime capacity --json` prints."""

    inputs: Inputs
    heartbeats_per_execution: int
    partition_wcu_per_second: float
    partition_wcu_share: float  # of 1,000
    partition_rcu_per_second: float
    open_index_wcu_per_second: float  # per shard, on the `open` index
    table_wru_per_second: float
    index_wru_per_second: float
    in_flight: float  # SQS messages per queue, Little's law: the runs in flight over the runs a message carries
    in_flight_share: float  # of 120,000
    worker_slots: float  # executions held by workers at once
    lambda_batches: float  # concurrent SQS event source batches of 10 messages (the runs of a batch run at once)
    ecs_tasks: int
    worker_vcpus: float
    smallest_shards: int
    preload_calls_per_cycle: float  # every shard's calls in one pre-load cycle
    preload_seconds_per_shard: float  # one shard's cycle at AWS_CALL_SECONDS a call
    preload_cycle_seconds: float  # the invocation: shards `preload_threads` at a time
    preload_lambda_gb_seconds: float  # per cycle
    fits: bool
    cost_per_million: dict[str, float] = field(default_factory=dict)
    # The scheduler's own work per million executions: every cost but the jobs' own run time (lambdaDuration).
    scheduler_cost_per_million: float = 0.0
    warnings: list[str] = field(default_factory=list)
    profile_name: str = ""
    open_index_keys: int = 0  # keys the `open` index's writes spread over
    open_index_wcu_per_key: float = 0.0
    preload_per_shard: PreloadShardDetail  # one shard's cycle, call by call
    classes: list[ClassPlan] = field(default_factory=list)  # per job class: workers and the fix
    herd: HerdPlan | None = None  # the herd instant, when `herd` > 0
    # The stack's reserved concurrency by function, its total and the account limit that total needs.
    reserved_concurrency: ReservedConcurrency
    # With --every: what those repeating jobs come to a month (schedule_cost).
    schedule: ScheduleCost | None = None
    # With lateness budgets or owners named in their metrics: those CloudWatch metrics (owner_metrics).
    owner_metrics: OwnerMetrics | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def heartbeats(avg_seconds: float, lease_seconds: int) -> int:
    """Heartbeats a run of `avg_seconds` makes: one every lease/3 while it runs."""
    return max(0, math.ceil(avg_seconds / (lease_seconds / 3)) - 1)


def execution_partition_wcu(profile: CallProfile, beats: int) -> float:
    """Write units one execution puts on its hour#shard partition (each heartbeat is one more write)."""
    return profile.executions_wcu + beats


def smallest_shards(rate: float, profile: CallProfile, beats: int, open_index_by_shard: bool = True) -> int:
    """The fewest shards whose hour#shard partitions (and `open` index partitions, while that index is
    partitioned by shard) each stay within 1,000 write units/s at `rate`."""
    hottest = execution_partition_wcu(profile, beats)
    if open_index_by_shard:  # the deployed layout: each shard's index entries split OPEN_INDEX_SPREAD ways
        hottest = max(hottest, profile.open_index_wcu / OPEN_INDEX_SPREAD)
    return max(1, math.ceil(rate * hottest / PARTITION_WCU_PER_SECOND))


def call_profile(inputs: Inputs) -> CallProfile:
    """The measured per-execution work of the inputs' mix (or profile), with the `openByJob` entries of runs that
    heartbeat or repeat within a minute (open_by_job_share, job_index_units), and the `open` index's work for runs
    still running when the sweep passes them (swept_open_share)."""
    profile = blend_calls(inputs.mix) if inputs.mix else PROFILES[inputs.profile]
    by_job = max(inputs.extra_index_wcu, open_by_job_share(inputs) * OPEN_BY_JOB_INDEX_WCU)
    if by_job:
        profile = replace(profile, index_wcu=profile.index_wcu + by_job)
    share = swept_open_share(inputs)
    if share:
        profile = replace(
            profile,
            executions_writes=profile.executions_writes + share * SWEPT_OPEN_WRITES,
            executions_wcu=profile.executions_wcu + share * SWEPT_OPEN_WRITES,
            index_wcu=profile.index_wcu + share * SWEPT_OPEN_INDEX_WCU,
            open_index_wcu=profile.open_index_wcu + share * SWEPT_OPEN_INDEX_WCU,
        )
    return profile


# A run still open when the sweep passes its due time: the sweep's UpdateItem of its row (1 unit on its
# hour#shard), its `open` index entry then and that entry's removal at its end (2 units).
SWEPT_OPEN_WRITES = 1
SWEPT_OPEN_INDEX_WCU = 2


def open_by_job_share(inputs: Inputs) -> float:
    """The share of runs that enter `openByJob` (2 units: the entry and its removal at the end, domain/job_index.py)
    by their claim or their first heartbeat: every run when the lease is longer than BY_JOB_LEASE_SECONDS (the
    claim enters it), else those of a class whose average run is longer than a third of the lease (they
    heartbeat)."""
    if inputs.lease_seconds > BY_JOB_LEASE_SECONDS:
        return 1.0
    return sum(c.share for c in job_classes(inputs) if heartbeats(c.avg_seconds, inputs.lease_seconds) > 0)


def swept_open_share(inputs: Inputs) -> float:
    """The share of runs still running when the pre-loader's sweep passes their due time, `reconcile_after`
    later (definitions.reconcile_after_seconds): those of a class whose average run is longer than that. The
    measured profiles are of 2-s runs, which have all ended by then."""
    after = reconcile_after_seconds(inputs.preload_interval_seconds, inputs.lease_seconds)
    return sum(c.share for c in job_classes(inputs) if c.avg_seconds > after)


def preload_profile(inputs: Inputs) -> PreloadProfile:
    return blend_preload(inputs.mix) if inputs.mix else PRELOAD_PROFILES[inputs.profile]


def held_seconds(avg_seconds: float) -> float:
    """How long a worker holds one run (and a message, whose runs it holds at once): the run, the early hold
    before it is due and the calls."""
    return avg_seconds + EARLY_HOLD_SECONDS + CALL_OVERHEAD_SECONDS


def api_requests_per_month(inputs: Inputs) -> float:
    """The API Gateway requests `inputs` make in a month: what AWS's volume tiers count."""
    return inputs.rate * call_profile(inputs).api_requests * MONTH_SECONDS


def estimate(inputs: Inputs, prices: Prices | None = None) -> Estimate:
    """Partition load, queue depth, workers and cost for `inputs`; `fits` is False if a limit is exceeded."""
    if inputs.rate <= 0 or inputs.shards < 1 or inputs.lease_seconds < 3 or inputs.avg_seconds < 0:
        raise ValueError("rate must be > 0, shards >= 1, lease >= 3 s and avg-seconds >= 0")
    if inputs.herd < 0 or inputs.jitter_seconds < 0 or inputs.open_index_keys < 0:
        raise ValueError("herd, jitter-seconds and open-index-keys must be >= 0")
    if inputs.classes and sum(c.share for c in inputs.classes) <= 0:
        raise ValueError("the job classes' shares must add up to more than 0")
    if not 0 <= inputs.late_budgets <= 1:
        raise ValueError("late-budgets is a share of the runs, 0..1")
    if not 0 <= inputs.metric_owners <= MAX_METRIC_OWNERS:
        raise ValueError(f"metric-owners is how many owners the stack names, 0..{MAX_METRIC_OWNERS}")
    if inputs.billing not in BILLINGS or not 0.2 <= inputs.utilisation <= 0.9 or inputs.api not in API_TYPES:
        raise ValueError(f"billing is one of {', '.join(BILLINGS)}, utilisation 0.2..0.9, api rest or http")
    prices = prices or Prices()
    write_price, read_price = prices.per_million_units(inputs.billing, inputs.utilisation)
    profile = call_profile(inputs)
    # At the month's volume of requests this rate makes (the tiers fall from 333 million a month on REST).
    api_price = prices.api_gateway_per_million(inputs.api, api_requests_per_month(inputs))
    beats = heartbeats(inputs.avg_seconds, inputs.lease_seconds)
    per_partition = inputs.rate / inputs.shards
    partition_wcu = per_partition * execution_partition_wcu(profile, beats)
    partition_rcu = per_partition * profile.partition_read_units
    held = held_seconds(inputs.avg_seconds)
    slots = inputs.rate * held  # Little's law: runs held by workers, from receive to delete
    in_flight = slots / profile.runs_per_message  # a message is in flight while its runs are held
    lambda_batches = slots / profile.runs_per_batch
    lateness_wcu, lateness_sqs = lateness_units(inputs.late_budgets)
    write_units = profile.executions_wcu + profile.index_wcu + profile.jobs_wcu + beats + lateness_wcu
    # The claim's visibility change is the message's, shared by its runs; each heartbeat also extends the
    # message's visibility (counted as the run's own: a carrier's runs beat together only while all still run).
    sqs = profile.run_sqs_requests + beats + lateness_sqs
    cost = {
        "dynamodbWrites": write_units * write_price,
        "dynamodbReads": profile.read_units * read_price,
        "sqs": sqs * prices.sqs_per_million,
        # One invocation a batch of 10 messages, whatever runs they carry.
        "lambdaRequests": prices.lambda_requests_per_million / profile.runs_per_batch,
        # The runs of a batch run at once: the invocation lasts about as long as one run is held.
        "lambdaDuration": 1e6 * inputs.lambda_memory_gb * held / profile.runs_per_batch * prices.lambda_gb_second_arm64,
        "apiGateway": profile.api_requests * api_price,
        # The API function behind the gateway: an invocation a request, its calls' waits and its own CPU.
        "lambdaApi": profile.api_function_per_million(prices),
    }
    preload = preload_estimate(inputs)
    cycles_per_million = 1e6 / (inputs.rate * inputs.preload_interval_seconds)
    cost["lambdaPreloader"] = cycles_per_million * (
        preload.gb_seconds * prices.lambda_gb_second_arm64 + prices.lambda_requests_per_million / 1e6
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
        smallest_shards=smallest_shards(inputs.rate, profile, beats, not inputs.open_index_keys),
        preload_calls_per_cycle=round(preload.calls, 0),
        preload_seconds_per_shard=round(preload.shard_seconds, 1),
        preload_cycle_seconds=round(preload.cycle_seconds, 1),
        preload_lambda_gb_seconds=round(preload.gb_seconds, 1),
        fits=True,
        cost_per_million=cost,
        scheduler_cost_per_million=round(cost["total"] - cost["lambdaDuration"], 4),
        preload_per_shard=preload_shard_detail(inputs, preload),
        reserved_concurrency=reserved_concurrency(inputs),
        owner_metrics=owner_metrics(inputs, prices) if inputs.late_budgets or inputs.metric_owners else None,
    )
    if partition_wcu > PARTITION_WCU_PER_SECOND:
        result.warnings.append(
            f"{partition_wcu:,.0f} write units/s per hour#shard partition exceeds {PARTITION_WCU_PER_SECOND:,}: "
            f"use at least {result.smallest_shards} shards"
        )
    per_index_key = per_partition * profile.open_index_wcu / OPEN_INDEX_SPREAD
    if not inputs.open_index_keys and per_index_key > PARTITION_WCU_PER_SECOND:
        result.warnings.append(
            f"{per_index_key:,.0f} write units/s per open index key ({OPEN_INDEX_SPREAD} a shard) exceeds "
            f"{PARTITION_WCU_PER_SECOND:,}: add shards or spread the index over more keys (--open-index-keys)"
        )
    if partition_rcu > PARTITION_RCU_PER_SECOND:
        result.warnings.append(f"{partition_rcu:,.0f} read units/s per partition exceeds {PARTITION_RCU_PER_SECOND:,}")
    if in_flight > SQS_IN_FLIGHT_PER_QUEUE:
        result.warnings.append(
            f"{in_flight:,.0f} messages in flight exceeds SQS's {SQS_IN_FLIGHT_PER_QUEUE:,} per queue: "
            "split the job class over more queues by shard (`-c classQueues=CLASS:N`)"
        )
    result.fits = not result.warnings
    # Advisory, like the quotas below: more shard groups or calls at once fix it without a redesign.
    if preload.cycle_seconds > inputs.preload_interval_seconds:
        result.warnings.append(
            f"a pre-load cycle takes ~{preload.cycle_seconds:,.0f} s, longer than its "
            f"{inputs.preload_interval_seconds} s interval (its Lambda timeout): fan it out over shard groups "
            f"(CDK context preloadShardGroups) or raise DUETIME_PRELOAD_DISPATCH_THREADS (calls at once per shard)"
            + (", or add shards" if preload.shard_seconds > inputs.preload_interval_seconds / 2 else "")
        )
    # Each index has its own quota: `open`, or `openByJob` when runs enter it (the rest of the index units; a
    # plain run takes no byJob entry).
    by_job_index = profile.index_wcu - profile.open_index_wcu
    busiest_index = round(inputs.rate * max(profile.open_index_wcu, by_job_index), 1)
    for name, value in (("table", result.table_wru_per_second), ("busiest index", busiest_index)):
        if value > TABLE_ON_DEMAND_WRU_PER_SECOND:
            result.warnings.append(
                f"the executions {name} needs {value:,.0f} write units/s, above the default on-demand quota of "
                f"{TABLE_ON_DEMAND_WRU_PER_SECOND:,}/s: raise the quota first"
            )
    result.profile_name = profile.name
    open_index(inputs, profile, result)
    result.classes = [class_plan(inputs, c, profile.runs_per_message) for c in job_classes(inputs)]
    for plan in result.classes:  # advisory, like the pre-loader's: a class moves to ECS without a redesign
        result.warnings += plan.warnings
    if inputs.herd:
        result.herd = herd_plan(inputs, profile)
        result.warnings += result.herd.warnings
        if not result.herd.fits:
            result.fits = False
    reserved = result.reserved_concurrency
    if inputs.lambda_account_concurrency < reserved.account_needed:
        result.warnings.append(
            f"the stack reserves {reserved.total:,} concurrent executions and Lambda keeps "
            f"{LAMBDA_UNRESERVED_CONCURRENCY} unreserved: `cdk deploy` fails in an account whose concurrency limit "
            f"is below {reserved.account_needed:,} (it is {inputs.lambda_account_concurrency:,}): raise the "
            "quota, or lower -c apiReservedConcurrency (0: none) and -c workerMaxConcurrency"
        )
        result.fits = False
    return result


def owner_metrics(inputs: Inputs, prices: Prices) -> OwnerMetrics:
    """The lateness metrics' CloudWatch bill: 2 metrics for each `Owner` value (the named owners and `other`)
    and an alarm per named owner, a month; and the EMF log line each budgeted run writes, per million runs.
    A fixed count of metrics whatever the rate or the number of owners: that is what the bound buys."""
    metrics = LATENESS_METRICS_PER_OWNER * (inputs.metric_owners + 1)
    monthly = metrics * prices.cloudwatch_metric_month + inputs.metric_owners * prices.cloudwatch_alarm_month
    log_gb = 1e6 * inputs.late_budgets * EMF_BYTES_PER_COUNTED_RUN / 1e9
    return OwnerMetrics(
        named_owners=inputs.metric_owners,
        metrics=metrics,
        alarms=inputs.metric_owners,
        cost_per_month=round(monthly, 2),
        log_bytes_per_counted_run=EMF_BYTES_PER_COUNTED_RUN,
        logs_cost_per_million=round(log_gb * prices.cloudwatch_logs_per_gb, 4),
        prices_as_of=prices.cloudwatch_as_of,
    )


def reserved_concurrency(inputs: Inputs) -> ReservedConcurrency:
    """What the stack reserves (infra/functions.py): the API's, each Lambda worker function's (one per due queue
    of each Lambda class), the pre-loader's per shard group and the DLQ notifier's; and the account concurrency
    limit that leaves Lambda's minimum unreserved."""
    queues = dict(inputs.class_queues)
    worker_functions = sum(
        queues.get(name, job_class.queues)
        for name, job_class in JOB_CLASSES.items()
        if job_class.worker_kind == "lambda"
    )
    api = inputs.api_reserved_concurrency
    workers = inputs.worker_max_concurrency * worker_functions
    preloader = RUNS_PER_SCHEDULE * inputs.preload_shard_groups
    total = api + workers + preloader + RUNS_PER_SCHEDULE
    return ReservedConcurrency(
        api=api,
        workers=workers,
        preloader=preloader,
        dlq_notifier=RUNS_PER_SCHEDULE,
        total=total,
        account_needed=total + LAMBDA_UNRESERVED_CONCURRENCY,
    )


def preload_shard_detail(inputs: Inputs, cycle: PreloadCycle) -> PreloadShardDetail:
    """One shard's share of a pre-load cycle: what it sends, reads and writes, and at what rate it sends."""
    due = cycle.due_per_shard
    sends = due * PRELOAD_SENDS_PER_RUN
    cron_share = dict(inputs.mix).get("cron", 0.0) if inputs.mix else float(inputs.profile == "cron")
    return PreloadShardDetail(
        due=round(due, 1),
        send_message_batches=round(sends, 1),
        job_reads=round(due / 100, 1),
        follower_writes=round(due * cron_share, 1),
        control_writes=2,
        queries=3,
        sends_per_second=round(sends / cycle.shard_seconds, 1) if cycle.shard_seconds else 0.0,
        follower_wcu_per_second=round(due * cron_share / cycle.shard_seconds, 1) if cycle.shard_seconds else 0.0,
    )


def open_index(inputs: Inputs, profile: CallProfile, result: Estimate) -> None:
    """The busiest key of the sparse `open` index: every open execution adds and removes an entry there."""
    keys = inputs.open_index_keys or inputs.shards * OPEN_INDEX_SPREAD
    per_key = inputs.rate * profile.open_index_wcu / keys
    result.open_index_keys = keys
    result.open_index_wcu_per_key = round(per_key, 1)
    if per_key > PARTITION_WCU_PER_SECOND and inputs.open_index_keys:  # else the per-shard check said it
        needed = math.ceil(inputs.rate * profile.open_index_wcu / PARTITION_WCU_PER_SECOND)
        result.warnings.append(
            f"{per_key:,.0f} write units/s per `open` index key exceeds {PARTITION_WCU_PER_SECOND:,}: spread the "
            f"index over at least {needed} keys ({profile.open_index_wcu:g} units an execution)"
        )
        result.fits = False


def job_classes(inputs: Inputs) -> list[ClassLoad]:
    """The classes the rate is split over, shares scaled to 1 (default: one lambda class of `avg_seconds`)."""
    if not inputs.classes:
        return [ClassLoad(DEFAULT_JOB_CLASS, 1.0, inputs.avg_seconds, JOB_CLASSES[DEFAULT_JOB_CLASS].worker_kind)]
    total = sum(c.share for c in inputs.classes)
    return [ClassLoad(c.name, c.share / total, c.avg_seconds, c.worker_kind) for c in inputs.classes]


def class_queues_setting(name: str, queues: int) -> str:
    """The deploy setting that spreads class `name` over `queues` due queues by shard."""
    return f"`-c classQueues={name}:{queues}`"


def class_plan(inputs: Inputs, job_class: ClassLoad, runs_per_message: float | None = None) -> ClassPlan:
    """Where a class's runs can execute and the fix when Lambda's SQS event source cannot carry them:
    Little's law gives the runs in progress; the event source hands them over in batches of up to 10
    messages of `runs_per_message` runs (the inputs' profile's by default), run at once, and stops at 1,000
    concurrent batches per function; ECS has no such ceiling."""
    per_message = runs_per_message if runs_per_message is not None else call_profile(inputs).runs_per_message
    if job_class.worker_kind == "ecs":  # an ECS class's runs travel alone (JobClassDef.runs_per_message)
        per_message = 1
    rate = inputs.rate * job_class.share
    held = held_seconds(job_class.avg_seconds)
    slots = rate * held
    batches = slots / (SQS_BATCH * per_message)
    queues = max(1, math.ceil(batches / LAMBDA_SQS_MAX_CONCURRENT_BATCHES))
    # SQS's in-flight cap is per queue whichever worker receives: past it the class needs more queues anyway.
    in_flight_queues = max(1, math.ceil(slots / per_message / SQS_IN_FLIGHT_PER_QUEUE))
    configured = dict(inputs.class_queues).get(job_class.name, 1)
    tasks = math.ceil(slots / inputs.worker_concurrency)
    warnings: list[str] = []
    fits = True
    if job_class.worker_kind == "ecs":
        fix = f"ECS: {tasks:,} tasks at concurrency {inputs.worker_concurrency}"
        kind = "ecs"
    elif job_class.avg_seconds > LAMBDA_MAX_RUN_SECONDS:
        fix = f"ECS: runs of {job_class.avg_seconds:g} s exceed Lambda's {LAMBDA_MAX_RUN_SECONDS} s; {tasks:,} tasks"
        kind = "ecs"
        warnings.append(f"class {job_class.name}: {fix}")
        fits = False
    elif queues <= configured:
        cap = min(LAMBDA_SQS_MAX_CONCURRENT_BATCHES, max(2, math.ceil(batches / configured * 1.25)))
        fix = f"Lambda: set the event source's maximum concurrency to {cap:,} (room for 25% more)"
        if configured > 1:  # each queue's function takes its share of the batches
            fix = (
                f"Lambda over {configured} queues by shard ({class_queues_setting(job_class.name, configured)}): "
                f"{batches / configured:,.0f} batches a queue; set each event source's maximum concurrency to "
                f"{cap:,} (`-c workerMaxConcurrency={cap}`)"
            )
        kind = "lambda"
    elif queues <= MAX_SPILL_QUEUES:
        fix = (
            f"Lambda over {queues} queues by shard ({class_queues_setting(job_class.name, queues)}), each with a "
            f"worker function of its own (the {LAMBDA_SQS_MAX_CONCURRENT_BATCHES:,} batches are per function)"
        )
        kind = "lambda"
        warnings.append(
            f"class {job_class.name}: {batches:,.0f} concurrent Lambda batches exceeds the SQS event source's "
            f"{LAMBDA_SQS_MAX_CONCURRENT_BATCHES:,}: {fix}, or ECS ({tasks:,} tasks)"
        )
        fits = False
    else:
        fix = (
            f"ECS: {tasks:,} tasks at concurrency {inputs.worker_concurrency} ({queues} Lambda queues would be needed)"
        )
        kind = "ecs"
        warnings.append(
            f"class {job_class.name}: {batches:,.0f} concurrent Lambda batches exceeds the SQS event source's "
            f"{LAMBDA_SQS_MAX_CONCURRENT_BATCHES:,} {queues} times over: run it on {fix}"
        )
        fits = False
    if in_flight_queues > configured:
        setting = class_queues_setting(job_class.name, in_flight_queues)
        cap = SQS_IN_FLIGHT_PER_QUEUE
        fix += f"; split over {in_flight_queues} queues by shard ({setting}) for SQS's {cap:,} in flight"
    if kind == "lambda" and batches > inputs.lambda_account_concurrency:
        warnings.append(
            f"class {job_class.name}: {batches:,.0f} concurrent worker invocations exceed the account's Lambda "
            f"concurrency of {inputs.lambda_account_concurrency:,}: raise the quota (--lambda-account-concurrency)"
        )
        fits = False
    return ClassPlan(
        name=job_class.name,
        rate=round(rate, 1),
        avg_seconds=job_class.avg_seconds,
        held_seconds=round(held, 2),
        slots=round(slots, 1),
        lambda_batches=round(batches, 1),
        queues=max(queues if kind == "lambda" else 1, in_flight_queues, configured),
        ecs_tasks=tasks,
        runs_on=kind,
        fix=fix,
        fits=fits,
        warnings=warnings,
    )


def herd_plan(inputs: Inputs, profile: CallProfile) -> HerdPlan:
    """`herd` runs of one cron instant: the pre-load cycle that sends them, their writes and the drain.

    Every one of them is in the instant's hour, so in that hour's `hour#shard` partitions. The pre-loader
    sends them (and writes each cron job's next slot) in the cycles before the instant: on time if that
    takes less than the window less one interval and the slack. At the instant they are due over
    `jitter_seconds` (the spread feature), and the fleet sized for `rate` drains them at that rate, no
    faster than the partitions take their writes: the last starts `drain - spread` late."""
    warnings: list[str] = []
    fits = True
    herd, shards = inputs.herd, inputs.shards
    per_shard = herd / shards
    cycle = preload_cycle(replace(inputs, mix=(("cron", 1.0),)), per_shard)
    send_seconds = cycle.cycle_seconds
    ahead = inputs.preload_window_seconds - inputs.preload_interval_seconds - PRELOAD_SLACK_SECONDS
    follower_wcu = per_shard / cycle.shard_seconds if cycle.shard_seconds else 0.0
    run_wcu = CRON_RUN.executions_wcu - 1  # claim and finish; the create was the follower write
    spread_seconds = max(1, inputs.jitter_seconds)
    due_rate = herd / spread_seconds
    partition_rate = shards * PARTITION_WCU_PER_SECOND / run_wcu
    fleet_rate = inputs.rate  # the workers are sized for the steady peak
    drain_rate = min(due_rate, fleet_rate, partition_rate)
    drain_seconds = max(spread_seconds, herd / drain_rate)
    late_seconds = max(0.0, drain_seconds - spread_seconds)
    in_flight_runs = min(herd, drain_rate * held_seconds(inputs.avg_seconds))
    in_flight = in_flight_runs / CRON_RUN.runs_per_message  # the herd's runs travel packed, as cron runs do
    partition_wcu = drain_rate / shards * run_wcu
    needed_jitter = math.ceil(herd / min(fleet_rate, partition_rate))
    if send_seconds > ahead:
        warnings.append(
            f"herd: sending {herd:,} runs takes ~{send_seconds:,.0f} s of pre-loader time, more than the "
            f"{ahead} s the {inputs.preload_window_seconds} s window leaves: raise preloadWindowSeconds (up to "
            f"{SQS_MAX_DELAY_SECONDS}), preloadShardGroups or DUETIME_PRELOAD_DISPATCH_THREADS"
        )
        fits = False
    if follower_wcu > PARTITION_WCU_PER_SECOND:
        warnings.append(
            f"herd: {follower_wcu:,.0f} next-slot writes/s per partition while sending exceeds "
            f"{PARTITION_WCU_PER_SECOND:,}: add shards or lower DUETIME_PRELOAD_DISPATCH_THREADS"
        )
        fits = False
    if late_seconds > START_TARGET_SECONDS:
        limit = "the partitions" if partition_rate < fleet_rate else "the workers"
        warnings.append(
            f"herd: {herd:,} runs over {spread_seconds} s drain in ~{drain_seconds:,.0f} s ({limit} take "
            f"{drain_rate:,.0f}/s): the last starts ~{late_seconds:,.0f} s late; give the jobs jitterSeconds >= "
            f"{needed_jitter:,}"
            + (" (above the 3,600 cap: spread the herd over several instants)" if needed_jitter > 3600 else "")
        )
        fits = False
    if in_flight > SQS_IN_FLIGHT_PER_QUEUE:
        warnings.append(
            f"herd: {in_flight:,.0f} messages in flight exceeds SQS's {SQS_IN_FLIGHT_PER_QUEUE:,} per queue: "
            "split the class over more queues by shard (`-c classQueues=CLASS:N`)"
        )
        fits = False
    return HerdPlan(
        runs=herd,
        per_shard=round(per_shard, 1),
        preload_calls=round(cycle.calls, 0),
        preload_send_seconds=round(send_seconds, 1),
        preload_seconds_ahead=ahead,
        send_message_batches_per_second=round(herd * PRELOAD_SENDS_PER_RUN / send_seconds, 1) if send_seconds else 0.0,
        follower_wcu_per_partition_per_second=round(follower_wcu, 1),
        spread_seconds=spread_seconds,
        due_per_second=round(due_rate, 1),
        drain_per_second=round(drain_rate, 1),
        partition_wcu_per_second=round(partition_wcu, 1),
        unthrottled_partition_wcu_per_second=round(due_rate / shards * run_wcu, 1),
        in_flight=round(in_flight, 1),
        in_flight_runs=round(in_flight_runs, 1),
        backlog=round(max(0.0, herd - in_flight_runs), 1) if late_seconds else 0.0,
        drain_seconds=round(drain_seconds, 1),
        last_start_late_seconds=round(late_seconds, 1),
        jitter_needed_seconds=needed_jitter,
        fits=fits,
        warnings=warnings,
    )


def preload_estimate(inputs: Inputs) -> PreloadCycle:
    """The pre-loader's calls per cycle and how long its invocation takes at AWS_CALL_SECONDS a call."""
    return preload_cycle(inputs, inputs.rate * inputs.preload_interval_seconds / inputs.shards)


def preload_cycle(inputs: Inputs, due_per_shard: float) -> PreloadCycle:
    """One pre-load cycle with `due_per_shard` executions due on every shard."""
    profile = preload_profile(inputs)
    serial = profile.calls_per_shard + due_per_shard * profile.serial_calls_per_execution
    parallel = due_per_shard * profile.parallel_calls_per_execution
    shard_seconds = (serial + parallel / max(1, inputs.preload_dispatch_threads)) * AWS_CALL_SECONDS
    groups = max(1, inputs.preload_shard_groups)
    rounds = math.ceil(math.ceil(inputs.shards / groups) / max(1, inputs.preload_threads))
    cycle_seconds = rounds * shard_seconds
    return PreloadCycle(
        calls=inputs.shards * (serial + parallel),
        shard_seconds=shard_seconds,
        cycle_seconds=cycle_seconds,
        gb_seconds=groups * cycle_seconds * PRELOADER_MEMORY_GB,
        due_per_shard=due_per_shard,
        serial_calls_per_shard=serial,
        parallel_calls_per_shard=parallel,
    )


def job_index_units(every: str) -> float:
    """Index write units a run of a job repeating `every` makes beyond CRON_RUN's: a job repeating faster than
    once a minute has each run entered in `openByJob` by its claim and removed at its end (domain/job_index.py),
    where a slower job's run on time enters it never. Its claim reads no more than CRON_RUN's: only runs
    claimed and not ended are in the index."""
    return float(OPEN_BY_JOB_INDEX_WCU) if parse_every(every) < MIN_UNINDEXED_PERIOD else 0.0


def rate_of(every: str, jobs: int) -> float:
    """Executions per second of `jobs` jobs repeating `every` (an `every` value: 1s, 30s, 5m, rate(1 hour))."""
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    return jobs / parse_every(every).total_seconds()


def schedule_cost(result: Estimate, every: str, jobs: int) -> ScheduleCost:
    """What `jobs` jobs repeating `every` come to a month at the estimate's per-execution cost: their runs, the
    scheduler's own work for them (all but the jobs' run time), and with the runs' Lambda time too. A 1-second
    job runs 2,628,000 times a month."""
    runs = rate_of(every, jobs) * MONTH_SECONDS
    return ScheduleCost(
        every=every,
        jobs=jobs,
        runs_per_month=round(runs),
        runs_per_month_per_job=round(runs / jobs),
        scheduler_cost_per_month=round(runs * result.scheduler_cost_per_million / 1e6, 2),
        total_cost_per_month=round(runs * result.cost_per_million["total"] / 1e6, 2),
        total_cost_per_month_per_job=round(runs * result.cost_per_million["total"] / 1e6 / jobs, 2),
    )


# The plans docs/performance.md records (`duetime capacity --scenarios`): two peaks, three shapes of load.
SCENARIO_RATES = (10_000.0, 100_000.0)
SCENARIO_MIXES = {"cron-heavy": "oneoff=0.2,cron=0.8", "one-off-heavy": "oneoff=0.8,cron=0.2"}
SCENARIO_HERD = 1_000_000  # jobs at `0 0 * * *`
PLAN_HEADROOM = 0.8


def sized(inputs: Inputs) -> Inputs:
    """`inputs` with the shard count, `open` index keys and pre-loader shard groups the estimate asks for."""
    profile = call_profile(inputs)
    beats = heartbeats(inputs.avg_seconds, inputs.lease_seconds)
    # Sized to PLAN_HEADROOM of each limit: a plan at 100% of a partition throttles on the first busy second.
    shards = max(inputs.shards, smallest_shards(inputs.rate / PLAN_HEADROOM, profile, beats, open_index_by_shard=False))
    keys = max(
        shards * OPEN_INDEX_SPREAD,
        math.ceil(inputs.rate / PLAN_HEADROOM * profile.open_index_wcu / PARTITION_WCU_PER_SECOND),
    )
    groups = 1
    while (
        groups < shards
        and preload_estimate(replace(inputs, shards=shards, preload_shard_groups=groups)).cycle_seconds
        > 0.5 * inputs.preload_interval_seconds
    ):  # half the interval: room for a slow tick
        groups += 1
    return replace(inputs, shards=shards, open_index_keys=keys, preload_shard_groups=groups)


def scenarios() -> list[tuple[str, Inputs]]:
    """The recorded plans: cron-heavy, one-off-heavy and a herd, each at 10,000/s and 100,000/s, sized."""
    found: list[tuple[str, Inputs]] = []
    for rate in SCENARIO_RATES:
        for label, mix in SCENARIO_MIXES.items():
            found.append((f"{rate:,.0f}/s {label}", sized(Inputs(rate=rate, mix=parse_mix(mix)))))
        herd = sized(Inputs(rate=rate, mix=parse_mix("cron=1"), herd=SCENARIO_HERD))
        found.append((f"{rate:,.0f}/s herd: {SCENARIO_HERD:,} jobs at 0 0 * * *, no jitter", herd))
        spread_out = estimate(herd).herd
        jitter = min(3600, spread_out.jitter_needed_seconds if spread_out else 0)
        found.append((f"{rate:,.0f}/s herd with jitterSeconds {jitter:,}", replace(herd, jitter_seconds=jitter)))
    return found
