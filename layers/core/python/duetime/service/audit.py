"""`duetime audit`: check a running system's invariants (a diagnostic that scans; never on the hot path)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from duetime.domain.job_index import indexed_at_claim, plain_runs_indexed
from duetime.domain.keys import open_index_key, preload_record_key, shard_of_partition
from duetime.domain.models import Execution, ExecutionStatus, Job, JobStatus, format_time, to_ms
from duetime.service.context import Ports
from duetime.service.dispatch import reconcile_after


@dataclass(frozen=True)
class Finding:
    """One broken invariant: which check, and the execution or job it is about."""

    check: str
    subject: str
    detail: str


@dataclass
class AuditReport:
    findings: list[Finding] = field(default_factory=list)
    waiting: int = 0
    running: int = 0
    active_cron_jobs: int = 0
    dead_letters: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.findings

    def lines(self) -> list[str]:
        depth = ", ".join(f"{name} {count}" for name, count in sorted(self.dead_letters.items()))
        head = (
            f"open executions: {self.waiting} waiting, {self.running} running; "
            f"active cron jobs: {self.active_cron_jobs}; DLQ depth: {depth or 'none'}"
        )
        body = [f"  {f.check}: {f.subject}: {f.detail}" for f in self.findings]
        verdict = "no invariant broken" if self.ok else f"{len(self.findings)} finding(s)"
        return [head, *body, verdict]


def stale_after(ports: Ports) -> timedelta:
    """How long an open execution may wait past its due time or lease before the reconciler should have
    acted: its own grace plus one pre-load cycle to run in."""
    return reconcile_after(ports) + timedelta(seconds=ports.settings.preload_interval_seconds)


def swept_through(ports: Ports) -> dict[int, int]:
    """How far each shard's sweep has gone (its pre-load record's `sweptMs`), for the shards that have swept."""
    shards = range(max(ports.settings.shards, ports.store.most_shards()))
    records = ports.store.get_controls([preload_record_key(shard) for shard in shards])
    return {
        shard: int(record["sweptMs"])
        for shard in shards
        if (record := records.get(preload_record_key(shard))) is not None and "sweptMs" in record
    }


def _why_in_job_index(execution: Execution, job: Job | None, unswept: bool) -> str | None:
    """Why an open row must be in its job's index of open runs by now (domain/job_index.py), or None if it may
    be out of it: a plain run of its schedule, claimed on time under a short lease, not reached by the sweep."""
    if execution.status.is_terminal:
        return None
    if not unswept:
        return f"due {format_time(execution.due_at)}, and its shard's sweep has passed it"
    if execution.kind != "scheduled" or (execution.status == ExecutionStatus.SCHEDULED and execution.attempt > 0):
        return f"a {execution.kind} run at attempt {execution.attempt}, entered as it is written"
    if execution.status == ExecutionStatus.RUNNING and job is not None and plain_runs_indexed(job):
        return "its job repeats within a minute (or is spread over more): its claim entered it"
    started, lease = execution.started_at, execution.lease_until
    if execution.status != ExecutionStatus.RUNNING or started is None or lease is None:
        return None
    if indexed_at_claim(execution.due_at, started, lease):
        return f"claimed {format_time(started)} until {format_time(lease)}: late or long, entered by its claim"
    return None


def audit(ports: Ports, now: datetime | None = None) -> AuditReport:
    """Check docs/lifecycle.md's invariants over every open execution, every job and every DLQ.

    - every open execution sits in the partition of its due hour and shard, and in the `open` index once its
      shard's sweep has passed its due time;
    - every waiting or running execution is in its job's index of open runs unless it is a plain run of its
      schedule, claimed on time under a short lease, that the sweep has not reached (domain/job_index.py);
    - no running execution's lease ended longer ago than one reconcile cycle (it is abandoned), unless its job
      is paused (a takeover would start a new attempt: it waits for resume);
    - no waiting execution of an active job is overdue by longer than one reconcile cycle (stuck);
    - every active cron job has a waiting execution (its chain of slots is unbroken);
    - no failed execution's owner is left untold longer than one reconcile cycle;
    - each job class's DLQ is empty (a message there is a failure whose owner was not told yet).
    """
    now = now or ports.clock()
    late = now - stale_after(ports)
    report = AuditReport()
    jobs = {job.job_id: job for job in ports.store.scan_jobs()}
    swept = swept_through(ports)
    waiting_of: Counter[str] = Counter()
    running_of: Counter[str] = Counter()
    for stored in ports.store.scan_open_executions():
        execution = stored.execution
        subject = execution.execution_id
        expected = ports.store.key_of(execution)
        if stored.key != expected:
            report.findings.append(
                Finding("misplaced", subject, f"stored at {stored.key.pk} {stored.key.sk}, due in {expected.pk}")
            )
        shard = open_index_key(expected)
        job = jobs.get(execution.job_id)
        # A paused job's waiting rows are held out of the index until resume (the reconciler skips them).
        held = job is not None and job.status == JobStatus.PAUSED and execution.status == ExecutionStatus.SCHEDULED
        # A row enters the index when its shard's sweep passes its due time (service/dispatch.py, sweep), if not
        # before: one the sweep has not reached yet may be out of it.
        swept_to = swept.get(shard_of_partition(expected.pk))
        unswept = swept_to is None or to_ms(execution.due_at) > swept_to
        if stored.open_shard != shard and not (stored.open_shard is None and (held or unswept)):
            report.findings.append(
                Finding("not in the open index", subject, f"openShard {stored.open_shard!r}, expected {shard!r}")
            )
        why_indexed = _why_in_job_index(execution, job, unswept)
        if stored.open_job is None and why_indexed is not None:
            report.findings.append(Finding("not in the job index", subject, why_indexed))
        if execution.status == ExecutionStatus.SCHEDULED:
            report.waiting += 1
            waiting_of[execution.job_id] += 1
            if job is not None and job.status == JobStatus.ACTIVE and execution.due_at < late:
                report.findings.append(
                    Finding("stuck waiting", subject, f"due {format_time(execution.due_at)}, never picked up")
                )
        elif execution.status == ExecutionStatus.FAILED:
            finished = execution.finished_at
            if finished is not None and finished < late:
                report.findings.append(
                    Finding("owner not told", subject, f"failed {format_time(finished)}, no notice recorded")
                )
        else:
            report.running += 1
            running_of[execution.job_id] += 1
            lease = execution.lease_until
            # A paused job's run whose worker was lost waits for resume: a takeover would start a new attempt.
            paused = job is not None and job.status == JobStatus.PAUSED
            if (lease is None or lease < late) and not paused:
                ended = format_time(lease) if lease else "never set"
                report.findings.append(
                    Finding("abandoned", subject, f"attempt {execution.attempt} lease ended {ended}, not taken over")
                )
    for job in jobs.values():
        if job.status == JobStatus.ACTIVE and job.schedule.is_recurring:
            report.active_cron_jobs += 1
            # A bounded schedule's last run may be running with nothing after it: it completes the job at its end.
            last_run_running = job.schedule.is_bounded and running_of[job.job_id] > 0
            if waiting_of[job.job_id] == 0 and not last_run_running:
                report.findings.append(Finding("cron chain broken", job.job_id, "active, but no waiting execution"))
        # A one-off job's run's end completes it in the same write: an open one-off job has its run open.
        elif (
            job.status in (JobStatus.ACTIVE, JobStatus.PAUSED)
            and job.schedule.at is not None
            and waiting_of[job.job_id] == 0
            and running_of[job.job_id] == 0
        ):
            report.findings.append(Finding("one-off not completed", job.job_id, f"{job.status.value}, no open run"))
    for job_class in ports.settings.job_classes:
        depth = ports.queues.dead_letter_depth(job_class)
        report.dead_letters[job_class] = depth
        if depth:
            report.findings.append(Finding("dead letters", job_class, f"{depth} on the DLQ, owners not yet told"))
    return report
