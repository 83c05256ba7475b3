"""Issue 13's side-by-side benchmark: duetime on SQLite, duetime on moto and Celery + Redis, one run.

Every figure is start lateness = the start the system recorded (duetime: attempt 1's `startedAt` from
`GET /jobs/{jobId}/executions`; Celery: the task's own clock at its first line) minus the due time the
job was submitted with. duetime is driven only over the HTTP API of a real `duetime local` subprocess;
Celery by `send_task(..., eta=due)` into a real worker. Each run gets a fresh system unless `Plan.reuse`.

- one-off: a job submitted every 1/rate s, each due 8-18 s after its submit, while the earlier ones run;
  submission stops once it falls `give_up_lag` s behind plan (saturated).
- scheduled ahead: rate x seconds jobs created first, as fast as the system takes them, due beyond the
  dispatch horizon at one every 1/rate s, so duetime's pre-loader sends them (skipped when creating them
  would take longer than `max_setup_seconds` at the submit rate the system showed).
- search: the highest one-off rate with every job run, none refused and p99 < 1 s, from the rate runs
  up (doubling) or down, then bisected.
- burst: `burst` jobs due at one instant, created first over the API (a pool of `submitters`
  connections), beyond the dispatch horizon; drain = last finish - the instant.
- intake: jobs created as fast as the system takes them, due far beyond the dispatch horizon (none runs
  meanwhile): the creation rate alone.
A runner made with `batch` > 1 creates the jobs of the scheduled-ahead, burst and intake runs `batch` a
request through the system's batch route (duetime's POST /jobs/batch); one-offs always go one a request.
- stored: the one-off rates and the burst again on a data dir seeded with `stored` future executions
  (SQLite only, seeded through the adapter in batches: `bench.seed`).
"""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import lateness_summary, percentile
from bench.systems import (
    BatchSubmitter,
    CeleryPeer,
    DuetimeLocal,
    Outcome,
    Refused,
    Submitter,
    System,
    local_backends,
    redis_server_path,
)

SEARCH_P99_MS = 1000.0
SETTLE_SECONDS = 1.0
COLLECT_CHUNK = 400
INTAKE_DUE_SECONDS = 600.0  # intake jobs are due this long after the dispatch horizon: none runs while measured
HOST_PROBE_LOOPS = 1_000_000


def host_probe_ms() -> float:
    """How long this machine takes, now, for a fixed pure-Python loop: recorded beside each run, as the
    machine's speed at the time (on this 2-core VM the same loop takes 159-274 ms from one second to the
    next, idle), so a slow run can be told from a slow machine."""
    started = time.perf_counter()
    total = 0
    for n in range(HOST_PROBE_LOOPS):
        total += n
    return round((time.perf_counter() - started) * 1000, 1)


@dataclass
class Plan:
    """The sizes of one side-by-side run (`make bench`: the issue's; `--quick`: a smoke run)."""

    rates: list[float] = field(default_factory=lambda: [20.0, 100.0, 500.0])
    seconds: float = 60.0
    lead: tuple[float, float] = (8.0, 18.0)  # one-offs are due this many seconds after their submit
    ahead: bool = True
    search_probe_seconds: float = 20.0
    search_steps: int = 2
    search_doublings: int = 2
    burst: int = 10_000
    moto_burst: int = 1_000  # moto serves ~26 executions/s: 10,000 would take ~7 minutes to drain
    stored: int = 1_000_000
    # More runs of the top one-off rate and the burst, fresh and stored data dir by turns: the machine's own
    # speed varies by a quarter from second to second (host_probe_ms), so one run each says little.
    paired_repeats: int = 4
    max_setup_seconds: float = 150.0
    drain_seconds: float = 60.0
    burst_drain_seconds: float = 240.0  # 10,000 at the ~75/s measured before would take ~135 s
    give_up_lag: float = 5.0
    submitters: int = 8
    workers: int | None = None  # `duetime local --workers`; None: its default (64 slots a class on SQLite, 4 on moto)
    api_processes: int | None = None  # `duetime local --api-processes` on SQLite; None: its default
    worker_processes: int = 1  # `duetime local --worker-processes` on SQLite (its default)
    celery_concurrency: int = 4
    reuse: bool = False  # one system for all runs of a kind (the smoke run), not a fresh one per run
    # The burst and the scheduled-ahead runs are due beyond duetime's dispatch horizon, so the pre-loader
    # sends them (not in the smoke run: waiting out the horizon is most of its time).
    beyond_horizon: bool = True

    @classmethod
    def quick(cls) -> Plan:
        return cls(
            rates=[20.0, 100.0],
            seconds=5.0,
            lead=(2.0, 4.0),
            search_probe_seconds=4.0,
            search_steps=1,
            search_doublings=1,
            burst=300,
            moto_burst=100,
            stored=20_000,
            paired_repeats=0,
            max_setup_seconds=30.0,
            drain_seconds=30.0,
            burst_drain_seconds=30.0,
        )

    @classmethod
    def smoke(cls) -> Plan:
        """A couple of seconds of load per system, to prove the harness runs (the test's)."""
        return cls(
            rates=[20.0],
            seconds=1.0,
            lead=(1.0, 2.0),
            ahead=False,
            beyond_horizon=False,
            search_probe_seconds=1.0,
            search_steps=0,
            search_doublings=0,
            burst=20,
            moto_burst=10,
            stored=200,
            paired_repeats=0,
            max_setup_seconds=10.0,
            drain_seconds=20.0,
            burst_drain_seconds=20.0,
            submitters=2,
            reuse=True,
        )


# --- driving one run -------------------------------------------------------------------------------


@dataclass
class Submission:
    keys: list[str]
    due_ms: dict[str, int]
    refused: list[str]
    lags: list[float]
    gave_up: bool
    seconds: float
    late_in: int  # submitted after the time it should have been in by (scheduled ahead and burst)


def submit(
    system: System,
    plan: list[tuple[float, datetime]],
    submitters: int,
    give_up_lag: float | None = None,
    in_by: datetime | None = None,
    batch: int = 1,
) -> Submission:
    """Submit one job per (monotonic instant, due), each at or after its instant, from `submitters`
    threads with a connection each; with `give_up_lag`, stop once that far behind plan. With `batch` > 1,
    `batch` consecutive jobs a request through the system's batch route, sent at the first one's instant."""
    keys: list[str] = []
    due_ms: dict[str, int] = {}
    refused: list[str] = []
    lags: list[float] = []
    late = [0]
    gave_up = threading.Event()
    lock = threading.Lock()
    cursor = iter(range(0, len(plan), batch))
    started = time.monotonic()

    def send(client: Submitter, index: int, dues: list[datetime]) -> list[str | Refused]:
        try:
            if batch == 1:
                return [client.submit(index, dues[0])]
            if not isinstance(client, BatchSubmitter):
                raise TypeError(f"{system.name} has no batch route")
            return client.submit_many(index, dues)
        except (Refused, OSError) as exc:
            return [Refused(str(exc))] * len(dues)

    def loop() -> None:
        client = system.submitter()
        try:
            while not gave_up.is_set():
                with lock:
                    index = next(cursor, None)
                if index is None:
                    return
                at = plan[index][0]
                pause = at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                lag = time.monotonic() - at
                if give_up_lag is not None and lag > give_up_lag:
                    gave_up.set()
                    return
                dues = [due for _, due in plan[index : index + batch]]
                answers = send(client, index, dues)
                with lock:
                    for due, answer in zip(dues, answers, strict=True):
                        if isinstance(answer, Refused):
                            refused.append(str(answer))
                            continue
                        keys.append(answer)
                        due_ms[answer] = int(due.timestamp() * 1000)
                        lags.append(lag)
                        if in_by is not None and datetime.now(UTC) > in_by:
                            late[0] += 1
        finally:
            client.close()

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(submitters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Submission(keys, due_ms, refused, lags, gave_up.is_set(), time.monotonic() - started, late[0])


def collect(system: System, submission: Submission, last_due: datetime, drain_seconds: float) -> dict[str, Outcome]:
    """Every key's outcome once it finished, waiting from the last due time up to `drain_seconds` more.

    Keys are read in due order, COLLECT_CHUNK at a time, moving on only once a chunk has finished: a
    system still draining is asked about a few keys a second, not all of them (reading back competes
    with it for the CPU); what is left at the deadline is read once, as it stands."""
    wait_until(last_due + timedelta(seconds=SETTLE_SECONDS))
    deadline = time.monotonic() + drain_seconds
    found: dict[str, Outcome] = {}
    pending = sorted(submission.keys, key=lambda k: submission.due_ms[k])
    while pending and time.monotonic() < deadline:
        chunk, rest = pending[:COLLECT_CHUNK], pending[COLLECT_CHUNK:]
        found.update(system.outcomes(chunk))
        waiting = [k for k in chunk if k not in found or found[k].finished_ms is None]
        pending = waiting + rest
        if waiting:
            time.sleep(1.0)
    if pending:
        found.update(system.outcomes(pending))
    check = getattr(system, "api_mismatches", None)  # results read from a store are checked against its API
    ended = {key: outcome for key, outcome in found.items() if outcome.finished_ms is not None}  # no longer moving
    if check is not None and ended and (wrong := check(ended)):
        raise AssertionError(f"{system.name}: the API shows {len(wrong)} sampled results otherwise, e.g. {wrong[:3]}")
    return found


def wait_until(moment: datetime) -> None:
    pause = (moment - datetime.now(UTC)).total_seconds()
    if pause > 0:
        time.sleep(pause)


class MemoryWatch:
    """The system's resident memory: at its start (idle) and the peak, sampled each half second."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.idle = system.rss_bytes()
        self.peak = self.idle
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stopped.wait(0.5):
            self.peak = max(self.peak, self.system.rss_bytes())

    def stop(self) -> dict[str, float]:
        self.stopped.set()
        self.thread.join()
        self.peak = max(self.peak, self.system.rss_bytes())
        return {"rssIdleMb": round(self.idle / 2**20, 1), "rssPeakMb": round(self.peak / 2**20, 1)}


def submission_figures(submission: Submission, planned: int) -> dict[str, Any]:
    """What the submitting side saw: jobs taken, refused, and how fast."""
    return {
        "planned": planned,
        "accepted": len(submission.keys),
        "refused": len(submission.refused),
        "refusals": sorted(set(submission.refused))[:3],
        "saturated": submission.gave_up,
        "submitSeconds": round(submission.seconds, 2),
        "submitPerSecond": round(len(submission.keys) / submission.seconds, 1) if submission.seconds else 0.0,
        "submitLagP99Ms": round(percentile(submission.lags, 99) * 1000, 1) if submission.lags else 0.0,
        "lateIn": submission.late_in,
    }


def figures(submission: Submission, found: dict[str, Outcome], planned: int) -> dict[str, Any]:
    lateness = [float(o.started_ms - submission.due_ms[k]) for k, o in found.items() if o.started_ms is not None]
    starts = sorted(o.started_ms for o in found.values() if o.started_ms is not None)
    span = (starts[-1] - starts[0]) / 1000 if len(starts) > 1 else 0.0
    done = sum(1 for o in found.values() if o.status == "succeeded" and o.finished_ms is not None)
    return {
        **submission_figures(submission, planned),
        "started": len(lateness),
        "undone": len(submission.keys) - done,
        "rerun": sum(o.runs - 1 for o in found.values() if o.runs > 1),
        "lateness": lateness_summary(lateness),
        "executionsPerSecond": round((len(starts) - 1) / span, 1) if span > 0 else 0.0,
    }


# --- the runs ----------------------------------------------------------------------------------------


class Runner:
    """Runs the plan's scenarios on one kind of system, from `make_system`, and keeps what it learnt (the
    submit rate the system takes, for sizing scheduled-ahead runs and the burst)."""

    def __init__(
        self,
        label: str,
        make_system: Callable[[], System],
        plan: Plan,
        log: Callable[[str], None],
        batch: int = 1,
    ):
        self.label, self.make_system, self.plan, self.log = label, make_system, plan, log
        self.batch = batch  # jobs a create request in the scheduled-ahead, burst and intake runs
        self.submit_rate = 0.0
        self.shared: System | None = None
        self.rng = random.Random(13)

    def _system(self) -> System:
        if self.plan.reuse:
            if self.shared is None:
                self.shared = self.make_system()
                self.shared.start()
            return self.shared
        system = self.make_system()
        system.start()
        return system

    def _done(self, system: System) -> None:
        if not self.plan.reuse:
            system.stop()

    def close(self) -> None:
        if self.shared is not None:
            self.shared.stop()
            self.shared = None

    def _record(self, result: dict[str, Any]) -> dict[str, Any]:
        result["hostProbeMs"] = host_probe_ms()
        self.submit_rate = max(self.submit_rate, result.get("submitPerSecond", 0.0))
        late = result.get("lateness", {})
        self.log(
            f"    {self.label} {result['scenario']} {result.get('rate', result.get('count', ''))}: "
            + (
                f"skipped ({result['skipped']})"
                if "skipped" in result
                else f"{result['accepted']}/{result['planned']} in at {result['submitPerSecond']}/s, "
                f"refused {result['refused']}, host probe {result['hostProbeMs']} ms"
                if result["scenario"] == "intake"
                else f"{result['accepted']}/{result['planned']} in, undone {result['undone']}, "
                f"p50 {late.get('p50Ms')} ms, p99 {late.get('p99Ms')} ms"
                + (f", drain {result['drainSeconds']} s" if "drainSeconds" in result else "")
                + (", saturated" if result.get("saturated") else "")
                + f", host probe {result['hostProbeMs']} ms"
            )
        )
        return result

    def one_off(self, rate: float, seconds: float, scenario: str = "one-off") -> dict[str, Any]:
        system = self._system()
        try:
            watch = MemoryWatch(system)
            count = max(1, int(rate * seconds))
            low, high = self.plan.lead
            start_mono, start_wall = time.monotonic() + 0.5, datetime.now(UTC) + timedelta(seconds=0.5)
            plan = [
                (start_mono + i / rate, start_wall + timedelta(seconds=i / rate + self.rng.uniform(low, high)))
                for i in range(count)
            ]
            submission = submit(system, plan, self.plan.submitters, give_up_lag=self.plan.give_up_lag)
            found = collect(system, submission, max(d for _, d in plan), self.plan.drain_seconds)
            result = {"system": self.label, "scenario": scenario, "rate": rate, "seconds": seconds}
            result.update(figures(submission, found, count))
            result.update(watch.stop())
            return self._record(result)
        finally:
            self._done(system)

    def ahead(self, rate: float, seconds: float, scenario: str = "scheduled ahead") -> dict[str, Any]:
        count = max(1, int(rate * seconds))
        setup = count / max(1.0, self.submit_rate)
        result: dict[str, Any] = {"system": self.label, "scenario": scenario, "rate": rate, "seconds": seconds}
        if setup > self.plan.max_setup_seconds:
            result["skipped"] = (
                f"{count} jobs at the {self.submit_rate:.0f}/s it takes would need {setup:.0f} s to create"
            )
            return self._record(result)
        system = self._system()
        try:
            watch = MemoryWatch(system)
            # Created at ~80% of the submit rate seen, and all due beyond the dispatch horizon.
            horizon = system.horizon_seconds if self.plan.beyond_horizon else 0.0
            lead = setup / 0.8 + horizon + 3.0
            first = datetime.now(UTC) + timedelta(seconds=lead)
            now = time.monotonic()
            plan = [(now, first + timedelta(seconds=i / rate)) for i in range(count)]
            in_by = first - timedelta(seconds=horizon)
            submission = submit(system, plan, self.plan.submitters, in_by=in_by, batch=self.batch)
            found = collect(system, submission, plan[-1][1], self.plan.drain_seconds)
            result.update(figures(submission, found, count))
            result["leadSeconds"] = round(lead, 1)
            result.update(watch.stop())
            return self._record(result)
        finally:
            self._done(system)

    def burst(self, count: int) -> dict[str, Any]:
        result: dict[str, Any] = {"system": self.label, "scenario": "burst", "count": count}
        rate = self.submit_rate or 50.0
        setup = count / rate
        if setup > self.plan.max_setup_seconds * 2:
            result["skipped"] = f"{count} jobs at the {rate:.0f}/s it takes would need {setup:.0f} s to create"
            return self._record(result)
        system = self._system()
        try:
            watch = MemoryWatch(system)
            horizon = system.horizon_seconds if self.plan.beyond_horizon else 0.0
            due = datetime.now(UTC) + timedelta(seconds=setup / 0.8 + horizon + 1.0)
            in_by = due - timedelta(seconds=horizon)
            plan = [(time.monotonic(), due)] * count
            submission = submit(system, plan, self.plan.submitters, in_by=in_by, batch=self.batch)
            found = collect(system, submission, due, max(self.plan.drain_seconds, self.plan.burst_drain_seconds))
            result.update(figures(submission, found, count))
            due_ms = int(due.timestamp() * 1000)
            finishes = [o.finished_ms for o in found.values() if o.finished_ms is not None]
            result["drainSeconds"] = round((max(finishes) - due_ms) / 1000, 2) if finishes else None
            result["executionsPerSecond"] = (
                round(len(finishes) / result["drainSeconds"], 1) if result["drainSeconds"] else 0.0
            )
            result.update(watch.stop())
            return self._record(result)
        finally:
            self._done(system)

    def intake(self, count: int, clients: int) -> dict[str, Any]:
        """`count` jobs created as fast as the system takes them from `clients` connections, due one a
        millisecond from INTAKE_DUE_SECONDS past the dispatch horizon: the jobs taken a second, with
        every refusal counted (none runs while they are created, so creating is all the system does)."""
        system = self._system()
        try:
            watch = MemoryWatch(system)
            first = datetime.now(UTC) + timedelta(seconds=system.horizon_seconds + INTAKE_DUE_SECONDS)
            now = time.monotonic()
            plan = [(now, first + timedelta(milliseconds=i)) for i in range(count)]
            submission = submit(system, plan, clients, batch=self.batch)
            result = {"system": self.label, "scenario": "intake", "count": count, "clients": clients}
            result.update(batch=self.batch, **submission_figures(submission, count), **watch.stop())
            return self._record(result)
        finally:
            self._done(system)

    def search(self, runs: list[dict[str, Any]]) -> dict[str, Any]:
        """The highest one-off rate that passes, starting from the rate runs already made."""
        probes: list[dict[str, Any]] = []
        tried = {r["rate"]: passes(r) for r in runs if r["scenario"] == "one-off" and "skipped" not in r}

        def probe(rate: float) -> bool:
            result = self.one_off(rate, self.plan.search_probe_seconds, scenario="search")
            probes.append(result)
            tried[rate] = passes(result)
            return tried[rate]

        good = max((r for r, ok in tried.items() if ok), default=0.0)
        bad = min((r for r, ok in tried.items() if not ok and r > good), default=None)
        for _ in range(self.plan.search_doublings):
            if bad is not None:
                break
            rate = (good or 10.0) * 2
            if probe(rate):
                good = rate
            else:
                bad = rate
        if bad is not None:
            for _ in range(self.plan.search_steps):
                rate = round((good + bad) / 2)
                if rate in (good, bad):
                    break
                if probe(rate):
                    good = rate
                else:
                    bad = rate
        return {
            "system": self.label,
            "highestPassingPerSecond": good,
            "lowestFailingPerSecond": bad,
            "criterion": f"every job run, none refused, p99 < {SEARCH_P99_MS:.0f} ms",
            "probes": probes,
        }


def passes(result: dict[str, Any]) -> bool:
    return (
        not result.get("saturated")
        and result.get("refused", 1) == 0
        and result.get("undone", 1) == 0
        and result.get("accepted") == result.get("planned")
        and result["lateness"]["p99Ms"] < SEARCH_P99_MS
    )


def run_scenarios(runner: Runner, plan: Plan, burst: int, search: bool = True) -> dict[str, Any]:
    """Every scenario of the plan on one kind of system."""
    try:
        one_offs = [runner.one_off(rate, plan.seconds) for rate in plan.rates]
        ahead = [runner.ahead(rate, plan.seconds) for rate in plan.rates] if plan.ahead else []
        found = runner.search(one_offs) if search else None
        bursts = [runner.burst(burst)]
    finally:
        runner.close()
    out: dict[str, Any] = {"runs": [*one_offs, *ahead, *bursts], "submitPerSecond": runner.submit_rate}
    if found is not None:
        out["search"] = found
    return out


SYSTEMS = ("sqlite", "moto", "celery")


def run(plan: Plan, wanted: list[str], log: Callable[[str], None] = print) -> dict[str, Any]:
    """The side-by-side benchmark on each wanted system that this machine has; a message for the others."""
    backends = local_backends()
    out: dict[str, Any] = {"plan": asdict(plan), "systems": {}, "skipped": {}, "runs": [], "searches": []}
    for name in wanted:
        label = system_label(name)
        reason = unavailable(name, backends)
        if reason:
            log(f"... {label}: skipped, {reason}")
            out["skipped"][label] = reason
            continue
        log(f"... {label} ({time.strftime('%H:%M:%S')})")
        started = time.monotonic()
        runner = Runner(label, factory(name, plan, backends), plan, log)
        burst = plan.moto_burst if name == "moto" else plan.burst
        found = run_scenarios(runner, plan, burst)
        out["runs"] += found["runs"]
        out["searches"].append(found["search"])
        seconds = round(time.monotonic() - started)
        out["systems"][label] = {"submitPerSecond": found["submitPerSecond"], "seconds": seconds}
        if name == "sqlite":
            base = Runner(label, factory(name, plan, backends), plan, log)
            base.submit_rate = runner.submit_rate  # sizes the burst's setup as the first pass did
            out["stored"] = stored(plan, base, log)
    if "sqlite" not in wanted or "sqlite" in {k.split()[-1] for k in out["skipped"]}:
        out["skipped"]["stored"] = "the 1,000,000-stored figures need the SQLite backend"
    if "moto" in wanted:
        out["skipped"].setdefault(
            "stored on moto", "not run: moto keeps every item in memory and serves ~26 executions/s"
        )
    return out


def system_label(name: str) -> str:
    """How results name the system `name` (one of SYSTEMS)."""
    return "celery+redis" if name == "celery" else f"duetime {name}"


def unavailable(name: str, backends: set[str]) -> str | None:
    if name == "celery":
        return None if redis_server_path() else "redis-server is not installed (make bench installs it with apt-get)"
    if name not in backends:
        return f"this checkout's `duetime local` has no --backend {name} (it offers: {', '.join(sorted(backends))})"
    return None


def factory(name: str, plan: Plan, backends: set[str]) -> Callable[[], System]:
    if name == "celery":
        return lambda: CeleryPeer(plan.celery_concurrency)
    legacy = backends == {"moto"}
    api_processes, worker_processes = (plan.api_processes, plan.worker_processes) if name == "sqlite" else (None, 1)
    return lambda: DuetimeLocal(
        name, plan.workers, legacy=legacy, api_processes=api_processes, worker_processes=worker_processes
    )


def paired_repeats(plan: Plan, stored_runner: Runner, base: Runner, log: Callable[[str], None]) -> dict[str, Any]:
    """The top one-off rate and the burst again, `plan.paired_repeats` times each on each data dir,
    alternating a fresh one and the stored one, so the two are compared by medians of runs made minutes
    apart, not by one run each.

    At the top rate the machine is near its edge and p99 is set by the other load on the machine: one
    commit measured p99 34 ms and 506 ms at 500/s within 80 minutes (docs/performance.md)."""
    rate = max(plan.rates, default=0.0)
    out: dict[str, list[dict[str, Any]]] = {"base": [], "stored": []}
    if not rate:
        return out
    log(f"... paired repeats of one-off {rate:g}/s and the burst, fresh and {plan.stored:,} stored by turns")
    runs: list[Callable[[Runner], dict[str, Any]]] = [
        lambda runner: runner.one_off(rate, plan.seconds),
        lambda runner: runner.burst(plan.burst),
    ]
    for measure in runs:
        for repeat in range(1, plan.paired_repeats + 1):
            out["base"].append({**measure(base), "repeat": repeat})
            out["stored"].append({**measure(stored_runner), "repeat": repeat})
    return out


def stored(plan: Plan, base: Runner, log: Callable[[str], None]) -> dict[str, Any]:
    """The one-off rates and the burst again, on a data dir holding `plan.stored` future executions, and the
    paired repeats (`base` makes the fresh-data-dir runs; its submit rate, the first pass's, sizes setups)."""
    from bench import seed

    data_dir = Path(tempfile.mkdtemp(prefix="duetime-bench-stored-"))
    try:
        log(f"... duetime sqlite with {plan.stored:,} future executions stored")
        seeded = seed.seed(data_dir, plan.stored, log)
        label = f"duetime sqlite, {plan.stored:,} stored"
        api_processes = plan.api_processes
        workers = plan.workers
        runner = Runner(
            label, lambda: DuetimeLocal("sqlite", workers, data_dir=data_dir, api_processes=api_processes), plan, log
        )
        runner.submit_rate = base.submit_rate
        found = run_scenarios(runner, plan, plan.burst, search=False)
        repeats = paired_repeats(plan, runner, base, log)
        idle = [r["rssIdleMb"] for r in found["runs"] if "rssIdleMb" in r]
        return {
            "seed": seeded,
            "runs": found["runs"] + repeats["stored"],
            "baseRepeats": repeats["base"],
            "rssIdleMb": min(idle, default=0.0),
        }
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
