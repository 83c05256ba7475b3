"""The `duetime` command: local, token, worker and preview."""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
from datetime import UTC, datetime
from types import FrameType

from duetime.api.auth import issue_token
from duetime.audit_cli import add_audit_command
from duetime.client_cli import add_client_commands
from duetime.config import RuntimeConfig, build_ports, build_targets
from duetime.domain.errors import DuetimeError
from duetime.domain.models import Schedule, format_time
from duetime.local.backends import BACKENDS, DEFAULT_BACKEND, MOTO, attach_ports
from duetime.local.state import config_from_state, load_state
from duetime.service.jobs import preview
from duetime.worker.registry import load_modules
from duetime.worker.runtime import Worker, append_run_log


def cmd_local(args: argparse.Namespace) -> int:
    from duetime.local.system import FIRST_USER, LocalSystem

    run_log = os.environ.get("DUETIME_RUN_LOG")  # opt-in: one JSON line per handler run (the restart test reads it)
    system = LocalSystem(
        args.data_dir,
        port=args.port,
        workers=args.workers,
        lease_seconds=args.lease_seconds,
        shards=args.shards,
        backend=args.backend,
        on_run=append_run_log(run_log) if run_log else None,
    )
    system.start()
    token = system.token(FIRST_USER)
    print(
        f"duetime local is running on {args.backend}\n  API:   {system.api_url}\n  token: {token}\n"
        f"  (owner {FIRST_USER!r}; more with `duetime token --owner NAME --data-dir {args.data_dir}`)",
        flush=True,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    print("duetime local: stopping", flush=True)
    system.stop()
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    state = load_state(args.data_dir)
    if not args.worker and not args.owner:
        print("give --owner NAME or --worker", file=sys.stderr)
        return 2
    print(issue_token(state.jwt_secret, args.owner or "worker", worker=args.worker))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    load_modules(args.handlers or [])
    if args.data_dir:  # attach to a running `duetime local`: its SQLite file, or its moto server
        state = load_state(args.data_dir)
        ports = attach_ports(args.data_dir, state)
        # `lambda:` and `ecs:` handlers reach AWS APIs: moto's stand-ins on moto, none on SQLite.
        targets = build_targets(config_from_state(state.model_dump(by_alias=True))) if state.backend == MOTO else None
    else:
        config = RuntimeConfig.from_env()
        ports, targets = build_ports(config), build_targets(config)
    worker_id = args.worker_id or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"
    run_log = os.environ.get("DUETIME_RUN_LOG")  # opt-in: one JSON line per handler run (the chaos soak reads it)
    on_run = append_run_log(run_log) if run_log else None
    worker = Worker(ports, args.job_class, worker_id, concurrency=args.concurrency, on_run=on_run, targets=targets)

    def on_term(signum: int, frame: FrameType | None) -> None:
        worker.stopping.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    print(f"duetime worker {worker_id} on class {args.job_class!r}, concurrency {args.concurrency}", flush=True)
    worker.run(grace_seconds=args.grace_seconds)
    print(f"duetime worker {worker_id} stopped", flush=True)
    return 0


def cmd_preview(args: argparse.Namespace) -> int:
    start = datetime.fromisoformat(args.from_.replace("Z", "+00:00")) if args.from_ else datetime.now(UTC)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    schedule = Schedule(cron=args.cron, time_zone=args.tz)
    runs = preview(schedule, start, args.count)
    if args.json:
        print(json.dumps({"runs": [format_time(r) for r in runs]}))
    else:
        zone = schedule.time_zone
        from zoneinfo import ZoneInfo

        for run in runs:
            print(f"{format_time(run)}  {run.astimezone(ZoneInfo(zone)).isoformat()} {zone}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="duetime", description="A distributed job scheduler.")
    sub = top.add_subparsers(dest="command", required=True)

    local = sub.add_parser("local", help="run the whole system on this machine")
    local.add_argument("--port", type=int, default=8080)
    local.add_argument("--workers", type=int, default=4, help="worker threads per job class (0: none)")
    local.add_argument("--lease-seconds", type=int, default=30)
    local.add_argument("--data-dir", default=".duetime")
    local.add_argument("--shards", type=int, default=8)
    local.add_argument(
        "--backend",
        choices=BACKENDS,
        default=DEFAULT_BACKEND,
        help="sqlite: one durable database file under --data-dir (default); moto: the AWS adapters on an "
        "embedded moto server, in memory",
    )
    local.set_defaults(fn=cmd_local)

    token = sub.add_parser("token", help="print a bearer token the local system accepts")
    token.add_argument("--owner")
    token.add_argument("--worker", action="store_true")
    token.add_argument("--data-dir", default=".duetime")
    token.set_defaults(fn=cmd_token)

    worker = sub.add_parser("worker", help="run a worker process")
    worker.add_argument("--job-class", default="default")
    worker.add_argument("--concurrency", type=int, default=8)
    worker.add_argument("--handlers", nargs="*", default=[])
    worker.add_argument("--data-dir", default=None)
    worker.add_argument("--worker-id", default=None)
    worker.add_argument("--grace-seconds", type=float, default=5.0)
    worker.set_defaults(fn=cmd_worker)

    prev = sub.add_parser("preview", help="print the next run times of a cron schedule")
    prev.add_argument("--cron", required=True)
    prev.add_argument("--tz", default="UTC")
    prev.add_argument("--from", dest="from_")
    prev.add_argument("--count", type=int, default=10)
    prev.add_argument("--json", action="store_true")
    prev.set_defaults(fn=cmd_preview)

    add_client_commands(sub)
    add_audit_command(sub)
    from duetime.capacity import add_parser as add_capacity_command

    add_capacity_command(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=os.environ.get("DUETIME_LOG_LEVEL", "WARNING"),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    args = parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except (DuetimeError, FileNotFoundError) as exc:
        print(f"duetime: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    time.tzset() if hasattr(time, "tzset") else None
    sys.exit(main())
