"""`duetime load`: a load generator for a running deployment, driven only through its HTTP API.

It creates one-off and cron jobs at a rate for a while, spread over owners (and, by their random ids, over
shards), reads every execution due in its window back from the jobs' history and reports start lateness
(attempt 1's `startedAt` minus the execution's `dueAt`), executions/s, the throttles it met (429/503),
the dead letters, and the cost per million executions that `duetime capacity` computes from the measured
per-execution calls at the measured rate and mix. Against AWS it also reads the stack's CloudWatch metrics.
At the end it cancels the cron jobs it made.

The window: cron jobs are created first, each `* * * * *` with jitterSeconds 59 (domain/spread.py), so their
runs fall evenly over every minute; the window opens at the next minute start after that (so their first
runs are inside it) and lasts `duration` seconds. One-offs are submitted from `lead` seconds before it
opens, one every 1/rate s, each due `lead` seconds after its submit, so they too are due inside the window.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit

from duetime.definitions import (
    DEFAULT_REGION,
    JOB_CLASSES,
    METRIC_NAMESPACE,
    METRIC_START_LATENESS_MS,
    METRIC_STARTED,
    WORKER_METRICS_SERVICE,
)
from duetime.domain import capacity

THROTTLE_STATUSES = (429, 503)
CRON_JITTER_SECONDS = 59  # a cron job's runs spread over its minute (jitter must stay below the period)
CRON_PERIOD_SECONDS = 60  # `* * * * *`
GIVE_UP_LAG_SECONDS = 5.0  # submission this far behind plan: the API does not take the rate (saturated)
READ_CHUNK = 400  # executions read back at a time, in due order
LOAD_HANDLER = "demo.echo"
LOAD_TAG = "duetime-load"


# --- HTTP ----------------------------------------------------------------------------------------------


class Signer(Protocol):
    """Signs a request: a bearer token per owner, or AWS SigV4 for API Gateway (execute-api)."""

    def headers(self, owner: str, method: str, url: str, body: bytes | None) -> dict[str, str]: ...


class BearerSigner:
    def __init__(self, tokens: dict[str, str]) -> None:
        self.tokens = tokens

    def headers(self, owner: str, method: str, url: str, body: bytes | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[owner]}"}


class SigV4Signer:
    """SigV4 with the caller's AWS credentials (boto3's chain), for an API that authorizes with IAM."""

    def __init__(self, region: str) -> None:
        import boto3
        from botocore.auth import SigV4Auth

        credentials = boto3.Session().get_credentials()
        if credentials is None:
            raise ValueError("--sigv4: no AWS credentials found (boto3's chain)")
        self.auth = SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region)

    def headers(self, owner: str, method: str, url: str, body: bytes | None) -> dict[str, str]:
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method, url=url, data=body or b"", headers={"Content-Type": "application/json"})
        self.auth.add_auth(request)
        return dict(request.headers.items())


class Connection:
    """One keep-alive HTTP(S) connection to the API (one per thread)."""

    def __init__(self, api_url: str, signer: Signer, timeout: float = 60.0) -> None:
        parts = urlsplit(api_url)
        self.base, self.prefix, self.signer = api_url.rstrip("/"), parts.path.rstrip("/"), signer
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self.connection = kind(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)

    def call(self, owner: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update(self.signer.headers(owner, method, self.base + path, data))
        for attempt in (1, 2):  # a keep-alive connection the server closed is reopened once
            try:
                self.connection.request(method, self.prefix + path, body=data, headers=headers)
                response = self.connection.getresponse()
                raw = response.read()
                try:
                    return response.status, json.loads(raw) if raw else None
                except ValueError:
                    return response.status, {"message": raw[:200].decode(errors="replace")}
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.connection.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.connection.close()


# --- the plan ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadPlan:
    api_url: str
    signer: Signer
    owners: tuple[str, ...]
    rate: float
    duration: float
    mix: tuple[tuple[str, float], ...] = (("one-off", 1.0),)
    lead: tuple[float, float] = (10.0, 10.0)  # one-offs are due this many seconds after their submit
    connections: int = 8
    drain_seconds: float = 120.0
    owners_note: str = ""


def parse_lead(text: str) -> tuple[float, float]:
    """`10` (each one-off due 10 s after its submit) or `8:18` (uniformly between)."""
    low, _, high = text.partition(":")
    values = (float(low), float(high or low))
    if values[0] < 1 or values[1] < values[0]:
        raise ValueError("--lead: SECONDS >= 1, or LOW:HIGH with LOW <= HIGH")
    return values


def share_of(mix: tuple[tuple[str, float], ...], kind: str) -> float:
    return dict(mix).get(kind, 0.0)


def iso_ms(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


# --- running it ----------------------------------------------------------------------------------------


@dataclass
class Job:
    job_id: str
    owner: str
    kind: str  # "one-off" or "cron"


@dataclass
class Tally:
    """What the API answered, by outcome, across threads."""

    accepted: int = 0
    throttled: int = 0
    refused: int = 0
    errors: list[str] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, status: int, body: Any) -> None:
        with self.lock:
            self.requests += 1
            if status in (200, 201):
                self.accepted += 1
            elif status in THROTTLE_STATUSES:
                self.throttled += 1
            else:
                self.refused += 1
                if len(self.errors) < 5:
                    self.errors.append(f"{status} {json.dumps(body)[:200]}")


class LoadRun:
    """One run of `duetime load`: create, wait, read back, clean up."""

    def __init__(self, plan: LoadPlan, say: Callable[[str], None] = lambda _: None) -> None:
        self.plan, self.say = plan, say
        self.local = threading.local()
        self.connections: list[Connection] = []
        self.lock = threading.Lock()
        self.tally = Tally()
        self.cron_jobs: list[Job] = []
        self.one_offs: list[Job] = []
        self.gave_up = False
        self.run_id = uuid.uuid4().hex[:8]

    def connection(self) -> Connection:
        found: Connection | None = getattr(self.local, "connection", None)
        if found is None:
            found = Connection(self.plan.api_url, self.plan.signer)
            self.local.connection = found
            with self.lock:
                self.connections.append(found)
        return found

    def owner(self, index: int) -> str:
        return self.plan.owners[index % len(self.plan.owners)]

    def spec(self, index: int, kind: str, due: datetime | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": f"load-{self.run_id}-{index}",
            "handler": LOAD_HANDLER,
            "tags": {LOAD_TAG: self.run_id},
        }
        if kind == "cron":
            body.update(schedule={"cron": "* * * * *"}, jitterSeconds=CRON_JITTER_SECONDS)
        else:
            assert due is not None
            body["schedule"] = {"at": iso_ms(due)}
        return body

    def create(self, index: int, kind: str, due: datetime | None) -> Job | None:
        owner = self.owner(index)
        try:
            status, body = self.connection().call(owner, "POST", "/jobs", self.spec(index, kind, due))
        except OSError as exc:
            self.tally.count(0, {"message": str(exc)})
            return None
        self.tally.count(status, body)
        return Job(str(body["jobId"]), owner, kind) if status == 201 else None

    def create_cron_jobs(self) -> None:
        count = round(share_of(self.plan.mix, "cron") * self.plan.rate * CRON_PERIOD_SECONDS)
        if not count:
            return
        self.say(f"creating {count} cron jobs (* * * * *, jitterSeconds {CRON_JITTER_SECONDS})")
        with ThreadPoolExecutor(self.plan.connections) as pool:
            made = pool.map(lambda i: self.create(i, "cron", None), range(count))
            self.cron_jobs = [job for job in made if job is not None]

    def submit_one_offs(self, opens: datetime) -> None:
        """One one-off every 1/(rate x share) s from `lead` before the window opens, each due `lead` later."""
        rate = self.plan.rate * share_of(self.plan.mix, "one-off")
        count = int(rate * self.plan.duration)
        if not count:
            return
        low, high = self.plan.lead
        start_mono = time.monotonic() + (opens - timedelta(seconds=low) - datetime.now(UTC)).total_seconds()
        cursor = iter(range(count))
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                with self.lock:
                    index = next(cursor, None)
                if index is None:
                    return
                at = start_mono + index / rate
                pause = at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                elif -pause > GIVE_UP_LAG_SECONDS:
                    stop.set()
                    return
                due = datetime.now(UTC) + timedelta(seconds=random.uniform(low, high))
                job = self.create(100_000_000 + index, "one-off", due)
                if job is not None:
                    with self.lock:
                        self.one_offs.append(job)

        threads = [threading.Thread(target=loop, daemon=True) for _ in range(self.plan.connections)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.gave_up = stop.is_set()

    def executions(self, job: Job, opens: datetime, closes: datetime) -> list[dict[str, Any]] | None:
        """The job's executions due in [opens, closes), newest first; None if it could not be read."""
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query = urlencode({"limit": 100, **({"cursor": cursor} if cursor else {})})
            try:
                status, body = self.connection().call(job.owner, "GET", f"/jobs/{job.job_id}/executions?{query}")
            except OSError:
                return None
            if status != 200:
                return None
            for execution in body["executions"]:
                if opens <= parse_time(execution["dueAt"]) < closes or job.kind == "one-off":
                    found.append(execution)
            cursor = body.get("nextCursor")
            oldest = body["executions"][-1]["scheduledAt"] if body["executions"] else None
            if not cursor or job.kind == "one-off" or (oldest and parse_time(oldest) < opens):
                return found

    def read_back(self, opens: datetime, closes: datetime) -> tuple[dict[str, dict[str, Any]], int]:
        """Every execution due in the window once it has finished (or as it stands at the deadline),
        read in chunks of READ_CHUNK jobs, and how many jobs could not be read."""
        deadline = time.monotonic() + self.plan.drain_seconds
        done: dict[str, dict[str, Any]] = {}
        unreadable = 0
        jobs = self.cron_jobs + self.one_offs
        with ThreadPoolExecutor(self.plan.connections) as pool:
            for start in range(0, len(jobs), READ_CHUNK):
                pending = jobs[start : start + READ_CHUNK]
                while pending:
                    answers = list(pool.map(lambda job: (job, self.executions(job, opens, closes)), pending))
                    pending = []
                    for job, found in answers:
                        # Every execution due in the window exists by now (created at submit or a slot ahead):
                        # a cron job with none there has no run in it.
                        if found is None or any(e.get("finishedAt") is None for e in found):
                            if time.monotonic() < deadline:
                                pending.append(job)
                                continue
                            unreadable += found is None
                        for execution in found or []:
                            done[execution["executionId"]] = execution
                    if pending:
                        time.sleep(1.0)
        return done, unreadable

    def dead_letters(self) -> int:
        """The dead letters of the owners the run used (a page of 100 each at most)."""
        total = 0
        for owner in self.plan.owners:
            try:
                status, body = self.connection().call(owner, "GET", "/dead-letters?limit=100")
            except OSError:
                continue
            if status == 200:
                total += len(body["executions"])
        return total

    def cancel_cron_jobs(self) -> int:
        def cancel(job: Job) -> bool:
            try:
                status, _ = self.connection().call(job.owner, "DELETE", f"/jobs/{job.job_id}")
            except OSError:
                return False
            return status in (200, 204, 404)

        with ThreadPoolExecutor(self.plan.connections) as pool:
            return sum(pool.map(cancel, self.cron_jobs))

    def close(self) -> None:
        for connection in self.connections:
            connection.close()


def window_start(has_cron: bool, lead: float) -> datetime:
    """When the window opens: the next minute start for cron runs (their first runs spread over it), else
    as soon as the first one-off can be due."""
    now = datetime.now(UTC)
    if not has_cron:
        return now + timedelta(seconds=lead + 0.5)
    minute = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    # A cron job created less than a second before its slot may already have planned the next one.
    return minute if (minute - now).total_seconds() >= max(2.0, lead) else minute + timedelta(minutes=1)


def run_load(plan: LoadPlan, say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Run the plan and return its report (see render)."""
    run = LoadRun(plan, say)
    try:
        run.create_cron_jobs()
        opens = window_start(bool(run.cron_jobs), plan.lead[0])
        closes = opens + timedelta(seconds=plan.duration)
        say(f"window {iso_ms(opens)} .. {iso_ms(closes)}")
        run.submit_one_offs(opens)
        wait = (closes - datetime.now(UTC)).total_seconds() + 1.0
        if wait > 0:
            time.sleep(wait)
        say("reading the executions back")
        executions, unreadable = run.read_back(opens, closes)
        dead = run.dead_letters()
    finally:
        cancelled = run.cancel_cron_jobs()
        run.close()
    return report(plan, run, executions, unreadable, dead, cancelled, opens, closes)


def report(
    plan: LoadPlan,
    run: LoadRun,
    executions: dict[str, dict[str, Any]],
    unreadable: int,
    dead: int,
    cancelled: int,
    opens: datetime,
    closes: datetime,
) -> dict[str, Any]:
    lateness: list[float] = []
    finished: list[datetime] = []
    due = [parse_time(e["dueAt"]) for e in executions.values()]
    not_started = 0
    for execution in executions.values():
        attempts = execution.get("attempts") or []
        started = attempts[0]["startedAt"] if attempts else execution.get("startedAt")
        if not started:
            not_started += 1
            continue
        lateness.append((parse_time(started) - parse_time(execution["dueAt"])).total_seconds() * 1000)
        if execution.get("finishedAt"):
            finished.append(parse_time(execution["finishedAt"]))
    # Throughput: what finished over the time from the first due to the last finish. It equals the rate the
    # executions fell due at (dueRate) when the system keeps up; less when it queues them.
    first_due = min(due, default=opens)
    span = (max(finished) - first_due).total_seconds() if finished else 0.0
    per_second = len(finished) / max(1.0, span) if finished else 0.0
    due_span = (max(due) - first_due).total_seconds() if due else 0.0
    due_rate = len(due) / max(1.0, due_span) if due else 0.0
    mix = plan.mix
    counted = run.tally.requests / len(executions) if executions else 0.0
    estimate = capacity.estimate(capacity.Inputs(rate=max(per_second, 0.001), mix=mix))
    cost = dict(estimate.cost_per_million)
    return {
        "api": plan.api_url,
        "rate": plan.rate,
        "duration": plan.duration,
        "mix": dict(mix),
        "owners": len(plan.owners),
        "ownerNames": list(plan.owners),
        "runId": run.run_id,
        "ownersNote": plan.owners_note,
        "window": {"opens": iso_ms(opens), "closes": iso_ms(closes)},
        "jobs": {"cron": len(run.cron_jobs), "oneOff": len(run.one_offs)},
        "submission": {
            "accepted": run.tally.accepted,
            "throttled": run.tally.throttled,
            "refused": run.tally.refused,
            "errors": run.tally.errors,
            "saturated": run.gave_up,
        },
        "executions": len(executions),
        "notStarted": not_started,
        "unreadable": unreadable,
        "latenessMs": {
            "p50": round(percentile(lateness, 0.5), 1),
            "p99": round(percentile(lateness, 0.99), 1),
            "max": round(max(lateness, default=0.0), 1),
        },
        "executionsPerSecond": round(per_second, 2),
        "dueRate": round(due_rate, 2),
        "deadLetters": dead,
        "cronJobsCancelled": cancelled,
        "costPerMillion": {
            "total": cost["total"],
            "parts": {k: v for k, v in cost.items() if k != "total"},
            "apiRequestsPerExecutionCounted": round(counted, 2),
            "from": "duetime capacity's per-execution counts (tests/integration/test_call_counts.py) for this mix, "
            f"us-east-1 prices as of {capacity.PRICES_AS_OF}",
        },
    }


# --- CloudWatch (a deployed stack) -----------------------------------------------------------------------


def cloudwatch_figures(client: Any, prefix: str, start: datetime, end: datetime) -> dict[str, Any]:
    """The stack's own figures for [start, end): start lateness p50/p99/max and executions started (the
    workers' EMF metrics, definitions.METRIC_*), Lambda throttles (account-wide), the DLQs' depth."""
    period = max(60, math.ceil((end - start).total_seconds() / 60) * 60)
    dimensions = [{"Name": "service", "Value": WORKER_METRICS_SERVICE}]

    def statistics(namespace: str, name: str, dims: list[dict[str, str]], **kwargs: Any) -> list[dict[str, Any]]:
        answer = client.get_metric_statistics(
            Namespace=namespace,
            MetricName=name,
            Dimensions=dims,
            StartTime=start,
            EndTime=end,
            Period=period,
            **kwargs,
        )
        return list(answer.get("Datapoints") or [])

    lateness = statistics(
        METRIC_NAMESPACE,
        METRIC_START_LATENESS_MS,
        dimensions,
        Statistics=["Maximum"],
        ExtendedStatistics=["p50", "p99"],
    )
    started = statistics(METRIC_NAMESPACE, METRIC_STARTED, dimensions, Statistics=["Sum"])
    throttles = statistics("AWS/Lambda", "Throttles", [], Statistics=["Sum"])
    dlq: dict[str, float] = {}
    for job_class in JOB_CLASSES.values():
        name = job_class.dlq_name(prefix)
        points = statistics(
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            [{"Name": "QueueName", "Value": name}],
            Statistics=["Maximum"],
        )
        dlq[name] = max((p["Maximum"] for p in points), default=0.0)

    def extended(key: str) -> float | None:
        values = [p["ExtendedStatistics"][key] for p in lateness if key in (p.get("ExtendedStatistics") or {})]
        return max(values) if values else None

    total_started = sum(p["Sum"] for p in started)
    return {
        "latenessMs": {
            "p50": extended("p50"),
            "p99": extended("p99"),
            "max": max((p["Maximum"] for p in lateness if "Maximum" in p), default=None),
        },
        "started": total_started,
        "executionsPerSecond": round(total_started / max(1.0, (end - start).total_seconds()), 2),
        "lambdaThrottles": sum(p["Sum"] for p in throttles),
        "dlqDepth": dlq,
    }


# --- the command -----------------------------------------------------------------------------------------


def local_tokens(data_dir: str, owners: int, run_id: str) -> tuple[str, dict[str, str]]:
    """The API URL of the `duetime local` on `data_dir` and a token for each of `owners` owners."""
    from duetime.api.auth import issue_token
    from duetime.local.state import load_connection

    state = load_connection(data_dir)
    names = [f"load-{run_id}-{i + 1}" for i in range(owners)]
    return state.api_url, {n: issue_token(state.jwt_secret, n, audience=state.instance_id) for n in names}


def plan_from_args(args: argparse.Namespace) -> LoadPlan:
    if args.rate <= 0 or args.duration <= 0 or args.owners < 1:
        raise ValueError("--rate and --duration must be > 0 and --owners >= 1")
    mix = capacity.parse_mix(args.mix)
    lead = parse_lead(args.lead)
    signer: Signer
    owners: tuple[str, ...]
    note = ""
    api = args.api
    if args.sigv4:
        signer, owners = SigV4Signer(args.region), ("iam",)
        note = "one principal: SigV4 signs as the caller's AWS identity"
    elif args.token:
        signer, owners = BearerSigner({"token": args.token}), ("token",)
        note = "one owner: the token's (--data-dir of a `duetime local` gives a token per owner)"
    else:
        url, tokens = local_tokens(args.data_dir, args.owners, uuid.uuid4().hex[:6])
        api = api or url
        signer, owners = BearerSigner(tokens), tuple(tokens)
        note = f"{len(tokens)} owners, tokens signed with {args.data_dir}'s key"
    if not api:
        raise ValueError("give --api URL")
    if args.owners > 1 and len(owners) == 1:
        note += f" (--owners {args.owners} ignored)"
    return LoadPlan(
        api_url=api,
        signer=signer,
        owners=owners,
        rate=args.rate,
        duration=args.duration,
        mix=mix,
        lead=lead,
        connections=args.connections,
        drain_seconds=args.drain,
        owners_note=note,
    )


def render(result: dict[str, Any]) -> str:
    late, sub, cost = result["latenessMs"], result["submission"], result["costPerMillion"]
    mix = ", ".join(f"{k} {v:.0%}" for k, v in result["mix"].items())
    lines = [
        f"duetime load: {result['rate']:g}/s for {result['duration']:g} s ({mix}) against {result['api']}",
        f"  owners               {result['owners']} ({result['ownersNote']})",
        f"  jobs                 {result['jobs']['oneOff']:,} one-off, {result['jobs']['cron']:,} cron "
        f"(window {result['window']['opens']} .. {result['window']['closes']})",
        f"  submission           {sub['accepted']:,} accepted, {sub['throttled']:,} throttled (429/503), "
        f"{sub['refused']:,} refused" + (", SATURATED: the API fell behind the rate" if sub["saturated"] else ""),
        f"  executions           {result['executions']:,} due in the window, {result['notStarted']:,} not started, "
        f"{result['unreadable']:,} jobs unreadable",
        f"  start lateness ms    p50 {late['p50']:,.0f}  p99 {late['p99']:,.0f}  max {late['max']:,.0f}",
        f"  executions/s         {result['executionsPerSecond']:,.2f} (they fell due at {result['dueRate']:,.2f}/s)",
        f"  dead letters         {result['deadLetters']:,}",
        f"  cost per million     ${cost['total']:.2f} ({cost['from']})",
        f"  cron jobs cancelled  {result['cronJobsCancelled']:,}",
    ]
    lines += [f"  ! {e}" for e in sub["errors"]]
    cloud = result.get("cloudwatch")
    if cloud:
        cl = cloud["latenessMs"]
        lines.append(
            f"  CloudWatch           lateness p50 {cl['p50']} p99 {cl['p99']} max {cl['max']} ms, "
            f"{cloud['started']:,.0f} started ({cloud['executionsPerSecond']}/s), "
            f"{cloud['lambdaThrottles']:,.0f} Lambda throttles, DLQ depth {cloud['dlqDepth']}"
        )
    return "\n".join(lines)


def cmd_load(args: argparse.Namespace) -> int:
    try:
        plan = plan_from_args(args)
    except (ValueError, OSError) as exc:
        print(f"duetime load: {exc}")
        return 2
    say: Callable[[str], None] = (lambda _: None) if args.json else (lambda text: print(f"duetime load: {text}"))
    result = run_load(plan, say)
    if args.cloudwatch:
        from duetime.adapters.aws.client import make_client

        client = make_client("cloudwatch", args.region, args.endpoint_url)
        opens = parse_time(result["window"]["opens"])
        end = opens + timedelta(seconds=plan.duration + plan.drain_seconds)
        result["cloudwatch"] = cloudwatch_figures(client, args.prefix, opens, min(end, datetime.now(UTC)))
    print(json.dumps(result, indent=2) if args.json else render(result))
    # Exit 0 only if every job was accepted and every execution due in the window started.
    submission = result["submission"]
    healthy = result["notStarted"] == 0 and not submission["refused"] and not submission["throttled"]
    healthy = healthy and result["executions"] > 0
    return 0 if healthy else 1


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register `duetime load` on the CLI's subparsers."""
    load = sub.add_parser(
        "load",
        help="drive a deployment through its API and report lateness, throughput, cost",
        description="Exit 0 if every job was accepted and every execution due in the window started, else 1.",
    )
    load.add_argument("--rate", type=float, required=True, help="executions per second to create")
    load.add_argument("--duration", type=float, required=True, metavar="SECONDS", help="how long the window lasts")
    load.add_argument("--api", help="the API's URL (default: the --data-dir's `duetime local`)")
    auth = load.add_mutually_exclusive_group()
    auth.add_argument("--token", help="a bearer token (one owner); default: a token per owner from --data-dir")
    auth.add_argument(
        "--sigv4", action="store_true", help="sign with the caller's AWS credentials (IAM-authorized API)"
    )
    load.add_argument("--data-dir", default=".duetime", help="a `duetime local`'s data dir, for per-owner tokens")
    load.add_argument("--owners", type=int, default=4, metavar="K", help="owners to spread the jobs over")
    load.add_argument("--mix", default="oneoff=0.8,cron=0.2", help="kinds of job and their shares of the rate")
    load.add_argument("--lead", default="10", metavar="SECONDS[:MAX]", help="one-offs are due this long after submit")
    load.add_argument("--connections", type=int, default=8, help="keep-alive connections submitting at once")
    load.add_argument("--drain", type=float, default=120.0, metavar="SECONDS", help="wait this long for stragglers")
    load.add_argument("--cloudwatch", action="store_true", help="also read the stack's CloudWatch metrics")
    load.add_argument("--prefix", default="duetime", help="the stack's name prefix (its DLQ names)")
    load.add_argument("--region", default=DEFAULT_REGION, help="for --sigv4 and --cloudwatch")
    load.add_argument("--endpoint-url", help="a CloudWatch endpoint other than AWS's (moto's, in tests)")
    load.add_argument("--json", action="store_true")
    load.set_defaults(fn=cmd_load)
    parser: argparse.ArgumentParser = load
    return parser
