"""Lateness budgets (a job's lateAfterSeconds, issue 34): a run not started by `dueAt + lateAfterSeconds` is
late. It is found late once, by whichever looks first: the reconciler, among the open rows it already reads
(a run that has not started), or the claim that finally starts it. A conditional write on the row (lateAt)
makes that once; the finder then emits an `Execution Late` event, tells the owner through the class's DLQ
(as a pause is told: the notifier reaches the job's `notify` destinations) and counts the run late.

The job's health shows the share of its runs started within budget over the last 7 and 30 days, from two
counters a day (runs started in time, runs found late), kept only for jobs with a budget: a claim within
budget adds one UpdateItem, a late run two (the mark and its count). A run is counted once, by the day it
was due: in time at its first attempt's claim, late when it is marked. Only first attempts are judged (a
retry's dueAt moved on purpose, after a start).

On AWS each count is also a CloudWatch metric (RunsOnTime, RunsLate) with an `Owner` dimension whose values
are bounded: the owners the stack names (CDK context metricOwners) as themselves, everyone else as `other`
(owner_dimension). A team alarms on its own owner's RunsLate; the metric count, 2 x (named + 1), is fixed
at deploy and priced by `duetime capacity --metric-owners`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from duetime.definitions import METRIC_OTHER_OWNERS, METRIC_RUNS_LATE, METRIC_RUNS_ON_TIME
from duetime.domain.events import LATE_DETAIL_TYPE, late_event
from duetime.domain.models import Execution, ExecutionStatus, Job, JobStatus, format_time, to_ms
from duetime.domain.quotas import COUNT_ATTR
from duetime.service.context import Ports

log = logging.getLogger("duetime.lateness")

COUNTER_PREFIX = "lateness#"
ON_TIME, LATE = "onTime", "late"
SHARE_WINDOWS_DAYS = (7, 30)
COUNTER_KEEP_DAYS = max(SHARE_WINDOWS_DAYS) + 2  # a counter outlives the longest window it is summed in


def counter_key(job_id: str, day: date, which: str) -> str:
    """The record counting `which` (ON_TIME or LATE) of the job's runs due on `day` (UTC)."""
    return f"{COUNTER_PREFIX}{job_id}#{day:%Y%m%d}#{which}"


def owner_dimension(owner: str, named: tuple[str, ...]) -> str:
    """The `Owner` value of an owner's lateness metrics: itself when the stack names it, else `other`. A
    fixed list, not the first owners a process happens to see: every function agrees on every owner's value,
    and the metrics a deploy can create are known before it."""
    return owner if owner in named else METRIC_OTHER_OWNERS


def budget_end(job: Job, execution: Execution) -> datetime | None:
    """When `execution` becomes late: its dueAt plus the job's lateAfterSeconds; None without a budget, or for
    a run that is not a first attempt."""
    if job.late_after_seconds is None or execution.attempt > 1 or execution.retry_base:
        return None
    return execution.due_at + timedelta(seconds=job.late_after_seconds)


def judge_start(ports: Ports, job: Job, claimed: Execution) -> None:
    """At the claim of a run's first attempt: count it in time, or mark it late (once) and announce it."""
    end = budget_end(job, claimed)
    if end is None or claimed.attempt != 1 or claimed.started_at is None:
        return
    if claimed.started_at <= end:
        _count(ports, job, claimed, ON_TIME)
    elif claimed.late_at is None:
        _mark(ports, job, claimed, claimed.started_at)


def find_unstarted(ports: Ports, jobs: dict[str, Job], waiting: list[Execution], now: datetime) -> int:
    """Among waiting rows the reconciler read, mark those past their budget late (once each) and announce
    them; returns how many it marked. No read beyond what the reconciler holds; a write per late run."""
    marked = 0
    for execution in waiting:
        job = jobs.get(execution.job_id)
        # A cancelled or completed job's waiting row is ended by the dispatch that follows, not late.
        if job is None or job.status != JobStatus.ACTIVE or execution.attempt != 0 or execution.late_at is not None:
            continue
        end = budget_end(job, execution)
        if end is None or now <= end:
            continue
        try:
            marked += _mark(ports, job, execution, now)
        except Exception:  # one run's mark never stops the reconciler's pass: the next cycle tries again
            log.exception("marking %s late failed", execution.execution_id)
    return marked


def _mark(ports: Ports, job: Job, execution: Execution, now: datetime) -> bool:
    late = ports.store.mark_late(ports.store.key_of(execution), now)
    if late is None:
        return False  # marked already by the other finder: announced there
    _count(ports, job, late, LATE)
    if ports.events is not None:
        ports.events.publish([late_event(late, job, now)])
    ports.queues.dead_letter(late.job_class, late_notice(job, late, now))
    return True


def _count(ports: Ports, job: Job, execution: Execution, which: str) -> None:
    day = execution.due_at.date()
    expires = to_ms(execution.due_at + timedelta(days=COUNTER_KEEP_DAYS)) // 1000
    ports.store.add_count(counter_key(job.job_id, day, which), 1, expires)
    if ports.owner_metric is not None:
        name = METRIC_RUNS_LATE if which == LATE else METRIC_RUNS_ON_TIME
        try:
            ports.owner_metric(name, owner_dimension(job.owner, ports.settings.metric_owners))
        except Exception:  # a metric is told, never fatal: the late run is still announced and its owner told
            log.exception("the %s metric of %s was not emitted", name, execution.execution_id)


def late_notice(job: Job, execution: Execution, now: datetime) -> dict[str, Any]:
    """The DLQ message the drain turns into the owner's notice of a late run (delivered to the job's `notify`
    destinations as a failure's is)."""
    started = execution.started_at if execution.status != ExecutionStatus.SCHEDULED else None
    return {
        "kind": "late",
        "executionId": execution.execution_id,
        "jobId": job.job_id,
        "owner": job.owner,
        "jobName": job.name,
        "dueAt": format_time(execution.due_at),
        "lateAfterSeconds": job.late_after_seconds,
        "startedAt": format_time(started) if started else None,
        "foundLateAt": format_time(now),
        "notify": job.notify.in_notice() if job.notify else None,
        "ownerGroups": list(job.owner_groups),
        "event": LATE_DETAIL_TYPE,
    }


@dataclass(frozen=True)
class WithinBudget:
    """Of the job's runs due over the last `days` days: how many started within budget, how many were late,
    and the share in time (None when none was counted)."""

    days: int
    on_time: int
    late: int

    @property
    def share(self) -> float | None:
        counted = self.on_time + self.late
        return None if counted == 0 else round(self.on_time / counted, 4)

    def to_json(self) -> dict[str, Any]:
        return {"days": self.days, "onTime": self.on_time, "late": self.late, "share": self.share}


def within_budget(ports: Ports, job: Job, now: datetime) -> list[WithinBudget]:
    """The share of the job's runs started within budget over each of SHARE_WINDOWS_DAYS, up to today (UTC):
    one batch read of its counters (60 keys). Empty for a job without a budget."""
    if job.late_after_seconds is None:
        return []
    today = now.date()
    days = [today - timedelta(days=n) for n in range(max(SHARE_WINDOWS_DAYS))]
    keys = [counter_key(job.job_id, day, which) for day in days for which in (ON_TIME, LATE)]
    found = ports.store.get_controls(keys)

    def total(which: str, window: int) -> int:
        return sum(int(found.get(counter_key(job.job_id, day, which), {}).get(COUNT_ATTR, 0)) for day in days[:window])

    return [WithinBudget(window, total(ON_TIME, window), total(LATE, window)) for window in SHARE_WINDOWS_DAYS]
