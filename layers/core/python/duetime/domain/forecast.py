"""A schedule's forecast, before the job exists: its runs per day and per month, what those runs cost on AWS
a month, and whether its slots pile onto the start of a popular minute (a herd) with a jitterSeconds that
spreads them. Pure: the schedule, an instant and the price list in, numbers out (no store is read).

Counting walks the schedule's included slots over the year from `start`, at most MAX_COUNTED of them: a
schedule with more (every minute: 525,600 a year) is counted that far and carried to the year's end at the
same rate. The cost is the AWS requests one run makes (domain.costs: the figures `duetime capacity` uses, without
heartbeats and without the handler's own time, which depend on the handler), times the runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.domain.costs import CRON_RUN, ONE_OFF, CallProfile, Prices
from duetime.domain.exclusions import Exclusions
from duetime.domain.models import MAX_JITTER_SECONDS, Schedule
from duetime.domain.recurrence import next_included, recurrence_of

YEAR = timedelta(days=365)
MAX_COUNTED = 2000  # slots walked at most (bounded work per preview)
HERD_SAMPLE = 50  # slots looked at to tell a herd and the schedule's shortest period
# People write schedules on the hour and on round minutes (:00, :05, ..., :30): their runs all fall due in
# the first second of those minutes, with every other deployment's jobs written the same way.
HERD_MINUTE_STEP = 5
MAX_SUGGESTED_JITTER_SECONDS = 60


@dataclass(frozen=True)
class Forecast:
    """`runs_per_day` and `runs_per_month`: the average day's and month's over the year from the start (a
    monthly schedule runs once a month; a weekday one 0.71 times a day); `cost_per_month_usd` of a month's
    runs' AWS requests; `herd`: every slot starts a round minute (its first second); with it,
    `suggested_jitter_seconds` spreads the runs (None when no herd or the schedule is spread already)."""

    runs_per_day: float
    runs_per_month: float
    cost_per_run_usd: float
    cost_per_month_usd: float
    herd: bool
    suggested_jitter_seconds: int | None


def cost_per_run(profile: CallProfile, prices: Prices) -> float:
    """USD of one run's AWS requests: the write and read units, SQS requests (with the claim's visibility
    change), its share of a Lambda invocation (a batch of 10 messages of the profile's runs) and API
    requests with the API function's invocations, as `duetime capacity` prices them (API Gateway's REST API
    at its first tier's price: a schedule alone makes far fewer than 333 million requests a month)."""
    write_units = profile.executions_wcu + profile.index_wcu + profile.jobs_wcu
    per_million = (
        write_units * prices.dynamodb_write_per_million
        + profile.read_units * prices.dynamodb_read_per_million
        + profile.run_sqs_requests * prices.sqs_per_million
        + prices.lambda_requests_per_million / profile.runs_per_batch
        + profile.api_requests * prices.api_gateway_per_million("rest")
        + profile.api_function_per_million(prices)
    )
    return per_million / 1e6


def forecast(
    schedule: Schedule,
    start: datetime,
    exclusions: Exclusions | None = None,
    jitter_seconds: int = 0,
    prices: Prices | None = None,
) -> Forecast:
    """The forecast of `schedule` from `start` (aware), its excluded dates left out, bounded by its endAt and
    maxRuns; `jitter_seconds`: the spread the job has already (no suggestion then)."""
    prices = prices or Prices()
    exclusions = exclusions or Exclusions([], schedule.time_zone)
    slots = _slots(schedule, start, exclusions)
    year = _count(schedule, slots, start, YEAR)
    day, month = year / 365, year / 12
    per_run = cost_per_run(CRON_RUN if schedule.is_recurring else ONE_OFF, prices)
    sample = list(itertools.islice(slots(), HERD_SAMPLE))
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(sample)]
    period = min(gaps) if gaps else None
    # At the first second of a round minute, or of every few minutes (each shared with every such schedule).
    on_the_minute = bool(sample) and all(slot.second == 0 and slot.microsecond == 0 for slot in sample)
    frequent = period is not None and period <= HERD_MINUTE_STEP * 60
    herd = on_the_minute and (frequent or all(slot.minute % HERD_MINUTE_STEP == 0 for slot in sample))
    suggested = None
    if herd and jitter_seconds == 0:
        period = period or float(MAX_SUGGESTED_JITTER_SECONDS * 2)
        # Less than the period (a run is due before the next slot), as jitterSeconds must be.
        suggested = max(1, min(MAX_SUGGESTED_JITTER_SECONDS, MAX_JITTER_SECONDS, int(period // 2)))
    return Forecast(
        runs_per_day=round(day, 2),
        runs_per_month=round(month, 2),
        cost_per_run_usd=per_run,
        cost_per_month_usd=round(month * per_run, 6),
        herd=herd,
        suggested_jitter_seconds=suggested,
    )


Slots = Callable[[], Iterator[datetime]]


def _slots(schedule: Schedule, start: datetime, exclusions: Exclusions) -> Slots:
    """A maker of iterators over the schedule's included slots after `start`, within endAt and maxRuns."""

    def walk() -> Iterator[datetime]:
        if schedule.at is not None:
            if schedule.at > start:
                yield schedule.at
            return
        recurrence = recurrence_of(schedule, created_at=start)
        assert recurrence is not None
        current = start
        for _ in range(schedule.max_runs if schedule.max_runs is not None else MAX_COUNTED * 10):
            found = next_included(recurrence, exclusions, current)
            if found is None or (schedule.end_at is not None and found > schedule.end_at):
                return
            yield found
            current = found

    return walk


def _count(schedule: Schedule, slots: Slots, start: datetime, window: timedelta) -> float:
    """The slots in (start, start + window]; past MAX_COUNTED, carried at their rate to the window's end (or
    the schedule's endAt, and no further than its maxRuns)."""
    end = start + window
    counted = 0
    for slot in slots():
        if slot > end:
            break
        counted += 1
        if counted == MAX_COUNTED:
            until = end if schedule.end_at is None else min(end, schedule.end_at)
            carried = counted * ((until - start) / (slot - start))
            return carried if schedule.max_runs is None else min(carried, float(schedule.max_runs))
    return float(counted)
