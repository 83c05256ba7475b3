"""What AWS charges and what duetime's AWS work for one execution is: the figures the capacity model
(`duetime capacity`, domain/capacity.py) carries to a rate, and the schedule preview's forecast to a month.

The per-execution figures are those `make bench` measures (bench/calls.py) and
tests/integration/test_call_counts.py pins; the prices are AWS's published ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from duetime.definitions import FUNCTION_MEMORY_MB, MAX_BATCH_JOBS, RUNS_PER_MESSAGE

SQS_BATCH = 10  # messages a SendMessageBatch, ReceiveMessage or DeleteMessageBatch carries at most
# One AWS call's round trip from Lambda or ECS in the same region (~5-10 ms): the upper figure.
AWS_CALL_SECONDS = 0.01
# Lambda gives a function a share of a vCPU in proportion to its memory: a whole one at 1,769 MB.
LAMBDA_FULL_VCPU_MB = 1769
API_MEMORY_MB = FUNCTION_MEMORY_MB["api"]
API_VCPU_SHARE = min(1.0, API_MEMORY_MB / LAMBDA_FULL_VCPU_MB)

# --- Prices, us-east-1, as published on the AWS pricing pages; recorded 2026-11-29 ---------------------
PRICES_AS_OF = "2026-11-29"
CLOUDWATCH_PRICES_AS_OF = "2026-12-02"


@dataclass(frozen=True)
class Prices:
    """USD, us-east-1. DynamoDB on-demand rates are those since the 2024-11-01 reduction."""

    dynamodb_write_per_million: float = 0.625  # write request units, on-demand
    dynamodb_read_per_million: float = 0.125  # read request units, on-demand
    sqs_per_million: float = 0.40  # standard queue requests (first 100 billion a month), 64 KB each
    lambda_requests_per_million: float = 0.20
    lambda_gb_second_arm64: float = 0.0000133334
    # API Gateway's volume tiers: (a month's requests up to, USD a million of them), per account and region.
    # REST; HTTP (its requests metered in 512 KB units).
    api_gateway_rest_tiers: tuple[tuple[float, float], ...] = (
        (333e6, 3.50),
        (1e9, 2.80),
        (20e9, 2.38),
        (math.inf, 1.51),
    )
    api_gateway_http_tiers: tuple[tuple[float, float], ...] = ((300e6, 1.00), (math.inf, 0.90))
    dynamodb_wcu_hour: float = 0.00065  # provisioned write capacity unit-hour (standard table class)
    dynamodb_rcu_hour: float = 0.00013  # provisioned read capacity unit-hour
    # CloudWatch, recorded CLOUDWATCH_PRICES_AS_OF: a custom metric (one name and dimension values) a month,
    # first 10,000 metrics; a standard-resolution alarm a month; log ingestion (EMF documents are log lines).
    cloudwatch_metric_month: float = 0.30
    cloudwatch_alarm_month: float = 0.10
    cloudwatch_logs_per_gb: float = 0.50
    as_of: str = PRICES_AS_OF
    cloudwatch_as_of: str = CLOUDWATCH_PRICES_AS_OF

    def api_gateway_per_million(self, api: str, monthly_requests: float = 0.0) -> float:
        """USD a million requests to an API of type `api` ("rest" or "http") cost on average, at
        `monthly_requests` a month: each tier's requests at its price. The first tier's price for a small
        volume; an account's other requests to API Gateway in the region only lower it."""
        tiers = self.api_gateway_rest_tiers if api == "rest" else self.api_gateway_http_tiers
        if monthly_requests <= tiers[0][0]:
            return tiers[0][1]
        cost, floor = 0.0, 0.0
        for ceiling, price in tiers:
            cost += (min(monthly_requests, ceiling) - floor) * price
            if monthly_requests <= ceiling:
                break
            floor = ceiling
        return cost / monthly_requests

    def per_million_units(self, billing: str, utilisation: float) -> tuple[float, float]:
        """(writes, reads): what a million write units and a million read units cost. On demand, the request
        units' price; provisioned, the unit-hours that serve them with auto-scaling holding consumption at
        `utilisation` of what is provisioned (a unit-hour serves 3,600 units at 100%)."""
        if billing == ON_DEMAND:
            return self.dynamodb_write_per_million, self.dynamodb_read_per_million
        hours = 1e6 / 3600 / utilisation
        return self.dynamodb_wcu_hour * hours, self.dynamodb_rcu_hour * hours


ON_DEMAND, PROVISIONED = "on-demand", "provisioned"
BILLINGS = (ON_DEMAND, PROVISIONED)
# Auto-scaling's target (CDK context provisionedTargetUtilization, infra/context.py): consumption held at 70%
# of what is provisioned, so a unit consumed costs 1/0.7 of a unit provisioned.
DEFAULT_UTILISATION = 0.7
API_TYPES = ("rest", "http")


# --- What one execution costs, as measured --------------------------------------------------------------


@dataclass(frozen=True)
class CallProfile:
    """The AWS work of one successful execution without heartbeats (bench/calls.py measures it).

    Write units count 1 per KB started (rows are ~0.4 KB), doubled inside a transaction. The executions
    table's writes all land on the execution's `hour#shard` partition. Its indexes project keys only, so
    only writes that add or remove an entry cost index units (tests/integration/test_call_counts.py reads
    them off the tables around each write). byJob (partitioned by jobId, spread out) costs a plain run of the
    schedule nothing: its row is found by its slot's key (domain/history.py); a run-now, a retry moved to a later
    due, a backfilled or caught-up slot or a slot planned past the pre-load window's reach take an entry at
    their write (BY_JOB_INDEX_WCU). The sparse `openByJob` index (by jobId) costs a plain run on time nothing:
    a run enters it only if its claim is late, it heartbeats or its job repeats within a minute
    (domain/job_index.py). The sparse `open` index (by shard) costs a run nothing unless the pre-loader's sweep
    finds its row still open once `reconcile_after` overdue (a lost message or worker, a run longer than
    that): then an entry and its removal, 2 units.
    The sweep reads each row once more (a strongly consistent Query of the hour#shard range: ~0.1 unit).
    SQS charges by the request and a request carries up to 10 messages; runs sent together to one queue with
    the same whole-second delay travel up to RUNS_PER_MESSAGE to a message (adapters/aws/carriers.py), so the
    requests, the Lambda worker's invocations and its visibility changes are shared by a message's runs.
    """

    name: str
    executions_writes: float  # write requests on the executions table
    executions_wcu: float  # their write units (the hot-partition figure)
    index_wcu: float  # index write units (byJob, openByJob and open only for runs that enter them)
    open_index_wcu: float  # of which on the execution's `open` index partition (its shard)
    jobs_wcu: float  # jobs table, its byOwner index and the owner's counter record (control table)
    read_units: float  # GetItem/BatchGetItem of the job, overlap Query, pre-load and sweep Query shares
    partition_read_units: float  # of which on the hour#shard partition (the pre-load and sweep Queries)
    sqs_requests: float  # SendMessageBatch, ReceiveMessage and DeleteMessageBatch shares at full batches
    api_requests: float  # API Gateway requests (POST /jobs for a one-off), each an invocation of the API function
    api_calls: float  # AWS calls the API function makes for it, one after another (its share of a batch's)
    api_cpu_seconds: float  # the API function's own CPU for it, on a whole core (API_CPU_SECONDS_ALONE)
    runs_per_message: float  # runs an SQS message carries: 1 for a run sent alone, RUNS_PER_MESSAGE packed

    @property
    def claim_visibility_changes(self) -> float:
        """ChangeMessageVisibility requests a run costs at its claim: the Lambda worker shortens the message's
        visibility to a lease when it claims the run (the queue's own is the function's timeout), one change
        per message, shared by a carrier's runs."""
        return 1 / self.runs_per_message

    @property
    def run_sqs_requests(self) -> float:
        """SQS requests a run costs without heartbeats: its shares of the send, receive and delete, and of the
        claim's visibility change."""
        return self.sqs_requests + self.claim_visibility_changes

    @property
    def api_function_seconds(self) -> float:
        """The API function's billed time for it: its AWS calls' round trips, and its own CPU at the share of
        a vCPU the function's memory buys."""
        return self.api_calls * AWS_CALL_SECONDS + self.api_cpu_seconds / API_VCPU_SHARE

    def api_function_per_million(self, prices: Prices) -> float:
        """USD a million executions pay the API function behind API Gateway: its invocations and their time."""
        seconds = 1e6 * API_MEMORY_MB / 1024 * self.api_function_seconds
        return self.api_requests * prices.lambda_requests_per_million + seconds * prices.lambda_gb_second_arm64

    @property
    def runs_per_batch(self) -> float:
        """Runs in one SQS event source batch of the Lambda worker: 10 messages, run at once in one invocation."""
        return SQS_BATCH * self.runs_per_message


# The byJob index's units a run that takes an entry (at its write, kept as history): not a plain run.
BY_JOB_INDEX_WCU = 1
# The openByJob index's units a run that enters it (an entry, then its removal at the end).
OPEN_BY_JOB_INDEX_WCU = 2
# The sweep's share of a run: its row read once more, ~0.4 KB of a strongly consistent Query (4 KB a unit).
SWEEP_READ_UNITS = 0.1
# The API function's own CPU a job (Python: the event, validation, the items, boto3's requests; its calls'
# waits apart) on one whole core: POST /jobs, and a job's share of a POST /jobs/batch. bench/calls.py's
# api_cpu measures them (`python -m bench --only calls`): 2.6-3.6 ms and 0.65-0.68 ms on 2026-12-04 at host
# probes of 26-30 ms; rounded up here.
API_CPU_SECONDS_ALONE = 0.004
API_CPU_SECONDS_BATCHED = 0.0007

# A one-off job submitted through the API and due soon: one TransactWriteItems (job + execution + the
# owner's active-jobs counter, so the execution's create costs 2 units), a SendMessageBatch of one message of
# one run (it is sent alone, at its POST); at run time ReceiveMessage and DeleteMessageBatch (full batches at
# load), GetItem of the job, the claim, and the finish in one TransactWriteItems with the job's completion and
# the counter's -1 (issue 35: the run's end ends the job in the same write), read back with one strongly
# consistent GetItem.
ONE_OFF = CallProfile(
    name="one-off",
    executions_writes=3,
    executions_wcu=5,
    index_wcu=0,  # byJob: none for a plain run (domain/history.py); openByJob: never, for a plain run on time
    open_index_wcu=0,
    # job put, byOwner entry, counter +1; completion, its byOwner rewrite (ALL projection), counter -1; the
    # job's and the counter's writes are inside transactions (doubled), the index's are not
    jobs_wcu=2 + 1 + 2 + 2 + 1 + 2,
    read_units=1 + 1 + SWEEP_READ_UNITS,
    partition_read_units=SWEEP_READ_UNITS,
    sqs_requests=1 + 1 / SQS_BATCH + 1 / SQS_BATCH,
    api_requests=1,
    api_calls=2,  # the creation's TransactWriteItems, the SendMessageBatch
    api_cpu_seconds=API_CPU_SECONDS_ALONE,
    runs_per_message=1,
)
# A cron run in steady state: the pre-loader reads the job (BatchGetItem of 100, eventually consistent: half a
# unit a job of up to 4 KB; service/dispatch.py's _jobs_of says when it reads one again, strongly), creates the
# next slot (PutItem) and sends due runs packed, up to RUNS_PER_MESSAGE a message and 10 messages a request
# (runs due in the same second to one queue: at load every message is full); the claim reads the job (GetItem,
# strongly consistent: 1 unit) and, for the overlap policy, the job's open rows due by now from openByJob (a
# Query of an index, eventually consistent: 0.5 unit for up to 4 KB of keys) and the rows of the slots that may
# run without an entry (by key: none for a run on time of a job a minute or more apart, domain/job_index.py).
# The claim's own row is never in the index, so a job with no other run open reads no row (issue 32).
CRON_RUN = CallProfile(
    name="cron",
    executions_writes=3,
    executions_wcu=3,
    index_wcu=0,  # byJob: none for a plain run (domain/history.py); openByJob: never, for a plain run on time
    open_index_wcu=0,
    jobs_wcu=0,
    read_units=0.5 + 1 + 0.5 + 0.1 + SWEEP_READ_UNITS,
    partition_read_units=0.1 + SWEEP_READ_UNITS,
    # the send, the receive and the delete, each a request of 10 messages of RUNS_PER_MESSAGE runs
    sqs_requests=3 / (SQS_BATCH * RUNS_PER_MESSAGE),
    api_requests=0,
    api_calls=0,
    api_cpu_seconds=0,
    runs_per_message=RUNS_PER_MESSAGE,
)
# One-off jobs created through POST /jobs/batch (issue 32), 500 a request: the jobs of a batch are written
# 49 a TransactWriteItems (a job and its execution are two items, the owner's counter one a transaction) and
# their first executions sent packed as cron runs are (up to RUNS_PER_MESSAGE a message, 10 messages a
# SendMessageBatch); the run is ONE_OFF's, its messages shared as a cron run's are.
BATCH_JOBS_PER_TRANSACTION = 49
ONE_OFF_BATCH = replace(
    ONE_OFF,
    name="one-off-batch",
    jobs_wcu=2 + 1 + 2 / BATCH_JOBS_PER_TRANSACTION + 2 + 1 + 2,  # the counter's +1 once a transaction
    sqs_requests=3 / (SQS_BATCH * RUNS_PER_MESSAGE),
    api_requests=1 / MAX_BATCH_JOBS,
    # a request's transactions and sends, one after another: 11 and 5 for 500 jobs
    api_calls=(
        math.ceil(MAX_BATCH_JOBS / BATCH_JOBS_PER_TRANSACTION)
        + math.ceil(MAX_BATCH_JOBS / (SQS_BATCH * RUNS_PER_MESSAGE))
    )
    / MAX_BATCH_JOBS,
    api_cpu_seconds=API_CPU_SECONDS_BATCHED,
    runs_per_message=RUNS_PER_MESSAGE,
)
PROFILES = {p.name: p for p in (ONE_OFF, CRON_RUN, ONE_OFF_BATCH)}

# A run of a job with a lateness budget (lateAfterSeconds, service/lateness.py): its day's counter, one
# UpdateItem on the control table (1 write unit) at its claim. A late run instead marks its row late (one
# conditional UpdateItem, 1 unit) and counts in the late counter, and tells its owner through the DLQ (a send,
# and the drain's receive and delete). Reading a job's share (GET /jobs/{id}) is a BatchGetItem of 60 keys.
LATENESS_WCU_PER_RUN = 1.0
LATE_RUN_EXTRA_WCU = 1.0
LATE_RUN_EXTRA_SQS = 3.0
ASSUMED_LATE_SHARE = 0.01  # of budgeted runs: the capacity model prices this share of them late
# On AWS each budgeted run is also counted in CloudWatch (definitions.METRIC_RUNS_ON_TIME or METRIC_RUNS_LATE,
# dimension Owner): one EMF document on the function's log, ~190 bytes (event_sinks.emf_owner_count's, measured
# by tests/unit/test_capacity.py), and 2 metrics per `Owner` value: each owner the stack names, and `other`.
LATENESS_METRICS_PER_OWNER = 2
EMF_BYTES_PER_COUNTED_RUN = 190


def lateness_units(budgeted_share: float) -> tuple[float, float]:
    """(write units, SQS requests) the lateness budgets add to one execution, when `budgeted_share` of the
    runs are of jobs with a lateAfterSeconds (and ASSUMED_LATE_SHARE of those start late)."""
    late = budgeted_share * ASSUMED_LATE_SHARE
    return budgeted_share * LATENESS_WCU_PER_RUN + late * LATE_RUN_EXTRA_WCU, late * LATE_RUN_EXTRA_SQS
