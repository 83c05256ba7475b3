"""Where croniter is proven right (zones without DST, Vixie day-field rules), our engine agrees with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from croniter import croniter
from duetime.domain.cron import CronSchedule

EXPRESSIONS = [
    "* * * * *",
    "*/5 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "0 0 1 * *",
    "15 10 * * MON-FRI",
    "0 9 1,15 * *",
    "0 0 * * 0",
    "0 0 * * 7",
    "59 23 31 12 *",
    "0 12 29 2 *",
    "5-10/2 3 * JAN,JUL *",
    "0 0 13 * FRI",
    "*/15 9-17 * * 1-5",
    "0 6 1-7 * *",
    "45 4 * * SUN",
    "0 0 1 */3 *",
    "10 0-23/6 * * *",
]
STARTS = [
    datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=d, minutes=m)
    for d, m in [(0, 0), (37, 61), (120, 7), (300, 1439), (365, 1)]
]


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_next_runs_equal_croniters_in_zones_without_dst(expression, zone):
    schedule = CronSchedule(expression, zone)
    for start in STARTS:
        ours = schedule.runs(start, 12)
        theirs_iter = croniter(expression, start.astimezone(schedule.zone))
        theirs = [theirs_iter.get_next(datetime).astimezone(UTC) for _ in range(12)]
        assert ours == theirs, (expression, zone, start)
