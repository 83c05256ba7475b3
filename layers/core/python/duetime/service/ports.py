"""The ports the use-cases work through: stores and due queues as Protocols, and the values they exchange."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from duetime.definitions import DEFAULT_JOB_CLASS, queue_of_shard
from duetime.domain.errors import DuetimeError, NotFound
from duetime.domain.exclusions import Calendar
from duetime.domain.keys import ExecutionId, ExecutionKey
from duetime.domain.limits import RateLimit
from duetime.domain.models import Execution, ExecutionStatus, Job, JobStatus, to_ms
from duetime.domain.quotas import RateWindow

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; `cursor` is opaque (bound to what it pages) and None on the last page."""

    items: list[T]
    cursor: str | None


def new_claim_token() -> str:
    """A claim's secret (128 random bits): what binds an attempt's later writes to the one who claimed it."""
    return secrets.token_urlsafe(16)


@dataclass(frozen=True)
class JobFilter:
    """What GET /jobs narrows the owner's jobs to: every given condition holds (tags: each key:value pair)."""

    status: JobStatus | None = None
    handler: str | None = None
    tags: tuple[tuple[str, str], ...] = ()

    @property
    def is_empty(self) -> bool:
        return self.status is None and self.handler is None and not self.tags

    def matches(self, job: Job) -> bool:
        return (
            (self.status is None or job.status == self.status)
            and (self.handler is None or job.handler == self.handler)
            and all(job.tags.get(key) == value for key, value in self.tags)
        )


# What a one-off job's status moves to, and its owner's active-jobs counter by, when its run ends for good (from
# the status its caller read: active or paused) and when that run is retried (from completed).
_ENDING_MOVES = {False: (JobStatus.COMPLETED, -1), True: (JobStatus.ACTIVE, 1)}


@dataclass(frozen=True)
class NewJob:
    """One job of a batch creation, with what create_job writes beside it: its first execution and the
    idempotency record ({"key", "bodyHash", "expiresAt"}) when its item gave a key."""

    job: Job
    first: Execution | None
    idempotency: dict[str, Any] | None = None


@dataclass
class JobEnding:
    """A job whose status changes in the same write as its run: a one-off job `completed` by the end of its
    one run (its place in its owner's active-jobs counter given back), or reopened (`active`, the place taken
    again) by a retry of that run. The store applies it only while the job is in the status it moves from
    (to complete: the status `job` was read in, active or paused; to reopen: completed) and sets `changed` to
    the job as written; otherwise (cancelled, completed already, or paused or resumed since it was read) the
    run's own write happens alone and `changed` stays None, so an ending is applied, and counted, at most
    once. job_ends.announce completes the job as it now stands if it is still active or paused: a pause since
    the read held the job's waiting rows, which must go back to the reconciler first."""

    job: Job
    now: datetime
    note: str | None = None
    reopen: bool = False
    changed: Job | None = None

    @property
    def from_statuses(self) -> tuple[JobStatus, ...]:
        return (JobStatus.COMPLETED,) if self.reopen else (self.job.status,)

    @property
    def to_status(self) -> JobStatus:
        return _ENDING_MOVES[self.reopen][0]

    @property
    def counter_delta(self) -> int:
        """What the owner's active-jobs counter moves by in the same write."""
        return _ENDING_MOVES[self.reopen][1]

    def applied_to(self, stored: Job) -> Job:
        """`stored` (the job as it stands) with this change made: status, note, version and update time."""
        update = {"status": self.to_status, "note": self.note, "updated_at": self.now, "version": stored.version + 1}
        return stored.model_copy(update=update)


@dataclass(frozen=True)
class ClaimOutcome:
    """The result of a claim: `claimed` if this worker now holds the attempt (with the claim's token in
    `claimed.claim_token`), else the row as it stands."""

    claimed: Execution | None
    current: Execution | None


@dataclass(frozen=True)
class OpenPage:
    """Open executions of a shard read in one bounded step, and where the next step goes on (None: the end
    of the open set was reached, start from its beginning next time)."""

    executions: list[Execution]
    next_token: str | None


@dataclass(frozen=True)
class StoredExecution:
    """An execution with where it is stored and its `open` index shard, as `duetime audit` checks them."""

    key: ExecutionKey
    open_shard: str | None
    execution: Execution
    open_job: str | None = None  # its entry in the job's index of open runs (`openByJob`), if it has one


@dataclass(frozen=True)
class DueMessage:
    """What a worker needs to find and claim one execution row."""

    key: ExecutionKey
    execution_id: str
    job_id: str
    due_ms: int
    job_class: str
    kind: str = "scheduled"
    # The row's retryBase (a failed execution retried by hand): the claim's attempt limit counts from it.
    retry_base: int = 0
    # A backfilled run's overlap policy ("allow" or "forbid"), None for every other run.
    overlap: str | None = None
    # Set only on a message sent again by a rate limit or concurrency cap (service/limits.py): the start
    # reserved in the limit's bucket (epoch ms), when the run was first held back, and when to look again.
    limit_ready_ms: int | None = None
    limit_since_ms: int | None = None
    not_before_ms: int | None = None
    # The execution id read into its parts when the message is made (from_body, where a received message
    # enters the worker): the claim uses its slot, and a message naming no execution is refused there.
    parsed_id: ExecutionId = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            parsed = ExecutionId.parse(self.execution_id)
        except NotFound:
            raise ValueError(f"a due message names no execution: {self.execution_id!r}") from None
        object.__setattr__(self, "parsed_id", parsed)

    @property
    def slot(self) -> datetime:
        """The slot the message's execution runs (parsed once, with the message)."""
        return self.parsed_id.slot

    @property
    def start_ms(self) -> int:
        """When the run may start: its due time, or its reserved start if that is later."""
        return max(self.due_ms, self.limit_ready_ms or 0)

    @property
    def visible_ms(self) -> int:
        """When the queue should make the message visible."""
        return max(self.start_ms, self.not_before_ms or 0)

    def to_body(self) -> str:
        body: dict[str, Any] = {
            "pk": self.key.pk,
            "sk": self.key.sk,
            "executionId": self.execution_id,
            "jobId": self.job_id,
            "dueMs": self.due_ms,
            "jobClass": self.job_class,
            "kind": self.kind,
        }
        # Only when set: a normal run's message stays byte for byte what it was.
        if self.retry_base:
            body["retryBase"] = self.retry_base
        if self.overlap is not None:
            body["overlap"] = self.overlap
        for name, value in (
            ("limitReadyMs", self.limit_ready_ms),
            ("limitSinceMs", self.limit_since_ms),
            ("notBeforeMs", self.not_before_ms),
        ):
            if value is not None:
                body[name] = value
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def from_body(cls, body: str) -> DueMessage:
        """The message a queue's body holds; raises ValueError (or KeyError, TypeError) for one that is not."""
        return cls.from_fields(json.loads(body))

    @classmethod
    def from_fields(cls, v: dict[str, Any]) -> DueMessage:
        """The message of a body already read as JSON (the DLQ drain reads bodies so)."""
        return cls(
            key=ExecutionKey(pk=v["pk"], sk=v["sk"]),
            execution_id=v["executionId"],
            job_id=v["jobId"],
            due_ms=int(v["dueMs"]),
            job_class=v.get("jobClass", DEFAULT_JOB_CLASS),
            kind=v.get("kind", "scheduled"),
            retry_base=int(v.get("retryBase", 0)),
            overlap=v.get("overlap"),
            limit_ready_ms=_opt_int(v.get("limitReadyMs")),
            limit_since_ms=_opt_int(v.get("limitSinceMs")),
            not_before_ms=_opt_int(v.get("notBeforeMs")),
        )

    @classmethod
    def for_execution(cls, execution: Execution, key: ExecutionKey) -> DueMessage:
        return cls(
            key=key,
            execution_id=execution.execution_id,
            job_id=execution.job_id,
            due_ms=to_ms(execution.due_at),
            job_class=execution.job_class,
            kind=execution.kind,
            retry_base=execution.retry_base,
            overlap=None if execution.overlap is None else execution.overlap.value,
        )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class Received:
    """A received message: the due message, its receipt handle and how often it was received."""

    message: DueMessage
    receipt: str
    receive_count: int


# A class spread over several due queues (JobClassDef.queues): the receipt of a message received from queue
# i > 0 carries i after this mark, so a delete or visibility change goes to the queue the message came from.
# Queue 0's receipts are the queue's own handles, unchanged. SQS handles and SQLite receipts never hold it.
QUEUE_RECEIPT_MARK = "#q"


def queue_receipt(queue_index: int, handle: str) -> str:
    """The receipt of a message received from queue `queue_index` of its class with handle `handle`."""
    return handle if queue_index == 0 else f"{handle}{QUEUE_RECEIPT_MARK}{queue_index}"


def queue_index(message: DueMessage, queues: int) -> int:
    """Which of its class's `queues` due queues `message` goes to (a one-queue class: 0, with no look at
    the key)."""
    return 0 if queues == 1 else queue_of_shard(message.key.shard, queues)


def split_receipt(receipt: str) -> tuple[int, str]:
    """(queue index, the queue's handle) of a receipt made by queue_receipt."""
    handle, mark, index = receipt.rpartition(QUEUE_RECEIPT_MARK)
    if mark and index.isdigit():
        return int(index), handle
    return 0, receipt


class JobStore(Protocol):
    """Jobs, written with their first execution and idempotency record in one transaction."""

    def create_job(
        self,
        job: Job,
        first: Execution | None,
        idempotency: dict[str, Any] | None = None,
        max_active_jobs: int | None = None,
        rate: RateWindow | None = None,
    ) -> None:
        """Write the job, its first execution and the idempotency record ({"key", "bodyHash", "expiresAt"})
        together, with +1 on the owner's active-jobs counter and on `rate`'s window counter; raises Conflict
        if the job, the execution's slot or the key exists already, QuotaExceeded if the owner holds
        `max_active_jobs` already or the window `rate.limit` (nothing is written then)."""
        ...

    def create_jobs(
        self, jobs: Sequence[NewJob], max_active_jobs: int | None = None, rate: RateWindow | None = None
    ) -> list[DuetimeError | None]:
        """Write each job as create_job would, each atomic with its first execution, idempotency record and
        counters, in fewer transactions where the store can; one outcome a job, in order: None (written),
        Conflict or QuotaExceeded (that job, and only it, not written)."""
        ...

    def get_job(self, job_id: str) -> Job | None: ...

    def get_jobs(self, job_ids: list[str], consistent: bool = True) -> dict[str, Job]:
        """Many jobs by id (those not found are left out). With `consistent` False the store may answer what it
        held up to a moment ago (DynamoDB's eventually consistent read, half the read units): a job written
        within that moment may be missing or show its state before that write."""
        ...

    def list_jobs(self, owner: str, limit: int, cursor: str | None, filters: JobFilter | None = None) -> Page[Job]:
        """The owner's jobs, newest first, narrowed by `filters` within the owner's partition (never a scan of
        other owners'); a page may hold fewer than `limit` jobs while its cursor is set. Raises
        InvalidInput(field="cursor") for a cursor not of this owner."""
        ...

    def update_job_status(self, job: Job, status: JobStatus, now: datetime, note: str | None = None) -> Job:
        """Set the status and the note (None clears it) if the version is still `job.version`; raises
        Conflict otherwise. Ending a job (cancelled or completed) takes it off its owner's active-jobs
        counter in the same write."""
        ...

    def scan_jobs(self) -> Iterator[Job]:
        """Every job (`duetime audit` only)."""
        ...

    def edit_job(self, edited: Job, replaced: list[ExecutionKey], first: Execution | None) -> None:
        """Store `edited` (its version one past the stored one) in one transaction with its waiting rows
        `replaced` by `first`: the job only if its stored version is still `edited.version - 1`, each replaced
        row deleted only if still `scheduled` (`first` may reuse one's key: it then takes that row's place),
        `first` put only if its key is free. Raises Conflict(field="version") and writes nothing otherwise.
        The owner's counters are untouched: an edit neither adds nor ends a job."""
        ...


class ExecutionStore(Protocol):
    """Executions by due partition (`hour#shard`) and due time; every state change is conditional and a
    worker's writes are fenced by its attempt number (raising StaleAttempt)."""

    # Whether every open execution is in its job's index of open runs (indexed_open_executions_of_job finds
    # them all), so a claim's overlap check reads nothing more (domain/job_index.py: on DynamoDB a plain run
    # claimed on time has no entry).
    indexes_every_open_run: bool

    def key_of(self, execution: Execution) -> ExecutionKey: ...

    def put_execution(self, execution: Execution) -> bool:
        """Create an execution unless its slot exists already; True if this call created it."""
        ...

    def put_executions(self, executions: list[Execution]) -> list[Execution]: ...

    def get_execution(self, key: ExecutionKey) -> Execution | None: ...

    def find_execution(self, job_id: str, execution_id: str) -> Execution | None: ...

    def list_executions(
        self, job_id: str, limit: int, cursor: str | None, newest_first: bool = True
    ) -> Page[Execution]:
        """A job's executions by id; raises InvalidInput(field="cursor") for a cursor not of this job."""
        ...

    def executions_of_job(self, job_id: str, newest_first: bool = True, limit: int = 50) -> list[Execution]: ...

    def iter_executions_of_job(self, job_id: str) -> Iterator[Execution]: ...

    def query_due(self, partition: str, after_ms: int, until_ms: int) -> list[Execution]:
        """Waiting executions in `partition` with after_ms < due <= until_ms, oldest first."""
        ...

    def sweep_open(self, partition: str, after_ms: int, until_ms: int) -> int:
        """Put into the open set every execution of `partition` due in (after_ms, until_ms] that is still open
        (waiting, running, failed with the owner not told) and not in it yet; returns how many. The reconciler
        sweeps each due range once it is overdue, so the open set need hold only what outlived its time: a
        store whose index entries cost writes (DynamoDB) leaves a new row out of it until then."""
        ...

    def open_executions(self, shard: int, until_ms: int) -> list[Execution]:
        """Executions of `shard` in the open set (waiting, running, failed with the owner not told) due at
        or before `until_ms`, oldest first."""
        ...

    def open_page(self, shard: int, until_ms: int, limit: int, after: str | None = None) -> OpenPage:
        """At most `limit` open executions of `shard` due at or before `until_ms`, in due order, after the
        position `after` (a token an earlier page returned): bounded work whatever the open set holds."""
        ...

    def open_executions_of_job(
        self, job_id: str, due_by: datetime | None = None, excluding: str | None = None
    ) -> list[Execution]:
        """The job's executions that have not ended (waiting, held or running), earliest due first: bounded
        by what is open (on DynamoDB, and by the job's rows due after the sweep's bound: minutes, not its
        history); with `due_by`, only those due at or before it; without the execution `excluding` names."""
        ...

    def indexed_open_executions_of_job(
        self, job_id: str, due_by: datetime | None = None, excluding: str | None = None
    ) -> list[Execution]:
        """open_executions_of_job's rows that are in the job's index of open runs: all of them, but on DynamoDB
        the plain runs of a job's schedule that are not in it yet (domain/job_index.py says which and where the
        claim finds them). What the claim's overlap check reads: one Query of the index."""
        ...

    def index_by_job(self, key: ExecutionKey) -> bool:
        """Enter the open execution at `key` in its job's index (an edit that moves the job's timing does it
        for its running runs); False if it has ended."""
        ...

    def hold_waiting(self, key: ExecutionKey) -> bool:
        """Take a paused job's waiting execution out of the open set; False if it is no longer waiting."""
        ...

    def unhold_waiting(self, key: ExecutionKey) -> bool:
        """Put a held execution back in the open set (its job resumed); False if it is no longer waiting."""
        ...

    def scan_open_executions(self) -> Iterator[StoredExecution]: ...

    def claim(
        self,
        key: ExecutionKey,
        worker_id: str,
        now: datetime,
        lease_until: datetime,
        max_attempts: int = 2**31,
        first_only: bool = False,
        index_by_job: bool = False,
    ) -> ClaimOutcome:
        """Claim the row in one conditional write: attempt + 1, a lease, and a new claim token stored on the
        row and returned on `claimed` (new_claim_token). `first_only` (an at-most-once job's run): only a
        `scheduled` row no attempt has claimed before; any other comes back as `current`. `index_by_job`: the
        run enters its job's index of open runs whatever its timing (domain/job_index.py)."""
        ...

    # The writes of an attempt's holder are fenced by the attempt and, when `claim_token` is given, by the
    # claim's token, both inside the one conditional write: a write naming the right attempt with a wrong
    # token raises StaleAttempt and changes nothing. Without a token (the service ending a lost or replaced
    # attempt it does not hold) the attempt alone fences.

    def heartbeat(
        self, key: ExecutionKey, attempt: int, lease_until: datetime, claim_token: str | None = None
    ) -> Execution:
        """Extend `attempt`'s lease; raises StaleAttempt if that attempt (with that token) no longer holds it."""
        ...

    def release(self, key: ExecutionKey, attempt: int, now: datetime, claim_token: str | None = None) -> bool: ...

    def finish(
        self,
        key: ExecutionKey,
        attempt: int,
        status: ExecutionStatus,
        now: datetime,
        result: Any = None,
        error: str | None = None,
        claim_token: str | None = None,
        ending: JobEnding | None = None,
        outcome: str | None = None,
    ) -> Execution:
        """Record the outcome of `attempt` (fenced by it and `claim_token`; raises StaleAttempt), with
        `ending`'s change of its job in the same write; the attempt's outcome is `outcome` (e.g.
        RESULT_UNKNOWN) when given, else the status."""
        ...

    def move_for_retry(
        self, key: ExecutionKey, attempt: int, moved: Execution, claim_token: str | None = None
    ) -> None: ...

    def end_waiting(
        self,
        key: ExecutionKey,
        status: ExecutionStatus,
        now: datetime,
        reason: str | None = None,
        skipped_count: int | None = None,
        ending: JobEnding | None = None,
    ) -> Execution | None:
        """End a still-`scheduled` execution (None if it was not waiting: nothing written), with `ending`'s
        change of its job in the same write."""
        ...

    def end_claimed(
        self,
        key: ExecutionKey,
        attempt: int,
        status: ExecutionStatus,
        now: datetime,
        reason: str,
        claim_token: str | None = None,
    ) -> Execution: ...

    def mark_notified(self, key: ExecutionKey, now: datetime, owner: str | None = None) -> None:
        """Record that the owner was told of this failed execution: it leaves the open set and, with `owner`,
        enters that owner's dead letters (list_dead_letters), in one write. No row: nothing to do."""
        ...

    def retry_failed(
        self, key: ExecutionKey, attempt: int, retried: Execution, ending: JobEnding | None = None
    ) -> bool:
        """Replace the failed row at `key` (still `failed` after `attempt`) by `retried` (waiting, in the
        partition of its new due time, out of the dead letters) in one transaction, with `ending` (a one-off
        job reopened) in it; False, with nothing written, if the row is no longer that failed one or the new
        key is taken."""
        ...

    def list_dead_letters(self, owner: str, limit: int, cursor: str | None) -> Page[Execution]:
        """The owner's executions that failed for good and were told, newest first (by when they were told),
        from an index of that owner's dead letters only; raises InvalidInput(field="cursor") for a cursor
        not of this owner."""
        ...

    def execution_ids_between(self, job_id: str, from_ms: int, to_ms: int) -> set[str]:
        """The ids of the job's stored executions (any status) whose slot is in [from_ms, to_ms): what a
        backfill must not create again, bounded by the range, not by the job's history."""
        ...

    def record_limit_wait(
        self, key: ExecutionKey, attempt: int, waited_ms: int, claim_token: str | None = None
    ) -> Execution:
        """Add `waited_ms` (the time the run was held back by a rate limit or concurrency cap) to the row's
        waitedForLimitMs, fenced like every write of the attempt's holder (raises StaleAttempt)."""
        ...

    def mark_late(self, key: ExecutionKey, now: datetime) -> Execution | None:
        """Record, in one conditional write, that the row was found past its job's lateness budget (lateAt =
        `now`) unless it was already; the row as written, or None (gone, or marked before): so a run's
        lateness is announced once, whoever finds it."""
        ...

    def add_count(self, key: str, delta: int, expires_at: int) -> None:
        """Add `delta` to the counter record `key` (a control record), forgotten after `expires_at` (epoch s)."""
        ...

    def record_checkpoint(
        self,
        key: ExecutionKey,
        attempt: int,
        checkpoint: str,
        now: datetime,
        claim_token: str | None = None,
        lease_until: datetime | None = None,
    ) -> Execution:
        """Store `attempt`'s checkpoint (compact JSON text, recorded at `now`) in the heartbeat's fenced write,
        extending the lease to `lease_until` in that same write when given; raises StaleAttempt if that
        attempt (with that token) no longer holds the row. Rows keep it across retries and takeovers."""
        ...

    def stored_buckets(self) -> set[str]:
        """The due-hour buckets that hold any row: a full scan, for the one-time `duetime reshard` only."""
        ...

    def reindex_open(self, key: ExecutionKey, stored: str) -> bool:
        """Move a row whose `open` index key is `stored` (an older form) to the key it has now."""
        ...


class ControlStore(Protocol):
    """Small records that coordinate the system: pre-loader shard leases and cursors, idempotency keys."""

    def get_control(self, key: str) -> dict[str, Any] | None: ...

    def get_controls(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The records of `keys` that exist, by key, read strongly (a batch's idempotency keys at once)."""
        ...

    def acquire_lease(self, key: str, owner: str, now_ms: int, until_ms: int) -> dict[str, Any] | None:
        """Take or renew the lease on `key` unless another holds it live; the record if `owner` holds it."""
        ...

    def advance_cursor(
        self, key: str, owner: str, cursor_ms: int, reconcile_from: str | None = None, swept_ms: int | None = None
    ) -> bool:
        """Move the lease holder's cursor, record where the reconciler goes on and how far the open rows were
        swept (`sweptMs`, kept when None), and hand the lease back, in one write; False if `owner` lost the
        lease meanwhile."""
        ...

    def release_lease(self, key: str, owner: str) -> bool:
        """Hand back `owner`'s lease on `key` without moving its cursor; False if `owner` did not hold it."""
        ...

    def announce_handlers(self, job_class: str, worker_id: str, names: list[str], now_ms: int, until_ms: int) -> None:
        """Record that `worker_id` serves `names` for `job_class` until `until_ms`; forget ended announcements."""
        ...

    def withdraw_handlers(self, job_class: str, worker_id: str) -> None: ...

    def announced_handlers(self, job_class: str, now_ms: int) -> set[str]:
        """The handler names announced for `job_class` by workers whose announcement is still live."""
        ...

    def get_calendars(self, owner: str) -> dict[str, Calendar]:
        """The owner's named calendars by name (one read: all of an owner's calendars are one record)."""
        ...

    def put_calendar(self, owner: str, calendar: Calendar) -> bool:
        """Create or replace the owner's calendar of that name; True if it is new."""
        ...

    def delete_calendar(self, owner: str, name: str) -> bool:
        """Forget the owner's calendar `name`; False if there was none."""
        ...

    def count_request(self, window: RateWindow) -> None:
        """Count one request in an owner's fixed rate window (one conditional increment, so it holds across
        API instances); raises QuotaExceeded if the window holds `window.limit` already."""
        ...

    def active_jobs(self, owner: str) -> int:
        """The owner's jobs not cancelled, as its counter (kept by create_job and update_job_status) stands."""
        ...

    # -- rate limits and concurrency caps (service/limits.py) -----------------------------------------------

    def get_limits(self, owner: str) -> dict[str, RateLimit]:
        """The owner's named limits by name (one read: all of an owner's limits are one record)."""
        ...

    def put_limit(self, owner: str, limit: RateLimit) -> bool:
        """Create or replace the owner's limit of that name; True if it is new."""
        ...

    def delete_limit(self, owner: str, name: str) -> bool:
        """Forget the owner's limit `name`; False if there was none."""
        ...

    def reserve_start(self, key: str, now_ms: int, interval_ms: float, burst: int) -> int:
        """Reserve one start in the token bucket `key` (domain.limits.reserve_start, applied atomically to
        the bucket's row: a transaction locally, a conditional write on AWS); the instant it may run."""
        ...

    def acquire_slot(self, key: str, holder: str, capacity: int, now_ms: int, until_ms: int) -> bool:
        """Hold one of `capacity` slots of `key` for `holder` until `until_ms` (renewing it if held already),
        in one atomic step that ignores holds ended by `now_ms`; False if all are held."""
        ...

    def renew_slot(self, key: str, holder: str, until_ms: int) -> bool:
        """Extend `holder`'s hold on a slot of `key` (its lease was extended); False if it holds none any more (its
        hold ended and an acquisition since dropped it)."""
        ...

    def release_slot(self, key: str, holder: str) -> None:
        """Give `holder`'s slot of `key` back (its run ended)."""
        ...

    def shards_of_bucket(self, bucket: str) -> int:
        """The shard count of due-hour bucket `bucket` (`YYYYMMDDHH`): fixed by its first writer (or now, with
        the configured count), never changed after, read once per process and bucket."""
        ...

    def recorded_shards(self, buckets: list[str]) -> dict[str, int]:
        """The shard counts of those of `buckets` that are fixed (a bucket not fixed holds no row)."""
        ...

    def most_shards(self) -> int:
        """How many shards the pre-loader and the reconciler visit: the configured count, or the largest any
        bucket was fixed with if that is more."""
        ...


class Store(JobStore, ExecutionStore, ControlStore, Protocol):
    """One object serving the three stores (both adapters keep them in one database)."""

    def batched(self) -> AbstractContextManager[None]:
        """A block whose writes (this thread's, of this store and of queues in the same database) may be
        committed together at its end, as a worker claiming or finishing several runs at once does. Each write
        keeps its own condition and error, and one that fails changes nothing; the others commit. Where writes
        are each their own request (DynamoDB) it changes nothing."""
        ...


class Queues(Protocol):
    """Each job class's due queue (delays, visibility, receive counts, redrive) and dead-letter queue."""

    def send(self, messages: Iterable[DueMessage], now: datetime) -> int:
        """Send each message to its class's queue, visible when it is due; returns the number sent."""
        ...

    def receive(self, job_class: str, max_messages: int, wait_seconds: float, visibility: float) -> list[Received]:
        """Up to `max_messages` visible messages, each hidden for `visibility` seconds; waits up to
        `wait_seconds` for one to become visible."""
        ...

    def extend(self, job_class: str, receipt: str, seconds: float) -> None:
        """Hide a received message for `seconds` from now (0: visible at once): it is received again then."""
        ...

    def runs_per_message(self, job_class: str) -> int:
        """How many runs a message of `job_class`'s queue may carry (1: a message is a run)."""
        ...

    def hold(self, job_class: str, receipt: str, seconds: float) -> None:
        """Keep a received message hidden for `seconds` from now while this worker holds its run (at claim,
        with each heartbeat); where several runs share a message, it stays hidden while any is held."""
        ...

    def settle(self, job_class: str, receipt: str) -> str | None:
        """A received message is handled: the receipt to delete now, or None while it carries other runs
        still open (it is deleted with the last)."""
        ...

    def delete(self, job_class: str, receipt: str) -> None: ...

    def delete_batch(self, job_class: str, receipts: list[str]) -> None: ...

    def dead_letter(self, job_class: str, body: dict[str, Any]) -> None: ...

    def dead_letter_depth(self, job_class: str) -> int: ...

    def receive_dead_letters(self, job_class: str, wait_seconds: float = 0) -> list[tuple[dict[str, Any], str]]: ...

    def delete_dead_letter(self, job_class: str, receipt: str) -> None: ...
