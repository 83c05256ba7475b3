"""The `duetime` command: local, token, worker, webhook-secret and preview."""

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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.secrets import FileSecrets, SecretsManagerSecrets
from duetime.api.auth import DEFAULT_TOKEN_TTL, check_owner_name, issue_token
from duetime.cli.audit import add_audit_command
from duetime.cli.client import add_client_commands
from duetime.config import RuntimeConfig, build_ports, build_targets
from duetime.definitions import (
    DEFAULT_JOB_CLASS,
    JOB_CLASSES,
    LOCAL_API_PROCESSES,
    LOCAL_API_PROCESSES_MAX,
    LOCAL_WORKER_PROCESSES,
    LOCAL_WORKER_PROCESSES_MAX,
    MAX_CLASS_QUEUES,
    parse_class_queues,
)
from duetime.domain.errors import DuetimeError, InvalidInput
from duetime.domain.grants import Grants
from duetime.domain.models import Schedule, format_time
from duetime.domain.quotas import Quotas
from duetime.local import BACKENDS as LOCAL_BACKENDS
from duetime.local.backends import DEFAULT_WORKERS, MOTO, SQLITE, attach_ports, config_from_state
from duetime.local.state import load_state
from duetime.service.jobs import preview
from duetime.targets.webhook import WebhookTarget
from duetime.worker.kinds import Targets
from duetime.worker.registry import load_modules, registered_names
from duetime.worker.runtime import Worker


def importable_cwd() -> None:
    """Make the current directory importable, so `--handlers billing.handlers` finds a project's module
    (an installed console script puts only its own directory on sys.path)."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def read_grants(path: str | None) -> list[dict[str, Any]] | None:
    """The grant rules of a `--grants` JSON file (checked here, so a mistake stops the command at once)."""
    if path is None:
        return None
    try:
        raw = json.loads(Path(path).read_text())
    except ValueError as exc:
        raise InvalidInput(f"--grants {path}: not JSON: {exc}", field="grants") from exc
    grants = Grants.parse(raw, source=f"--grants {path}")
    return [{"owners": list(r.owners), "handlers": list(r.handlers)} for r in grants.rules]


def class_queues_arg(raw: str) -> dict[str, int]:
    """`--class-queues default=2,long=1`, checked as the stack checks context classQueues."""
    try:
        return parse_class_queues(raw, "=", JOB_CLASSES)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def cmd_local(args: argparse.Namespace) -> int:
    from duetime.console import sign_in_link
    from duetime.local.system import FIRST_USER, LocalSystem

    importable_cwd()
    if args.handler_path:  # SQLite imports the modules from it; moto stages it as the workers' handler layer
        sys.path.insert(0, str(Path(args.handler_path).resolve()))
    # On SQLite the workers run in a child process beside the API (local/worker_process.py says why).
    worker_process = args.backend == SQLITE
    system = LocalSystem(
        args.data_dir,
        port=args.port,
        workers=DEFAULT_WORKERS[args.backend] if args.workers is None else args.workers,
        lease_seconds=args.lease_seconds,
        shards=args.shards,
        handler_modules=args.handlers,
        handler_path=args.handler_path,
        grants=read_grants(args.grants),
        backend=args.backend,
        worker_process=worker_process,
        worker_processes=args.worker_processes,
        api_processes=args.api_processes if args.backend == SQLITE else 1,
        reset=args.reset,
        events_console=args.events,
        events_webhook=args.events_webhook,
        class_queues=args.class_queues,
        function_processes=args.backend == MOTO,
        quotas=Quotas(
            max_active_jobs=args.max_active_jobs or None,
            job_creates_per_minute=args.job_creates_per_minute or None,
            run_nows_per_minute=args.run_nows_per_minute or None,
            backfill_slots_per_hour=args.backfill_slots_per_hour or None,
        ),
    )
    system.start()
    token = system.token(FIRST_USER)
    database = system.local_backend.database_file if system.local_backend else None
    where = f"{args.backend} ({Path(args.data_dir) / database})" if database else args.backend
    print(
        f"duetime local is running on {where}\n  API:   {system.api_url}\n  token: {token}\n"
        f"  console: {sign_in_link(system.api_url, token)}\n"
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
    if not args.worker and not args.owner:
        print("give --owner NAME or --worker", file=sys.stderr)
        return 2
    if args.owner:
        check_owner_name(args.owner)  # before reading local.json: a bad name is refused wherever it is asked
    state = load_state(args.data_dir)
    ttl = timedelta(hours=args.ttl)
    owner = args.owner or "worker"
    print(issue_token(state.jwt_secret, owner, args.worker, ttl, args.group, audience=state.instance_id))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    importable_cwd()
    load_modules(args.handlers or [])
    if args.data_dir:  # attach to a running `duetime local`: its SQLite file, or its moto server
        state = load_state(args.data_dir)
        ports = attach_ports(args.data_dir, state)
        # `lambda:` and `ecs:` handlers reach AWS APIs: moto's stand-ins on moto, none on SQLite; webhooks
        # are signed with the same secrets as the `duetime local` it joins.
        if state.backend == MOTO:
            config = config_from_state(state)
            targets = build_targets(config.model_copy(update={"webhook_secrets_dir": args.data_dir}))
        else:
            webhooks = WebhookTarget(FileSecrets(args.data_dir), allow_loopback=ports.settings.allow_loopback_webhooks)
            targets = Targets(webhook_target=webhooks)
    else:
        config = RuntimeConfig.from_env()
        ports, targets = build_ports(config), build_targets(config)
    worker_id = args.worker_id or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"
    worker = Worker(ports, args.job_class, worker_id, concurrency=args.concurrency, targets=targets)

    def on_term(signum: int, frame: FrameType | None) -> None:
        worker.stopping.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    worker.announcer.announce()  # jobs naming these handlers are accepted from now on
    print(
        f"duetime worker {worker_id} on class {args.job_class!r}, concurrency {args.concurrency}, "
        f"serving {', '.join(registered_names())}",
        flush=True,
    )
    worker.run(grace_seconds=args.grace_seconds)
    print(f"duetime worker {worker_id} stopped", flush=True)
    return 0


def cmd_webhook_secret(args: argparse.Namespace) -> int:
    """Print an owner's webhook signing secret, creating it on first use, for its receiver to verify with."""
    if args.aws:
        config = RuntimeConfig.from_env()
        if args.prefix:
            config = config.model_copy(update={"prefix": args.prefix})
        client = make_client("secretsmanager", config.region, config.endpoint_url)
        print(SecretsManagerSecrets(client, config.prefix).ensure(args.owner))
        return 0
    if not Path(args.data_dir).is_dir():
        print(f"no data dir {args.data_dir}: run `duetime local` there first, or give --data-dir", file=sys.stderr)
        return 2
    print(FileSecrets(args.data_dir).secret_for(args.owner))
    return 0


def cmd_preview(args: argparse.Namespace) -> int:
    start = datetime.fromisoformat(args.from_.replace("Z", "+00:00")) if args.from_ else datetime.now(UTC)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    start_at = datetime.fromisoformat(args.start_at.replace("Z", "+00:00")) if args.start_at else None
    dst = {k: v for k, v in (("gap", args.dst_gap), ("fold", args.dst_fold)) if v}
    schedule = Schedule.model_validate(
        {"cron": args.cron, "every": args.every, "startAt": start_at, "timeZone": args.tz, "dst": dst or None}
    )
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
    local.add_argument(
        "--workers",
        type=int,
        help="per job class: concurrent worker invocations or threads (0: none; default 64 on sqlite, 4 on moto)",
    )
    local.add_argument("--lease-seconds", type=int, default=30)
    local.add_argument("--data-dir", default=".duetime")
    local.add_argument("--shards", type=int, default=8)
    local.add_argument("--handlers", nargs="*", default=[], metavar="MODULE", help="modules with your @handlers")
    local.add_argument(
        "--handler-path",
        metavar="DIR",
        help="the folder holding their packages, as context handlerPath (default: the current directory); "
        "--backend moto ships it to the Lambda workers as their handler layer",
    )
    local.add_argument("--grants", metavar="FILE", help="JSON grant rules (default: everyone may use everything)")
    local.add_argument(
        "--backend",
        choices=LOCAL_BACKENDS,
        default=LOCAL_BACKENDS[0],
        help="sqlite: one durable database file under --data-dir (default); moto: the AWS-faithful mode, the "
        "real Lambda handlers over an embedded moto server, in memory",
    )
    local.add_argument(
        "--reset",
        action="store_true",
        help="start on empty data: delete the data dir's database and signing key (every earlier token is refused)",
    )
    for flag, what in (
        ("--max-active-jobs", "jobs (neither cancelled nor completed) each owner may hold"),
        ("--job-creates-per-minute", "jobs each owner may create per minute"),
        ("--run-nows-per-minute", "run-now requests each owner may make per minute"),
        ("--backfill-slots-per-hour", "runs each owner's backfills may create per hour"),
    ):
        local.add_argument(flag, type=int, default=0, metavar="N", help=f"quota: {what}, HTTP 429 past it (0: none)")
    local.add_argument("--events", action="store_true", help="print each event (docs/events.md) on the console")
    local.add_argument(
        "--events-webhook",
        metavar="URL",
        help="POST each event to URL, signed with `duetime webhook-secret --owner duetime-events`'s secret",
    )
    local.add_argument(
        "--api-processes",
        type=int,
        choices=range(1, LOCAL_API_PROCESSES_MAX + 1),
        default=min(LOCAL_API_PROCESSES, os.cpu_count() or 1),
        metavar="N",
        help=f"sqlite: processes answering the API on its one port (default {LOCAL_API_PROCESSES}, or 1 on a "
        "machine of one core; more take more submits a second where cores are free)",
    )
    local.add_argument(
        "--worker-processes",
        type=int,
        choices=range(1, LOCAL_WORKER_PROCESSES_MAX + 1),
        default=LOCAL_WORKER_PROCESSES,
        metavar="N",
        help=f"sqlite: processes running the workers, each with --workers slots a job class (default "
        f"{LOCAL_WORKER_PROCESSES}; a second drains a burst sooner where a core is free for it)",
    )
    local.add_argument(
        "--class-queues",
        type=class_queues_arg,
        default={},
        metavar="CLASS=N[,CLASS=N]",
        help=f"spread a job class over N due queues by shard (1..{MAX_CLASS_QUEUES}; default 1 each), as the "
        "stack's -c classQueues does",
    )
    local.set_defaults(fn=cmd_local)

    token = sub.add_parser("token", help="print a bearer token the local system accepts")
    token.add_argument("--owner")
    token.add_argument("--worker", action="store_true")
    token.add_argument("--group", action="append", default=[], help="a group of the owner (repeatable)")
    token.add_argument("--data-dir", default=".duetime")
    token.add_argument(
        "--ttl",
        type=float,
        default=DEFAULT_TOKEN_TTL.total_seconds() / 3600,
        metavar="HOURS",
        help=f"how long the token is accepted (default {DEFAULT_TOKEN_TTL.total_seconds() / 3600:g} hours)",
    )
    token.set_defaults(fn=cmd_token)

    worker = sub.add_parser("worker", help="run a worker process")
    worker.add_argument("--job-class", default=DEFAULT_JOB_CLASS)
    worker.add_argument("--concurrency", type=int, default=8)
    worker.add_argument("--handlers", nargs="*", default=[], metavar="MODULE", help="modules with your @handlers")
    worker.add_argument("--data-dir", default=None)
    worker.add_argument("--worker-id", default=None)
    worker.add_argument("--grace-seconds", type=float, default=5.0)
    worker.set_defaults(fn=cmd_worker)

    webhook = sub.add_parser("webhook-secret", help="print an owner's webhook signing secret (made on first use)")
    webhook.add_argument("--owner", required=True)
    webhook.add_argument("--data-dir", default=".duetime", help="the `duetime local` whose secrets to read")
    webhook.add_argument(
        "--aws", action="store_true", help="the deployed stack's secret in Secrets Manager (AWS credentials)"
    )
    webhook.add_argument("--prefix", default=None, help="the stack's name prefix (default: DUETIME_PREFIX or duetime)")
    webhook.set_defaults(fn=cmd_webhook_secret)

    prev = sub.add_parser("preview", help="print the next run times of a cron or interval schedule")
    kind = prev.add_mutually_exclusive_group(required=True)
    kind.add_argument("--cron")
    kind.add_argument("--every", help="an interval: 30s, 90m, 1h30m, 2d or rate(90 minutes) (from 1 s)")
    prev.add_argument("--start-at", dest="start_at", help="the interval's anchor (ISO; default: --from)")
    prev.add_argument("--tz", default="UTC")
    prev.add_argument("--dst-gap", dest="dst_gap", choices=("shift", "skip"), help="a cron time the clock skips")
    prev.add_argument("--dst-fold", dest="dst_fold", choices=("first", "last", "both"), help="one it shows twice")
    prev.add_argument("--from", dest="from_")
    prev.add_argument("--count", type=int, default=10)
    prev.add_argument("--json", action="store_true")
    prev.set_defaults(fn=cmd_preview)

    add_client_commands(sub)
    add_audit_command(sub)
    from duetime.cli.capacity import add_parser as add_capacity_command

    add_capacity_command(sub)
    from duetime.cli.load import add_parser as add_load_command

    add_load_command(sub)
    from duetime.cli.reshard import add_reshard_command

    add_reshard_command(sub)
    from duetime.cli.smoke import add_smoke_command

    add_smoke_command(sub)
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
