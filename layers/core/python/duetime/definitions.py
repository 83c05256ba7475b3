"""The one definition of duetime's tables, indexes, queues and settings, read by CDK and `duetime local`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

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
# shard, in due order (by `sk`), without reading finished history.
EXECUTIONS_OPEN_INDEX = IndexDef(name="open", partition_key="openShard", sort_key="sk")
EXECUTIONS_TABLE = TableDef(
    logical_name="executions",
    partition_key="pk",
    sort_key="sk",
    indexes=(EXECUTIONS_BY_JOB_INDEX, EXECUTIONS_OPEN_INDEX),
    ttl_attribute="expiresAt",
)

# Small records that coordinate the system itself: per-shard pre-loader leases and cursors,
# idempotency keys of POST /jobs.
CONTROL_TABLE = TableDef(logical_name="control", partition_key="key", ttl_attribute="expiresAt")

TABLES: tuple[TableDef, ...] = (JOBS_TABLE, EXECUTIONS_TABLE, CONTROL_TABLE)


# --- job classes and their queues ------------------------------------------------------------------


@dataclass(frozen=True)
class JobClassDef:
    """A class of work with its own due queue and DLQ, so long jobs never starve short ones.

    worker_kind "lambda" runs on the SQS event source of functions/worker; "ecs" on `duetime worker`.
    """

    name: str
    lease_seconds: int
    max_timeout_seconds: int
    worker_kind: str
    concurrency: int

    def queue_name(self, prefix: str) -> str:
        return f"{prefix}-due-{self.name}"

    def dlq_name(self, prefix: str) -> str:
        return f"{prefix}-dlq-{self.name}"


JOB_CLASSES: dict[str, JobClassDef] = {
    # Lambda's 15-minute cap less a minute to finish and report.
    "default": JobClassDef("default", lease_seconds=30, max_timeout_seconds=840, worker_kind="lambda", concurrency=8),
    # SQS's 12-hour visibility cap bounds the longest job.
    "long": JobClassDef("long", lease_seconds=30, max_timeout_seconds=43200, worker_kind="ecs", concurrency=4),
}

# A message received more often than this goes to the class's DLQ by SQS redrive.
MAX_RECEIVE_COUNT = 50

# An attempt's error is kept to this many characters in its execution's row.
MAX_ERROR_CHARS = 4000


# --- settings ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """Tunables shared by the stack and the local runtime; CDK context and `duetime local` flags override."""

    prefix: str = "duetime"
    shards: int = 32
    # The pre-loader loads executions due within `preload_window_seconds` every `preload_interval_seconds`.
    # On AWS, one minute and five minutes (under SQS's 15-minute delay cap); locally both are short to
    # keep moto's queues shallow (NOTES.md).
    preload_interval_seconds: int = 60
    preload_window_seconds: int = 300
    history_retention_days: int = 30
    job_classes: dict[str, JobClassDef] = field(default_factory=lambda: dict(JOB_CLASSES))

    def table_name(self, table: TableDef) -> str:
        return table.table_name(self.prefix)

    def job_class(self, name: str) -> JobClassDef:
        return self.job_classes[name]

    def with_lease_seconds(self, lease_seconds: int) -> Settings:
        """The same settings with every job class leased for `lease_seconds` (`--lease-seconds`)."""
        classes = {name: replace(c, lease_seconds=lease_seconds) for name, c in self.job_classes.items()}
        return replace(self, job_classes=classes)


# Locally the window is short: moto's SQS scans every queued message on each call (NOTES.md), and a
# 10 s window keeps at most ~10 s of due messages queued.
LOCAL_SETTINGS = Settings(preload_interval_seconds=5, preload_window_seconds=10)
# On the SQLite backend a queued message is one row of an indexed table: depth costs nothing and a delay
# may be any number of milliseconds, so the window is not bounded by SQS's 15 minutes or moto's scans. A
# minute gives the pre-loader eleven missed cycles of margin before anything starts late (10 s gave one),
# and jobs submitted up to a minute ahead are queued by the API request itself. It stays a minute, not an
# hour: what is queued has been dispatched, and dispatch creates a cron job's next slot, so a longer window
# would only materialize more of every cron chain ahead of time. The interval stays 5 s: it also paces
# the reconciler and the shard leases.
SQLITE_LOCAL_SETTINGS = Settings(preload_interval_seconds=5, preload_window_seconds=60)

# SQS limits the design leans on.
SQS_MAX_DELAY_SECONDS = 900
SQS_BATCH_SIZE = 10
SQS_MAX_VISIBILITY_SECONDS = 12 * 3600
