"""The API's request and response bodies: the pydantic models that both validate requests and generate
the OpenAPI document (duetime.api.openapi), so the two cannot drift apart."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_serializer, field_validator

from duetime.definitions import MAX_RESULT_BYTES
from duetime.domain.exclusions import MAX_EXCLUSIONS, Calendar, check_exclude_entry, parse_exclusion
from duetime.domain.models import CamelModel, Execution, Job, UtcDatetime, format_time, from_ms
from duetime.domain.results import compact_json

MAX_PAGE = 100
MAX_ATTEMPT = 1_000_000
MAX_WORKER_ID_CHARS = 200  # the id a worker gave at claim (host-pid-random); longer is no worker's
MAX_CLAIM_TOKEN_CHARS = 200  # the secret handed out at claim (22 characters today); longer is no claim's


def _times(values: list[datetime]) -> list[str]:
    """A list of times as the API writes them (CamelModel's serializer formats only single times)."""
    return [format_time(t) for t in values]


class JobResponse(Job):
    """A job as the API returns it: its definition, status, nextRunAt and, for cron jobs, the next runs."""

    next_runs: list[UtcDatetime] = Field(default_factory=list)

    @field_serializer("next_runs", when_used="json")
    def _next_runs(self, value: list[datetime]) -> list[str]:
        return _times(value)


class JobPage(CamelModel):
    jobs: list[JobResponse]
    next_cursor: str | None = None


class ExecutionPage(CamelModel):
    executions: list[Execution]
    next_cursor: str | None = None


class StatusChange(CamelModel):
    """PATCH /jobs/{jobId}: pause or resume (DELETE cancels)."""

    status: Literal["paused", "active"]


class PreviewRequest(CamelModel):
    at: UtcDatetime | None = None
    cron: str | None = Field(default=None, min_length=1, max_length=200)
    every: str | None = Field(default=None, min_length=1, max_length=64)
    start_at: UtcDatetime | None = None
    time_zone: str = Field(default="UTC", min_length=1, max_length=64)
    exclude: list[str] = Field(default_factory=list, max_length=MAX_EXCLUSIONS)
    from_: UtcDatetime | None = Field(default=None, alias="from")
    count: int = Field(default=10, ge=1, le=MAX_PAGE)

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    @field_validator("exclude")
    @classmethod
    def _exclusions(cls, value: list[str]) -> list[str]:
        for entry in value:
            check_exclude_entry(entry)
        return value


class PreviewResponse(CamelModel):
    runs: list[UtcDatetime]

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
            parse_exclusion(entry)
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
