"""The one definition of duetime's tables, indexes, queues and settings, read by CDK and `duetime local`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

# --- tables -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexDef:
    """A global secondary index: its name, key attribute names (all strings) and projection.

    KEYS_ONLY keeps index writes to the changes of its own keys: a heartbeat or a completion, which
    change no index key, then costs no index write at all.
    """

    name: str
    partition_key: str
    sort_key: str | None = None
    projection: str = "KEYS_ONLY"


@dataclass(frozen=True)
class TableDef:
    """A DynamoDB table: logical name, keys (all strings), global secondary indexes and TTL attribute."""

    logical_name: str
    partition_key: str
    sort_key: str | None = None
    indexes: tuple[IndexDef, ...] = ()
    ttl_attribute: str | None = None

    def table_name(self, prefix: str) -> str:
        return f"{prefix}-{self.logical_name}"

    def attribute_names(self) -> list[str]:
        """Every attribute used as a key by the table or one of its indexes, each once."""
        names: list[str] = []
        for name in (self.partition_key, self.sort_key):
            if name and name not in names:
                names.append(name)
        for index in self.indexes:
            for name in (index.partition_key, index.sort_key):
                if name and name not in names:
                    names.append(name)
        return names


JOBS_BY_OWNER_INDEX = IndexDef(name="byOwner", partition_key="owner", sort_key="createdKey", projection="ALL")
JOBS_TABLE = TableDef(logical_name="jobs", partition_key="jobId", indexes=(JOBS_BY_OWNER_INDEX,))

# Executions live in the partition of the UTC hour they are next due ("YYYYMMDDHH#shard") and sort
# by "dueMs#executionId" (dueMs zero-padded to 13 digits), so "what is due in this window" is one
# range query per shard. executionId sorts by scheduled time, so the byJob index gives history.
EXECUTIONS_BY_JOB_INDEX = IndexDef(name="byJob", partition_key="jobId", sort_key="executionId")
# A sparse index of the executions that have not ended: `openShard` is set while an execution is
# scheduled or running and removed when it ends, so the reconciler finds overdue or abandoned ones per
# shard, in due order (by `sk`), without reading finished history. Its key is "shard#spread" (the row's
# shard, then stable_hash(executionId) mod OPEN_INDEX_SPREAD), so no index key takes more writes than a
# base-table partition does (issue 18: 32 index keys took every open row of a 10,000/s system).
# A waiting execution of a paused job leaves it (and comes back on resume), so the reconciler never
# re-reads what a pause holds.
EXECUTIONS_OPEN_INDEX = IndexDef(name="open", partition_key="openShard", sort_key="sk")
# A sparse index of one job's executions that have not ended (`openJob` = jobId while scheduled or
# running, paused or not), so cancel, pause and resume touch only those, never the job's history.
EXECUTIONS_OPEN_BY_JOB_INDEX = IndexDef(name="openByJob", partition_key="openJob", sort_key="sk")
# A sparse index of an owner's dead letters: `deadOwner` (the job's owner) and `deadKey`
# ("finishedMs#executionId") are set on a failed execution by the write that records its owner was told
# (mark_notified, a write every failure makes anyway), so GET /dead-letters reads one owner's failures,
# newest first, and a normal run never writes to it. A retry moves the row and the new row has neither.
EXECUTIONS_DEAD_BY_OWNER_INDEX = IndexDef(name="deadByOwner", partition_key="deadOwner", sort_key="deadKey")
EXECUTIONS_TABLE = TableDef(
    logical_name="executions",
    partition_key="pk",
    sort_key="sk",
    indexes=(
        EXECUTIONS_BY_JOB_INDEX,
        EXECUTIONS_OPEN_INDEX,
        EXECUTIONS_OPEN_BY_JOB_INDEX,
        EXECUTIONS_DEAD_BY_OWNER_INDEX,
    ),
    ttl_attribute="expiresAt",
)

# Small records that coordinate the system itself: per-shard pre-loader leases and cursors,
# idempotency keys of POST /jobs, the shard count of each due-hour bucket (`shards#YYYYMMDDHH`).
CONTROL_TABLE = TableDef(logical_name="control", partition_key="key", ttl_attribute="expiresAt")

TABLES: tuple[TableDef, ...] = (JOBS_TABLE, EXECUTIONS_TABLE, CONTROL_TABLE)


# The AWS region when none is configured (and the one `duetime local` emulates).
DEFAULT_REGION = "us-east-1"

# --- SQS limits the design leans on -----------------------------------------------------------------

SQS_MAX_DELAY_SECONDS = 900
SQS_BATCH_SIZE = 10
# Runs due in the same second to one queue of a Lambda class travel in one SQS message, up to this many
# (adapters/aws/carriers.py): a send, a receive and a delete carry ten times the runs. The worker function's
# batch of 10 messages is up to 100 runs at once.
RUNS_PER_MESSAGE = 10
SQS_MAX_VISIBILITY_SECONDS = 12 * 3600

# --- job classes and their queues ------------------------------------------------------------------


@dataclass(frozen=True)
class JobClassDef:
    """A class of work with its own due queue and DLQ, so long jobs never starve short ones.

    worker_kind "lambda" runs on the SQS event source of functions/worker; "ecs" on `duetime worker`.
    `queues` spreads the class over that many due queues by shard (a message goes to queue
    `shard % queues`): Lambda's SQS event source runs at most ~1,000 batches at once per function, and each
    queue has a worker function of its own. Every queue of the class redrives to its one DLQ.
    """

    name: str
    lease_seconds: int
    max_timeout_seconds: int
    worker_kind: str
    concurrency: int
    queues: int = 1

    def queue_name(self, prefix: str, index: int = 0) -> str:
        """Queue `index` of the class: queue 0 keeps the name a one-queue class always had."""
        return f"{prefix}-due-{self.name}" if index == 0 else f"{prefix}-due-{self.name}-{index}"

    def queue_names(self, prefix: str) -> list[str]:
        """Every due queue of the class, by index."""
        return [self.queue_name(prefix, index) for index in range(self.queues)]

    def queue_of_shard(self, shard: int) -> int:
        """The index of the queue a message of execution shard `shard` goes to."""
        return queue_of_shard(shard, self.queues)

    def dlq_name(self, prefix: str) -> str:
        return f"{prefix}-dlq-{self.name}"

    @property
    def runs_per_message(self) -> int:
        """Runs one SQS message of the class carries at most: RUNS_PER_MESSAGE for a Lambda class, whose worker
        function runs a batch's runs at once; one for an ECS class, whose `duetime worker` takes no more runs
        than it has free slots (a message of more would send the rest back)."""
        return RUNS_PER_MESSAGE if self.worker_kind == "lambda" else 1


# The class of a job that names none, and of the worker function and `duetime worker` unless told otherwise.
DEFAULT_JOB_CLASS = "default"
LONG_JOB_CLASS = "long"
# A job's longest timeout: SQS's 12-hour visibility cap bounds how long one receive can hold a message.
MAX_TIMEOUT_SECONDS = SQS_MAX_VISIBILITY_SECONDS

JOB_CLASSES: dict[str, JobClassDef] = {
    # Lambda's 15-minute cap less a minute to finish and report.
    DEFAULT_JOB_CLASS: JobClassDef(
        DEFAULT_JOB_CLASS, lease_seconds=30, max_timeout_seconds=840, worker_kind="lambda", concurrency=8
    ),
    LONG_JOB_CLASS: JobClassDef(
        LONG_JOB_CLASS, lease_seconds=30, max_timeout_seconds=MAX_TIMEOUT_SECONDS, worker_kind="ecs", concurrency=4
    ),
}


def queue_of_shard(shard: int, queues: int) -> int:
    """Which of a class's `queues` due queues a message of execution shard `shard` goes to."""
    return shard % queues


# A class's due queues at most (JobClassDef.queues): 10 x 1,000 concurrent batches covers 100,000/s of 2-s jobs.
MAX_CLASS_QUEUES = 10


def class_queues_problem(job_class: str, queues: int, known: Iterable[str]) -> str | None:
    """Why `queues` due queues for class `job_class` cannot be configured, or None if they can."""
    if job_class not in known:
        return f"unknown job class {job_class!r} (known: {', '.join(sorted(known))})"
    if not 1 <= queues <= MAX_CLASS_QUEUES:
        return f"the queues of job class {job_class!r} must be 1..{MAX_CLASS_QUEUES}, got {queues}"
    return None


def parse_class_queues(raw: str, separator: str, known: Iterable[str]) -> dict[str, int]:
    """`default:4,long:1` (CDK context, separator ":") or `default=2` (`duetime local`, "="): queues per
    class. ValueError says what is wrong with which entry."""
    counts: dict[str, int] = {}
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        name, mark, count = entry.partition(separator)
        if not mark or not count.strip().lstrip("-").isdigit():
            raise ValueError(f"{entry!r} is not CLASS{separator}COUNT (e.g. default{separator}4)")
        name = name.strip()
        if name in counts:
            raise ValueError(f"job class {name!r} is given twice")
        problem = class_queues_problem(name, int(count), known)
        if problem:
            raise ValueError(problem)
        counts[name] = int(count)
    return counts


# A message received more often than this goes to the class's DLQ by SQS redrive.
MAX_RECEIVE_COUNT = 50
# How long SQS keeps a message: a due message is sent at most SQS_MAX_DELAY_SECONDS early and is received or
# redriven long before 4 days; a dead letter waits for the notifier and for people, SQS's 14-day maximum.
DUE_QUEUE_RETENTION_SECONDS = 4 * 24 * 3600
DLQ_RETENTION_SECONDS = 14 * 24 * 3600

# --- Lambda functions ----------------------------------------------------------------------------------
# Read by the CDK stack (infra/functions.py) and by the local Lambda emulation (duetime.local.lambda_mode).

LAMBDA_MAX_TIMEOUT_SECONDS = 900
# Reserved concurrency the stack asks for (CDK context apiReservedConcurrency, workerMaxConcurrency: each Lambda
# worker function reserves what its event source may start), and the scheduled functions' runs of one rule
# (a tick's run and one overlapping it; the pre-loader has a rule per shard group). Lambda refuses a
# reservation that would leave an account fewer than LAMBDA_UNRESERVED_CONCURRENCY unreserved executions.
DEFAULT_API_RESERVED_CONCURRENCY = 50
DEFAULT_WORKER_MAX_CONCURRENCY = 50
RUNS_PER_SCHEDULE = 2
LAMBDA_UNRESERVED_CONCURRENCY = 100
API_FUNCTION_TIMEOUT_SECONDS = 29  # API Gateway answers 504 after 29 s whatever the function does
# A drain stops before a dead letter once less than one notice's longest time (five webhooks given up after
# their timeout: functions/dlq_notifier) is left: two minutes leave about one for draining. Runs start every
# minute, so at most two overlap (its reserved concurrency).
DLQ_NOTIFIER_TIMEOUT_SECONDS = 120
FUNCTION_MEMORY_MB = {"api": 1024, "preloader": 512, "worker": 1024, "dlq_notifier": 512}
# The worker function's SQS event source: up to this many messages a batch, handed over as soon as one is
# visible (no batching window: on time beats fewer invocations), failed items reported one by one.
WORKER_BATCH_SIZE = 10
WORKER_BATCHING_WINDOW_SECONDS = 0


def lambda_worker_timeout_seconds(job_class: JobClassDef) -> int:
    """The worker function's timeout: the class's longest job plus a minute to report, within Lambda's 15."""
    return min(LAMBDA_MAX_TIMEOUT_SECONDS, job_class.max_timeout_seconds + 60)


def queue_visibility_seconds(job_class: JobClassDef) -> int:
    """The due queue's visibility timeout. An SQS event source needs it to cover the function's timeout
    (the worker shortens it to one lease at claim); `duetime worker` receives with a lease of its own."""
    return lambda_worker_timeout_seconds(job_class) if job_class.worker_kind == "lambda" else job_class.lease_seconds


# --- the pre-loader ---------------------------------------------------------------------------------

# Each `open` index partition of a shard is split this many ways. Fixed for the life of a deployment: the
# reconciler reads exactly these sub-keys (a change needs every open row re-keyed, `duetime reshard`).
OPEN_INDEX_SPREAD = 4
# The pre-loader fixes the shard count of the buckets (due hours) from now to this far ahead, so the hot
# path finds them fixed; later buckets are fixed by their first write. A new `shards` setting applies from
# the first bucket not fixed yet: within this much time for near work, at once for work further ahead.
SHARD_COUNT_FIXED_AHEAD = timedelta(hours=1)

# A window must reach this far past the next cycle: ticks arrive late and a cycle takes time to send.
PRELOAD_SLACK_SECONDS = 5
# Open rows the reconciler reads per shard and cycle at most; the next cycle goes on from where it stopped.
RECONCILE_ROWS_PER_SHARD = 1000
# Shards one pre-loader invocation works on at once, and within each shard the next-slot puts and
# SendMessageBatch requests in flight at once: 8 x 8 = 64, the boto3 clients' connection pool (adapters/aws/client.py).
PRELOAD_THREADS = 8
PRELOAD_DISPATCH_THREADS = 8


def preload_window_problem(interval_seconds: int, window_seconds: int) -> str | None:
    """Why a pre-load schedule cannot start executions on time, or None if it can: each cycle must load
    what is due until the next cycle has run (interval + slack), within SQS's delay cap."""
    if window_seconds < interval_seconds + PRELOAD_SLACK_SECONDS:
        return (
            f"preloadWindowSeconds {window_seconds} must cover the pre-load interval ({interval_seconds} s) "
            f"plus {PRELOAD_SLACK_SECONDS} s, or executions due just after a cycle start late"
        )
    if window_seconds > SQS_MAX_DELAY_SECONDS:
        return f"preloadWindowSeconds {window_seconds} exceeds SQS's delay cap of {SQS_MAX_DELAY_SECONDS} s"
    return None


# --- settings ----------------------------------------------------------------------------------------


def reconcile_after_seconds(preload_interval_seconds: int, lease_seconds: int) -> int:
    """How overdue an open execution must be before the reconciler sends it again: three pre-load cycles (a
    message sent normally has long been delivered by then) and at least one lease past its end. The pre-loader
    sweeps each due range into the open set once it is this overdue (service/dispatch.py, sweep)."""
    return max(3 * preload_interval_seconds, lease_seconds + preload_interval_seconds)


@dataclass(frozen=True)
class Settings:
    """Tunables shared by the stack and the local runtime; CDK context and `duetime local` flags override."""

    prefix: str = "duetime"
    shards: int = 32
    # The pre-loader loads executions due within `preload_window_seconds` every `preload_interval_seconds`.
    # On AWS, one minute and five minutes (under SQS's 15-minute delay cap); locally both are short to
    # keep moto's queues shallow (docs/measured.md).
    preload_interval_seconds: int = 60
    preload_window_seconds: int = 300
    history_retention_days: int = 30
    job_classes: dict[str, JobClassDef] = field(default_factory=lambda: dict(JOB_CLASSES))
    # Webhooks may call this machine (plain http included) only in `duetime local`, never on AWS.
    allow_loopback_webhooks: bool = False
    # The owners whose lateness metrics carry their own `Owner` value (METRIC_RUNS_LATE); the rest: "other".
    metric_owners: tuple[str, ...] = ()

    def table_name(self, table: TableDef) -> str:
        return table.table_name(self.prefix)

    def job_class(self, name: str) -> JobClassDef:
        return self.job_classes[name]

    def with_class_queues(self, queues: Mapping[str, int]) -> Settings:
        """The same settings with each class named in `queues` spread over that many due queues."""
        for name, count in queues.items():
            problem = class_queues_problem(name, count, self.job_classes)
            if problem:
                raise ValueError(problem)
        classes = {name: replace(c, queues=queues.get(name, c.queues)) for name, c in self.job_classes.items()}
        return replace(self, job_classes=classes)

    def class_queues(self) -> dict[str, int]:
        """The classes spread over more than one due queue, with their count (empty: one queue each)."""
        return {name: c.queues for name, c in self.job_classes.items() if c.queues != 1}

    def reconcile_after_seconds(self) -> int:
        """How overdue an open execution must be before the reconciler sends it again (reconcile_after_seconds)."""
        lease = max(c.lease_seconds for c in self.job_classes.values())
        return reconcile_after_seconds(self.preload_interval_seconds, lease)

    def with_lease_seconds(self, lease_seconds: int) -> Settings:
        """The same settings with every job class leased for `lease_seconds` (`--lease-seconds`)."""
        classes = {name: replace(c, lease_seconds=lease_seconds) for name, c in self.job_classes.items()}
        return replace(self, job_classes=classes)


# Locally the window is short: moto's SQS scans every queued message on each call (docs/measured.md), and a
# 10 s window keeps at most ~10 s of due messages queued.
LOCAL_SETTINGS = Settings(preload_interval_seconds=5, preload_window_seconds=10, allow_loopback_webhooks=True)
# On the SQLite backend a queued message is one row of an indexed table: depth costs nothing and a delay
# may be any number of milliseconds, so the window is not bounded by SQS's 15 minutes or moto's scans. A
# minute gives the pre-loader eleven missed cycles of margin before anything starts late (10 s gave one),
# and jobs submitted up to a minute ahead are queued by the API request itself. It stays a minute, not an
# hour: what is queued has been dispatched, and dispatch creates a cron job's next slot, so a longer window
# would only materialize more of every cron chain ahead of time. The interval stays 5 s: it also paces
# the reconciler and the shard leases.
SQLITE_LOCAL_SETTINGS = Settings(preload_interval_seconds=5, preload_window_seconds=60, allow_loopback_webhooks=True)


# --- per-owner quotas (HTTP 429 past them) --------------------------------------------------------------

# The deployed API's defaults (CDK context maxActiveJobs, jobCreatesPerMinute, runNowsPerMinute; 0: none):
# far above what one team's scheduling needs, low enough that one owner cannot fill the tables or queues
# for every other. `duetime local` has none unless its flags set them (one developer's machine).
DEFAULT_MAX_ACTIVE_JOBS = 10_000
DEFAULT_JOB_CREATES_PER_MINUTE = 600
DEFAULT_RUN_NOWS_PER_MINUTE = 120
# Backfilled slots (runs a backfill creates) per owner and fixed hour (CDK context backfillSlotsPerHour):
# two full backfills (MAX_BACKFILL_SLOTS each) an hour. Backfill is for catching up on a past range, not a
# way around runNowsPerMinute: without it, two requests made 2,000 runs in a minute.
DEFAULT_BACKFILL_SLOTS_PER_HOUR = 2_000


# --- handlers ----------------------------------------------------------------------------------------

# Handler names with these prefixes name a target of their kind; they are dispatched by kind and never
# announced by workers (grants bound who may use them). Every other name is a registered Python function.
HANDLER_KIND_PREFIXES = ("lambda:", "ecs:", "https://", "http://")
# The built-in handlers (duetime.worker.demo): every worker serves them, so no announcement is read for them.
BUILTIN_HANDLERS = frozenset({"demo.echo", "demo.sleep", "demo.fail", "demo.count"})
# Workers announce the Python handlers they serve per job class this often; an announcement not renewed
# within the TTL (three refreshes and a margin) is forgotten, so a stopped worker's names disappear.
HANDLER_ANNOUNCE_SECONDS = 30
HANDLER_ANNOUNCE_TTL_SECONDS = 100

# --- results and errors that fit the execution row -------------------------------------------------------

# DynamoDB's item limit bounds an execution row: the result, plus the error text of every attempt in its
# history (up to RetryPolicy's 100 attempts), plus a few hundred bytes of keys and times.
DYNAMODB_MAX_ITEM_BYTES = 400 * 1024
MAX_RESULT_BYTES = 128 * 1024  # a handler's result as compact JSON (UTF-8)
MAX_ERROR_BYTES = 1024  # one error text (UTF-8): 100 attempts' errors + the result stay under the item limit
# A job's payload as compact JSON (UTF-8): keeps the job item under DynamoDB's item limit.
MAX_PAYLOAD_BYTES = 256 * 1024

# --- webhook secrets ------------------------------------------------------------------------------------

# Each owner's webhook signing secret: a Secrets Manager secret "<prefix>/webhook-secrets/<owner>" on AWS
# (workers may read that name prefix only), a 0600 file "<data-dir>/webhook-secrets/<owner>" locally.
WEBHOOK_SECRETS_FOLDER = "webhook-secrets"


def webhook_secret_name(prefix: str, owner_key: str) -> str:
    """The Secrets Manager name of an owner's webhook secret (`owner_key`: the owner, made name-safe)."""
    return f"{prefix}/{WEBHOOK_SECRETS_FOLDER}/{owner_key}"


# `duetime smoke`'s `lambda:` target (infra/smoke_target.py, context smokeTarget): a function of the stack that
# sleeps as long as a run asks. Only the smoke test's owners (ids starting SMOKE_OWNER_PREFIX, which no user
# pool issues: `duetime smoke` invokes the API function directly with such an id) are granted it.
SMOKE_OWNER_PREFIX = "smoke-"
SMOKE_TARGET_TIMEOUT_SECONDS = 120  # above the longest sleep it takes (functions/smoke_target: 90 s)


def smoke_target_name(prefix: str) -> str:
    """The smoke target's function name: the name prefix is unique in the account and region already."""
    return f"{prefix}-smoke-target"


# A webhook must accept the connection within this time (then its job's timeout bounds the request);
# a reply is read up to this size, a larger one fails the attempt permanently.
WEBHOOK_CONNECT_TIMEOUT_SECONDS = 10.0
WEBHOOK_MAX_REPLY_BYTES = 256 * 1024

# --- request edges -------------------------------------------------------------------------------------

# API Gateway (REST) refuses a larger request body; the local HTTP bridge answers 413 above it as well.
API_MAX_BODY_BYTES = 10 * 1024 * 1024
# The API's own bound on a request body: a job's payload at its limit and room for the rest of the job.
API_MAX_REQUEST_BYTES = MAX_PAYLOAD_BYTES + 64 * 1024
# POST /jobs/batch takes this many jobs a request at most, in a body of at most this many bytes (under
# Lambda's 6 MB synchronous payload, with room for the event around it).
MAX_BATCH_JOBS = 500
API_MAX_BATCH_REQUEST_BYTES = 5 * 1024 * 1024
# An Idempotency-Key (header, or a batch item's idempotencyKey): 1..255 printable ASCII characters.
MAX_IDEMPOTENCY_KEY_CHARS = 255
# One attribute of a paging cursor's start key, in UTF-8 bytes: DynamoDB's sort-key limit.
MAX_CURSOR_KEY_BYTES = 1024
# A whole cursor as sent in the query string (urlsafe base64 of JSON whose non-ASCII text is escaped, up to
# 3 characters per UTF-8 byte): room for four start-key values at MAX_CURSOR_KEY_BYTES, and no more.
MAX_CURSOR_CHARS = 24 * 1024

# --- named calendars ----------------------------------------------------------------------------------
# All of an owner's calendars are one control record (one read per owner when dispatch plans); a calendar
# holds at most MAX_EXCLUSIONS (366) entries of <= 21 bytes, so 32 of them stay well under the item limit.
MAX_CALENDARS_PER_OWNER = 32

# --- backfill -------------------------------------------------------------------------------------------
# The most slots one POST /jobs/{jobId}/backfill may cover (runs, excluded slots and slots already present
# alike): a bigger range is refused (400 naming `to`) and is backfilled in several requests.
MAX_BACKFILL_SLOTS = 1000

# --- metrics ---------------------------------------------------------------------------------------------
# What the code emits (Powertools Metrics, CloudWatch EMF) and the CDK monitoring construct alarms and graphs
# on: one namespace, the emitting service as the "service" dimension.

METRIC_NAMESPACE = "duetime"
WORKER_METRICS_SERVICE = "worker"
PRELOADER_METRICS_SERVICE = "preloader"
# Per execution, by the workers.
METRIC_STARTED = "Started"
METRIC_SUCCEEDED = "Succeeded"
METRIC_FAILED = "Failed"
METRIC_RETRIED = "Retried"
METRIC_DEAD_LETTERED = "DeadLettered"
METRIC_START_LATENESS_MS = "StartLatenessMs"
# Per pre-load cycle, by the pre-loader.
METRIC_DISPATCHED = "Dispatched"
METRIC_SKIPPED = "Skipped"
METRIC_SHARDS_BUSY = "ShardsBusy"
METRIC_SHARD_ERRORS = "ShardErrors"
# Per run of a job with a lateAfterSeconds (service/lateness.py), by whichever finds it in time or late (the
# worker's claim, the pre-loader's reconciler), with the one dimension `Owner` and no `service`: one series
# per owner whoever emits. Its values are bounded so the metric count is known before a deploy: the owners
# the stack names (CDK context metricOwners, DUETIME_METRIC_OWNERS), at most MAX_METRIC_OWNERS, each as
# itself, and every other owner together as METRIC_OTHER_OWNERS. So 2 x (named + 1) custom metrics, which
# `duetime capacity --metric-owners N` prices.
METRIC_RUNS_ON_TIME = "RunsOnTime"
METRIC_RUNS_LATE = "RunsLate"
METRIC_OWNER_DIMENSION = "Owner"
METRIC_OTHER_OWNERS = "other"
MAX_METRIC_OWNERS = 50


def metric_owners_problem(owners: Sequence[str]) -> str | None:
    """Why a list of owners to name in the lateness metrics is refused (at deploy and cold start), or None."""
    if len(owners) > MAX_METRIC_OWNERS:
        return f"metricOwners names {len(owners)} owners, at most {MAX_METRIC_OWNERS} (the rest count as other)"
    if METRIC_OTHER_OWNERS in owners:
        return f"metricOwners cannot name {METRIC_OTHER_OWNERS!r}: it is every owner not named"
    if any(not owner or len(owner) > 255 for owner in owners):
        return "metricOwners: each owner is 1 to 255 characters (a CloudWatch dimension value)"
    return None


# --- duetime local ---------------------------------------------------------------------------------------

# The owner `duetime local` prints a token for at start, and the API client's owner with a data dir's secret.
LOCAL_FIRST_USER = "local-user"
# Schedule health (GET /jobs/{id}): the newest executions read for lastRun/lastSuccess/lastFailure, and how
# long past its dueAt a waiting run may be (a pre-load cycle or two late) before the job shows `pastDue`.
HEALTH_HISTORY_ROWS = 20
PAST_DUE_GRACE_SECONDS = 120

# POST /dead-letters/redrive retries at most this many executions per request (a read and a transaction each).
MAX_REDRIVE = 100
# POST /jobs/bulk changes at most this many jobs per request (a job read, a conditional write, its event and
# its open rows each), the rest left to the next request's cursor.
MAX_BULK = 100

# --- rate limits and concurrency caps (issue 20) ---------------------------------------------------------
# All of an owner's limits are one control record, like its calendars.
MAX_LIMITS_PER_OWNER = 64
MAX_LIMIT_PER_SECOND = 10_000.0
# Rates are stored in thousandths of a start a second: one start in about 17 minutes is the slowest.
MIN_LIMIT_PER_SECOND = 0.001
MAX_LIMIT_BURST = 10_000
# A job's or a limit's maxConcurrent: the slot record holds one attribute per running execution.
MAX_CONCURRENT_RUNS = 1_000
# A run waiting for a concurrency slot is looked at again this often.
SLOT_WAIT_SECONDS = 1.0
# A reserved start this close is waited for by the worker itself (briefly: a sleeping slot receives nothing,
# so the backlog behind it would take its starts late); further out, the message is sent again
# to be received at its start (an SQS delay is whole seconds, at most 15 minutes: longer waits go in steps).
LIMIT_SLEEP_MS = 50
# A reserved start missed by more than this (the worker stalled, the queue delivered late) lapses: the run
# reserves again, so starts in any second stay within perSecond * (1 s + this) + burst.
LIMIT_LAPSE_MS = 100
# --- checkpoints (ctx.checkpoint) ------------------------------------------------------------------------

# A handler's checkpoint as compact JSON (UTF-8): progress to resume from, not data (that goes elsewhere);
# small enough to ride on a heartbeat write and to show with the execution.
MAX_CHECKPOINT_BYTES = 8 * 1024
# A worker writes a handler's checkpoints at most this often: a newer one offered sooner waits (the newest
# wins) for the next heartbeat, the next checkpoint after the interval, or the end of the run.
CHECKPOINT_MIN_SECONDS = 1.0
# --- events and owners' failure notices -------------------------------------------------------------
# PutEvents takes at most this many entries a request: a batch's events go in ceil(n / 10) requests.
PUT_EVENTS_MAX_ENTRIES = 10
METRIC_EVENTS_FAILED = "EventsFailed"  # events EventBridge refused (logged; the runs they tell of are not failed)
METRIC_NOTICES_FAILED = "NoticesFailed"  # owners' failure notices a destination did not take
# `duetime local --events-webhook`: the events are signed with this name's webhook secret (as an owner's
# webhook requests are with the owner's): `duetime webhook-secret --owner duetime-events` prints it.
LOCAL_EVENTS_SIGNER = "duetime-events"
# How long one webhook delivery of an event or an owner's notice may take before it is given up.
NOTICE_WEBHOOK_TIMEOUT_SECONDS = 10.0
# `duetime local --api-processes` on SQLite: processes answering the API on its one port (local/api_process.py).
# Two by default where the machine has two cores or more (cli/main.py), else one: a process answers one request
# at a time (api/app.py), and waits for the database's write lock while a worker commits, so beside a draining
# worker one process took 615-633 one-offs/s of 750 on a 2-core machine and two took all 750 (p99 start lateness
# 37 ms), and POST /jobs/batch from two clients took 11,744 jobs/s against 5,304; for ~70 MB more
# (docs/performance.md, "750 one-offs a second").
LOCAL_API_PROCESSES = 2
LOCAL_API_PROCESSES_MAX = 16
# `duetime local --worker-processes` on SQLite: child processes running the workers, each with --workers slots
# a job class (local/worker_process.py). One by default: a second, waiting for the file's write lock on a flock
# (adapters/sqlite/file_lock.py), drained a burst of 10,000 9-16% sooner on a 2-core machine with 64 slots each
# (3-9% with 8; the lock is held for the claims' and ends' CPU work: docs/performance.md), for ~60 MB more and
# its idle watcher.
LOCAL_WORKER_PROCESSES = 1
LOCAL_WORKER_PROCESSES_MAX = 16

# A shard's first pre-load cycle (no cursor yet) looks back this far for due rows, and its first sweep of rows
# `reconcile_after` overdue goes back as far (service/dispatch.py).
FIRST_LOOKBACK_SECONDS = 3600

# A run is claimed once it is due (a worker holds a message received early until then): a job's rows due after
# now plus this margin (well over any clock skew between workers) cannot be running, so the claim's overlap
# check reads only the rows due by then. A job repeating every second reads ~31 rows, not every slot the
# pre-loader planned ahead (its window); `duetime capacity --every` counts them.
RUNNING_DUE_MARGIN_SECONDS = 30
