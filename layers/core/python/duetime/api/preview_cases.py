"""The use case of POST /schedules/preview: a schedule's next runs (their spread and costs too) before a job
has it."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime

from pydantic import ValidationError

from duetime.api.models import (
    PreviewForecast,
    PreviewRequest,
    PreviewResponse,
    PreviewSlot,
)
from duetime.api.parsing import validation_error
from duetime.api.routing import Call, Reply
from duetime.domain.costs import PRICES_AS_OF
from duetime.domain.errors import InvalidInput, InvalidSchedule
from duetime.domain.exclusions import Exclusions
from duetime.domain.forecast import forecast
from duetime.domain.horizon import HORIZON_RULE, within_horizon
from duetime.domain.models import Schedule
from duetime.service import calendars as calendar_cases
from duetime.service import jobs as job_cases


def preview_schedule(call: Call) -> Reply:
    request = call.body_as(PreviewRequest)
    calendars = calendar_cases.referenced_calendars(call.ports, call.owner, request.exclude)
    try:
        schedule = Schedule(
            at=request.at,
            cron=request.cron,
            every=request.every,
            start_at=request.start_at,
            time_zone=request.time_zone,
            end_at=request.end_at,
            max_runs=request.max_runs,
            dst=request.dst,
        )
    except ValidationError as exc:
        raise validation_error(exc) from exc
    try:
        job_cases.check_bounds(schedule)
    except InvalidInput as exc:  # named for a job's `schedule.*`; here the fields are top level
        raise InvalidInput(exc.message, field=(exc.field or "").removeprefix("schedule.") or None) from exc
    if request.jitter_seconds and request.job_id is None:
        raise InvalidInput("jitterSeconds spreads a job's runs by its id: give jobId too", field="jobId")
    start: datetime = request.from_ or call.ports.clock()
    if not within_horizon(start):
        raise InvalidInput(f"from is out of range: {HORIZON_RULE}", field="from")
    try:
        runs = job_cases.preview(schedule, start, request.count, request.exclude, calendars)
    except InvalidSchedule as exc:  # named for a job's `schedule.*`; here the fields are top level
        raise InvalidSchedule(exc.message, field=(exc.field or "").removeprefix("schedule.") or None) from exc
    slots = None
    if request.job_id is not None:
        due = job_cases.preview_due(request.job_id, request.jitter_seconds, runs)
        slots = [PreviewSlot(scheduled_at=slot, due_at=at) for slot, at in zip(runs, due, strict=True)]
    outlook = None
    if request.forecast:
        exclusions = Exclusions(request.exclude, schedule.time_zone, calendars)
        ahead = forecast(schedule, start, exclusions, request.jitter_seconds)
        outlook = PreviewForecast(**asdict(ahead), prices_as_of=PRICES_AS_OF)
    # `slots` and `forecast` are absent unless asked for, not null
    answer = PreviewResponse(runs=runs, slots=slots, forecast=outlook)
    return Reply(200, answer.model_dump(mode="json", by_alias=True, exclude_none=True))
