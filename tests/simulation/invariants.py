"""The simulation's invariants, checked after every step over what the store holds (read without faults) and
what the simulated workers believe.

- Nothing accepted is lost: every accepted job is stored with at least its first execution; no execution ever
  disappears; each one is waiting (in the reconciler's `open` index once its shard's sweep has passed its due
  time, unless its job is paused), running under a lease (in the index, likewise), or terminal with what ended
  it recorded (a result, an error or a skip reason).
- A serial (`forbid`) job's slot is claimed to run only while no other run of the job holds a live lease.
- No attempt is held by two workers: no two live workers believe at once that they hold the same row (each
  believes until the lease end the store last gave it); an attempt is claimed once; a stale worker's heartbeat
  or outcome is refused (and a current one is not); a row is reported finished once; a finished row's attempt
  history reads in order and ends with the attempt, and the worker, that reported it.
- Every due slot of a repeating job is accounted exactly once: its rows (one per slot, each a slot of the
  schedule, from the job's first slot on) and the slots its skip records count (`skippedCount`) cover every
  slot up to its latest row, none twice; a skip's reason belongs to the job's catch-up policy.
- An edited job (the world's `edits`): only the waiting runs its edit replaced disappear; after the edit it has its
  new schedule's waiting run and none of the old one's; each row is a slot of a schedule it has had; and from the
  first slot its last edit wrote, its slots are accounted as above.
- A backfilled row (the world's `backfill`) is a slot of its job's schedule and the only row of that slot; a slot
  backfilled before the plan that reached it is accounted by that row (see the ledger above).
- A terminal row never changes (the DLQ drain's notified marking is not part of the row the API shows).
- At the end, once the faults stop and the system has run healthy for a while: `duetime audit` is clean.
"""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from duetime.adapters.sqlite.items import execution_from_doc, job_from_doc
from duetime.adapters.sqlite.store import SqliteStore
from duetime.domain.keys import ExecutionKey, open_index_key, shard_of_partition
from duetime.domain.models import CatchUp, Execution, ExecutionStatus, Job, JobStatus, Overlap, to_ms
from duetime.domain.recurrence import SCHEDULE_EDITED, SLOT_TOLERANCE, Recurrence, is_slot, recurrence_of
from duetime.service.audit import swept_through
from duetime.service.jobs import first_slot
from duetime.service.ports import StoredExecution

if TYPE_CHECKING:
    from .world import SimWorker, Task, World

# Skip reasons that any job may have, and those of each catch-up policy (domain/catchup.py).
COMMON_SKIPS = {"overlap", "starting deadline", "schedule edited", "excluded"}
POLICY_SKIPS = {
    CatchUp.NONE: {"catch-up none"},
    CatchUp.LATEST: {"catch-up latest"},
    CatchUp.ALL: {"catch-up all: too many missed"},
}
MAX_SLOTS_WALKED = 20_000


# The page size the history check reads with: small, so pages end inside a job's runs.
HISTORY_PAGE = 7


class Violation(AssertionError):
    """An invariant the simulation found broken."""


class Checker:
    def __init__(self, world: World) -> None:
        self.world = world
        self.reader = StoredReader()
        self.terminal: dict[str, Execution] = {}  # execution id -> the terminal row as first seen
        self.seen: dict[str, set[str]] = {}  # job id -> execution ids ever seen
        self.claims: dict[tuple[str, int], str] = {}  # (execution id, attempt) -> the worker that claimed it
        self.reported: dict[str, tuple[int, str]] = {}  # execution id -> (attempt, worker) that ended it
        self.slots_seen: set[tuple[str, datetime]] = set()  # rows found to be slots of their job's schedule
        self.due_counts: dict[str, tuple[datetime, int]] = {}  # job id -> (a slot, how many are due up to it)
        self.swept: dict[int, int] = {}  # shard -> how far its sweep has gone (sweptMs)
        # What the checks derive from a job's stored form, kept while the reader hands back the same parsed job:
        # job id -> (the job, its recurrence, its first slot). Parsing a cron again for every check of every step
        # was a tenth of the budget's CPU.
        self.schedules: dict[str, tuple[Job, Any, datetime]] = {}
        # Terminal rows checked as they are: execution id -> (the row, the report then). A row the reader hands
        # back unchanged, with no new report, passes the same checks again, so it is not checked again.
        self.checked_terminal: dict[str, tuple[Execution, tuple[int, str] | None]] = {}
        # Edited jobs (the world's `edits`): job id -> every schedule it has had, as stored; and the ids of waiting
        # runs an edit may replace (edit_job deletes them and writes the new schedule's first slot).
        self.schedules_had: dict[str, list[Any]] = {}
        self.replaceable: dict[str, set[str]] = {}
        self.epochs: dict[str, tuple[Any, datetime]] = {}  # job id -> (its schedule, the first slot its edit wrote)
        self.last_slots: dict[str, datetime] = {}  # a bounded job's id -> its last slot (_check_bounds)

    # -- events the world tells -----------------------------------------------------------------------------------

    def stale(self, task: Task) -> str | None:
        """Why `task`'s attempt no longer holds its row (so its heartbeat or outcome must be refused), or None."""
        assert task.execution is not None
        row = self._row(task.execution)
        if row is None:
            return "the row is gone"
        if row.status != ExecutionStatus.RUNNING:
            return f"the row is {row.status.value}"
        if row.attempt != task.execution.attempt:
            return f"the row runs attempt {row.attempt}"
        if row.claim_token != task.execution.claim_token:
            return "the row's claim token is another's"
        return None

    def claimed(self, worker: SimWorker, task: Task) -> None:
        assert task.execution is not None
        key = (task.execution.execution_id, task.execution.attempt)
        if key in self.claims:
            raise Violation(f"{key[0]} attempt {key[1]} claimed by {self.claims[key]} and again by {worker.worker_id}")
        self.claims[key] = worker.worker_id
        job = self.world.jobs.get(task.execution.job_id)
        if job is not None and job.at_most_once and task.execution.attempt > 1:
            raise Violation(f"{key[0]} of at-most-once job {job.job_id} started a second time (attempt {key[1]})")
        self._serial(task)
        self._capped(task)

    def _capped(self, task: Task) -> None:
        """A run of a job with `maxConcurrent`, or naming a limit with a cap on runs at once, is claimed only while
        fewer than the cap of its job's (or its limit's) runs hold a live lease (service/limits.py: each holds a
        slot, renewed with its lease; a dead worker's slot ends with its lease)."""
        execution, job, now = task.execution, task.job, self.world.clock_now
        assert execution is not None
        if job is None:
            return
        limit = self.world.limit
        caps: list[tuple[str, int, Any]] = []
        if job.max_concurrent is not None:
            caps.append((f"job {job.job_id}", job.max_concurrent, lambda other: other.job_id == job.job_id))
        if job.rate_limit is not None and limit is not None and limit.max_concurrent is not None:
            caps.append((f"limit {limit.name}", limit.max_concurrent, lambda other: other.rate_limit == job.rate_limit))
        for name, cap, member in caps:
            live = [
                other.execution.execution_id
                for worker in self.world.workers
                for other in worker.tasks
                if other is not task
                and other.holds
                and other.execution is not None
                and other.job is not None
                and member(other.job)
                and other.known_lease_end is not None
                and other.known_lease_end > now
                and self.stale(other) is None
            ]
            if len(live) >= cap:
                raise Violation(
                    f"{execution.execution_id} claimed while {len(live)} runs of {name} (at most {cap} at once) run "
                    f"under live leases: {', '.join(live)}"
                )

    def _serial(self, task: Task) -> None:
        """A serial (`forbid`) job's slot is claimed to run only while no other run of the job holds a live lease
        (its claim's overlap check: docs/lifecycle.md; on DynamoDB runs without an index entry are read by key,
        domain/job_index.py)."""
        execution, job, now = task.execution, task.job, self.world.clock_now
        assert execution is not None
        serial = job is not None and job.overlap == Overlap.FORBID and job.schedule.is_recurring
        if not serial or execution.kind != "scheduled" or execution.attempt != 1:
            return
        for worker in self.world.workers:
            for other in worker.tasks:
                if other is task or not other.holds or other.execution is None or other.known_lease_end is None:
                    continue
                running = other.execution
                if running.job_id != execution.job_id or running.execution_id == execution.execution_id:
                    continue
                if other.known_lease_end > now and self.stale(other) is None:
                    raise Violation(
                        f"{execution.execution_id} of serial job {execution.job_id} claimed to run while "
                        f"{running.execution_id} (attempt {running.attempt}) runs under a live lease to "
                        f"{other.known_lease_end:%H:%M:%S}"
                    )

    def completed(self, worker: SimWorker, task: Task, ended: Execution) -> None:
        if not ended.status.is_terminal:
            return  # moved for a retry
        assert task.execution is not None
        eid = ended.execution_id
        if eid in self.reported:
            raise Violation(f"{eid} reported finished twice: by {self.reported[eid]} and by {worker.worker_id}")
        self.reported[eid] = (task.execution.attempt, worker.worker_id)

    def editing(self, job_id: str, job: Job) -> None:
        """An edit of `job` starts: its waiting first runs of its schedule may be replaced."""
        self.schedules_had.setdefault(job_id, [job.schedule])
        self.replaceable.setdefault(job_id, set()).update(e.execution_id for e in self._waiting_first_runs(job_id))

    def _waiting_first_runs(self, job_id: str) -> list[Execution]:
        """The job's waiting first attempts of its schedule's slots (what an edit replaces), as stored now."""
        return [
            e
            for e in self.world.raw.store.open_executions_of_job(job_id)
            if e.kind == "scheduled" and e.attempt == 0 and e.status == ExecutionStatus.SCHEDULED
        ]

    def edited(self, job_id: str, job: Job) -> None:
        """`job` as stored after an edit that took (its schedule anchored as the API stores it), and the first slot
        of its new schedule the edit wrote (the waiting first run of the new schedule)."""
        self.schedules_had.setdefault(job_id, []).append(job.schedule)
        self.epochs.pop(job_id, None)
        self.due_counts.pop(job_id, None)  # counted under the schedule it had
        recurrence = recurrence_of(job.schedule, job.created_at)
        if recurrence is None:
            return
        waiting = self._waiting_first_runs(job_id)
        written = [e.scheduled_at for e in waiting if is_slot(recurrence, e.scheduled_at)]
        if not written:
            raise Violation(f"the edit of {job_id} left its new schedule no waiting run")
        self.epochs[job_id] = (recurrence, min(written))
        # ... and replaced the old schedule's: the job never has two next runs (its waiting first attempts).
        left = [e.execution_id for e in waiting if e.scheduled_at < min(written)]
        if left:
            raise Violation(f"the edit of {job_id} left the old schedule's waiting runs {left}")

    # -- after every step --------------------------------------------------------------------------------------------

    def check(self, stored: bool = True) -> None:
        """The workers' beliefs, and with `stored` everything the store holds."""
        world = self.world
        self._single_holders(world.clock_now)
        if not stored:
            return
        jobs, rows_of = self.reader.read(world.raw.store)
        self.swept = swept_through(world.raw)
        for job_id in sorted(world.jobs):
            job = jobs.get(job_id)
            if job is None:
                raise Violation(f"accepted job {job_id} is gone")
            stored = rows_of.get(job_id, [])
            if not stored:
                raise Violation(f"accepted job {job_id} has no execution")
            ids = {s.execution.execution_id for s in stored}
            lost = self.seen.get(job_id, set()) - ids - self.replaceable.get(job_id, set())
            if lost:
                raise Violation(f"executions of {job_id} disappeared: {sorted(lost)}")
            self.seen[job_id] = ids
            for row in stored:
                self._row_state(job, row)
            self._slots(job, [s.execution for s in stored])

    def histories(self) -> None:
        """Every stored row of every job is in its history, each once, newest first and oldest first, in pages;
        is found by its id; and the job's open rows are those not ended: whatever finds each row (on DynamoDB
        byJob, or its slot's key under the timing the job had, domain/history.py). Run once, after the heal."""
        store = self.world.raw.store
        _, rows_of = self.reader.read(store)
        for job_id in sorted(self.world.jobs):
            rows = [s.execution for s in rows_of.get(job_id, [])]
            ids = sorted(e.execution_id for e in rows)
            newest, cursor = [], None
            while True:
                page = store.list_executions(job_id, HISTORY_PAGE, cursor)
                newest += [e.execution_id for e in page.items]
                if page.cursor is None:
                    break
                cursor = page.cursor
            if newest != ids[::-1]:
                raise Violation(f"{job_id}'s history pages list {newest}, its rows are {ids[::-1]}")
            oldest = [e.execution_id for e in store.iter_executions_of_job(job_id)]
            if oldest != ids:
                raise Violation(f"{job_id}'s history oldest first lists {oldest}, its rows are {ids}")
            for row in rows:
                found = store.find_execution(job_id, row.execution_id)
                if found is None or found.execution_id != row.execution_id:
                    raise Violation(f"{row.execution_id} is stored but not found by its id")
            open_ids = sorted(e.execution_id for e in store.open_executions_of_job(job_id))
            not_ended = sorted(e.execution_id for e in rows if not e.status.is_terminal)
            if open_ids != not_ended:
                raise Violation(f"{job_id}'s open rows are read as {open_ids}, stored as {not_ended}")

    def _single_holders(self, now: datetime) -> None:
        holders: dict[str, tuple[str, datetime]] = {}
        for worker in self.world.workers:
            for task in worker.tasks:
                if not task.holds or task.execution is None or task.known_lease_end is None:
                    continue
                if task.known_lease_end <= now:
                    continue  # its lease has ended by its own account: it may still run, but holds nothing
                eid = task.execution.execution_id
                if eid in holders:
                    other, until = holders[eid]
                    raise Violation(
                        f"{eid} held by {other} (lease to {until:%H:%M:%S}) and by {worker.worker_id} "
                        f"(attempt {task.execution.attempt}, lease to {task.known_lease_end:%H:%M:%S}) at once"
                    )
                holders[eid] = (worker.worker_id, task.known_lease_end)

    def _row_state(self, job: Job, stored: StoredExecution) -> None:
        row = stored.execution
        eid = row.execution_id
        indexed = stored.open_shard == open_index_key(stored.key)
        if stored.open_shard is None and not self._swept_past(stored):
            # Not in the index yet (DynamoDB writes it only when the sweep finds the row still open, or when a
            # row is written already due): what matters is that the sweep has not passed it, and it is checked
            # again once it has.
            indexed = True
        if row.status == ExecutionStatus.SCHEDULED:
            held = job.status == JobStatus.PAUSED
            if not held and not indexed:
                raise Violation(f"{eid} waits where the reconciler cannot find it (open shard {stored.open_shard!r})")
            return
        if row.status == ExecutionStatus.RUNNING:
            if row.lease_until is None or row.worker_id is None:
                raise Violation(f"{eid} runs without a lease")
            if not indexed:
                raise Violation(f"{eid} runs where the reconciler cannot find it (open shard {stored.open_shard!r})")
            return
        reported = self.reported.get(eid)
        checked = self.checked_terminal.get(eid)
        if checked is not None and checked[0] is row and checked[1] == reported:
            return
        self._terminal_record(row)
        first = self.terminal.setdefault(eid, row)
        if first != row:
            before, after = first.model_dump(mode="json"), row.model_dump(mode="json")
            changed = {k: (before.get(k), after.get(k)) for k in before | after if before.get(k) != after.get(k)}
            raise Violation(f"terminal {eid} changed after it ended: {changed}")
        if reported is not None and row.status == ExecutionStatus.SUCCEEDED and reported[0] != row.attempt:
            raise Violation(f"{eid} was reported by attempt {reported[0]} but ended with attempt {row.attempt}")
        self.checked_terminal[eid] = (row, reported)

    def _swept_past(self, stored: StoredExecution) -> bool:
        """Whether the sweep of the row's shard has passed its due time (service/dispatch.py, sweep)."""
        swept = self.swept.get(shard_of_partition(stored.key.pk))
        return swept is not None and to_ms(stored.execution.due_at) <= swept

    def _terminal_record(self, row: Execution) -> None:
        eid = row.execution_id
        if row.finished_at is None:
            raise Violation(f"terminal {eid} ({row.status.value}) has no finishedAt")
        if row.status == ExecutionStatus.FAILED and not (row.error or row.skip_reason):
            raise Violation(f"failed {eid} records no error")
        if row.status == ExecutionStatus.SKIPPED and not row.skip_reason:
            raise Violation(f"skipped {eid} records no reason")
        history = row.attempts
        if [a.attempt for a in history] != list(range(1, len(history) + 1)):
            raise Violation(f"{eid}'s attempts are out of order: {[a.attempt for a in history]}")
        if any(b.started_at < a.started_at for a, b in pairwise(history)):
            raise Violation(f"{eid}'s attempts started out of order")
        if any(a.finished_at is not None and a.finished_at < a.started_at for a in history):
            raise Violation(f"{eid} has an attempt that finished before it started")
        if row.status == ExecutionStatus.SUCCEEDED:
            if row.attempt != len(history) or not history or history[-1].outcome != "succeeded":
                raise Violation(f"succeeded {eid} (attempt {row.attempt}) has history {history}")
            reported = self.reported.get(eid)
            if reported is not None and reported[1] != history[-1].worker_id:
                raise Violation(f"{eid} reported by {reported[1]}, its history says {history[-1].worker_id}")

    def _schedule_of(self, job: Job) -> tuple[Any, datetime]:
        """(recurrence, first slot) of `job`, derived again only when the reader parsed the job again."""
        cached = self.schedules.get(job.job_id)
        if cached is None or cached[0] is not job:
            cached = (job, recurrence_of(job.schedule, job.created_at), first_slot(job.schedule, job.created_at))
            self.schedules[job.job_id] = cached
        return cached[1], cached[2]

    def _slots(self, job: Job, rows: list[Execution]) -> None:
        if job.job_id in self.schedules_had:
            self._edited_slots(job, rows)
            epoch = self.epochs.get(job.job_id)
            if epoch is None:
                return
            schedule, first = epoch
            # Since its last edit, its schedule's rows are accounted as a new job's are, from the first slot the
            # edit wrote (a row of an old schedule that falls on a slot of the new one is that slot's row).
            rows = [row for row in rows if row.scheduled_at >= first and is_slot(schedule, row.scheduled_at)]
        else:
            schedule, first = self._schedule_of(job)
        planned = [row for row in rows if row.kind not in ("manual", "backfill")]
        if schedule is not None and job.job_id not in self.schedules_had:
            self._check_bounds(job, schedule, first, rows)
        if schedule is None:
            if len(planned) != 1:
                raise Violation(f"one-off {job.job_id} has {len(planned)} executions")
            return
        # A backfilled run is a past slot's, run by request: a slot of the schedule with no row of its own before
        # (a slot a skip record counts may be backfilled), outside the ledger of what the schedule ran.
        for row in rows:
            if row.kind == "backfill" and job.job_id not in self.schedules_had:
                if not is_slot(schedule, row.scheduled_at):
                    raise Violation(f"backfilled {row.execution_id} is not a slot of {job.job_id}'s schedule")
                if any(other.scheduled_at == row.scheduled_at for other in planned):
                    raise Violation(f"{job.job_id}'s slot {row.scheduled_at:%H:%M:%S} has two rows")
        by_slot: dict[datetime, Execution] = {}
        for row in planned:
            if row.scheduled_at in by_slot:
                raise Violation(f"{job.job_id}'s slot {row.scheduled_at:%H:%M:%S} has two rows")
            if (job.job_id, row.scheduled_at) not in self.slots_seen and not is_slot(schedule, row.scheduled_at):
                raise Violation(f"{row.execution_id} is not a slot of {job.job_id}'s schedule")
            by_slot[row.scheduled_at] = row
            self.slots_seen.add((job.job_id, row.scheduled_at))
            _check_skip(job, row)
        earliest, latest = min(by_slot), max(by_slot)
        if abs(earliest - first) > SLOT_TOLERANCE:  # a slot's row is stored to the millisecond
            raise Violation(f"{job.job_id}'s first row is {earliest:%H:%M:%S}, its first slot {first:%H:%M:%S}")
        # Walked on from where the last check of this job stopped (a seconds job's latest row moves on every few
        # steps: walking from its first slot each time would cost the square of its slots).
        walked_to, due = self.due_counts.get(job.job_id, (first, 1))
        if walked_to > latest + SLOT_TOLERANCE:
            walked_to, due = first, 1  # never while rows only grow; walked again to be sure of the count
        slot = walked_to
        while slot + SLOT_TOLERANCE < latest and due < MAX_SLOTS_WALKED:
            slot = schedule.next_after(slot)
            due += 1
        self.due_counts[job.job_id] = (slot, due)
        # A skip record counts the slots after it that have no row; the latest row's count runs past the rows.
        counted = sum((row.skipped_count or 1) for at, row in by_slot.items() if at < latest) + 1
        # A slot backfilled before the plan that reached it has a row, so no skip record counts it; one backfilled
        # after may be counted by a skip record too (backfill runs a past slot that did not run).
        backfilled = sum(1 for row in rows if row.kind == "backfill" and first <= row.scheduled_at < latest)
        # Fewer is a gap still to be planned while a row before it waits (a pre-loader that died after creating
        # the next slot and before ending the missed ones: the next cycle plans them again), or one a cancel
        # froze (it ended that waiting row `cancelled`, with no count); more is never right.
        planning = job.status == JobStatus.CANCELLED or any(
            row.status == ExecutionStatus.SCHEDULED for at, row in by_slot.items() if at < latest
        )
        if counted > due or (counted + backfilled < due and not planning):
            ledger = ", ".join(
                f"{at:%H:%M:%S} {row.status.value}"
                + (f" x{row.skipped_count}" if row.skipped_count else "")
                + (f" ({row.skip_reason})" if row.skip_reason else "")
                for at, row in sorted(by_slot.items())
            )
            raise Violation(
                f"{job.job_id} ({job.catch_up.value}): {due} slots due up to {latest:%H:%M:%S}, "
                f"{counted} accounted: {ledger}"
            )

    def _check_bounds(self, job: Job, schedule: Recurrence, first: datetime, rows: list[Execution]) -> None:
        """A bounded job's rows of its schedule (planned, caught up or backfilled) lie within its bounds: no slot
        after endAt, none after its maxRuns-th slot (skipped slots are counted), no run number over maxRuns."""
        bounds = job.schedule
        if not bounds.is_bounded:
            return
        last = self.last_slots.get(job.job_id)
        if last is None:
            last = bounds.end_at
            if bounds.max_runs is not None:
                slot = first
                for _ in range(bounds.max_runs - 1):
                    slot = schedule.next_after(slot)
                last = slot if last is None else min(last, slot)
            assert last is not None
            self.last_slots[job.job_id] = last
        for row in rows:
            if row.kind == "manual":
                continue
            if row.scheduled_at > last + SLOT_TOLERANCE:
                raise Violation(f"{row.execution_id} is past {job.job_id}'s bounds (last slot {last:%H:%M:%S})")
            numbered = bounds.max_runs is not None and row.run_number is not None
            if numbered and row.run_number > bounds.max_runs:  # type: ignore[operator]
                raise Violation(f"{row.execution_id} is run {row.run_number} of {job.job_id}'s {bounds.max_runs}")

    def _edited_slots(self, job: Job, rows: list[Execution]) -> None:
        """An edited job's rows: one a slot, each a slot of a schedule the job has had (or ended as one an edit
        left behind), each skip for a reason of its catch-up policy. The count of its slots is not checked: an
        edit replaces the waiting run, so which slots of the old schedule were due is the edit's moment's."""
        recurrences = [recurrence_of(schedule, job.created_at) for schedule in self.schedules_had[job.job_id]]
        seen: set[datetime] = set()
        for row in rows:
            if row.kind == "manual":
                continue
            if row.scheduled_at in seen:
                raise Violation(f"{job.job_id}'s slot {row.scheduled_at:%H:%M:%S} has two rows")
            seen.add(row.scheduled_at)
            of_a_schedule = any(r is not None and is_slot(r, row.scheduled_at) for r in recurrences)
            if not of_a_schedule and row.skip_reason != SCHEDULE_EDITED:
                raise Violation(f"{row.execution_id} is not a slot of any schedule {job.job_id} has had")
            _check_skip(job, row)

    def _row(self, execution: Execution) -> Execution | None:
        store = self.world.raw.store
        return store.find_execution(execution.job_id, execution.execution_id)


def _check_skip(job: Job, row: Execution) -> None:
    """A skipped row's reason belongs to its job's catch-up policy (or to any job's)."""
    if row.status == ExecutionStatus.SKIPPED and row.skip_reason not in COMMON_SKIPS | POLICY_SKIPS[job.catch_up]:
        raise Violation(f"{row.execution_id} skipped for {row.skip_reason!r} under catchUp {job.catch_up}")


class StoredReader:
    """Every stored job and execution, read in one pass (a query on SQLite, a scan on DynamoDB) and parsed again
    only when its stored form changed since the last pass: the checks run after every step."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], tuple[Any, StoredExecution]] = {}
        self.jobs: dict[str, tuple[Any, Job]] = {}

    def read(self, store: Any) -> tuple[dict[str, Job], dict[str, list[StoredExecution]]]:
        if isinstance(store, SqliteStore):
            raw_rows = [
                ((pk, sk), doc, shard)
                for pk, sk, shard, doc in store.db.query("SELECT pk, sk, open_shard, doc FROM executions")
            ]
            raw_jobs = store.db.query("SELECT job_id, doc FROM jobs")
            parse_row, parse_job = execution_from_doc, job_from_doc
        else:
            from duetime.adapters.aws.items import execution_from_item, job_from_item

            raw_rows = [
                ((i["pk"]["S"], i["sk"]["S"]), i, i.get("openShard", {}).get("S"))
                for i in store._scan(store.executions_table)
            ]
            raw_jobs = [(i["jobId"]["S"], i) for i in store._scan(store.jobs_table)]
            parse_row, parse_job = execution_from_item, job_from_item
        rows: dict[tuple[str, str], tuple[Any, StoredExecution]] = {}
        for (pk, sk), raw, shard in raw_rows:
            cached = self.rows.get((pk, sk))
            if cached is None or cached[0] != raw or cached[1].open_shard != shard:
                cached = (raw, StoredExecution(ExecutionKey(pk=pk, sk=sk), shard, parse_row(raw)))
            rows[(pk, sk)] = cached
        self.rows = rows
        jobs: dict[str, tuple[Any, Job]] = {}
        for job_id, raw in raw_jobs:
            cached_job = self.jobs.get(job_id)
            jobs[job_id] = cached_job if cached_job is not None and cached_job[0] == raw else (raw, parse_job(raw))
        self.jobs = jobs
        rows_of: dict[str, list[StoredExecution]] = {}
        for _, stored in rows.values():
            rows_of.setdefault(stored.execution.job_id, []).append(stored)
        return {job_id: job for job_id, (_, job) in jobs.items()}, rows_of
