"""The preview's forecast (domain.forecast): runs a day and a month over the next year, their AWS cost from
the capacity model's figures, and a herd's suggested jitterSeconds. Expected counts are written from the
calendar, never from the engine."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from duetime.domain.capacity import CRON_RUN, ONE_OFF, Inputs, estimate, heartbeats
from duetime.domain.costs import Prices
from duetime.domain.exclusions import Exclusions
from duetime.domain.forecast import MAX_COUNTED, cost_per_run, forecast
from duetime.domain.models import Schedule

START = datetime(2027, 1, 4, tzinfo=UTC)  # a Monday


def cron(expression: str, **bounds: object) -> Schedule:
    return Schedule.model_validate({"cron": expression, **bounds})


def weekdays_in_year_from(first: date) -> int:
    return sum((first + timedelta(days=n)).isoweekday() <= 5 for n in range(365))


@pytest.mark.parametrize(
    ("schedule", "per_year"),
    [
        pytest.param(cron("0 9 * * *"), 365, id="daily"),
        pytest.param(cron("0 9 * * 1-5"), weekdays_in_year_from(START.date()), id="weekdays"),
        pytest.param(cron("0 0 1 * *"), 12, id="monthly"),
        pytest.param(Schedule.model_validate({"every": "15m", "startAt": "2027-01-04T00:00:00Z"}), 365 * 96, id="15m"),
        pytest.param(cron("* * * * *"), 365 * 1440, id="every-minute-carried-past-the-count"),
        pytest.param(cron("*/5 * * * * *"), 365 * 17_280, id="every-5-seconds"),
        pytest.param(
            Schedule.model_validate({"every": "1s", "startAt": "2027-01-04T00:00:00Z"}), 365 * 86_400, id="1s"
        ),
        pytest.param(cron("30 0 9 * * *"), 365, id="daily-at-a-second"),
        pytest.param(cron("0 9 * * *", endAt="2027-01-13T23:00:00Z"), 10, id="end-at"),
        pytest.param(cron("0 9 * * *", maxRuns=3), 3, id="max-runs"),
        pytest.param(Schedule.model_validate({"at": "2027-01-05T00:00:00Z"}), 1, id="one-off"),
    ],
)
def test_runs_a_day_and_a_month_average_the_next_year(schedule: Schedule, per_year: int) -> None:
    ahead = forecast(schedule, START)
    assert ahead.runs_per_day == pytest.approx(per_year / 365, abs=0.01)
    assert ahead.runs_per_month == pytest.approx(per_year / 12, abs=0.01)


def test_excluded_dates_are_not_counted() -> None:
    schedule = cron("0 9 * * *")
    exclusions = Exclusions(["2027-01-10/2027-01-19"], "UTC")
    assert forecast(schedule, START, exclusions).runs_per_month == pytest.approx(355 / 12, abs=0.01)


def test_counting_is_bounded_however_often_the_schedule_runs() -> None:
    # Every minute for a year is 525,600 slots: MAX_COUNTED are walked, the rest carried at their rate
    assert MAX_COUNTED < 525_600
    assert forecast(cron("* * * * *"), START).runs_per_day == 1440


def test_a_run_costs_what_the_capacity_model_prices_for_it() -> None:
    # The capacity model's per-million figures for a cron run without heartbeats, less the handler's own time
    # (Lambda duration) and the pre-loader's share, which depend on the deployment's load, not on the schedule
    inputs = Inputs(rate=100, profile="cron", avg_seconds=1)
    assert heartbeats(inputs.avg_seconds, inputs.lease_seconds) == 0
    priced = estimate(inputs).cost_per_million
    parts = ("dynamodbWrites", "dynamodbReads", "sqs", "lambdaRequests", "apiGateway", "lambdaApi")
    assert cost_per_run(CRON_RUN, Prices()) * 1e6 == pytest.approx(sum(priced[p] for p in parts), abs=1e-3)
    ahead = forecast(cron("0 9 * * *"), START)
    assert ahead.cost_per_run_usd == cost_per_run(CRON_RUN, Prices())
    # the month is rounded to a millionth of a dollar
    assert ahead.cost_per_month_usd == pytest.approx(365 / 12 * ahead.cost_per_run_usd, abs=1e-6)
    # A one-off is submitted through the API: its run costs the API request and the API function's invocation too
    one_off = forecast(Schedule.model_validate({"at": "2027-01-05T00:00:00Z"}), START)
    assert one_off.cost_per_run_usd == cost_per_run(ONE_OFF, Prices()) > ahead.cost_per_run_usd
    submitted = estimate(Inputs(rate=100, profile="one-off", avg_seconds=1)).cost_per_million
    assert cost_per_run(ONE_OFF, Prices()) * 1e6 == pytest.approx(sum(submitted[p] for p in parts), abs=1e-3)


@pytest.mark.parametrize(
    ("schedule", "jitter", "herd", "suggested"),
    [
        pytest.param(cron("0 * * * *"), 0, True, 60, id="on-the-hour"),
        pytest.param(cron("30 2 * * *"), 0, True, 60, id="round-minute"),
        pytest.param(cron("*/5 * * * *"), 0, True, 60, id="every-5-minutes"),
        pytest.param(cron("* * * * *"), 0, True, 30, id="every-minute-below-its-period"),
        pytest.param(cron("7 3 * * *"), 0, False, None, id="an-odd-minute-daily"),
        pytest.param(cron("0 * * * *"), 20, True, None, id="spread-already"),
    ],
)
def test_a_herd_gets_a_jitter_below_its_period(
    schedule: Schedule, jitter: int, herd: bool, suggested: int | None
) -> None:
    ahead = forecast(schedule, START, jitter_seconds=jitter)
    assert (ahead.herd, ahead.suggested_jitter_seconds) == (herd, suggested)


def test_seconds_schedules_herd_only_at_a_round_minutes_first_second() -> None:
    """`0 * * * * *` is `* * * * *`: every slot the first second of a minute (a herd); `*/5 * * * * *` and a
    1-second interval spread over the minute's seconds already."""
    assert forecast(cron("0 * * * * *"), START).herd
    assert forecast(cron("0 * * * * *"), START) == forecast(cron("* * * * *"), START)
    assert not forecast(cron("*/5 * * * * *"), START).herd
    assert not forecast(cron("30 0 9 * * *"), START).herd
