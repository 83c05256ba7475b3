"""The worker runtime: receive, wait out early arrival, claim, run under heartbeats, complete or retry."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.adapters.aws.queue import DeleteBatcher, Received
from duetime.definitions import HANDLER_ANNOUNCE_SECONDS
from duetime.domain.errors import StaleAttempt
from duetime.domain.models import Execution, ExecutionStatus, Job, to_ms
from duetime.service.context import Ports
from duetime.service.events import buffered
from duetime.service.executions import Claim, Lease, Success, claim_execution, lateness_ms
from duetime.service.handlers import announce_handlers, is_kind_name, withdraw_handlers
from duetime.service.outcomes import ClaimVerdict, RunOutcome, RunResult
from duetime.worker import limited
from duetime.worker.checkpoints import Checkpointer
from duetime.worker.isolation import run_in_child
from duetime.worker.kinds import Targets, resolve_handler
from duetime.worker.observe import DEAD_LETTERED, RETRIED, SUCCEEDED, Observer, default_observer
from duetime.worker.registry import JobContext, failure_of, get_registered, not_served, registered_names
from duetime.worker.runners import RunnerThreads

log = logging.getLogger("duetime.worker")

# A message more than this early (it can only be, if clocks disagree) goes back to wait in the queue.
MAX_EARLY_WAIT_SECONDS = 5.0
POLL_SECONDS = 1
# How long the receive loop waits for more free slots when fewer are free than a message may carry: messages
# surface a second or two before they are due, so this costs a run on time nothing.
SLOTS_WAIT_SECONDS = 0.25


def timed_out(job: Job) -> RunResult:
    """The outcome of a run stopped at its job's timeout."""
    return RunResult.failure(f"timeout after {job.timeout_seconds} s")


@dataclass
class RunRecord:
    """One handler run as the worker saw it end, given to the `on_run` hook of whoever embeds a Worker."""

    execution_id: str
    attempt: int
    worker_id: str
    started_ms: int
    ended_ms: int
    outcome: str


class HandlerAnnouncer:
    """Announces the Python handlers this process serves for one job class (service.handlers), so the API
    accepts jobs naming them; renewed every HANDLER_ANNOUNCE_SECONDS, withdrawn at a clean stop."""

    def __init__(self, ports: Ports, job_class: str, worker_id: str) -> None:
        self.ports, self.job_class, self.worker_id = ports, job_class, worker_id
        self.last = -float("inf")

    def announce(self) -> None:
        """Announce now; a failure is logged (the next refresh tries again), never fatal to the worker."""
        try:
            announce_handlers(self.ports, self.job_class, self.worker_id, registered_names())
            self.last = time.monotonic()
        except Exception:
            log.exception("announcing handlers failed; will try again")

    def announce_if_due(self) -> None:
        if time.monotonic() - self.last >= HANDLER_ANNOUNCE_SECONDS:
            self.announce()

    def refresh_until(self, stopping: threading.Event) -> None:
        while not stopping.wait(HANDLER_ANNOUNCE_SECONDS):
            self.announce()

    def withdraw(self) -> None:
        try:
            withdraw_handlers(self.ports, self.job_class, self.worker_id)
        except Exception:
            log.exception("withdrawing handlers failed; they expire on their own")


@dataclass
class Claimed:
    """A message's claimed run, leased to this worker, not started yet."""

    execution: Execution
    job: Job
    lease: Lease


@dataclass
class Running:
    execution: Execution
    lease: Lease
    context: JobContext
    job: Job
    received: Received
    started_ms: int
    released: bool = False  # handed back at shutdown: another worker continues, this one reports nothing
    # The handler's checkpoints, written with the heartbeats (None: heartbeats renew the lease alone).
    checkpoints: Checkpointer | None = None
    # The receive loop's runs (the finisher thread tends them): when the next heartbeat is due and when the
    # job's timeout ends (time.monotonic()), when a timed-out handler's grace to stop ends, what its handler
    # returned (set by its thread), and what the finisher decided instead (a timeout, a lost lease). A run is
    # reported once: it leaves the worker's runs then.
    tended: bool = False  # by the finisher thread (a receive loop's run), else by the thread running it
    next_beat: float = 0.0
    deadline: float = 0.0
    stop_by: float | None = None
    result: RunResult | None = None
    decided: RunResult | None = None
    lost: bool = False

    def heartbeat(self) -> None:
        """Renew the lease (with the waiting checkpoint, if any); raises StaleAttempt once fenced out."""
        if self.checkpoints is None:
            self.lease.extend()
        else:
            self.checkpoints.heartbeat()


class Worker:
    """Runs executions of one job class: at most `concurrency` at once, each under a renewed lease."""

    def __init__(
        self,
        ports: Ports,
        job_class: str,
        worker_id: str,
        concurrency: int = 8,
        on_run: Callable[[RunRecord], None] | None = None,
        observer: Observer | None = None,
        lease_visibility_on_claim: bool = False,
        targets: Targets | None = None,
        deletes_by_event_source: bool = False,
        children_at_once: int | None = None,
    ) -> None:
        """`children_at_once` bounds the handlers run in child processes at once (each a Python interpreter of
        its own); None: `concurrency` bounds them."""
        # A batch's terminal runs are published together (flush_events): one PutEvents per ten on AWS.
        self.ports, self.event_buffer = buffered(ports)
        self.job_class = job_class
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.lease = ports.settings.job_class(job_class).lease_seconds
        self.on_run = on_run
        self.observer = observer or default_observer()
        # An SQS event source receives with the queue's visibility (the function's timeout); shorten it
        # to one lease at claim so a worker that dies before its first heartbeat is replaced in a lease.
        self.lease_visibility_on_claim = lease_visibility_on_claim
        self.targets = targets
        # The SQS event source deletes the messages of records not reported as failures: no delete calls.
        self.deletes_by_event_source = deletes_by_event_source
        self._deleter: DeleteBatcher | None = None
        # While the receive loop runs, handler threads are kept for the next run (worker/runners.py says why);
        # a worker called once per batch (Lambda) starts one per run and keeps none.
        self._runners = RunnerThreads(worker_id, max_idle=0)
        self._inflight = 0
        # Set whenever a run ends, so a worker with every slot busy receives again at once, not after a poll.
        self._slot_freed = threading.Event()
        self._runs: dict[str, Running] = {}
        self._lock = threading.Lock()
        # The receive loop's runs that ended, for the finisher thread to report (None: stop).
        self._ended: queue.SimpleQueue[Running | None] = queue.SimpleQueue()
        self._held_deletes = threading.local()  # see _deletes_after_commit
        self.stopping = threading.Event()
        # How long a handler past its timeout, asked to stop, is waited for before its run is reported failed.
        self._stop_grace = min(5.0, self.lease / 3)
        self.announcer = HandlerAnnouncer(ports, job_class, worker_id)
        self._children = threading.BoundedSemaphore(max(1, children_at_once or concurrency))

    # -- the receive loop ------------------------------------------------------------------------

    def run(self, grace_seconds: float = 5.0) -> None:
        """Receive and run until `stopping` is set, never holding more messages than free slots; then
        let runs finish within `grace_seconds` and release the rest so another worker continues at once."""
        self._deleter = DeleteBatcher(self.ports.queues, self.job_class)
        self._runners = RunnerThreads(self.worker_id)
        announcer = self.announcer
        if announcer.last == -float("inf"):
            announcer.announce()  # before the first receive: the API accepts this worker's names from now on
        refresher = threading.Thread(target=announcer.refresh_until, args=(self.stopping,), daemon=True)
        refresher.start()
        try:
            self._receive_loop(grace_seconds)
        finally:
            self.flush_events()
            self._deleter.close()
            self._deleter = None
            self._runners.close()
            self._runners = RunnerThreads(self.worker_id, max_idle=0)
            announcer.withdraw()

    def _receive_loop(self, grace_seconds: float) -> None:
        """Receive as many messages as slots are free and claim them together (one transaction where the
        store allows); each claimed run's handler starts in a thread of its own, and the finisher thread
        reports the runs that ended, together too, and heartbeats the rest. Claims and reports are the work of
        two threads, not of a thread per slot: on SQLite they were a third of a run's CPU in thread switches
        while eight slots took turns at the write lock and the interpreter's lock."""
        finisher = threading.Thread(target=self._finish_loop, name=f"{self.worker_id}-finish", daemon=True)
        finisher.start()
        try:
            with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix=self.worker_id) as pool:
                # A message may carry several runs (a Lambda class's queue on SQS): with fewer slots free than
                # that, wait a moment for more, so a receive does not bring runs there is no slot for.
                carried = min(self.concurrency, self.ports.queues.runs_per_message(self.job_class))
                slots_short_since: float | None = None
                while not self.stopping.is_set():
                    with self._lock:
                        free, busy = self.concurrency - self._inflight, self._inflight
                    if free == 0:
                        self._slot_freed.wait(1.0)
                        self._slot_freed.clear()
                        continue
                    if free < carried and busy:
                        now = time.monotonic()
                        slots_short_since = slots_short_since or now
                        if now - slots_short_since < SLOTS_WAIT_SECONDS:
                            self._slot_freed.wait(SLOTS_WAIT_SECONDS - (now - slots_short_since))
                            self._slot_freed.clear()
                            continue
                    slots_short_since = None
                    try:
                        visible_until = self.ports.clock() + timedelta(seconds=self.lease)
                        batch = self.ports.queues.receive(self.job_class, free, POLL_SECONDS, self.lease)
                    except Exception:  # an unreachable queue must not kill the worker
                        log.exception("receive failed")
                        time.sleep(1)
                        continue
                    if batch:
                        with self._lock:
                            self._inflight += len(batch)
                        self._start_batch(batch, visible_until, pool)
                    self.flush_events()  # what ended since the last receive: at most one poll's wait late
                self._drain(grace_seconds)
        finally:
            self._ended.put(None)  # the finisher reports what has ended, then stops
            finisher.join(timeout=max(grace_seconds, 1.0) + 5)

    def _start_batch(self, batch: list[Received], visible_until: datetime, pool: ThreadPoolExecutor) -> None:
        """Claim the received messages in one batch of the store, then start the claimed runs. A message
        that must wait first (due in a moment, held back by its limit) goes on in a pool thread."""
        claimed: list[tuple[Received, Claimed]] = []
        waiting: list[Callable[[], RunOutcome]] = []
        handled = 0
        jobs = self._jobs_of(batch)
        try:
            with self._deletes_after_commit(), self._events_after_commit(), self.ports.store.batched():
                for received in batch:
                    try:
                        job = jobs.get(received.message.job_id)
                        step = self._claim_message(received, visible_until, blocking=False, job=job)
                    except Exception:
                        log.exception("processing %s failed", received.message.execution_id)
                        handled += 1
                        continue
                    if isinstance(step, Claimed):
                        claimed.append((received, step))
                    elif isinstance(step, RunOutcome):
                        handled += 1
                    else:
                        waiting.append(step)
        except Exception:  # the batch did not commit: its messages come back, as after a crash
            log.exception("claiming %d messages failed", len(batch))
            self._slots_done(len(batch))
            return
        self._slots_done(handled)
        for then in waiting:
            pool.submit(self._process_slot, then)
        for received, step in claimed:
            self._start(step, received)

    def _jobs_of(self, batch: list[Received]) -> dict[str, Job]:
        """The received messages' jobs, read together before their claims (one read, and on SQLite outside the
        claims' transaction, so the write lock is not held while jobs are read and parsed); a job this read
        misses, or all of them if it fails, is read by its claim."""
        try:
            return self.ports.store.get_jobs([received.message.job_id for received in batch])
        except Exception:
            log.exception("reading the jobs of %d messages failed; each claim reads its own", len(batch))
            return {}

    def _start(self, claimed: Claimed, received: Received) -> None:
        """Start a claimed run's handler in a thread of its own; the finisher reports it when it ends."""
        try:
            running = self._running(claimed, received)
        except Exception:
            log.exception("starting %s failed", claimed.execution.execution_id)
            self._slots_done(1)
            return
        now = time.monotonic()
        running.deadline = now + claimed.job.timeout_seconds
        running.next_beat = now + self.lease / 3
        running.tended = True
        ended = self._ended

        def target() -> None:
            try:
                running.result = self._invoke(running.job, running.context)
            finally:  # a handler thread that raised past _invoke ends the run unreported: its lease lapses
                ended.put(running)

        self._runners.run(target)

    def _finish_loop(self) -> None:
        """The finisher: reports the runs that ended, as many as have ended together, and tends the rest
        (heartbeats, timeouts, lost leases) at least every second; stops at the receive loop's None."""
        stopping = False
        while not stopping:
            ended: list[Running] = []
            try:
                first = self._ended.get(timeout=self._next_tending())
            except queue.Empty:
                first = None
            else:
                items = [first]
                while True:
                    try:
                        items.append(self._ended.get_nowait())
                    except queue.Empty:
                        break
                stopping = None in items
                ended = [item for item in items if item is not None]
            try:
                if ended:
                    self._conclude(ended)
                self._tend()
            except Exception:
                log.exception("reporting ended runs failed")

    def _next_tending(self) -> float:
        """Seconds until a run needs tending (a heartbeat, a timeout), at most one."""
        with self._lock:
            runs = list(self._runs.values())
        now, wake = time.monotonic(), 1.0
        for running in runs:
            if not running.tended:
                continue
            due = running.stop_by if running.stop_by is not None else min(running.next_beat, running.deadline)
            wake = min(wake, due - now)
        return max(wake, 0.005)

    def _conclude(self, runs: list[Running]) -> None:
        """Report each run (what the finisher decided for it, else what its handler returned), together in one
        batch of the store; each frees its slot."""
        with self._lock:  # reported already if no longer among the worker's runs
            runs = [r for r in runs if self._runs.get(r.execution.execution_id) is r]
            for running in runs:
                del self._runs[running.execution.execution_id]
        reports: list[tuple[Running, RunResult | None, Success | None]] = []
        for running in runs:
            if running.result is None and running.decided is None and not running.lost:
                log.error(
                    "%s: its handler thread raised; the run ends when its lease does", running.context.execution_id
                )
                continue
            outcome = None if running.lost else running.decided or running.result
            reports.append((running, outcome, self._success(running, outcome)))
        afters: list[Callable[[], None]] = []
        try:
            with self._deletes_after_commit(), self._events_after_commit(), self.ports.store.batched():
                for running, outcome, success in reports:
                    try:
                        self._report(running, outcome, success, afters)
                    except Exception:
                        log.exception("processing %s failed", running.execution.execution_id)
        except Exception:  # not committed: each run's lease lapses and its message comes back, as after a crash
            log.exception("reporting %d runs failed", len(runs))
            afters = []
        finally:
            self._slots_done(len(runs))
        for after in afters:
            try:
                after()
            except Exception:
                log.exception("what follows a stored success failed")

    def _success(self, running: Running, outcome: RunResult | None) -> Success | None:
        """A succeeded run's end made ready before the batch that stores it (see Success), so the batch's
        transaction, and on SQLite the file's write lock, holds little more than the writes."""
        if outcome is None or running.released:
            return None
        try:
            return running.lease.success(outcome, running.job)
        except Exception:
            log.exception("preparing %s's success failed", running.execution.execution_id)
            return None

    def _tend(self) -> None:
        """Heartbeat the running runs that are due one; ask a run past its timeout to stop and report it
        failed once it stops or its grace ends; report a run whose lease was lost or that was released."""
        with self._lock:
            runs = list(self._runs.values())
        now = time.monotonic()
        over: list[Running] = []
        for running in runs:
            if not running.tended or running.result is not None:
                continue
            if running.released:
                running.lost = True
                over.append(running)
            elif running.stop_by is not None:
                if now >= running.stop_by:
                    over.append(running)
            elif now >= running.deadline:
                # A child process is killed at once; an in-process handler is asked to stop and runs on.
                running.context.cancelled.set()
                running.decided = timed_out(running.job)
                running.stop_by = now + self._stop_grace
            elif now >= running.next_beat:
                running.next_beat = now + self.lease / 3
                try:
                    running.heartbeat()
                except StaleAttempt:
                    log.warning(
                        "%s attempt %s lost its lease; stopping", running.context.execution_id, running.context.attempt
                    )
                    running.context.cancelled.set()
                    running.lost = True
                    over.append(running)
                except Exception:
                    log.exception("heartbeat failed; will try again")
        if over:
            self._conclude(over)

    def _events_after_commit(self) -> contextlib.AbstractContextManager[None]:
        """Hold this thread's events until the block (a batch of the store) has committed: a batch that does
        not commit publishes no event of what it did not store."""
        buffer = self.event_buffer
        return contextlib.nullcontext() if buffer is None else buffer.held_until_stored()

    @contextmanager
    def _deletes_after_commit(self) -> Iterator[None]:
        """Hold this thread's message deletes until the block (a batch of the store) has committed: a message
        is deleted only once what handled it is stored."""
        held: list[Received] = []
        self._held_deletes.held = held
        try:
            yield
        except BaseException:
            held.clear()
            raise
        finally:
            self._held_deletes.held = None
            for received in held:
                self._delete(received)

    def _slots_done(self, count: int) -> None:
        if count:
            with self._lock:
                self._inflight -= count
            self._slot_freed.set()

    def flush_events(self) -> None:
        """Publish the events of the runs that ended since the last flush, together; a failure is logged
        (events never fail a run)."""
        if self.event_buffer is None:
            return
        try:
            self.event_buffer.flush()
        except Exception:
            log.exception("publishing events failed")

    def _process_slot(self, then: Callable[[], RunOutcome]) -> None:
        try:
            then()
        except Exception:
            log.exception("processing a message failed")
        finally:
            self._slots_done(1)

    def _drain(self, grace_seconds: float) -> None:
        deadline = time.monotonic() + grace_seconds
        while time.monotonic() < deadline:
            with self._lock:
                if not self._runs:
                    return
            time.sleep(0.05)
        with self._lock:
            leftovers = list(self._runs.values())
        for running in leftovers:
            running.released = True
            running.context.cancelled.set()
            if running.checkpoints is not None:
                # The next worker resumes from the waiting checkpoint; a lost attempt has none to hand on.
                with contextlib.suppress(Exception):
                    running.checkpoints.flush()
            if running.lease.release():
                log.info("released %s attempt %s", running.execution.execution_id, running.execution.attempt)

    # -- one message --------------------------------------------------------------------------

    def process(self, received: Received, visible_until: datetime | None = None) -> RunOutcome:
        """Handle one message to its end; returns how it ended, which says what becomes of the message.

        `visible_until` is when the message's visibility (set at receive) ends: the lease is made to end
        then too, so a dead worker's message reappears just as its lease has ended. When too little of it
        is left, the lease runs one lease from the claim and the visibility is reset to match.
        """
        step = self._claim_message(received, visible_until, blocking=True)
        if isinstance(step, RunOutcome):
            return step
        return step() if callable(step) else self._run_claimed(step, received)

    def _claim_message(
        self, received: Received, visible_until: datetime | None, blocking: bool, job: Job | None = None
    ) -> RunOutcome | Claimed | Callable[[], RunOutcome]:
        """Claim one message: how it ended if it gives this worker no run, else the claimed run. Not
        `blocking` (the receive loop's claims), a message that must first wait (due in a moment, or held back
        by its limit) is answered with what handles it from there, to be run in a thread of its own. `job` is
        the message's job read just before, if the caller read it (one that waits first reads it again)."""
        message = received.message
        early = (message.start_ms - to_ms(self.ports.clock())) / 1000  # a start reserved by a limit counts
        if early > MAX_EARLY_WAIT_SECONDS:
            self.ports.queues.extend(self.job_class, received.receipt, int(early) - 1)
            return RunOutcome.EARLY
        if early > 0:
            if not blocking:
                return lambda: self.process(received, visible_until)
            time.sleep(early)
        lease_until = visible_until
        reset_visibility = self.lease_visibility_on_claim
        if lease_until is not None and lease_until - self.ports.clock() < timedelta(seconds=self.lease * 2 / 3):
            lease_until, reset_visibility = None, True  # it waited long: a full lease from now, visibility too
        claim = claim_execution(self.ports, message, self.worker_id, lease_until, can_run=self._can_run, job=job)
        if claim.verdict == ClaimVerdict.LIMITED and claim.deferred is not None and not blocking:
            return lambda: self._run_claimed(
                self._after_claim(received, claim, lease_until, reset_visibility), received
            )
        return self._after_claim(received, claim, lease_until, reset_visibility)

    def _after_claim(
        self, received: Received, claim: Claim, lease_until: datetime | None, reset_visibility: bool
    ) -> RunOutcome | Claimed:
        """What follows a claim: a limited run waits briefly for its turn (claimed again then), a claim that
        gives no run says how the message ends, a claimed one is leased."""
        message = received.message
        while claim.verdict == ClaimVerdict.LIMITED and claim.deferred is not None:
            if not limited.wait_briefly(self.ports, claim.deferred):
                limited.send_again(self.ports, claim.deferred)
                self._delete(received)
                return RunOutcome.LIMITED
            message = claim.deferred  # its start is reserved now: claimed without taking another
            claim = claim_execution(self.ports, message, self.worker_id, lease_until, can_run=self._can_run)
        if claim.verdict in (ClaimVerdict.DONE, ClaimVerdict.HELD):
            self._delete(received)
            return RunOutcome.of_claim(claim.verdict)
        if claim.verdict == ClaimVerdict.BUSY:
            # Waiting its turn: a fresh copy for later, as a LIMITED run. Hiding this message again and again
            # would bring it to the queue's receive limit, and the DLQ drain would fail a run that never ran.
            assert claim.deferred is not None
            limited.send_again(self.ports, claim.deferred)
            self._delete(received)
            return RunOutcome.of_claim(claim.verdict)
        if claim.verdict == ClaimVerdict.PASSED:
            # Hidden a little longer each time it comes back, so a message the serving worker is too busy to
            # take is not received MAX_RECEIVE_COUNT times (and redriven to the DLQ) within minutes.
            hide = max(claim.hide_seconds, min(self.lease, received.receive_count))
            self.ports.queues.extend(self.job_class, received.receipt, hide)
            return RunOutcome.of_claim(claim.verdict)
        assert claim.execution is not None and claim.job is not None
        lease = limited.with_slots(
            Lease(self.ports, message.key, claim.execution, self.job_class, received.receipt),
            claim.slots,
            claim.slot_holder,
        )
        if reset_visibility:
            lease.hide_message()
        return Claimed(claim.execution, claim.job, lease)

    def _run_claimed(self, step: RunOutcome | Claimed, received: Received) -> RunOutcome:
        """Run a claimed run in this thread; a message that gave none ended already."""
        return self._run(step, received) if isinstance(step, Claimed) else step

    def _can_run(self, job: Job) -> bool:
        """False when this worker lacks the job's Python handler but a live worker of its class announces
        it (`duetime local` beside a `duetime worker --handlers`): that one runs it. With no such worker
        the run is claimed and ends failed, permanently (see _invoke), never passed around for good."""
        if is_kind_name(job.handler) or get_registered(job.handler) is not None:
            return True
        announced = self.ports.store.announced_handlers(self.job_class, to_ms(self.ports.clock()))
        return job.handler not in announced

    def _delete(self, received: Received) -> None:
        """The message is handled: delete it (batched while the receive loop runs, at once otherwise)."""
        if self.deletes_by_event_source:
            return
        held: list[Received] | None = getattr(self._held_deletes, "held", None)
        if held is not None:
            held.append(received)
            return
        deleter = self._deleter
        if deleter is not None:
            deleter.add(received.receipt)
        else:
            self.ports.queues.delete(self.job_class, received.receipt)

    def _running(self, claimed: Claimed, received: Received) -> Running:
        """The claimed run as it starts: its handler's context, registered among this worker's runs."""
        execution, job, lease = claimed.execution, claimed.job, claimed.lease
        context = JobContext(
            execution_id=execution.execution_id,
            job_id=execution.job_id,
            attempt=execution.attempt,
            scheduled_at=execution.scheduled_at,
            # A run-now may carry its own payload, for this execution only.
            payload=job.payload if execution.payload is None else execution.payload,
            owner=job.owner,
            worker_id=self.worker_id,
            claim_token=execution.claim_token or "",
            last_checkpoint=None if execution.checkpoint is None else execution.checkpoint.state,
        )
        checkpoints = Checkpointer(lease, context)
        context.on_checkpoint = checkpoints.offer
        started = to_ms(self.ports.clock())
        running = Running(execution, lease, context, job, received, started, checkpoints=checkpoints)
        with self._lock:
            self._runs[execution.execution_id] = running
        self.observer.started(execution, lateness_ms(execution))
        return running

    def _run(self, claimed: Claimed, received: Received) -> RunOutcome:
        """Run a claimed attempt in this thread, under heartbeats, and report how it ended."""
        running = self._running(claimed, received)
        try:
            outcome = self._run_with_heartbeats(claimed.job, running)
        finally:
            with self._lock:
                self._runs.pop(claimed.execution.execution_id, None)
        return self._report(running, outcome)

    def _report(
        self,
        running: Running,
        outcome: RunResult | None,
        success: Success | None = None,
        afters: list[Callable[[], None]] | None = None,
    ) -> RunOutcome:
        """Store how a run ended (None: its lease was lost) and say what becomes of its message. `success`:
        the outcome made ready before (see _success), stored by its write alone; what follows it is appended
        to `afters`, to be done once the batch has committed (at once without `afters`)."""
        execution, job, lease, received = running.execution, running.job, running.lease, running.received
        record = RunRecord(
            execution.execution_id,
            execution.attempt,
            self.worker_id,
            running.started_ms,
            to_ms(self.ports.clock()),
            "lost" if outcome is None else "succeeded" if outcome.succeeded else "failed",
        )
        if self.on_run:
            self.on_run(record)
        if running.released:
            return RunOutcome.RELEASED
        if outcome is None:
            return RunOutcome.LOST
        checkpoints = running.checkpoints
        try:
            if checkpoints is not None:
                checkpoints.flush()  # the last checkpoint lands before the outcome, so a retry resumes from it
            ended = lease.complete(outcome, job) if success is None else success.write()
        except StaleAttempt:
            log.warning("%s attempt %s was fenced out at completion", execution.execution_id, execution.attempt)
            return RunOutcome.STALE
        self._delete(received)
        if success is not None:
            stored = ended

            def after() -> None:
                success.after(stored)
                self.observer.finished(execution, SUCCEEDED)

            if afters is None:
                after()
            else:
                afters.append(after)
            return RunOutcome.SUCCEEDED
        if ended.status == ExecutionStatus.SUCCEEDED:
            self.observer.finished(execution, SUCCEEDED)
            return RunOutcome.SUCCEEDED
        if ended.status == ExecutionStatus.SCHEDULED:
            self.observer.finished(execution, RETRIED, ended.error)
        else:  # a result that could not be stored ends here too, with ended.error saying why
            self.observer.finished(execution, DEAD_LETTERED, ended.error)
        return RunOutcome.FAILED

    def _run_with_heartbeats(self, job: Job, running: Running) -> RunResult | None:
        """Run the handler in its own thread, extending the lease every lease/3 and stopping it at the job's
        timeout; returns its result, or None if the lease was lost (the attempt is no longer ours to report)."""
        context = running.context
        done = threading.Event()
        ran: list[RunResult] = []

        def target() -> None:
            try:
                ran.append(self._invoke(job, context))
            finally:
                done.set()

        self._runners.run(target)
        deadline = time.monotonic() + job.timeout_seconds
        interval = self.lease / 3
        while not done.wait(min(interval, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                # A child process is killed at once; an in-process handler is asked to stop and runs on.
                context.cancelled.set()
                done.wait(self._stop_grace)
                return timed_out(job)
            if running.released:
                return None
            try:
                running.heartbeat()
            except StaleAttempt:
                log.warning("%s attempt %s lost its lease; stopping", context.execution_id, context.attempt)
                context.cancelled.set()
                return None
            except Exception:
                log.exception("heartbeat failed; will try again")
        return ran[0]

    def _invoke(self, job: Job, context: JobContext) -> RunResult:
        """Run the job's handler once and return its outcome; the grant is checked again here, so a job
        created before its owner's grant was withdrawn ends without running."""
        grants = self.ports.grants
        if not grants.allows(job.owner, job.owner_groups, job.handler):
            return RunResult.failure(grants.denial(job.owner, job.handler), retryable=False)
        registered = get_registered(job.handler)
        try:
            if registered is not None and not registered.in_process and registered.module != "__main__":
                with self._children:
                    return run_in_child(registered, context)
            fn = resolve_handler(job.handler, self.targets)
            if fn is None:
                return RunResult.failure(not_served(job.handler), retryable=False)
            return RunResult.success(fn(context))
        except Exception as exc:
            error, retryable = failure_of(exc)
            return RunResult.failure(error, retryable)
