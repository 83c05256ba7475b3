"""The simulated world: the real use-cases over the real store and queue adapters, driven step by step.

One `World` is one seed's run. Its virtual clock is the only clock every part reads (the service through
`Ports.clock`, the SQLite store's TTLs and queue's visibility through their injected clocks, moto's SQS through
its patched time source), and its `random.Random` is the only source of choices: which action comes next,
which worker, which fault, how long a handler runs and how it ends. Nothing sleeps and no thread runs a part of
the system, so a seed replays the same run, action for action.

The parts are driven as their processes drive them, with the waits taken out:
- the API's submit, pause, resume and cancel (service/jobs.py);
- the pre-loader and its reconciler (service/dispatch.py `preload`);
- workers: the real `Worker.process` receives the claim's verdict and what becomes of the message
  (worker/runtime.py); the run itself is split into steps the simulation interleaves (claim, heartbeats as the
  clock moves, the outcome's `Lease.complete`, the message's delete), so a fault can fall between any two;
- the DLQ drain (service/deadletters.py).

Faults are drawn from the same seed: a worker killed at any step, a worker frozen past its lease and resumed,
stale duplicate messages, shuffled receives, a lost delete, a store call that fails (an exception the code may
catch) or crashes the calling process (a BaseException nothing catches), before or after its write, a
pre-loader killed mid-cycle, messages received past the receive limit (redriven to the DLQ), and restarts of the
whole system (every in-memory object dropped, the database kept). Invariants (invariants.py) are checked after
every step, and the audit once the faults stop and the system has had time to settle.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from duetime.adapters.sqlite import queue as sqlite_queue
from duetime.adapters.sqlite.db import Database
from duetime.adapters.sqlite.queue import SqliteQueues
from duetime.adapters.sqlite.store import SqliteStore
from duetime.definitions import DEFAULT_JOB_CLASS, Settings
from duetime.domain.catchup import MIN_CATCH_UP_ALL_PERIOD_SECONDS
from duetime.domain.errors import Conflict, InvalidInput, NotFound, StaleAttempt
from duetime.domain.keys import new_job_id
from duetime.domain.limits import RateLimit
from duetime.domain.models import (
    CatchUp,
    Delivery,
    Execution,
    Job,
    JobSpec,
    Overlap,
    RetryPolicy,
    Schedule,
    to_ms,
)
from duetime.domain.recurrence import recurrence_of
from duetime.service.audit import audit
from duetime.service.backfill import backfill
from duetime.service.context import Ports
from duetime.service.deadletters import drain_dead_letters
from duetime.service.dispatch import preload
from duetime.service.edit import edit_job
from duetime.service.executions import Lease
from duetime.service.jobs import cancel_job, pause_job, resume_job, run_now, submit_job
from duetime.service.limits import put_limit
from duetime.service.outcomes import RunOutcome, RunResult
from duetime.service.ports import DueMessage, Received
from duetime.worker import demo  # noqa: F401  (registers demo.echo, the handler the simulated jobs name)
from duetime.worker.runtime import MAX_EARLY_WAIT_SECONDS, Claimed, Worker

from tests.moto_keys import reuse_kms_key_material

from .invariants import Checker, Violation

JOB_CLASS = DEFAULT_JOB_CLASS
OWNER = "sim"
LIMIT_NAME = "shared-api"  # the owner's one named limit (`--limits`)
LEASE_SECONDS = 30
SETTINGS = Settings(shards=2, preload_interval_seconds=5, preload_window_seconds=30).with_lease_seconds(LEASE_SECONDS)
# The queues' receive limit in the simulation (50 in a deployment): low, so that messages received again and
# again without completing are redriven to the DLQ within a run of a few hundred steps.
RECEIVE_LIMIT = 4
# Live workers the simulation keeps (a killed one is replaced at the next receive).
WORKERS = 3
# A running handler's heartbeats come every lease/3, as the runtime sends them.
HEARTBEAT_SECONDS = LEASE_SECONDS / 3
# After the last step: faults stop and the system runs healthy this long before the audit.
HEAL_ROUNDS = 25
HEAL_STEP_SECONDS = 10
# More while the audit is not clean: 20 virtual minutes, then on while its findings keep changing (a backlog that
# drains: serial backfilled runs of a failing handler each take their attempts in turn, seed 7369 with all four
# operator flags), at most 100 minutes in all; stopped once they stand still for five minutes.
HEAL_MORE_ROUNDS = 120
HEAL_MOST_ROUNDS = 600
HEAL_STALLED_ROUNDS = 30
FULL_CHECK_EVERY_MOTO = 5
START = datetime(2026, 12, 1, 8, 30, tzinfo=UTC)
# The repeating schedules a submit draws from: minute ones, and seconds ones (issue 34: a six-field cron, seconds
# first, and `every` in whole seconds from 1 s). A seconds job's slots are seconds apart, so a backlog, an overlap
# and a catch-up span many slots in one pre-load window, and it makes up to 60 times the rows of a minute job:
# SECONDS_SHARE of the repeating jobs are seconds ones, which keeps the budget's time within a tenth of what it
# was without them (docs/simulation.md has the figures).
MINUTE_CRONS = ["* * * * *", "*/2 * * * *", "*/3 * * * *"]
SECONDS_CRONS = ["*/5 * * * * *", "*/20 * * * * *", "15,45 * * * * *"]
MINUTE_EVERY = ["1m", "2m", "3m"]
SECONDS_EVERY = ["1s", "7s", "30s"]
SECONDS_SHARE = 0.05
# How long an eventually consistent read may lag a write (`--stale`): DynamoDB's are usually within a second; 30 s
# here, so a seed's pre-loader meets a moment-old job often (a cycle comes seconds to minutes after a change).
STALE_LAG = timedelta(seconds=30)


class StoreError(Exception):
    """A store call that failed (a timeout, a throttle): an exception the calling code may catch and survive."""


class Crash(BaseException):
    """The calling process died at a store call: nothing in duetime catches a BaseException."""


@dataclass
class Fault:
    """The `countdown`-th store call from now fails or crashes, before or after it has written."""

    kind: str  # "fail" or "crash"
    when: str  # "before" or "after"
    countdown: int


# Store calls a fault may hit: every write, and the reads the hot paths make.
FAULTABLE = frozenset(
    {
        "create_job",
        "update_job_status",
        "put_execution",
        "put_executions",
        "claim",
        "heartbeat",
        "release",
        "finish",
        "move_for_retry",
        "end_waiting",
        "end_claimed",
        "mark_notified",
        "hold_waiting",
        "unhold_waiting",
        "acquire_lease",
        "advance_cursor",
        "release_lease",
        "get_job",
        "get_jobs",
        "get_execution",
        "query_due",
        "sweep_open",
        "open_page",
        "open_executions_of_job",
        "indexed_open_executions_of_job",
        "index_by_job",
    }
)


class FaultyStore:
    """The real store behind a proxy that fires the world's armed fault at the call it counts down to."""

    def __init__(self, inner: Any, world: World) -> None:
        self._inner = inner
        self._world = world

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in FAULTABLE:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            fault = self._world.take_fault()
            if fault is not None and fault.when == "before":
                self._world.fire(fault, name)
            result = attr(*args, **kwargs)
            if fault is not None and fault.when == "after":
                self._world.fire(fault, name)
            return result

        return call

    def get_jobs(self, job_ids: list[str], consistent: bool = True) -> dict[str, Job]:
        """As the store answers (or the armed fault fires), but an eventually consistent read may answer a job
        changed a moment ago as it was before (World.stale_view)."""
        found: dict[str, Job] = self.__getattr__("get_jobs")(job_ids, consistent)
        return found if consistent else self._world.stale_view(job_ids, found)


class FaultyQueues:
    """The real queues behind a proxy that loses an armed delete and shuffles what a receive returns."""

    def __init__(self, inner: Any, world: World) -> None:
        self._inner = inner
        self._world = world

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def send(self, messages: Any, now: datetime) -> int:
        batch = list(messages)
        self._world.sent.extend(batch)
        return int(self._inner.send(batch, now))

    def receive(self, job_class: str, max_messages: int, wait_seconds: float, visibility: float) -> list[Received]:
        batch = list(self._inner.receive(job_class, max_messages, wait_seconds, visibility))
        self._world.rng.shuffle(batch)  # reordered: a worker's slots start in any order
        return batch

    def delete(self, job_class: str, receipt: str) -> None:
        """As the receive loop's DeleteBatcher deletes: a batch of one, whose failure is reported, not raised."""
        self.delete_batch(job_class, [receipt])

    def delete_batch(self, job_class: str, receipts: list[str]) -> None:
        if self._world.lose_delete:
            self._world.lose_delete = False
            self._world.log("  the delete is lost")
            return
        self._inner.delete_batch(job_class, receipts)


class Notices:
    """The notifier: what owners were told, kept for the trace."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def notify(self, owner: str, subject: str, detail: dict[str, object]) -> None:
        self.sent.append((owner, subject))


# -- the adapters ----------------------------------------------------------------------------------------------


class SimDatabase(Database):
    """The SQLite database without its background checkpoint thread (the one thread the adapter starts): SQLite's
    own WAL autocheckpoint does that work here, and nothing runs beside the simulation's single thread."""

    def _checkpoint(self) -> None:
        return


class SqliteBackend:
    """The SQLite store and queue on one file, both on the virtual clock."""

    name = "sqlite"

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self.clock = clock
        self.dir = Path(tempfile.mkdtemp(prefix="duetime-sim-", dir=_fast_tmp()))
        self.db: Database | None = None
        self.patches = contextlib.ExitStack()
        self.patches.enter_context(_patched(sqlite_queue, "MAX_RECEIVE_COUNT", RECEIVE_LIMIT))

    def open(self) -> tuple[Any, Any]:
        """New adapter objects over the kept file (a restart drops the old ones)."""
        if self.db is not None:
            self.db.close()
        self.db = SimDatabase(self.dir / "duetime.sqlite3")
        store = SqliteStore(self.db, SETTINGS, epoch_seconds=lambda: int(self.clock().timestamp()))
        queues = SqliteQueues(self.db, SETTINGS, wall_ms=lambda: to_ms(self.clock()))
        return store, queues

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
        self.patches.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class MotoBackend:
    """DynamoDB and SQS over in-process moto (mock_aws). moto's SQS keeps delays and visibility on its module's
    time functions (whole seconds of real time otherwise): they are patched to read the virtual clock, so a
    delayed or hidden message surfaces when virtual time says so."""

    name = "moto"

    def __init__(self, clock: Callable[[], datetime]) -> None:
        from duetime.adapters.aws import provision as queue_provision
        from duetime.adapters.aws.client import make_client
        from duetime.adapters.aws.provision import create_queues, create_tables
        from duetime.local import moto_speed
        from moto import mock_aws
        from moto.sqs import models as sqs_models

        reuse_kms_key_material()
        moto_speed.install()
        self.clock = clock
        self.patches = contextlib.ExitStack()
        self.patches.enter_context(mock_aws())
        self.patches.enter_context(_patched(sqs_models, "unix_time", lambda *_: self.clock().timestamp()))
        self.patches.enter_context(_patched(sqs_models, "unix_time_millis", lambda *_: self.clock().timestamp() * 1000))
        self.patches.enter_context(_patched(queue_provision, "MAX_RECEIVE_COUNT", RECEIVE_LIMIT))
        self.dynamodb = make_client("dynamodb", "us-east-1")
        self.sqs = make_client("sqs", "us-east-1")
        create_tables(self.dynamodb, SETTINGS)
        create_queues(self.sqs, SETTINGS)

    def open(self) -> tuple[Any, Any]:
        from duetime.adapters.aws.queue import DueQueues
        from duetime.adapters.aws.store import DynamoStore

        store = DynamoStore(self.dynamodb, SETTINGS, epoch_seconds=lambda: self.clock().timestamp())

        # SQS's clock is the virtual one (moto's is patched to it), and no timer thread runs beside the simulation's
        def wall() -> float:
            return self.clock().timestamp()

        return store, DueQueues.resolve(self.sqs, SETTINGS, wall=wall, spare_timer=False)

    def close(self) -> None:
        self.patches.close()


BACKENDS: dict[str, Callable[[Callable[[], datetime]], Any]] = {"sqlite": SqliteBackend, "moto": MotoBackend}


def _fast_tmp() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


@contextlib.contextmanager
def _patched(module: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


# -- workers ---------------------------------------------------------------------------------------------------


@dataclass
class Task:
    """One received message in a simulated worker's hands, from receive to delete."""

    received: Received
    visible_until: datetime
    stage: str = "received"  # received -> running -> reporting -> ended (reported, delete pending)
    execution: Execution | None = None
    job: Job | None = None
    lease: Lease | None = None
    known_lease_end: datetime | None = None  # the lease end this worker last heard from the store
    run_ends_at: datetime | None = None
    result: RunResult | None = None
    next_heartbeat: datetime | None = None

    @property
    def holds(self) -> bool:
        """Whether its worker believes it holds the attempt it claimed (until it reported the outcome)."""
        return self.stage == "running"


class SimWorker(Worker):
    """The real worker's message handling (`Worker.process`: early arrival, claim, verdicts, message fates),
    with the run taken out of its threads: `_run` hands the claimed attempt to the simulation instead."""

    def __init__(self, ports: Ports, worker_id: str) -> None:
        super().__init__(ports, JOB_CLASS, worker_id, concurrency=4)
        self.tasks: list[Task] = []
        self.frozen_until: datetime | None = None
        self.claimed: tuple[Execution, Job, Lease] | None = None

    def _run(self, claimed: Claimed, received: Received) -> RunOutcome:
        self.claimed = (claimed.execution, claimed.job, claimed.lease)
        return RunOutcome.SUCCEEDED  # not an outcome: the simulation runs the attempt step by step

    def frozen(self, now: datetime) -> bool:
        return self.frozen_until is not None and now < self.frozen_until


@dataclass
class SimJob:
    """A job the system accepted, with how its simulated handler behaves."""

    job_id: str
    profile: str  # "ok", "flaky", "failing" or "permanent"
    kind: str
    at_most_once: bool = False  # delivery at-most-once: no slot of it may start twice
    period_seconds: float = 60.0  # the time between two slots of a repeating job (a one-off's: a minute)


class SimulationFailure(AssertionError):
    """A broken invariant or an unexpected error: carries the seed and the action trace that led to it."""


@dataclass
class World:
    seed: int
    backend: str = "sqlite"
    steps: int = 150
    seconds_share: float = SECONDS_SHARE
    # `--spread`: a third of the jobs a minute or more apart are spread (jitterSeconds 20, 45 or 58), so two slots
    # fall due seconds apart (the budget's SPREAD_SEEDS; seed 85 found a slot counted twice, docs/simulation.md).
    spread: bool = False
    # `--edits`: schedules are edited too (PATCH's edit_job: a recurring job's waiting run replaced by the new
    # schedule's first slot), racing the pre-loader, claims, pauses and faults (the budget's OPERATOR_SEEDS).
    edits: bool = False
    # `--run-now`: jobs are also run now (POST /jobs/{id}/run's run_now: a manual run due at once, outside the
    # schedule), beside their scheduled runs.
    run_now: bool = False
    # `--backfill`: repeating jobs' past slots are also backfilled (service/backfill.py, as POST
    # /jobs/{id}/backfill does), allow or forbid.
    backfill: bool = False
    # `--bounded`: two in five repeating jobs are bounded (maxRuns 1-5, or endAt 4-15 minutes on): their chains
    # end, their last run completes them, catch-up and backfill stay within the bounds.
    bounded: bool = False
    # `--limits`: the owner has a named limit (PUT /limits/{name}) capping runs at once, and three in ten jobs name
    # it, three in ten have a maxConcurrent of their own: runs are admitted, deferred and given their slots back
    # under every fault.
    limits: bool = False
    # `--stale`: an eventually consistent read of jobs (the pre-loader's, Store.get_jobs(consistent=False)) answers
    # a job changed within STALE_LAG as it was before the change, or not at all if it was just created, three times in
    # four: DynamoDB's eventually consistent read, which may lag a write (usually by under a second).
    stale: bool = False
    trace: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.clock_now = START + timedelta(milliseconds=self.rng.randrange(3_600_000))
        self.step_no = 0
        self.ids = itertools.count(1)
        self.last_hex = ""
        self.fault: Fault | None = None
        self.lose_delete = False
        self.sent: list[DueMessage] = []
        self.jobs: dict[str, SimJob] = {}
        self.workers: list[SimWorker] = []
        self.worker_ids = itertools.count(1)
        self.preloader = 1
        self.notices = Notices()
        self.service_random = random.Random(self.seed ^ 0x5EED)
        # Staleness draws from its own generator: the actions a seed draws stay those it drew without `stale`.
        self.stale_random = random.Random(self.seed ^ 0x57A1E)
        self.job_as_read: dict[str, Job] = {}  # each job as it stood at the end of the last step that changed it
        self.job_before: dict[str, tuple[Job | None, datetime]] = {}  # what it was before, and when it changed
        self.checker = Checker(self)
        # The stored state's invariants are read after every step on SQLite; on moto, where a full read is two
        # scans of about 10 ms a page, after every FULL_CHECK_EVERY_MOTO-th step (what breaks there stays broken,
        # so it is caught a few steps late at most) and after the heal. The workers' beliefs: after every step.
        self.full_check_every = 1 if self.backend == "sqlite" else FULL_CHECK_EVERY_MOTO
        self.adapters = BACKENDS[self.backend](self.clock)
        self._open()
        self.limit: RateLimit | None = None
        if self.limits:
            # Its rate is far above what the jobs ask (the cap is what holds runs back): a start reserved in the
            # bucket lapses when taken more than LIMIT_LAPSE_MS late (100 ms), and the simulation's workers take
            # what is due only at their steps, so a rate they reach would lapse and reserve again at every step,
            # running the bucket away into the future (docs/simulation.md, Limits).
            per_second, burst = 100.0, 10
            self.limit, _ = put_limit(self.raw, OWNER, LIMIT_NAME, per_second, burst, self.rng.choice([2, 3]))
            self.log(f"limit {LIMIT_NAME}: {per_second}/s, burst {burst}, at most {self.limit.max_concurrent} at once")

    # -- wiring ------------------------------------------------------------------------------------------------

    def clock(self) -> datetime:
        return self.clock_now

    def _id_hex(self) -> str:
        self.last_hex = f"{next(self.ids):016x}"
        return self.last_hex

    def _open(self) -> None:
        store, queues = self.adapters.open()
        common: dict[str, Any] = {
            "settings": SETTINGS,
            "notifier": self.notices,
            "clock": self.clock,
            "id_hex": self._id_hex,
            "uniform": self.service_random.uniform,
        }
        self.raw = Ports(store=store, queues=queues, **common)  # what the invariants read: never faulted
        self.ports = Ports(store=FaultyStore(store, self), queues=FaultyQueues(queues, self), **common)  # type: ignore[arg-type]
        self.workers = []

    def close(self) -> None:
        self.adapters.close()

    def log(self, text: str) -> None:
        stamp = self.clock_now.strftime("%H:%M:%S.") + f"{self.clock_now.microsecond // 1000:03d}"
        self.trace.append(f"{self.step_no:>4} {stamp} {text}")

    # -- faults ------------------------------------------------------------------------------------------------

    def take_fault(self) -> Fault | None:
        fault = self.fault
        if fault is None:
            return None
        fault.countdown -= 1
        if fault.countdown > 0:
            return None
        self.fault = None
        return fault

    def note_job_changes(self) -> None:
        """After a step: each job changed by it (a new version, or new) is remembered as it was before."""
        for job_id, job in self.raw.store.get_jobs(sorted(self.jobs)).items():
            old = self.job_as_read.get(job_id)
            if old is None or old.version != job.version:
                self.job_before[job_id] = (old, self.clock_now)
                self.job_as_read[job_id] = job

    def stale_view(self, job_ids: list[str], found: dict[str, Job]) -> dict[str, Job]:
        """What an eventually consistent read of `job_ids` answers (`stale`): a job changed within STALE_LAG as it
        was before, or left out if it was new, three times in four."""
        if not self.stale:
            return found
        view = dict(found)
        for job_id in job_ids:
            old, changed = self.job_before.get(job_id, (None, None))
            if changed is None or self.clock_now - changed > STALE_LAG or self.stale_random.random() < 0.25:
                continue
            if old is None:
                view.pop(job_id, None)
            else:
                view[job_id] = old
            what = "nothing" if old is None else f"{old.status.value} version {old.version}"
            now = found.get(job_id)
            stands = "gone" if now is None else f"{now.status.value} version {now.version}"
            self.log(f"  an eventually consistent read of {job_id} answers {what} (it is {stands})")
        return view

    def fire(self, fault: Fault, call: str) -> None:
        self.log(f"  store.{call} {'fails' if fault.kind == 'fail' else 'crashes its caller'} {fault.when} its write")
        if fault.kind == "fail":
            raise StoreError(f"store.{call} failed ({fault.when})")
        raise Crash(f"store.{call} ({fault.when})")

    # -- the run -----------------------------------------------------------------------------------------------

    ACTIONS = (
        ("submit", 10),
        ("advance", 16),
        ("advance_far", 3),
        ("preload", 12),
        ("receive", 14),
        ("step", 30),
        ("drain", 3),
        ("pause", 1),
        ("resume", 1),
        ("cancel", 1),
        ("kill_worker", 2),
        ("freeze_worker", 2),
        ("duplicate", 2),
        ("bounce", 2),
        ("lose_delete", 2),
        ("store_fault", 3),
        ("kill_preloader", 1),
        ("restart", 1),
    )

    EDIT_WEIGHT = 3
    RUN_NOW_WEIGHT = 2
    BACKFILL_WEIGHT = 2

    def run(self) -> None:
        """Run `steps` steps, then heal and audit; raises SimulationFailure with the seed and the trace."""
        actions = (
            *self.ACTIONS,
            *((("edit", self.EDIT_WEIGHT),) if self.edits else ()),
            *((("run_now", self.RUN_NOW_WEIGHT),) if self.run_now else ()),
            *((("backfill", self.BACKFILL_WEIGHT),) if self.backfill else ()),
        )
        names = [name for name, _ in actions]
        weights = [weight for _, weight in actions]
        level = logging.getLogger("duetime").level
        logging.getLogger("duetime").setLevel(logging.CRITICAL)  # the faults make the code log, as it should
        try:
            for step in range(1, self.steps + 1):
                self.step_no = step
                action = self.rng.choices(names, weights)[0]
                self._guarded(getattr(self, f"act_{action}"))
                if self.stale:
                    self._guarded(self.note_job_changes)
                stored = step % self.full_check_every == 0
                self._guarded(lambda stored=stored: self.checker.check(stored))  # type: ignore[misc]
            self.step_no = self.steps + 1
            self._guarded(self.heal)
        finally:
            logging.getLogger("duetime").setLevel(level)

    def _guarded(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Violation as broken:
            raise SimulationFailure(self.report(f"invariant broken: {broken}")) from None
        except (Exception, Crash) as exc:
            raise SimulationFailure(self.report(f"unexpected {type(exc).__name__}: {exc}")) from exc

    def report(self, what: str, tail: int = 80) -> str:
        lines = self.trace[-tail:]
        skipped = len(self.trace) - len(lines)
        head = [
            f"simulation seed {self.seed} on {self.backend} ({self.steps} steps) failed at step {self.step_no}: {what}",
            f"replay: make simulate SEED={self.seed} BACKEND={self.backend} STEPS={self.steps}"
            + (" SPREAD=1" if self.spread else "")
            + (" EDITS=1" if self.edits else "")
            + (" RUN_NOW=1" if self.run_now else "")
            + (" BACKFILL=1" if self.backfill else "")
            + (" BOUNDED=1" if self.bounded else "")
            + (" LIMITS=1" if self.limits else "")
            + (" STALE=1" if self.stale else ""),
            f"trace{f' (last {tail} of {len(self.trace)} lines)' if skipped else ''}:",
        ]
        return "\n".join(head + lines)

    # -- actions -----------------------------------------------------------------------------------------------

    def act_submit(self) -> None:
        spec, profile = self._random_spec()
        what = (
            spec.schedule.at.strftime("at %H:%M:%S") if spec.schedule.at else spec.schedule.cron or spec.schedule.every
        )
        if spec.schedule.max_runs is not None:
            what += f" maxRuns={spec.schedule.max_runs}"
        if spec.schedule.end_at is not None:
            what += f" endAt={spec.schedule.end_at:%H:%M:%S}"
        if spec.max_concurrent is not None:
            what += f" maxConcurrent={spec.max_concurrent}"
        if spec.rate_limit is not None:
            what += f" rateLimit={spec.rate_limit}"
        self.log(
            f"submit {what} catchUp={spec.catch_up.value} overlap={spec.overlap.value} "
            f"attempts={spec.retry.max_attempts} deadline={spec.starting_deadline_seconds} "
            f"pauseAfter={spec.pause_after_failures} delivery={spec.delivery.value} handler={profile}"
        )
        try:
            job, _ = submit_job(self.ports, OWNER, spec)
            job_id = job.job_id
        except (StoreError, Crash):
            job_id = new_job_id(self.last_hex)
            if self.raw.store.get_job(job_id) is None:
                self.log(f"  not accepted ({job_id} not stored)")
                return
            self.log("  the caller saw an error, but the job was stored")
        kind = "at" if spec.schedule.at else "cron" if spec.schedule.cron else "every"
        at_most_once = spec.delivery == Delivery.AT_MOST_ONCE
        self.jobs[job_id] = SimJob(job_id, profile, kind, at_most_once, _period_seconds(spec.schedule, self.clock_now))
        self.log(f"  accepted {job_id}")

    def _repeating_schedule(self, kind: str) -> Schedule:
        rng = self.rng
        if kind == "cron":
            return Schedule(cron=rng.choice(SECONDS_CRONS if rng.random() < self.seconds_share else MINUTE_CRONS))
        return Schedule(every=rng.choice(SECONDS_EVERY if rng.random() < self.seconds_share else MINUTE_EVERY))

    def _random_spec(self) -> tuple[JobSpec, str]:
        rng = self.rng
        kind = rng.choice(["at", "at", "cron", "every"])
        if kind == "at":
            at = self.clock_now + timedelta(milliseconds=rng.randrange(-30_000, 180_000))
            schedule = Schedule(at=at.replace(microsecond=at.microsecond // 1000 * 1000))
        else:
            schedule = self._repeating_schedule(kind)
        spec = JobSpec(
            name=f"sim-{kind}",
            handler="demo.echo",
            schedule=schedule,
            retry=RetryPolicy(
                max_attempts=rng.randint(1, 4),
                base_delay_seconds=rng.choice([0, 1, 5, 10]),
                max_delay_seconds=rng.choice([20, 40]),
            ),
            timeout_seconds=rng.choice([20, 60, 90]),
            overlap=rng.choice(list(Overlap)),
            catch_up=rng.choice(list(CatchUp)),
            starting_deadline_seconds=rng.choice([None, None, None, 20, 90]),
            pause_after_failures=rng.choice([None, None, None, 2]),
        )
        if self.spread and kind != "at" and _period_seconds(schedule, self.clock_now) >= 60 and rng.random() < 0.3:
            spec = spec.model_copy(update={"jitter_seconds": rng.choice([20, 45, 58])})
        if self.bounded and kind != "at" and rng.random() < 0.4:
            end_at = self.clock_now + timedelta(milliseconds=rng.randrange(240_000, 900_000))
            bounds = rng.choice([{"max_runs": rng.randint(1, 5)}, {"end_at": end_at}])
            spec = spec.model_copy(update={"schedule": schedule.model_copy(update=bounds)})
        if self.limits:
            # Capped and limited jobs are a minute or more apart (a cap of one behind a job every second falls
            # behind for good: overload, not a defect).
            capped, named = rng.random() < 0.3, rng.random() < 0.3
            slow = kind == "at" or _period_seconds(schedule, self.clock_now) >= 60
            if capped and slow:
                spec = spec.model_copy(update={"max_concurrent": rng.choice([1, 2])})
            if named and slow:
                spec = spec.model_copy(update={"rate_limit": LIMIT_NAME})
            if (capped or named) and slow and spec.catch_up == CatchUp.ALL:
                # Every missed slot run one after another, each deferred by the cap or the rate behind the job's
                # new slots, drains slower than they come: a backlog by configuration, not a defect.
                spec = spec.model_copy(update={"catch_up": CatchUp.LATEST})
        if spec.catch_up == CatchUp.ALL and _period_seconds(schedule, self.clock_now) < MIN_CATCH_UP_ALL_PERIOD_SECONDS:
            # The API refuses `all` for slots this close (domain/catchup.py says why): such a job draws `latest`.
            spec = spec.model_copy(update={"catch_up": CatchUp.LATEST})
        if rng.random() < 0.25:  # at-most-once: one attempt, never a second start of a slot
            spec = spec.model_copy(
                update={"delivery": Delivery.AT_MOST_ONCE, "retry": spec.retry.model_copy(update={"max_attempts": 1})}
            )
        return spec, rng.choice(["ok", "ok", "flaky", "failing", "permanent"])

    def act_advance(self) -> None:
        self.advance(self.rng.choice([0.1, 0.5, 1, 2, 3, 5, 8, 13]) + self.rng.random())

    def act_advance_far(self) -> None:
        self.advance(self.rng.choice([20, 35, 60, 120, 200]) + self.rng.random())

    def advance(self, seconds: float) -> None:
        """Move the clock, in steps short enough for every live worker's heartbeats to come on time."""
        self.log(f"advance {seconds:.3f} s")
        left = seconds
        while left > 0:
            delta = min(left, HEARTBEAT_SECONDS / 2)
            left -= delta
            self.clock_now += timedelta(seconds=delta)
            self._heartbeats()

    def _heartbeats(self) -> None:
        now = self.clock_now
        for worker in list(self.workers):
            if worker.frozen_until is not None and now >= worker.frozen_until:
                worker.frozen_until = None
                self.log(f"  {worker.worker_id} resumes")
            if worker.frozen(now):
                continue
            for task in list(worker.tasks):
                # The runtime's heartbeat loop ends when the handler returns: a run that has ended waits for its
                # outcome to be reported (a worker frozen there reports late, without a heartbeat first).
                running = task.stage == "running" and task.run_ends_at is not None and now < task.run_ends_at
                due = running and task.next_heartbeat is not None and now >= task.next_heartbeat
                if due and not self._heartbeat(worker, task):
                    break  # the worker died

    def _heartbeat(self, worker: SimWorker, task: Task) -> bool:
        """One heartbeat of a running task; False if the worker died in it."""
        assert task.lease is not None and task.execution is not None
        stale = self.checker.stale(task)
        try:
            updated = task.lease.extend()
        except StaleAttempt:
            self.log(f"  {worker.worker_id}'s heartbeat for {_short(task)} is refused: the attempt is lost")
            worker.tasks.remove(task)
            return True
        except (StoreError, ClientError):  # the runtime logs it and tries again at the next heartbeat
            task.next_heartbeat = self.clock_now + timedelta(seconds=HEARTBEAT_SECONDS)
            return True
        except Crash:
            self._kill(worker, "in a heartbeat")
            return False
        if stale is not None:
            raise Violation(f"{worker.worker_id}'s heartbeat for {_short(task)} was accepted, but {stale}")
        task.known_lease_end = updated.lease_until
        task.next_heartbeat = self.clock_now + timedelta(seconds=HEARTBEAT_SECONDS)
        return True

    def act_preload(self) -> None:
        owner = f"preloader-{self.preloader}"
        self.log(f"preload by {owner}")
        try:
            report = preload(self.ports, owner)
        except Crash:
            self.preloader += 1
            self.log(f"  {owner} died mid-cycle")
            return
        self.log(
            f"  sent {report.sent} created {report.created} skipped {report.skipped} resent {report.resent} "
            f"held {report.held} busy {report.busy} errors {report.errors}"
        )

    def act_kill_preloader(self) -> None:
        self.fault = Fault("crash", self.rng.choice(["before", "after"]), self.rng.randint(1, 12))
        self.act_preload()
        self.fault = None

    def _live_worker(self) -> SimWorker | None:
        """A worker to receive with: an existing one that is not frozen, or a new one while fewer than WORKERS."""
        now = self.clock_now
        if len(self.workers) < WORKERS and (not self.workers or self.rng.random() < 0.5):
            worker = SimWorker(self.ports, f"w{next(self.worker_ids)}")
            self.workers.append(worker)
            return worker
        awake = [w for w in self.workers if not w.frozen(now)]
        return self.rng.choice(awake) if awake else None

    def act_receive(self) -> None:
        worker = self._live_worker()
        if worker is None:
            return
        visible_until = self.clock_now + timedelta(seconds=LEASE_SECONDS)  # as the runtime computes it
        batch = self.ports.queues.receive(JOB_CLASS, self.rng.randint(1, 3), 0, LEASE_SECONDS)
        for received in batch:
            worker.tasks.append(Task(received, visible_until))
        names = ", ".join(f"{_message(r.message)} (#{r.receive_count})" for r in batch)
        self.log(f"{worker.worker_id} receives {names or 'nothing'}")

    def act_bounce(self) -> None:
        """A worker that receives a message and gives it straight back (it crashes before claiming, say): its
        receive count grows, and past the receive limit the queue redrives it to the DLQ."""
        batch = self.ports.queues.receive(JOB_CLASS, 1, 0, LEASE_SECONDS)
        for received in batch:
            self.log(f"bounce {_message(received.message)} (#{received.receive_count})")
            self.ports.queues.extend(JOB_CLASS, received.receipt, 0)

    def act_step(self) -> None:
        now = self.clock_now
        ready = [(w, t) for w in self.workers if not w.frozen(now) for t in w.tasks]
        if not ready:
            return
        worker, task = self.rng.choice(ready)
        self.step_task(worker, task)

    def step_task(self, worker: SimWorker, task: Task) -> bool:
        """Take `task` one step on; False if there was nothing to do yet (waiting for its due time or run end)."""
        try:
            if task.stage == "received":
                return self._process(worker, task)
            if task.stage == "running":
                return self._finish_run(worker, task)
            self.log(f"{worker.worker_id} deletes {_short(task)}'s message")
            worker._delete(task.received)
            worker.tasks.remove(task)
            return True
        except (StoreError, ClientError) as error:  # as the runtime's _process_slot: logged, the message comes back
            self.log(f"  {worker.worker_id} drops {_short(task)} after {type(error).__name__} (the message comes back)")
            if task in worker.tasks:
                worker.tasks.remove(task)
            return True
        except Crash:
            self._kill(worker, f"at {task.stage} {_short(task)}")
            return True

    def _process(self, worker: SimWorker, task: Task) -> bool:
        message = task.received.message
        early = (message.start_ms - to_ms(self.clock_now)) / 1000
        if 0 < early <= MAX_EARLY_WAIT_SECONDS:
            return False  # the runtime sleeps it out: here the clock has to move first
        worker.claimed = None
        outcome = worker.process(task.received, task.visible_until)
        if worker.claimed is None:
            self.log(f"{worker.worker_id} handles {_message(message)}: {outcome.value}")
            worker.tasks.remove(task)
            return True
        execution, job, lease = worker.claimed
        task.stage, task.execution, task.job, task.lease = "running", execution, job, lease
        task.known_lease_end = execution.lease_until
        task.next_heartbeat = self.clock_now + timedelta(seconds=HEARTBEAT_SECONDS)
        duration = self.rng.choice([0, 0.5, 2, 5, 15, 40, 100])
        sim_job = self.jobs.get(job.job_id)
        profile = sim_job.profile if sim_job is not None else "ok"
        if sim_job is not None and sim_job.period_seconds < 60:
            # A seconds job's runs are as long against its period as a minute job's against a minute: most end
            # within the period, some overlap the next slots. (Runs of 40 s behind every 7 s slot would keep a
            # run live at all times, and catch-up runs, which wait for no run to be live, would never start.)
            duration = round(duration * sim_job.period_seconds / 60, 3)
        if duration >= job.timeout_seconds:
            duration, task.result = job.timeout_seconds, RunResult.failure(f"timeout after {job.timeout_seconds} s")
        elif profile == "permanent" or (profile == "flaky" and self.rng.random() < 0.5) or profile == "failing":
            task.result = RunResult.failure("simulated failure", retryable=profile != "permanent")
        else:
            task.result = RunResult.success({"ran": execution.execution_id, "attempt": execution.attempt})
        task.run_ends_at = self.clock_now + timedelta(seconds=duration)
        self.log(
            f"{worker.worker_id} claims {_short(task)} until {_hms(execution.lease_until)}; runs {duration} s, "
            f"{'succeeds' if task.result.succeeded else 'fails'}"
        )
        self.checker.claimed(worker, task)
        return True

    def _finish_run(self, worker: SimWorker, task: Task) -> bool:
        assert task.run_ends_at is not None and task.lease is not None and task.result is not None
        if self.clock_now < task.run_ends_at:
            return False
        stale = self.checker.stale(task)
        task.stage = "reporting"
        try:
            ended = task.lease.complete(task.result, task.job)
        except StaleAttempt:
            if stale is None:
                raise Violation(f"{worker.worker_id}'s outcome for {_short(task)} was refused, yet it held") from None
            self.log(f"{worker.worker_id}'s outcome for {_short(task)} is refused (stale: {stale})")
            worker.tasks.remove(task)
            return True
        if stale is not None:
            raise Violation(f"{worker.worker_id}'s outcome for {_short(task)} was accepted, but {stale}")
        task.stage = "ended"
        self.log(f"{worker.worker_id} reports {_short(task)}: the row is {ended.status.value}")
        self.checker.completed(worker, task, ended)
        return True

    def _kill(self, worker: SimWorker, where: str) -> None:
        stages = ", ".join(f"{_short(t)} {t.stage}" for t in worker.tasks)
        self.log(f"  {worker.worker_id} dies {where} (holding: {stages or 'nothing'})")
        if worker in self.workers:
            self.workers.remove(worker)

    def act_kill_worker(self) -> None:
        if self.workers:
            self._kill(self.rng.choice(self.workers), "(killed)")

    def act_freeze_worker(self) -> None:
        now = self.clock_now
        candidates = [w for w in self.workers if not w.frozen(now)]
        if candidates:
            worker = self.rng.choice(candidates)
            worker.frozen_until = now + timedelta(seconds=self.rng.uniform(LEASE_SECONDS, 4 * LEASE_SECONDS))
            self.log(f"{worker.worker_id} freezes until {_hms(worker.frozen_until)}")

    def act_duplicate(self) -> None:
        """A copy of a message sent earlier is delivered again (SQS is at least once; the reconciler resends)."""
        if self.sent:
            message = self.rng.choice(self.sent)
            self.log(f"duplicate of {_message(message)} delivered")
            self.raw.queues.send([message], self.clock_now)

    def act_lose_delete(self) -> None:
        self.lose_delete = True
        self.log("arm: the next delete is lost")

    def act_store_fault(self) -> None:
        self.fault = Fault(
            self.rng.choice(["fail", "crash"]), self.rng.choice(["before", "after"]), self.rng.randint(1, 10)
        )
        self.log(f"arm: the {self.fault.countdown}th store call from now {self.fault.kind}s {self.fault.when}")

    def act_drain(self) -> None:
        self.log("drain the DLQ")
        try:
            handled = drain_dead_letters(self.ports, JOB_CLASS)
        except (StoreError, ClientError, Crash):
            self.log("  the drain died")
            return
        self.log(f"  handled {handled}")

    def _some_job(self) -> str | None:
        return self.rng.choice(sorted(self.jobs)) if self.jobs else None

    def _some_repeating_job(self) -> str | None:
        repeating = sorted(job_id for job_id, job in self.jobs.items() if job.kind != "at")
        return self.rng.choice(repeating) if repeating else None

    def act_pause(self) -> None:
        self._job_call("pause", pause_job)

    def act_resume(self) -> None:
        self._job_call("resume", resume_job)

    def act_cancel(self) -> None:
        self._job_call("cancel", cancel_job)

    def act_edit(self) -> None:
        """Edit a repeating job's schedule to another (cron or interval), as PATCH /jobs/{id} does. Its waiting
        runs may be replaced (deleted, the new first slot written in their place), so the checker is told which
        may go; a catch-up `all` job keeps slots far enough apart (else the API refuses the edit, as it would)."""
        job_id = self._some_repeating_job()
        if job_id is None:
            return
        schedule = self._repeating_schedule(self.rng.choice(["cron", "every"]))
        before = self.raw.store.get_job(job_id)
        if before is None:
            return
        if (before.max_concurrent or before.rate_limit) and _period_seconds(schedule, self.clock_now) < 60:
            # A capped job stays a minute or more apart (as drawn, `limits`): a cap of one behind a slot every
            # second falls behind for good, and the heal, a second at a time, would drain it for hours.
            schedule = Schedule(cron=self.rng.choice(MINUTE_CRONS))
        what = schedule.cron or schedule.every
        self.checker.editing(job_id, before)
        try:
            edit_job(self.ports, OWNER, job_id, before.version, {"schedule": schedule})
            self.log(f"edit {job_id}: schedule {what}")
        except (Conflict, NotFound, InvalidInput) as refused:
            self.log(f"edit {job_id} to {what}: refused ({refused})")
        except (StoreError, Crash):
            self.log(f"edit {job_id} to {what}: the call died")
        after = self.raw.store.get_job(job_id)
        waiting = [
            f"{_hms(e.scheduled_at)} {e.status.value}/{e.kind}/{e.attempt}"
            for e in self.raw.store.open_executions_of_job(job_id)
        ]
        self.log(f"  its open runs now: {', '.join(waiting) or 'none'}")
        if after is not None and after.version != before.version:
            self.checker.edited(job_id, after)
            self.jobs[job_id].period_seconds = min(
                self.jobs[job_id].period_seconds, _period_seconds(after.schedule, self.clock_now)
            )

    def act_run_now(self) -> None:
        """Run a job now, outside its schedule (its slots are not disturbed): a manual run due at once, with its
        own id, which the workers claim and run like any other."""
        self._job_call("run now", run_now)

    def act_backfill(self) -> None:
        """Backfill a span of a repeating job's past: its slots without a row are run once, as kind `backfill`, one
        at a time (forbid) or together (allow)."""
        job_id = self._some_repeating_job()
        if job_id is None:
            return
        # A span of up to 8 of the job's periods, within the last half hour: a serial backfill runs its slots one
        # after another, and the heal must have time to run them all before the audit.
        period = self.jobs[job_id].period_seconds
        length = self.rng.uniform(1, 8 * period)
        start = self.clock_now - timedelta(seconds=self.rng.uniform(length + 1, 1800 + length))
        end = start + timedelta(seconds=length)
        overlap = self.rng.choice([Overlap.FORBID, Overlap.ALLOW])
        what = f"{_hms(start)}-{_hms(end)} {overlap.value}"
        try:
            done = backfill(self.ports, OWNER, job_id, start, end, overlap)
            self.log(f"backfill {job_id} {what}: {done.created} created, {done.present} present")
        except (Conflict, NotFound, InvalidInput) as refused:
            self.log(f"backfill {job_id} {what}: refused ({refused})")
        except (StoreError, Crash):
            self.log(f"backfill {job_id} {what}: the call died")

    def _job_call(self, name: str, call: Callable[[Ports, str, str], Any]) -> None:
        job_id = self._some_job()
        if job_id is None:
            return
        try:
            call(self.ports, OWNER, job_id)
            self.log(f"{name} {job_id}")
        except (Conflict, NotFound) as refused:
            self.log(f"{name} {job_id}: refused ({refused})")
        except (StoreError, Crash):
            self.log(f"{name} {job_id}: the call died")

    def act_restart(self) -> None:
        """Every process dies at once and starts again: in-memory state is gone, the database stays."""
        self.log("restart: every process dies; the database stays")
        self.fault = None
        self.lose_delete = False
        self.preloader += 1
        self._open()

    # -- the end -------------------------------------------------------------------------------------------------

    def heal(self) -> None:
        """Stop the faults, let the system run healthy for a while, then check the audit is clean."""
        self.log("heal: faults stop, frozen workers resume")
        self.fault = None
        self.lose_delete = False
        for worker in self.workers:
            worker.frozen_until = None
        for _ in range(HEAL_ROUNDS):
            self._heal_round()
        self.checker.check()
        report = audit(self.raw)
        extra = 0
        # A backlog of catch-up runs (which run one after another) with retries takes longer to drain; the audit
        # cannot tell a run deferred behind its job's running one from one never picked up: give it more time.
        seen, changed_at = report.lines()[1:-1], 0  # the findings alone (the counts move with every run)
        while not report.ok and extra < HEAL_MOST_ROUNDS:
            self._heal_round()
            extra += 1
            if extra % 6 == 0:
                report = audit(self.raw)
                if report.lines()[1:-1] != seen:
                    seen, changed_at = report.lines()[1:-1], extra
                elif extra >= HEAL_MORE_ROUNDS and extra - changed_at >= HEAL_STALLED_ROUNDS:
                    break  # the findings stood still for five minutes: stuck, not draining
        if extra:
            self.checker.check()
            report = audit(self.raw)
        self.log("audit: " + "; ".join(report.lines()))
        if not report.ok:
            raise Violation("the audit is not clean: " + "; ".join(report.lines()[1:-1]))
        self.checker.histories()

    def _heal_round(self) -> None:
        """One healthy stretch: a pre-load cycle, then the clock moves and every visible message is run to its
        end as it goes, then a drain. With a seconds job the clock moves a second at a time (its run ends and
        the next starts within the stretch, as they would), else the whole stretch at once."""
        self.act_preload()
        while len(self.workers) < WORKERS:
            self.workers.append(SimWorker(self.ports, f"w{next(self.worker_ids)}"))
        tick = 1 if any(job.period_seconds < 60 for job in self.jobs.values()) else HEAL_STEP_SECONDS
        for _ in range(HEAL_STEP_SECONDS // tick):
            self._heal_tick()
            self.advance(tick)
        self._heal_tick()
        self.act_drain()
        self.checker.check(stored=self.full_check_every == 1)

    def _heal_tick(self) -> None:
        for worker in self.workers:
            while batch := self.ports.queues.receive(JOB_CLASS, 10, 0, LEASE_SECONDS):
                visible_until = self.clock_now + timedelta(seconds=LEASE_SECONDS)
                worker.tasks.extend(Task(received, visible_until) for received in batch)
        moved = True
        while moved:
            moved = any(self.step_task(w, t) for w in list(self.workers) for t in list(w.tasks))


def _period_seconds(schedule: Schedule, now: datetime) -> float:
    """The time between the schedule's first two slots after `now` (every schedule drawn here is regular);
    a minute for a one-off."""
    recurrence = recurrence_of(schedule, now)
    if recurrence is None:
        return 60.0
    first = recurrence.next_after(now)
    return (recurrence.next_after(first) - first).total_seconds()


def _short(task: Task) -> str:
    if task.execution is not None:
        return f"{task.execution.execution_id} attempt {task.execution.attempt}"
    return _message(task.received.message)


def _message(message: DueMessage) -> str:
    return f"{message.execution_id}/{message.kind}"


def _hms(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def run_seed(
    seed: int,
    backend: str = "sqlite",
    steps: int = 150,
    seconds_share: float = SECONDS_SHARE,
    spread: bool = False,
    edits: bool = False,
    run_now: bool = False,
    backfill: bool = False,
    bounded: bool = False,
    limits: bool = False,
    stale: bool = False,
) -> World:
    """Run one seed to its end (raises SimulationFailure naming the seed, with its trace)."""
    world = World(seed, backend, steps, seconds_share, spread, edits, run_now, backfill, bounded, limits, stale)
    try:
        world.run()
    finally:
        world.close()
    return world
