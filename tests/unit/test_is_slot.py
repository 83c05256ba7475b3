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


def test_one_second_slots_match_to_the_millisecond_a_row_keeps():
    """Slots a second apart: a row's rounded milliseconds still name its own slot, never the one before."""
    anchor = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)  # a row keeps .123 (rounded down)
    schedule = IntervalSchedule("1s", anchor)
    for slot in schedule.runs(anchor, 3):
        assert is_slot(schedule, slot.replace(microsecond=123_000))
        assert not is_slot(schedule, slot + timedelta(milliseconds=500))
    up = IntervalSchedule("1s", anchor.replace(microsecond=123_600))  # a row keeps .124 (rounded up)
    assert is_slot(up, up.next_after(anchor).replace(microsecond=124_000))


def test_seconds_cron_slots():
    schedule = CronSchedule("*/5 * * * * *", "America/New_York")
    for slot in schedule.runs(datetime(2026, 3, 8, 6, 59, 50, tzinfo=UTC), 4):  # over the spring-forward
        assert is_slot(schedule, slot)
        assert not is_slot(schedule, slot + timedelta(seconds=1))
        assert not is_slot(schedule, slot - timedelta(seconds=2))
