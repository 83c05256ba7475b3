"""A bounded chaos soak on `duetime local`: hundreds of one-off jobs and a few every-minute cron jobs run by
`duetime worker` processes that are killed, frozen past their lease and restarted at random, while the
pre-loader dies at random AWS calls and comes back under a new owner. Afterwards nothing is stuck or lost,
no attempt ran on two workers, every repeated run is explained, the cron slots are whole, and
`duetime audit` finds nothing."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from duetime.domain.models import Execution, ExecutionStatus, JobStatus, to_ms
from duetime.local.backends import MOTO, attach_ports
from duetime.local.lambda_mode import scheduled_event
from duetime.local.state import load_state
from duetime.local.system import LocalSystem
from duetime.service.context import Ports
from duetime.service.dispatch import preload

from tests.e2e import recording
from tests.e2e.helpers import new_local_system, submit, wait_for
from tests.faults import Crash, Faults, wrap_ports
from tests.http_client import Api

LEASE = 4
WORKERS = 4
ONE_OFFS = 200
CRON_JOBS = 3
# The properties (nothing lost, never double-held) are proven under seeded faults by tests/simulation; this soak
# keeps what only real processes show (SIGKILL, SIGSTOP past a lease, a pre-loader thread dying mid-call).
CHAOS_SECONDS = 100
SETTLE_SECONDS = 75
SEED = int(os.environ.get("DUETIME_CHAOS_SEED", "0")) or random.randrange(1, 10**6)
# The worker's log line when a heartbeat finds its lease gone (worker/runtime.py): execution id and attempt.
# What a worker logs when the store refuses its attempt's write because the lease ended and another attempt
# took the row: at a heartbeat (it stops the run) or at completion (a starved worker whose handler ended
# after its lease did: its result is dropped, the next attempt's stands).
LOST_LEASE = re.compile(r"(\S+) attempt (\d+) (?:lost its lease; stopping|was fenced out at completion)")
FAST_RETRY = {"maxAttempts": 3, "baseDelaySeconds": 1, "maxDelaySeconds": 4}
AT_MOST_ONCE_SHARE = 0.2  # of the one-offs: delivery at-most-once
# Where the pre-loader may die: at an AWS call on moto, at a port method on SQLite (which makes no AWS calls).
PRELOAD_CALLS = {
    MOTO: [
        ("dynamodb", "UpdateItem"),
        ("dynamodb", "Query"),
        ("dynamodb", "BatchGetItem"),
        ("sqs", "SendMessageBatch"),
    ],
    "sqlite": [("store", "acquire_lease"), ("store", "query_due"), ("store", "get_jobs"), ("queues", "send")],
}


class Notices:
    def __init__(self) -> None:
        self.sent: list[dict[str, object]] = []

    def notify(self, owner: str, subject: str, detail: dict[str, object]) -> None:
        self.sent.append(detail)


class Workers:
    """`duetime worker` processes whose handlers record every run (tests/e2e/recording.py), by worker id."""

    def __init__(self, data_dir: Path, run_log: Path) -> None:
        self.data_dir, self.run_log = data_dir, run_log
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.frozen: dict[str, float] = {}  # worker id -> when to resume it
        self.started = 0
        self.events: list[tuple[str, str, float]] = []  # (kind, worker id, at)

    def start(self) -> str:
        self.started += 1
        worker_id = f"w{self.started}"
        cmd = [sys.executable, "-m", "duetime.cli", "worker", "--data-dir", str(self.data_dir)]
        cmd += ["--worker-id", worker_id, "--concurrency", "4", "--handlers", recording.MODULE]
        env = recording.worker_environment(self.run_log)
        # Its log (stderr): a run the worker was told it lost is named there, as an operator reads it.
        with open(self.run_log.parent / f"{worker_id}.log", "wb") as log:
            self.procs[worker_id] = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log)
        return worker_id

    def told_lost(self) -> set[tuple[str, int]]:
        """The attempts whose worker found at a heartbeat or at completion that its lease had ended (it logs so):
        a handler that ended just as the write was refused cannot tell, so it is read here."""
        found = set()
        for number in range(1, self.started + 1):
            text = (self.run_log.parent / f"w{number}.log").read_text(errors="replace")
            found |= {(execution, int(attempt)) for execution, attempt in LOST_LEASE.findall(text)}
        return found

    def healthy(self) -> list[str]:
        return [w for w, p in self.procs.items() if p.poll() is None and w not in self.frozen]

    def kill(self, worker_id: str) -> None:
        self.events.append(("kill", worker_id, time.time()))
        self.procs[worker_id].kill()
        self.procs[worker_id].wait(timeout=10)
        del self.procs[worker_id]

    def freeze(self, worker_id: str, seconds: float) -> None:
        self.events.append(("freeze", worker_id, time.time()))
        os.kill(self.procs[worker_id].pid, signal.SIGSTOP)
        self.frozen[worker_id] = time.monotonic() + seconds

    def resume_due(self, everyone: bool = False) -> None:
        for worker_id, at in list(self.frozen.items()):
            if everyone or time.monotonic() >= at:
                os.kill(self.procs[worker_id].pid, signal.SIGCONT)
                del self.frozen[worker_id]

    def stop_all(self) -> None:
        self.resume_due(everyone=True)
        for proc in self.procs.values():
            proc.kill()
            proc.wait(timeout=10)


class Preloader:
    """The pre-loader, killable at any AWS call (moto) or port call (SQLite) of a cycle; each restart comes
    back under a new owner, which must wait out the dead one's shard leases. On the AWS-faithful backend it
    is the real handler in the Lambda emulation (a crash ends its instance, the restart is a cold start);
    on SQLite the use-case on ports of its own."""

    def __init__(self, system: LocalSystem) -> None:
        self.data_dir = system.data_dir
        self.state = load_state(system.data_dir)
        self.function = next((f for f in system.functions.values() if f.name == "preloader"), None)
        self.generation = 0
        self.crashes = 0
        self.stopped = threading.Event()
        self.faults = Faults()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.generation += 1
        self.faults = Faults()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(self.faults, self.stopped), daemon=True)
        self.thread.start()

    def _cycle(self, faults: Faults) -> Callable[[], object]:
        """One cycle of a new pre-loader process: what it runs each interval."""
        if self.function is not None:
            function = self.function.fresh()

            def attach(module: ModuleType) -> None:
                faults.attach_ports(module.PORTS)

            function.on_cold_start = attach
            rule = f"arn:aws:events:{function.region}:123456789012:rule/chaos-preload"
            return lambda: function.invoke(scheduled_event(function.region, rule))
        ports = attach_ports(self.data_dir, self.state)
        if self.state.backend == MOTO:
            faults.attach_ports(ports)
        else:
            ports = wrap_ports(faults, ports)
        owner = f"chaos-preloader-{self.generation}"
        return lambda: preload(ports, owner)

    def _run(self, faults: Faults, stopped: threading.Event) -> None:
        """Start, then cycle until stopped or crashed. A start that fails (on SQLite, a worker frozen while it
        held the write lock keeps a new process from opening the file in time) is tried again next interval,
        as a supervisor restarting a process that died at start would."""
        while not stopped.is_set():
            try:
                cycle = self._cycle(faults)
                break
            except Exception:
                stopped.wait(self.state.preload_interval_seconds)
        else:
            return
        self._loop(cycle, stopped)

    def _loop(self, cycle: Callable[[], object], stopped: threading.Event) -> None:
        while not stopped.is_set():
            try:
                cycle()
            except Crash:
                self.crashes += 1
                return  # the process died mid-cycle
            except Exception:  # as the local timer does: log and carry on
                pass
            stopped.wait(self.state.preload_interval_seconds)

    def crash_and_restart(self, rng: random.Random) -> None:
        service, operation = rng.choice(PRELOAD_CALLS[self.state.backend])
        when = rng.choice(["before", "after"])
        getattr(self.faults, f"crash_{when}")(service, operation, nth=rng.randint(1, 4))
        assert self.thread is not None
        self.thread.join(timeout=6)  # it dies at that call within a cycle, or is stopped after its cycle
        self.stopped.set()
        self.start()

    def stop(self) -> None:
        self.stopped.set()


def every_execution(ports: Ports) -> Iterator[Execution]:
    for job in ports.store.scan_jobs():
        yield from ports.store.iter_executions_of_job(job.job_id)


def at_in(start: float, seconds: float) -> str:
    value = datetime.fromtimestamp(start + seconds, UTC)
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def one_off_bodies(rng: random.Random, start: float) -> list[dict[str, Any]]:
    bodies = []
    for n in range(ONE_OFFS):
        at = at_in(start, rng.uniform(8, CHAOS_SECONDS - 15))
        pick = rng.random()
        body: dict[str, Any] = {"name": f"one-off-{n}", "schedule": {"at": at}, "retry": FAST_RETRY}
        if pick < 0.55:
            body.update(handler="record.echo", payload={"n": n})
        elif pick < 0.8:
            body.update(handler="record.sleep", payload={"seconds": round(rng.uniform(0.5, 4), 1)})
        elif pick < 0.9:
            body.update(handler="record.fail", payload={"times": 1})  # fails once, then succeeds
        elif pick < 0.95:
            body.update(handler="record.fail", payload={"times": 9})  # exhausts its attempts: failed
        else:
            body.update(handler="record.fail", payload={"times": 9, "permanent": True})  # failed at once
        if rng.random() < AT_MOST_ONCE_SHARE:  # never started twice: one attempt, a lost one's result unknown
            body.update(delivery="at-most-once", retry={"maxAttempts": 1})
        bodies.append(body)
    return bodies


def at_most_once(body: dict[str, Any]) -> bool:
    return body.get("delivery") == "at-most-once"


def expected_status(body: dict[str, Any]) -> ExecutionStatus:
    # At-most-once has no retries: a handler that fails once fails the run.
    failing = body["handler"] == "record.fail" and (body["payload"]["times"] > 1 or at_most_once(body))
    return ExecutionStatus.FAILED if failing else ExecutionStatus.SUCCEEDED


def exhausted_by_lost_workers(execution: Execution, body: dict[str, Any]) -> bool:
    """A lost attempt (its worker killed or frozen past its lease) counts against maxAttempts like a
    failure: when the last one is lost, the execution ends failed, saying so."""
    max_attempts = body.get("retry", {}).get("maxAttempts", 3)
    return (
        execution.status == ExecutionStatus.FAILED
        and execution.attempt == max_attempts
        and "stopped heartbeating" in (execution.error or "")
        and execution.attempts[-1].outcome in (None, "failed")
    )


def lost_at_most_once(execution: Execution, body: dict[str, Any]) -> bool:
    """An at-most-once run whose one attempt's worker was lost (killed, or frozen past its lease) ends failed
    with that attempt's outcome unknown: it was not started again."""
    unknown = bool(execution.attempts) and execution.attempts[-1].outcome == "unknown"
    return at_most_once(body) and execution.status == ExecutionStatus.FAILED and unknown


def why_repeated(
    execution: Execution, attempt: int, runs: dict[tuple[str, int], dict[str, Any]], events: list[Any]
) -> str:
    """Why attempt `attempt + 1` ran after attempt `attempt`: the earlier one failed, or its lease ended
    because its worker was killed, frozen, or too slow to heartbeat (its run was then told it was lost)."""
    earlier = execution.attempts[attempt - 1]
    later = execution.attempts[attempt]
    if earlier.outcome == "failed":
        return "retry after a failure"
    begin, end = to_ms(earlier.started_at) / 1000 - 1, to_ms(later.started_at) / 1000 + 1
    for kind, worker_id, at in events:
        if worker_id == earlier.worker_id and begin <= at <= end:
            return {"kill": "worker killed", "freeze": "worker frozen past its lease"}[kind]
    logged = runs.get((execution.execution_id, attempt))
    if logged and logged["outcome"] == "lost":
        return "lease lost (heartbeat or completion refused)"
    if logged is None and earlier.outcome is None:
        # Its worker never reported: killed or frozen outside the window above (a receive batch can be
        # claimed late), or it lost the lease; the conditional claim is what made attempt + 1 possible.
        return "lease ended, no report from the worker"
    return "unexplained"


@pytest.mark.observe_last
# Its own budget: a minute to start and announce on a loaded machine, the chaos, the settle, the read-back over moto.
@pytest.mark.timeout(480)
def test_chaos_soak_loses_nothing_and_never_double_holds_an_attempt(tmp_path):
    rng = random.Random(SEED)
    notices = Notices()
    data_dir, log_path = tmp_path / "chaos", tmp_path / "runs.jsonl"
    # Its functions in this process on moto: the soak replaces the pre-loader with one it kills, and reads the
    # notices the DLQ notifier gives `notices`.
    system = new_local_system(
        data_dir,
        port=0,
        workers=0,
        lease_seconds=LEASE,
        shards=4,
        prefix="chaos",
        notifier=notices,
        function_processes=False,
    ).start()
    workers = Workers(data_dir, log_path)
    preloader = Preloader(system)
    try:
        for timer in system.timers:
            if timer.thread.name == "preloader":
                timer.stopped.set()  # replaced by one that chaos can kill
        preloader.start()
        for _ in range(WORKERS):
            workers.start()
        ports = system.ports
        assert ports is not None
        # The API accepts jobs naming the recording handlers once a worker has announced them.
        wait_for(lambda: recording.served(ports), 60, interval=0.2, what="the recording handlers to be announced")
        began = time.monotonic()  # the jobs are due within the chaos: it runs from their submission, not the wait
        api = Api(system.api_url, system.token("chaos"))
        start = time.time()
        bodies = {submit(api, **body)["jobId"]: body for body in one_off_bodies(rng, start)}
        cron_ids = []
        for n in range(CRON_JOBS):
            handler = {"handler": "record.sleep", "payload": {"seconds": 1}} if n == 0 else {"handler": "record.echo"}
            job = submit(api, name=f"cron-{n}", schedule={"cron": "* * * * *", "timeZone": "UTC"}, **handler)
            cron_ids.append(job["jobId"])

        # The chaos: every few seconds kill, freeze or restart something, keeping one worker healthy.
        counts: Counter[str] = Counter()
        chaos_end = began + CHAOS_SECONDS
        while time.monotonic() < chaos_end:
            time.sleep(rng.uniform(1.5, 4))
            workers.resume_due()
            action = rng.choice(["kill", "freeze", "preloader", "kill", "freeze"])
            healthy = workers.healthy()
            if action == "preloader":
                preloader.crash_and_restart(rng)
                counts["pre-loader crash + restart"] += 1
            elif len(healthy) >= 2 and action == "kill":
                workers.kill(rng.choice(healthy))
                workers.start()
                counts["worker SIGKILL + restart"] += 1
            elif len(healthy) >= 2:
                workers.freeze(rng.choice(healthy), LEASE + rng.uniform(1, 4))
                counts["worker SIGSTOP > lease, SIGCONT"] += 1
        workers.resume_due(everyone=True)
        cutoff = datetime.now(UTC) - timedelta(seconds=2)

        # Settle: every execution due before the chaos ended reaches an end.
        def open_due() -> list[Execution]:
            rows = [stored.execution for stored in ports.store.scan_open_executions()]
            return [e for e in rows if e.due_at <= cutoff and not e.status.is_terminal]

        try:
            wait_for(lambda: not open_due(), SETTLE_SECONDS, interval=2, what="every due execution to end")
        except AssertionError:
            stuck = [(e.execution_id, e.status.value, e.attempt, str(e.due_at)) for e in open_due()]
            raise AssertionError(f"stuck after settling (seed {SEED}): {stuck}") from None
        settled = time.monotonic()

        # The run log first: the cron jobs run on, and a run logged after the scan would be missing from its row.
        logged = recording.read_runs(log_path)
        rows = list(every_execution(ports))
        jobs = {j.job_id: j for j in ports.store.scan_jobs()}
        by_job: dict[str, list[Execution]] = defaultdict(list)
        for row in rows:
            by_job[row.job_id].append(row)

        # None lost: every one-off has its one execution, ended as its handler decides (failures with reasons).
        for job_id, body in bodies.items():
            [execution] = by_job[job_id]
            # An at-most-once slot never starts twice, whatever the faults: one attempt at most, one run logged.
            assert not at_most_once(body) or len(execution.attempts) <= 1, (body, execution)
            if exhausted_by_lost_workers(execution, body) or lost_at_most_once(execution, body):
                continue  # the policy's attempts all went to killed or frozen workers: failed, with that reason
            assert execution.status == expected_status(body), (body, execution)
            if execution.status == ExecutionStatus.FAILED:
                assert execution.error, execution

        # No attempt on two workers; every repeated run explained.
        runs: dict[tuple[str, int], dict[str, Any]] = {}
        for record in logged:
            key = (record["execution_id"], record["attempt"])
            assert key not in runs or runs[key]["worker_id"] == record["worker_id"], (record, runs.get(key))
            runs[key] = record
        once = {e.execution_id for e in rows if at_most_once(bodies.get(e.job_id, {}))}
        twice = sorted(key for key in runs if key[0] in once and key[1] > 1)
        assert not twice, (f"seed {SEED}: an at-most-once slot's handler ran again", twice)
        for key in workers.told_lost() & runs.keys():
            runs[key] = {**runs[key], "outcome": "lost"}
        by_id = {e.execution_id: e for e in rows}
        doubled = {execution_id for execution_id, n in Counter(e.execution_id for e in rows).items() if n > 1}
        assert not doubled, (f"seed {SEED}: one execution on two rows", [e for e in rows if e.execution_id in doubled])
        for (execution_id, attempt), record in runs.items():
            history = by_id[execution_id].attempts
            assert history[attempt - 1].worker_id == record["worker_id"], (record, history)
        duplicates: Counter[str] = Counter()
        unexplained = []
        for execution in rows:
            for attempt in range(1, len(execution.attempts)):
                why = why_repeated(execution, attempt, runs, workers.events)
                duplicates[why] += 1
                if why == "unexplained":
                    unexplained.append((execution.attempts, runs.get((execution.execution_id, attempt))))
        assert duplicates["unexplained"] == 0, (f"seed {SEED}", duplicates, unexplained)

        # The cron jobs: each minute from the first slot on, exactly once, each ended or skipped with a reason.
        cron_runs = 0
        for job_id in cron_ids:
            assert jobs[job_id].status == JobStatus.ACTIVE
            chain = sorted(by_job[job_id], key=lambda e: e.scheduled_at)
            slots = [e.scheduled_at for e in chain]
            assert len(slots) == len(set(slots)), f"doubled slot in {job_id}"
            covered = sum((e.skipped_count or 1) if e.status == ExecutionStatus.SKIPPED else 1 for e in chain)
            minutes = int((slots[-1] - slots[0]).total_seconds() // 60) + 1
            assert covered == minutes, f"missing slot in {job_id}: {slots}"
            assert all(e.status.is_terminal for e in chain if e.due_at <= cutoff)
            assert chain[-1].status == ExecutionStatus.SCHEDULED
            cron_runs += sum(1 for e in chain if e.status.is_terminal)

        # And the audit of the settled system finds nothing.
        audit = subprocess.run(
            [sys.executable, "-m", "duetime.cli", "audit", "--data-dir", str(data_dir)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert audit.returncode == 0, audit.stdout + audit.stderr

        failed = {e.execution_id for e in rows if e.status == ExecutionStatus.FAILED}
        told = {str(n.get("executionId")) for n in notices.sent}
        reasons = ", ".join(f"{n} {why}" for why, n in duplicates.most_common()) or "none"
        faults = ", ".join(f"{n} {what}" for what, n in counts.items())
        print(
            f"\nchaos (seed {SEED}): {len(bodies)} one-off + {cron_runs} cron executions ended "
            f"({len(failed)} failed, {len(failed & told)} of them notified); faults: {faults}, "
            f"{preloader.crashes} pre-loader deaths at an AWS call; handler runs logged {len(logged)}; "
            f"repeated attempts {sum(duplicates.values())}: {reasons}; at-most-once runs {len(once)} "
            f"({sum(1 for e in rows if e.execution_id in once and lost_at_most_once(e, bodies[e.job_id]))} "
            "lost, result unknown, none started twice); "
            f"chaos {CHAOS_SECONDS} s, settled in {settled - chaos_end:.0f} s; audit: {audit.stdout.splitlines()[-1]}",
            flush=True,
        )
    finally:
        preloader.stop()
        workers.stop_all()
        system.stop()
