"""The API's request and response bodies: the pydantic models that both validate requests and generate
the OpenAPI document (duetime.api.openapi), so the two cannot drift apart."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_serializer, field_validator, model_validator

from duetime.definitions import (
    MAX_BATCH_JOBS,
    MAX_CHECKPOINT_BYTES,
    MAX_CONCURRENT_RUNS,
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_LIMIT_BURST,
    MAX_LIMIT_PER_SECOND,
    MAX_REDRIVE,
    MAX_RESULT_BYTES,
    MIN_LIMIT_PER_SECOND,
)
from duetime.domain.destinations import Notify
from duetime.domain.exclusions import (
    MAX_EXCLUSIONS,
    Calendar,
    check_bounded_entries,
    check_exclude_entry,
    parse_bounded_exclusion,
)
from duetime.domain.limits import RateLimit
from duetime.domain.models import (
    CRON_DESCRIPTION,
    EVERY_DESCRIPTION,
    MAX_JITTER_SECONDS,
    MAX_NOTE_CHARS,
    MAX_RUNS,
    CamelModel,
    CatchUp,
    DstPolicy,
    Execution,
    ExecutionStatus,
    Job,
    Overlap,
    RetryPolicy,
    RunKind,
    Schedule,
    UtcDatetime,
    check_payload_size,
    format_time,
    from_ms,
)
from duetime.domain.results import compact_json

MAX_PAGE = 100
# What a page's items may take (api.pages), measured as they travel in the proxy response (a JSON string
# inside Lambda's JSON reply, each non-ASCII character and quote escaped): under the 6 MB cap of a
# synchronous Lambda response, with room to spare for the envelope, headers and the cursor.
MAX_PAGE_BODY_BYTES = 4 * 1024 * 1024
MAX_ATTEMPT = 1_000_000
MAX_WORKER_ID_CHARS = 200  # the id a worker gave at claim (host-pid-random); longer is no worker's
MAX_CLAIM_TOKEN_CHARS = 200  # the secret handed out at claim (22 characters today); longer is no claim's


def _times(values: list[datetime]) -> list[str]:
    """A list of times as the API writes them (CamelModel's serializer formats only single times)."""
    return [format_time(t) for t in values]


class RunSummary(CamelModel):
    """One execution as schedule health shows it."""

    execution_id: str
    scheduled_at: UtcDatetime
    due_at: UtcDatetime
    status: ExecutionStatus
    kind: RunKind
    started_at: UtcDatetime | None = None
    finished_at: UtcDatetime | None = None
    error: str | None = None

    @classmethod
    def of(cls, execution: Execution | None) -> RunSummary | None:
        if execution is None:
            return None
        return cls(**execution.model_dump(include=set(cls.model_fields)))


class BudgetShare(CamelModel):
    """Of a job's runs due over the last `days` days (UTC, today included): how many started within its
    lateAfterSeconds, how many were found late, and the share in time (null when none was counted)."""

    days: int
    on_time: int
    late: int
    share: float | None = None


class JobResponse(Job):
    """A job as the API returns it: its definition, status, nextRunAt and, for cron jobs, the next runs.

    GET /jobs/{jobId} adds the schedule's health, derived from its newest executions: lastRun (the last run
    that started), lastSuccess, lastFailure (among the newest 20 executions) and pastDue (a waiting run
    more than two minutes past its dueAt while the job is active; null if none) and, for a job with
    lateAfterSeconds, withinBudget: the share of its runs started within it over the last 7 and 30 days.
    GET /jobs carries each job's nextRunAt, lastRun and pastDue (not its nextRuns, lastSuccess, lastFailure
    or withinBudget)."""

    next_runs: list[UtcDatetime] = Field(default_factory=list)
    last_run: RunSummary | None = None
    last_success: RunSummary | None = None
    last_failure: RunSummary | None = None
    past_due: RunSummary | None = None
    # GET /jobs/{jobId} of a job with lateAfterSeconds: the share of runs started within it, 7 and 30 days.
    within_budget: list[BudgetShare] = Field(default_factory=list)

    @field_serializer("next_runs", when_used="json")
    def _next_runs(self, value: list[datetime]) -> list[str]:
        return _times(value)


class JobPage(CamelModel):
    jobs: list[JobResponse]
    next_cursor: str | None = None


class ExecutionPage(CamelModel):
    executions: list[Execution]
    next_cursor: str | None = None


class RunNowRequest(CamelModel):
    """POST /jobs/{jobId}/run (the body is optional): a payload for this execution only, instead of the
    job's (the same size rule as a job's payload)."""

    payload: dict[str, Any] | None = None

    @field_validator("payload")
    @classmethod
    def _payload_size(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else check_payload_size(value)


class PreviewRequest(CamelModel):
    at: UtcDatetime | None = None
    cron: str | None = Field(default=None, min_length=1, max_length=200, description=CRON_DESCRIPTION)
    every: str | None = Field(default=None, min_length=1, max_length=64, description=EVERY_DESCRIPTION)
    start_at: UtcDatetime | None = None
    time_zone: str = Field(default="UTC", min_length=1, max_length=64)
    exclude: list[str] = Field(default_factory=list, max_length=MAX_EXCLUSIONS)
    end_at: UtcDatetime | None = None
    max_runs: int | None = Field(default=None, ge=1, le=MAX_RUNS)
    # A cron schedule's DST policy, as a job's schedule.dst.
    dst: DstPolicy | None = None
    from_: UtcDatetime | None = Field(default=None, alias="from")
    count: int = Field(default=10, ge=1, le=MAX_PAGE)
    # With a jobId, each run's dueAt shows that job's spread (the delay derives from the job id and slot).
    jitter_seconds: int = Field(default=0, ge=0, le=MAX_JITTER_SECONDS)
    job_id: str | None = Field(default=None, pattern=r"^j_[0-9a-f]{1,64}$")
    # Also answer the schedule's forecast: runs a day and a month, their AWS cost, a herd's suggested jitter.
    forecast: bool = False

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    @field_validator("exclude")
    @classmethod
    def _exclusions(cls, value: list[str]) -> list[str]:
        for entry in value:
            check_exclude_entry(entry)
        check_bounded_entries(value)  # a preview's dates are a request's, bounded as a job's are
        return value


class PreviewSlot(CamelModel):
    scheduled_at: UtcDatetime
    due_at: UtcDatetime


class PreviewForecast(CamelModel):
    """What the schedule comes to (domain.forecast): the average day's and month's runs over the next year,
    the AWS requests of a run and of a month's runs in USD (us-east-1 on-demand prices of `pricesAsOf`, as
    `duetime capacity` counts them; the handler's own time and heartbeats not included), and whether every
    slot starts a round minute (`herd`), with a jitterSeconds that spreads the runs."""

    runs_per_day: float
    runs_per_month: float
    cost_per_run_usd: float
    cost_per_month_usd: float
    prices_as_of: str
    herd: bool
    suggested_jitter_seconds: int | None = None


class PreviewResponse(CamelModel):
    """The run times (slots); with a jobId, `slots` gives beside each when it is due: the slot plus that
    job's spread over jitterSeconds (absent without a jobId); with `forecast: true`, the forecast."""

    runs: list[UtcDatetime]
    slots: list[PreviewSlot] | None = None
    forecast: PreviewForecast | None = None

    @field_serializer("runs", when_used="json")
    def _runs(self, value: list[datetime]) -> list[str]:
        return _times(value)


class CalendarRequest(CamelModel):
    """PUT /calendars/{name}: the calendar's dates and inclusive ranges, as in a job's `exclude` (local dates
    in each job's own time zone); it replaces the whole calendar."""

    dates: list[str] = Field(max_length=MAX_EXCLUSIONS)

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    @field_validator("dates")
    @classmethod
    def _dates(cls, value: list[str]) -> list[str]:
        for entry in value:
            parse_bounded_exclusion(entry)
        return value


class CalendarResponse(CamelModel):
    name: str
    dates: list[str]
    updated_at: UtcDatetime

    @classmethod
    def of(cls, calendar: Calendar) -> CalendarResponse:
        return cls(name=calendar.name, dates=list(calendar.dates), updated_at=from_ms(calendar.updated_ms))


class CalendarList(CamelModel):
    calendars: list[CalendarResponse]


class HeartbeatRequest(CamelModel):
    """POST /executions/{executionId}/heartbeat: the attempt, the worker that claimed it and the claim's
    token (handed to whoever runs the attempt: `claimToken` in a Lambda target's event, DUETIME_CLAIM_TOKEN
    in an ECS task's environment)."""

    attempt: int = Field(ge=1, le=MAX_ATTEMPT)
    worker_id: str = Field(min_length=1, max_length=MAX_WORKER_ID_CHARS)
    claim_token: str = Field(min_length=1, max_length=MAX_CLAIM_TOKEN_CHARS)
    # The attempt's progress, recorded in the heartbeat's own fenced write (any JSON value, null included,
    # of at most MAX_CHECKPOINT_BYTES); the execution's next attempt receives it as `lastCheckpoint`.
    checkpoint: Any = Field(default=None, description="progress the next attempt resumes from (any JSON value)")

    @field_validator("checkpoint")
    @classmethod
    def _checkpoint_size(cls, value: Any) -> Any:
        compact_json(value, "checkpoint", MAX_CHECKPOINT_BYTES)
        return value

    @property
    def has_checkpoint(self) -> bool:
        """Whether the body gave `checkpoint` (null is a checkpoint too; an absent one is not)."""
        return "checkpoint" in self.model_fields_set


class HeartbeatResponse(CamelModel):
    lease_until: UtcDatetime


class CompleteRequest(CamelModel):
    """POST /executions/{executionId}/complete. `result` names the outcome; a value goes in `output`."""

    attempt: int = Field(ge=1, le=MAX_ATTEMPT)
    worker_id: str = Field(min_length=1, max_length=MAX_WORKER_ID_CHARS)
    claim_token: str = Field(min_length=1, max_length=MAX_CLAIM_TOKEN_CHARS)
    result: Literal["succeeded", "failed"]
    # Any length the request body allows: stored cut to MAX_ERROR_BYTES, as a worker's own errors are.
    error: str | None = None
    retryable: bool = True
    output: Any = None

    @field_validator("output")
    @classmethod
    def _output_size(cls, value: Any) -> Any:
        compact_json(value, "output", MAX_RESULT_BYTES)  # the limit of a result a worker stores itself
        return value


class ErrorDetail(CamelModel):
    code: str
    message: str
    field: str | None = None


class ErrorResponse(CamelModel):
    """Every 4xx body: {"error": {"code", "message", "field"?}}."""

    error: ErrorDetail


class BatchCreateRequest(CamelModel):
    """POST /jobs/batch: up to 500 jobs in a body of at most 5 MB, each a POST /jobs body with an optional
    `idempotencyKey` (the Idempotency-Key of that one job, sharing its keys). Each item is checked on its own:
    a bad item is answered in its place, never refusing the others."""

    jobs: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=MAX_BATCH_JOBS,
        description="each a job as POST /jobs takes it (JobSpec), with an optional idempotencyKey "
        f"(1..{MAX_IDEMPOTENCY_KEY_CHARS} printable ASCII characters)",
    )


class BatchItemResult(CamelModel):
    """One item's answer, in the request's order: `status` is what POST /jobs would answer for it alone
    (201 created, 200 the job its idempotencyKey created before, 4xx with `error` naming the item's field);
    a 429's `retryAfter` says in how many seconds the item may succeed. A created or replayed item answers
    its whole `job`, or under `Prefer: return=minimal` only its `jobId` and `nextRunAt`."""

    status: int
    job: JobResponse | None = None
    job_id: str | None = None
    next_run_at: datetime | None = None
    error: ErrorDetail | None = None
    retry_after: int | None = None


class BatchCreateResponse(CamelModel):
    results: list[BatchItemResult]


class JobChange(CamelModel):
    """PATCH /jobs/{jobId}: pause or resume (`status`, with an optional `note`), or edit the job's spec: any
    of its fields at the top level, each replacing the job's whole field (a `schedule` or `retry` is given
    in full; null clears an optional one), under the `version` read from GET /jobs/{jobId}. The edited job
    is checked as a POST body is, so each field's limits are JobSpec's. Not both in one request."""

    status: Literal["paused", "active"] | None = None
    note: str | None = Field(default=None, min_length=1, max_length=MAX_NOTE_CHARS)
    version: int | None = Field(default=None, ge=1, description="the job's version as read; required with an edit")
    name: str | None = None
    handler: str | None = None
    payload: dict[str, Any] | None = None
    schedule: Schedule | None = None
    retry: RetryPolicy | None = None
    timeout_seconds: int | None = None
    overlap: Overlap | None = None
    catch_up: CatchUp | None = None
    starting_deadline_seconds: int | None = None
    job_class: str | None = None
    exclude: list[str] | None = None
    jitter_seconds: int | None = None
    pause_after_failures: int | None = None
    tags: dict[str, str] | None = None
    notify: Notify | None = None

    @property
    def spec_changes(self) -> dict[str, Any]:
        """The spec fields the request gave (a null included), by their Python names."""
        return {name: getattr(self, name) for name in self.model_fields_set - {"status", "note", "version"}}


class RedriveRequest(CamelModel):
    """POST /dead-letters/redrive: the failed executions to retry, by id, or the caller's dead letters that
    match a filter (`jobId`, `failedAfter` <= finishedAt < `failedBefore`, or `all`), `limit` of them per
    request from `cursor` (the answer's `nextCursor` goes on)."""

    execution_ids: list[str] | None = Field(default=None, min_length=1, max_length=MAX_REDRIVE)
    job_id: str | None = Field(default=None, min_length=1, max_length=80)
    failed_after: UtcDatetime | None = None
    failed_before: UtcDatetime | None = None
    all: bool = False
    limit: int = Field(default=MAX_REDRIVE, ge=1, le=MAX_REDRIVE)
    cursor: str | None = Field(default=None, min_length=1)

    @field_validator("execution_ids")
    @classmethod
    def _ids(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not 0 < len(v) <= 300 for v in value):
            raise ValueError("each execution id must be 1 to 300 characters")
        return value

    @model_validator(mode="after")
    def _one_selection(self) -> RedriveRequest:
        filtered = self.all or any(v is not None for v in (self.job_id, self.failed_after, self.failed_before))
        if (self.execution_ids is not None) == filtered:
            raise ValueError("give either executionIds, or a filter: jobId, failedAfter, failedBefore or all")
        return self


class RedriveRefusal(CamelModel):
    """An execution a redrive did not retry, with the error a retry of it alone answers."""

    execution_id: str
    code: str
    message: str


class RedriveResponse(CamelModel):
    retried: list[Execution]
    refused: list[RedriveRefusal]
    # A filtered redrive: where the next request goes on among the caller's dead letters (None: at the end).
    next_cursor: str | None = None


class BackfillRequest(CamelModel):
    """POST /jobs/{jobId}/backfill: run every slot of the job's schedule in [from, to) (UTC, to <= now, at
    most MAX_BACKFILL_SLOTS slots). `overlap`: `forbid` (default) runs them one at a time and never beside
    another running run of the job; `allow` lets them run together and beside the live schedule."""

    start: UtcDatetime = Field(alias="from")
    end: UtcDatetime = Field(alias="to")
    overlap: Literal["allow", "forbid"] = "forbid"


class BackfillResponse(CamelModel):
    """What a backfill did: runs created (kind `backfill`, due now), slots whose execution existed already
    (left as they were: a second identical request creates nothing), excluded slots recorded skipped, and
    the range's first and last slot of the schedule (absent when it holds none)."""

    created: int
    present: int
    skipped: int
    first_slot: UtcDatetime | None = None
    last_slot: UtcDatetime | None = None
    overlap: Literal["allow", "forbid"]


class LimitRequest(CamelModel):
    """PUT /limits/{name}: a rate limit (perSecond starts a second, with burst more at once after a quiet
    spell) and optionally a cap on the runs under it at once; it replaces the whole limit."""

    per_second: float = Field(ge=MIN_LIMIT_PER_SECOND, le=MAX_LIMIT_PER_SECOND)
    burst: int = Field(default=0, ge=0, le=MAX_LIMIT_BURST)
    max_concurrent: int | None = Field(default=None, ge=1, le=MAX_CONCURRENT_RUNS)

    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class LimitResponse(CamelModel):
    name: str
    per_second: float
    burst: int
    max_concurrent: int | None = None
    updated_at: UtcDatetime

    @classmethod
    def of(cls, limit: RateLimit) -> LimitResponse:
        return cls(
            name=limit.name,
            per_second=limit.per_second,
            burst=limit.burst,
            max_concurrent=limit.max_concurrent,
            updated_at=from_ms(limit.updated_ms),
        )


class LimitList(CamelModel):
    limits: list[LimitResponse]
