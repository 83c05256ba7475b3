"""Jobs and executions: the domain models, validated by pydantic, free of any storage shape."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

from duetime.definitions import DEFAULT_JOB_CLASS, MAX_CONCURRENT_RUNS, MAX_PAYLOAD_BYTES, MAX_TIMEOUT_SECONDS
from duetime.domain.destinations import Notify
from duetime.domain.exclusions import MAX_EXCLUSIONS, check_exclude_entry
from duetime.domain.results import compact_json

MAX_RUNS = 1_000_000  # a schedule's maxRuns
# jitterSeconds: a run is spread over at most an hour after its slot (and less than the schedule's period).
MAX_JITTER_SECONDS = 3600
# What the OpenAPI document says of `cron` and `every` (docs/schedules.md has the whole of it).
CRON_DESCRIPTION = (
    "5 fields (minute hour day-of-month month day-of-week), or 6 with a seconds field first, as Quartz and Spring"
    " order them: `*/5 * * * * *` runs every 5 seconds"
)
EVERY_DESCRIPTION = "an interval of whole seconds, from 1 s to 366 days: 30s, 90m, 1h30m, 2d, rate(90 minutes)"
MAX_PAUSE_AFTER_FAILURES = 100
# Tags: a small string map, filterable as `tag=key:value`, so a key has no ':' and both are short.
MAX_TAGS = 20
MAX_TAG_KEY_CHARS = 64
MAX_TAG_VALUE_CHARS = 256
TAG_KEY = re.compile(r"[A-Za-z0-9_./-]{1,64}")
MAX_NOTE_CHARS = 500  # the note stored with a pause or resume
MAX_LATE_AFTER_SECONDS = 7 * 86400  # a job's lateAfterSeconds: a run is late this long after its dueAt


def to_utc(value: datetime) -> datetime:
    """An aware datetime in UTC; a naive one is taken to be UTC already.

    Raises ValueError (so pydantic reports the field) for a time whose UTC instant falls outside years
    1..9999, e.g. 0001-01-01T00:00:00+01:00.
    """
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("time is out of range once converted to UTC") from exc


def format_time(value: datetime) -> str:
    """ISO 8601 UTC with milliseconds, as the API writes every time: 2026-11-30T20:30:00.000Z."""
    return to_utc(value).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def whole_ms(value: datetime) -> datetime:
    """`value` cut to whole milliseconds, the precision every time is stored and answered at."""
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def to_ms(value: datetime) -> int:
    return round(to_utc(value).timestamp() * 1000)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def from_ms(ms: int) -> datetime:
    """The instant `ms` milliseconds after the epoch, exactly (integer arithmetic, no float rounding)."""
    return EPOCH + timedelta(milliseconds=ms)


UtcDatetime = Annotated[datetime, AfterValidator(to_utc)]


class CamelModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    @field_serializer("*", when_used="json")
    def _times(self, value: Any) -> Any:
        return format_time(value) if isinstance(value, datetime) else value


class JobStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    # The schedule's bounds (endAt, maxRuns) are reached and its last run has ended: nothing runs again.
    COMPLETED = "completed"


# A job in one of these is over: it no longer counts against its owner's active-jobs quota.
ENDED_JOB_STATUSES = (JobStatus.CANCELLED, JobStatus.COMPLETED)


class ExecutionStatus(StrEnum):
    SCHEDULED = "scheduled"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"

    @property
    def is_terminal(self) -> bool:
        return self not in (ExecutionStatus.SCHEDULED, ExecutionStatus.RUNNING)


class Overlap(StrEnum):
    ALLOW = "allow"
    FORBID = "forbid"
    REPLACE = "replace"


class Delivery(StrEnum):
    """How often one slot may start: `at-least-once` runs it again after a lost worker or a failure (retries),
    `at-most-once` never starts it a second time (a lost run ends with its result unknown; no retries)."""

    AT_LEAST_ONCE = "at-least-once"
    AT_MOST_ONCE = "at-most-once"


# The outcome recorded on an at-most-once attempt whose worker was lost: it may or may not have run.
RESULT_UNKNOWN = "unknown"


class CatchUp(StrEnum):
    LATEST = "latest"
    ALL = "all"
    NONE = "none"


def _given_or_left_out(schema: dict[str, Any]) -> None:
    """A nullable enum's JSON schema as the enum alone (the field may be left out, never sent as null)."""
    schema.pop("default", None)
    for option in schema.pop("anyOf", []):
        if option.get("type") != "null":
            schema.update(option)


class DstPolicy(CamelModel):
    """What a cron schedule does on DST days (domain.cron), replacing its default by kind: `gap` `shift` runs a
    matched time that does not exist at the gap's end (once), `skip` does not run it; `fold` `first`, `last`
    or `both` runs a time that happens twice at its first, its second or both occurrences. A key left out
    keeps the default: fixed-time schedules shift and run first, others skip and run both."""

    # A key is given or left out (null is not written in the schema: API Gateway's models drop null from an
    # enum), and only the keys given are shown.
    gap: Literal["shift", "skip"] | None = Field(default=None, json_schema_extra=_given_or_left_out)
    fold: Literal["first", "last", "both"] | None = Field(default=None, json_schema_extra=_given_or_left_out)

    @model_serializer(mode="wrap")
    def _given_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}


class Schedule(CamelModel):
    """One of `at` (one run), `cron` in `timeZone`, or `every` (an interval of elapsed time from `startAt`).

    A repeating schedule may be bounded: no slot before `startAt` or after `endAt`, at most `maxRuns` slots.
    """

    at: UtcDatetime | None = None
    cron: str | None = Field(default=None, min_length=1, max_length=200, description=CRON_DESCRIPTION)
    every: str | None = Field(default=None, min_length=1, max_length=64, description=EVERY_DESCRIPTION)
    # The interval's anchor: slots are startAt + k * every. Unset at submission: the job's creation time.
    # For cron: no slot before it.
    start_at: UtcDatetime | None = None
    time_zone: str = Field(default="UTC", min_length=1, max_length=64)
    # No slot after this instant (inclusive bound); the job ends `completed` after its last run.
    end_at: UtcDatetime | None = None
    # At most this many slots from the first; the job ends `completed` after the last.
    max_runs: int | None = Field(default=None, ge=1, le=MAX_RUNS)
    # A cron schedule's DST policy; None: the default by kind (docs/schedules.md).
    dst: DstPolicy | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Schedule:
        if sum(kind is not None for kind in (self.at, self.cron, self.every)) != 1:
            raise ValueError("give exactly one of 'at', 'cron' or 'every'")
        return self

    @field_validator("dst")
    @classmethod
    def _dst_for_cron(cls, value: DstPolicy | None, info: ValidationInfo) -> DstPolicy | None:
        # An interval counts elapsed time and a one-off names an instant: neither meets a wall clock.
        if value is not None and info.data.get("cron") is None:
            raise ValueError("dst applies to a cron schedule only")
        return value

    @property
    def is_bounded(self) -> bool:
        return self.end_at is not None or self.max_runs is not None

    @property
    def is_cron(self) -> bool:
        return self.cron is not None

    @property
    def is_recurring(self) -> bool:
        """Runs again after each run (cron or interval), so each dispatch creates the next slot."""
        return self.cron is not None or self.every is not None


class RetryPolicy(CamelModel):
    max_attempts: int = Field(default=3, ge=1, le=100)
    base_delay_seconds: float = Field(default=30, ge=0, le=86400)
    max_delay_seconds: float = Field(default=900, ge=0, le=86400)


class JobSpec(CamelModel):
    """What a user submits: the definition of a job (POST /jobs)."""

    name: str = Field(min_length=1, max_length=128)
    handler: str = Field(min_length=1, max_length=256)
    payload: dict[str, Any] = Field(default_factory=dict)
    schedule: Schedule
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    timeout_seconds: int = Field(default=3600, ge=1, le=MAX_TIMEOUT_SECONDS)
    overlap: Overlap = Overlap.FORBID
    catch_up: CatchUp = CatchUp.LATEST
    starting_deadline_seconds: int | None = Field(default=None, ge=1, le=365 * 86400)
    job_class: str = Field(default=DEFAULT_JOB_CLASS, min_length=1, max_length=64)
    # Local dates (in schedule.timeZone) whose slots are skipped and recorded with reason `excluded`.
    exclude: list[str] = Field(default_factory=list, max_length=MAX_EXCLUSIONS)

    # Each run is due this many seconds after its slot at most: a deterministic spread (domain.spread).
    jitter_seconds: int = Field(default=0, ge=0, le=MAX_JITTER_SECONDS)
    # After this many consecutive runs that failed for good, the job is paused with a note saying why.
    pause_after_failures: int | None = Field(default=None, ge=1, le=MAX_PAUSE_AFTER_FAILURES)
    tags: dict[str, str] = Field(default_factory=dict)
    # The owner's named limit (PUT /limits/{name}) its runs take a start from; None: no rate limit.
    rate_limit: str | None = Field(default=None, min_length=1, max_length=64)
    # At most this many runs of this job at once (beyond `overlap`: run-nows and retries count too).
    max_concurrent: int | None = Field(default=None, ge=1, le=MAX_CONCURRENT_RUNS)
    # Where the owner hears of runs that failed for good and of automatic pauses (domain.destinations).
    notify: Notify | None = None
    # at-most-once: no slot starts twice (docs/lifecycle.md); its retry.maxAttempts is 1.
    delivery: Delivery = Delivery.AT_LEAST_ONCE
    # A run not started this long after its dueAt is late: an `Execution Late` event, the owner told once,
    # and the share of runs started within it shown with the job (service/lateness.py). None: no budget.
    late_after_seconds: int | None = Field(default=None, ge=1, le=MAX_LATE_AFTER_SECONDS)

    @field_validator("exclude")
    @classmethod
    def _exclusions(cls, value: list[str]) -> list[str]:
        for entry in value:
            check_exclude_entry(entry)
        return value

    @field_validator("payload")
    @classmethod
    def _payload_size(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_payload_size(value)

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str]) -> dict[str, str]:
        return check_tags(value)


def check_payload_size(value: dict[str, Any]) -> dict[str, Any]:
    """Refuse a payload over MAX_PAYLOAD_BYTES as compact JSON (ValueError, so pydantic names the field)."""
    compact_json(value, "payload", MAX_PAYLOAD_BYTES)
    return value


def check_tags(value: dict[str, str]) -> dict[str, str]:
    """Refuse more than MAX_TAGS tags, a key not of TAG_KEY's characters or a value too long."""
    if len(value) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} tags are allowed, not {len(value)}")
    for key, tag_value in value.items():
        if not TAG_KEY.fullmatch(key):
            raise ValueError(f"tag key {key[:80]!r} must be 1 to {MAX_TAG_KEY_CHARS} of A-Z a-z 0-9 _ . / -")
        if len(tag_value) > MAX_TAG_VALUE_CHARS:
            raise ValueError(f"tag {key!r} has a value over {MAX_TAG_VALUE_CHARS} characters")
    return value


class Job(JobSpec):
    """A stored job: the definition plus identity, owner and lifecycle."""

    model_config = ConfigDict(extra="ignore")

    job_id: str
    owner: str
    status: JobStatus = JobStatus.ACTIVE
    created_at: UtcDatetime
    updated_at: UtcDatetime
    version: int = 1
    next_run_at: UtcDatetime | None = None
    # Why the job was last paused or resumed: the owner's note, or the reason of an automatic pause.
    note: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    # The owner's groups when the job was submitted (from the token): grants naming a group are checked
    # again at claim, when no token is at hand. Stored with the job, never shown in the API.
    owner_groups: SkipJsonSchema[list[str]] = Field(default_factory=list, exclude=True)


class AttemptRecord(CamelModel):
    """One attempt of an execution, kept in its history."""

    model_config = ConfigDict(extra="ignore")

    attempt: int
    worker_id: str
    started_at: UtcDatetime
    finished_at: UtcDatetime | None = None
    outcome: str | None = None
    error: str | None = None


# scheduled: a slot of the schedule; manual: "run now"; catchup: a missed slot run late by catch-up `all`.
RunKind = Literal["scheduled", "manual", "catchup", "backfill"]


class Execution(CamelModel):
    """One scheduled run of a job. `scheduled_at` is its slot and never changes; `due_at` moves on retry."""

    model_config = ConfigDict(extra="ignore")

    execution_id: str
    job_id: str
    scheduled_at: UtcDatetime
    due_at: UtcDatetime
    job_class: str = DEFAULT_JOB_CLASS
    status: ExecutionStatus = ExecutionStatus.SCHEDULED
    attempt: int = 0
    worker_id: str | None = None
    lease_until: UtcDatetime | None = None
    started_at: UtcDatetime | None = None
    finished_at: UtcDatetime | None = None
    result: Any = None
    error: str | None = None
    skip_reason: str | None = None
    skipped_count: int | None = None
    kind: RunKind = "scheduled"
    attempts: list[AttemptRecord] = Field(default_factory=list)
    # The secret minted when the current attempt was claimed: only its holder knows it, and every write of
    # that attempt (heartbeat, complete, release) must name it. Stored on the row, never shown in the API.
    claim_token: SkipJsonSchema[str | None] = Field(default=None, exclude=True)
    # A run-now's payload, used instead of the job's for this execution only.
    payload: dict[str, Any] | None = None
    # The spread (the job's jitterSeconds) a new plain run of the schedule was made with: a store whose rows
    # are keyed by due time may then find its row by its slot's key (domain/history.py). Stored, never shown.
    spread_seconds: SkipJsonSchema[int | None] = Field(default=None, exclude=True)
    # The version of its job the row was planned under: a pass that read the job eventually consistently reads it
    # again, strongly, when a row it dispatches is newer than what it read (service/dispatch.py). Stored, never shown.
    job_version: SkipJsonSchema[int | None] = Field(default=None, exclude=True)
    # The slot's number in a schedule with maxRuns (1 for the first): carried from row to row, no count kept.
    run_number: int | None = None
    # The attempt a retry of a failed execution restarted from (POST /executions/{id}/retry): attempt numbers
    # go on from it (the fencing token stays monotonic) while the retry budget counts attempt - retryBase.
    retry_base: int = 0
    # A backfilled run's overlap policy (POST /jobs/{jobId}/backfill): `forbid` waits for the job's other
    # running runs, `allow` does not. None on every other run (they follow the job's own policy).
    overlap: Overlap | None = None
    # How long the run waited for its rate limit or a concurrency slot before it was claimed: not the
    # scheduler's lateness (startLateness excludes it). None when it never waited.
    waited_for_limit_ms: int | None = None
    # The last progress a handler recorded (ctx.checkpoint), which the next attempt resumes from.
    checkpoint: Checkpoint | None = None
    # When the run was found past its job's lateAfterSeconds, unstarted (by the reconciler) or starting
    # (at its claim): set once, so its lateness is announced once. None: never found late.
    late_at: UtcDatetime | None = None

    def lease_live(self, now: datetime) -> bool:
        return self.status == ExecutionStatus.RUNNING and self.lease_until is not None and self.lease_until > now


class Checkpoint(CamelModel):
    """A handler's last recorded progress (ctx.checkpoint, or `checkpoint` on the heartbeat route): the JSON
    value it gave, the attempt that recorded it and when. The next attempt of the execution receives `state`."""

    model_config = ConfigDict(extra="ignore")

    state: Any = None
    attempt: int
    recorded_at: UtcDatetime


Execution.model_rebuild()
