"""Whether an instant is a slot of a schedule: how a row planned under an older schedule is recognised."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime.domain.cron import CronSchedule
from duetime.domain.interval import IntervalSchedule
from duetime.domain.recurrence import is_slot


def test_cron_slots_in_a_zone_across_a_dst_change():
    schedule = CronSchedule("30 1 * * *", "America/New_York")
    for slot in schedule.runs(datetime(2026, 10, 30, tzinfo=UTC), 5):  # over the November fall-back
        assert is_slot(schedule, slot)
        assert not is_slot(schedule, slot + timedelta(minutes=1))
        assert not is_slot(schedule, slot - timedelta(hours=1))


def test_interval_slots_match_to_the_millisecond_a_row_keeps():
    anchor = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
    schedule = IntervalSchedule("90m", anchor)
    slot = schedule.runs(anchor, 3)[-1]
    stored = slot.replace(microsecond=slot.microsecond // 1000 * 1000)  # what a row keeps
    assert is_slot(schedule, stored)
    assert not is_slot(schedule, stored + timedelta(minutes=30))
