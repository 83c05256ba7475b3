"""The slots a job's plain runs may have, under the timings it had (domain/history.py): pure logic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime.domain.history import (
    MOST_TIMINGS,
    REACH_SLACK,
    STALE_WRITE,
    Timing,
    is_plain,
    newest_reach,
    slots_after,
    slots_before,
    slots_between,
    timings_kept,
    within_reach,
)
from duetime.domain.models import Job, JobStatus, Schedule
from duetime.service.dispatch import new_execution

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=300)


def job(**changes: object) -> Job:
    values: dict[str, object] = {
        "name": "h",
        "handler": "demo.echo",
        "schedule": Schedule(cron="*/10 * * * *"),
        "job_id": "j_01",
        "owner": "alice",
        "created_at": T0,
        "updated_at": T0,
        **changes,
    }
    return Job.model_validate(values)


def minutes(*values: int) -> list[datetime]:
    return [T0 + timedelta(minutes=m) for m in values]


def test_a_timing_has_its_schedule_s_slots_within_its_span_and_the_schedule_s_bounds():
    timing = Timing(Schedule(cron="*/10 * * * *"), 0, T0, T0, end=T0 + timedelta(minutes=35))
    assert timing.slots(T0 - timedelta(hours=1), T0 + timedelta(hours=1)) == minutes(0, 10, 20, 30)
    bounded = Timing(Schedule(cron="*/10 * * * *", start_at=minutes(15)[0], end_at=minutes(40)[0]), 0, T0, T0)
    assert bounded.slots(T0, T0 + timedelta(hours=1)) == minutes(20, 30, 40)
    # A one-off's one slot is its own whatever the span: `at` may be before the job was created.
    one_off = Timing(Schedule(at=T0 - timedelta(hours=2)), 0, T0, T0)
    assert one_off.slots(T0 - timedelta(days=1), T0) == [T0 - timedelta(hours=2)]


def test_newest_first_walks_back_across_timings_and_says_how_far_it_reached():
    old = Timing(Schedule(cron="*/10 * * * *"), 0, T0, T0).replaced(minutes(25)[0])
    new = Timing(Schedule(cron="*/15 * * * *"), 30, T0, minutes(25)[0])
    timings = [old, new]
    found, bound = slots_before(timings, minutes(61)[0], 3)
    assert found == minutes(60, 50, 45) and bound == minutes(45)[0]  # the old timing reaches past its edit
    found, bound = slots_before(timings, bound, 100)
    assert bound is None and found[0] == minutes(40)[0] and found[-1] == T0
    assert slots_after(timings, T0, minutes(31)[0], 3) == (minutes(0, 10, 20), True)
    assert slots_between(timings, minutes(29)[0], minutes(46)[0]) == minutes(30, 40, 45)


def test_a_replaced_timing_reaches_two_slots_past_an_hour_after_its_edit():
    daily = Timing(Schedule(cron="0 6 * * *"), 0, T0, T0).replaced(T0)
    assert daily.end == datetime(2026, 12, 3, 6, tzinfo=UTC) + timedelta(milliseconds=1)
    assert daily.edited_at == T0  # two slots on from REACH_AFTER_EDIT (an hour) after the edit
    assert Timing.from_record(daily.to_record()) == daily


def test_a_plain_run_is_written_without_an_entry_only_within_the_reach_a_reader_walks_from():
    active = job()
    assert within_reach(active, T0 + WINDOW + REACH_SLACK, T0, WINDOW)
    # Past the window, up to the schedule's second slot beyond it (a sent run's follower is one slot on).
    assert within_reach(active, minutes(20)[0], T0, WINDOW)
    assert not within_reach(active, minutes(30)[0], T0, WINDOW)  # a follower past excluded dates, say
    reach = newest_reach(active, [Timing.current(active, [])], T0, WINDOW)
    assert reach == minutes(20)[0] + timedelta(milliseconds=1)
    # A job that stopped is read from its last change (and STALE_WRITE), not from now.
    stopped = job(status=JobStatus.CANCELLED)
    later = T0 + timedelta(days=30)
    assert newest_reach(stopped, [], later, WINDOW) <= T0 + STALE_WRITE + WINDOW + REACH_SLACK + timedelta(minutes=20)


def test_an_edit_keeps_the_timing_it_replaces_and_drops_those_whose_rows_expired():
    original = job()
    current = Timing.current(original, [])
    retimed = job(schedule=Schedule(cron="*/15 * * * *"), updated_at=minutes(25)[0])
    kept = timings_kept([current], retimed, minutes(25)[0], timedelta(days=31))
    assert kept is not None and [t.schedule.cron for t in kept] == ["*/10 * * * *"]
    assert Timing.current(retimed, kept).start == minutes(25)[0]
    assert timings_kept([current], job(name="renamed"), T0, timedelta(days=31)) is None  # timing unchanged
    months = T0 + timedelta(days=90)
    assert [t.edited_at for t in timings_kept([*kept, current], retimed, months, timedelta(days=31)) or []] == [months]
    many = [current.replaced(T0 + timedelta(minutes=i)) for i in range(MOST_TIMINGS + 5)]
    assert len(timings_kept([*many, current], retimed, T0, timedelta(days=31)) or []) == MOST_TIMINGS


def test_only_a_run_due_at_its_slot_s_spread_is_plain():
    spread = job(jitter_seconds=30)
    run = new_execution(spread, minutes(10)[0], by_slot=True)
    assert run.spread_seconds == 30 and is_plain(run, 30)
    assert not is_plain(run.model_copy(update={"attempt": 1}), 30)
    assert not is_plain(run.model_copy(update={"due_at": run.due_at + timedelta(seconds=1)}), 30)
    assert new_execution(spread, minutes(10)[0], kind="catchup", by_slot=True).spread_seconds is None
    assert new_execution(spread, minutes(10)[0]).spread_seconds is None
