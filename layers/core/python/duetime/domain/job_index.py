"""Which runs enter a job's index of open runs (`openByJob` on DynamoDB) and where the claim finds the rest.

An entry costs a run two write units on DynamoDB (it is added, then removed when the run ends), and the claim's
overlap check is its one reader on the hot path. So a plain run of its schedule (a slot's first attempt) is
written without one. It enters the index in the write that makes it one the claim of another run could not
find by its key: a claim long after its due time or with a longer lease than BY_JOB_LEASE_SECONDS, a claim of a
job repeating faster than once a minute (or spread over more: its window would hold several slots), its first
heartbeat, or the pre-loader's sweep once it is `reconcile_after` overdue. So a plain run running under a live
lease without an entry was claimed on time within the last BY_JOB_LEASE_SECONDS: it is due within
UNINDEXED_WINDOW_SECONDS of now, and the claim of another run of its job reads it by its key (its slot follows
from the schedule: none for a run claimed on time of a job a minute or more apart). Every other run enters the
index as it is written: a run-now, a backfilled or caught-up slot, a retry. An edit that moves a job's timing
enters its running runs first (their slots are the old schedule's). Cancel, pause, resume and GET read the
index and the job's rows due after the sweep's bound. On SQLite an entry costs nothing and every open run has
one from its write.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

from duetime.definitions import RUNNING_DUE_MARGIN_SECONDS
from duetime.domain.cron import CronSchedule
from duetime.domain.interval import parse_every
from duetime.domain.keys import execution_id
from duetime.domain.models import Execution, Job, Schedule
from duetime.domain.recurrence import recurrence_of
from duetime.domain.spread import spread_due

# A claim holding a longer lease than this (the job classes' default is 30 s) enters its run at once.
BY_JOB_LEASE_SECONDS = 40
# ...as does a claim this long after the run's due time (a slot received late, a run held back by its limit).
BY_JOB_LATE_SECONDS = 10
# Clocks of two workers may differ by this much (NTP keeps AWS's within milliseconds).
BY_JOB_SKEW_SECONDS = 5
# A plain run without an entry that runs under a live lease is due within this many seconds before now.
UNINDEXED_WINDOW_SECONDS = BY_JOB_LEASE_SECONDS + BY_JOB_LATE_SECONDS + BY_JOB_SKEW_SECONDS
# A job whose slots may be closer than this, or spread over more, has its runs entered at once: otherwise its
# claims would read several rows by key where the index query reads none.
MIN_UNINDEXED_PERIOD = timedelta(minutes=1)


@lru_cache(maxsize=4096)
def _cron_repeats_within_a_minute(expression: str, time_zone: str) -> bool:
    cron = CronSchedule(expression, time_zone)
    return cron.has_seconds and len(cron.seconds) > 1


def repeats_within_a_minute(schedule: Schedule) -> bool:
    """Whether two slots of `schedule` may be less than a minute apart: an interval under a minute, or a
    cron schedule whose seconds field names more than one second (whole minutes are a minute apart in
    elapsed time, across DST changes too)."""
    if schedule.every is not None:
        return parse_every(schedule.every) < MIN_UNINDEXED_PERIOD
    if schedule.cron is not None:
        return _cron_repeats_within_a_minute(schedule.cron, schedule.time_zone)
    return False


def plain_runs_indexed(job: Job) -> bool:
    """Whether `job`'s plain runs enter its index as they are written (see the module's docstring)."""
    too_spread = job.jitter_seconds > MIN_UNINDEXED_PERIOD.total_seconds()
    return job.schedule.is_recurring and (too_spread or repeats_within_a_minute(job.schedule))


def indexed_at_write(execution: Execution) -> bool:
    """Whether an open row enters its job's index with its write (the store's rule; SQLite's holds every one):
    all but a plain run of its schedule."""
    return not (execution.kind == "scheduled" and execution.attempt == 0)


def indexed_at_claim(due_at: datetime, now: datetime, lease_until: datetime) -> bool:
    """Whether a claim at `now` holding the run until `lease_until` enters it in its job's index whatever its
    job: a claim the window of unindexed_slots would not find (late, or with a long lease). A claim of a job
    whose runs are all in the index (plain_runs_indexed) enters it too."""
    late = (now - due_at).total_seconds() > BY_JOB_LATE_SECONDS
    return late or (lease_until - now).total_seconds() > BY_JOB_LEASE_SECONDS


def unindexed_slots(job: Job, own_slot: datetime, now: datetime) -> list[datetime]:
    """The slots (not `own_slot`) of `job` whose plain run may be running under a live lease without an index
    entry: those due in (now - UNINDEXED_WINDOW_SECONDS, now + RUNNING_DUE_MARGIN_SECONDS]. None for a job whose
    runs are all entered at write, or a one-off. A job a minute or more apart has at most two; a run claimed on
    time has none when its job repeats a minute or more apart."""
    recurrence = recurrence_of(job.schedule, job.created_at)
    if recurrence is None or plain_runs_indexed(job):
        return []
    low = now - timedelta(seconds=UNINDEXED_WINDOW_SECONDS)
    high = now + timedelta(seconds=RUNNING_DUE_MARGIN_SECONDS)
    # A slot's run is due up to jitter_seconds after it: start that much earlier.
    slot = recurrence.next_after(low - timedelta(seconds=job.jitter_seconds))
    found: list[datetime] = []
    while slot <= high:
        due = spread_due(job.job_id, slot, job.jitter_seconds)
        if low < due <= high and slot != own_slot:
            found.append(slot)
        slot = recurrence.next_after(slot)
    return found


def plain_run(job: Job, slot: datetime) -> Execution:
    """The plain run of `job` in `slot` as its row is written (service.dispatch.new_execution): what the claim
    needs to find its key."""
    return Execution(
        execution_id=execution_id(job.job_id, slot),
        job_id=job.job_id,
        scheduled_at=slot,
        due_at=spread_due(job.job_id, slot, job.jitter_seconds),
        job_class=job.job_class,
    )
