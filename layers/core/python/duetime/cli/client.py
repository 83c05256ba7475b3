"""`duetime jobs create|edit|list|get|pause|resume|cancel|run|bulk`, `duetime executions JOBID`, `duetime executions
retry|get ID`, `duetime dead-letters [redrive]` and `duetime calendars list|get|put|delete`: the API from a shell,
as readable tables or, with --json, the API's own JSON for scripts."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from duetime.cli.api_command import EXIT_API_ERROR, api_client, connection_flags, reporting_errors, show, table
from duetime.cli.limits import add_limit_commands
from duetime.client import ApiError, ConfigError
from duetime.domain.interval import every_words


def schedule_text(schedule: dict[str, Any]) -> str:
    if schedule.get("cron"):
        return f"{schedule['cron']} ({schedule.get('timeZone', 'UTC')})"
    if schedule.get("every"):
        return f"{every_words(schedule['every'])} from {schedule.get('startAt')}"
    return f"at {schedule.get('at')}"


def job_rows(jobs: Sequence[dict[str, Any]]) -> str:
    rows = [
        (
            j["jobId"],
            j["name"],
            j["status"],
            schedule_text(j["schedule"]),
            j["handler"],
            j.get("nextRunAt"),
            (j.get("lastRun") or {}).get("status"),
        )
        for j in jobs
    ]
    return table(rows, ("JOB ID", "NAME", "STATUS", "SCHEDULE", "HANDLER", "NEXT RUN", "LAST RUN"))


def job_detail(job: dict[str, Any]) -> str:
    retry = job.get("retry") or {}
    fields = [
        ("jobId", job["jobId"]),
        ("name", job["name"]),
        ("status", job["status"]),
        ("handler", job["handler"]),
        ("schedule", schedule_text(job["schedule"])),
        ("nextRunAt", job.get("nextRunAt")),
        ("jobClass", job.get("jobClass")),
        ("timeoutSeconds", job.get("timeoutSeconds")),
        (
            "retry",
            f"{retry.get('maxAttempts')} attempts, {retry.get('baseDelaySeconds')} s base, "
            f"{retry.get('maxDelaySeconds')} s cap",
        ),
        ("overlap / catchUp", f"{job.get('overlap')} / {job.get('catchUp')}"),
        ("delivery", job.get("delivery")),
        ("payload", json.dumps(job.get("payload", {}))),
        ("createdAt", job.get("createdAt")),
        ("version", job.get("version")),
    ]
    fields += [(name, value) for name, value in operation_fields(job) if value is not None]
    text = table(fields, ("FIELD", "VALUE"))
    runs = job.get("nextRuns") or []
    if runs:
        text += "\n\nnext runs:\n" + "\n".join(f"  {r}" for r in runs)
    return text


def operation_fields(job: dict[str, Any]) -> list[tuple[str, Any]]:
    """The job's note, tags, spread, bounds and schedule health, each shown only when it has a value."""
    schedule = job.get("schedule") or {}

    def run(name: str) -> str | None:
        summary = job.get(name)
        if not summary:
            return None
        return f"{summary['executionId']} {summary['status']} ({summary.get('finishedAt') or summary['dueAt']})"

    tags = job.get("tags") or {}
    return [
        ("note", job.get("note")),
        ("tags", " ".join(f"{k}:{v}" for k, v in sorted(tags.items())) or None),
        ("jitterSeconds", job.get("jitterSeconds") or None),
        ("pauseAfterFailures", job.get("pauseAfterFailures")),
        ("endAt", schedule.get("endAt")),
        ("maxRuns", schedule.get("maxRuns")),
        ("lastRun", run("lastRun")),
        ("lastSuccess", run("lastSuccess")),
        ("lastFailure", run("lastFailure")),
        ("pastDue", run("pastDue")),
        ("lateAfterSeconds", job.get("lateAfterSeconds")),
        ("withinBudget", budget_text(job.get("withinBudget") or [])),
        ("notify", " ".join(_destination(d) for d in ((job.get("notify") or {}).get("onFailure") or [])) or None),
    ]


def budget_text(shares: list[dict[str, Any]]) -> str | None:
    """The share of runs started within lateAfterSeconds, window by window: `7 d 98.5% (1 late of 67)`."""
    parts = []
    for share in shares:
        counted = share["onTime"] + share["late"]
        percent = "-" if share["share"] is None else f"{share['share'] * 100:.1f}%"
        parts.append(f"{share['days']} d {percent} ({share['late']} late of {counted})")
    return ", ".join(parts) or None


def _destination(destination: dict[str, Any]) -> str:
    kind, target = next(((k, v) for k, v in destination.items() if v), ("?", ""))
    return f"{kind}:{target}"


def execution_rows(executions: Sequence[dict[str, Any]]) -> str:
    rows = [
        (
            e["executionId"],
            e["scheduledAt"],
            e["status"],
            e.get("attempt"),
            e.get("startedAt"),
            e.get("finishedAt"),
            e.get("error") or e.get("skipReason") or e.get("workerId"),
        )
        for e in executions
    ]
    return table(rows, ("EXECUTION ID", "SCHEDULED AT", "STATUS", "ATTEMPT", "STARTED", "FINISHED", "NOTE"))


def spec_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /jobs body from flags, over a --file spec if one is given (flags win)."""
    spec: dict[str, Any] = json.loads(Path(args.file).read_text()) if args.file else {}
    if args.name:
        spec["name"] = args.name
    if args.handler:
        spec["handler"] = args.handler
    if args.cron:
        spec["schedule"] = {"cron": args.cron}
    elif args.every:
        spec["schedule"] = {"every": args.every}
    elif args.at:
        spec["schedule"] = {"at": args.at}
    if args.start_at:
        spec.setdefault("schedule", {})["startAt"] = args.start_at
    if args.end_at:
        spec.setdefault("schedule", {})["endAt"] = args.end_at
    if args.max_runs is not None:
        spec.setdefault("schedule", {})["maxRuns"] = args.max_runs
    if args.tag:
        spec["tags"] = {**spec.get("tags", {}), **dict(tag_pair(t) for t in args.tag)}
    if args.exclude:
        spec["exclude"] = args.exclude
    if args.tz:
        spec.setdefault("schedule", {})["timeZone"] = args.tz
    dst = {k: v for k, v in (("gap", args.dst_gap), ("fold", args.dst_fold)) if v}
    if dst:
        spec.setdefault("schedule", {})["dst"] = {**spec.get("schedule", {}).get("dst", {}), **dst}
    if args.payload is not None:
        spec["payload"] = json.loads(args.payload)
    retry = {
        k: v
        for k, v in (
            ("maxAttempts", args.max_attempts),
            ("baseDelaySeconds", args.base_delay),
            ("maxDelaySeconds", args.max_delay),
        )
        if v is not None
    }
    if retry:
        spec["retry"] = {**spec.get("retry", {}), **retry}
    for key, value in (
        ("timeoutSeconds", args.timeout),
        ("overlap", args.overlap),
        ("catchUp", args.catch_up),
        ("startingDeadlineSeconds", args.starting_deadline),
        ("jobClass", args.job_class),
        ("jitterSeconds", args.jitter),
        ("pauseAfterFailures", args.pause_after_failures),
        ("rateLimit", args.rate_limit),
        ("maxConcurrent", args.max_concurrent),
        ("delivery", args.delivery),
        ("lateAfterSeconds", args.late_after),
    ):
        if value is not None:
            spec[key] = value
    destinations = notify_destinations(args)
    if destinations:
        spec["notify"] = {"onFailure": destinations}
    return spec


def notify_destinations(args: argparse.Namespace) -> list[dict[str, str]]:
    """`--notify-webhook`, `--notify-sns` and `--notify-email` flags as the job's notify.onFailure list."""
    flags = (("webhook", args.notify_webhook), ("snsTopicArn", args.notify_sns), ("email", args.notify_email))
    return [{kind: value} for kind, values in flags for value in values or []]


def tag_pair(text: str) -> tuple[str, str]:
    """A `--tag key:value` flag as a (key, value) pair; ValueError without the colon."""
    key, sep, value = text.partition(":")
    if not sep:
        raise ValueError(f"--tag {text!r} must be key:value")
    return key, value


def cmd_create(args: argparse.Namespace) -> None:
    if args.batch:
        _create_batch(args)
        return
    try:
        spec = spec_from_args(args)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the job: {exc}") from exc
    show(args, api_client(args).create_job(spec, args.idempotency_key), job_detail)


def read_jsonl(path: str) -> list[dict[str, Any]]:
    """The job specs of a JSON Lines file (`-`: standard input), one object a line; blank lines are skipped.
    Raises ConfigError naming the line of anything else."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    specs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            spec = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{path} line {number} is not JSON: {exc}") from exc
        if not isinstance(spec, dict):
            raise ConfigError(f"{path} line {number} is not a JSON object")
        specs.append(spec)
    if not specs:
        raise ConfigError(f"{path} holds no job")
    return specs


def _create_batch(args: argparse.Namespace) -> None:
    """`jobs create --batch FILE`: every job of the file through POST /jobs/batch; one row a job, and an API
    error (exit 1) naming how many were not created if any was refused."""
    if args.file or args.idempotency_key:
        raise ConfigError("--batch takes its jobs (and each one's idempotencyKey) from its file: not with --file")
    # The table shows each job's id and next run only: asked for so (Prefer: return=minimal); --json prints whole jobs.
    results = api_client(args).create_jobs(read_jsonl(args.batch), minimal=not args.json)

    def text(values: list[dict[str, Any]]) -> str:
        rows = []
        for number, result in enumerate(values, start=1):
            error = result.get("error") or {}
            detail = f"{error.get('code')}: {error.get('message')}" if error else None
            ids = (result.get("jobId"), result.get("nextRunAt"))
            rows.append((number, result["status"], *ids, error.get("field"), detail))
        return table(rows, ("#", "STATUS", "JOB ID", "NEXT RUN", "FIELD", "ERROR"))

    show(args, results, text)
    refused = [r for r in results if r["status"] >= 400]
    if refused:
        worst = max(r["status"] for r in refused)
        raise ApiError(worst, "not_all_created", f"{len(refused)} of {len(results)} jobs were not created")


def cmd_edit(args: argparse.Namespace) -> None:
    try:
        changes = spec_from_args(args)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the edit: {exc}") from exc
    if not changes:
        raise ConfigError("nothing to edit: give --spec FILE or the flags of the fields to replace")
    show(args, api_client(args).edit_job(args.job_id, args.version, changes), job_detail)


def cmd_list(args: argparse.Namespace) -> None:
    client = api_client(args)
    filters = {"status": args.status, "handler": args.handler, "tags": args.tag or ()}
    if args.all:
        jobs = list(client.iter_jobs(**filters))
        show(args, {"jobs": jobs, "nextCursor": None}, lambda page: job_rows(page["jobs"]))
        return
    page = client.list_jobs(args.limit, args.cursor, **filters)

    def text(value: dict[str, Any]) -> str:
        more = f"\n(more: --cursor {value['nextCursor']})" if value.get("nextCursor") else ""
        return job_rows(value["jobs"]) + more

    show(args, page, text)


def cmd_get(args: argparse.Namespace) -> None:
    show(args, api_client(args).get_job(args.job_id), job_detail)


def cmd_pause(args: argparse.Namespace) -> None:
    show(args, api_client(args).pause_job(args.job_id, args.note), job_detail)


def cmd_resume(args: argparse.Namespace) -> None:
    show(args, api_client(args).resume_job(args.job_id, args.note), job_detail)


def cmd_cancel(args: argparse.Namespace) -> None:
    api_client(args).cancel_job(args.job_id)
    show(args, {"jobId": args.job_id, "status": "cancelled"}, lambda v: f"job {v['jobId']} cancelled")


BULK_DONE = {"pause": "paused", "resume": "resumed", "cancel": "cancelled"}


def bulk_request(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /jobs/bulk body of `jobs bulk`: ids, or a filter (`--all` for every job, so none is by accident)."""
    request: dict[str, Any] = {"action": args.bulk_action}
    chosen = {"status": args.status, "handler": args.handler, "tag": args.tag or None}
    selection = {k: v for k, v in chosen.items() if v is not None}
    if args.job_id and (selection or args.all):
        raise ConfigError("give JOBIDs or a filter (--status, --handler, --tag, --all), not both")
    if args.job_id:
        request["jobIds"] = args.job_id
    elif selection or args.all:
        request["filter"] = selection
    else:
        raise ConfigError("give JOBIDs, or a filter: --status, --handler, --tag, or --all for every job")
    optional = {"dryRun": args.dry_run or None, "limit": args.limit, "cursor": args.cursor, "note": args.note}
    request.update({k: v for k, v in optional.items() if v is not None})
    return request


def cmd_bulk(args: argparse.Namespace) -> int:
    """One dry run, or requests following nextCursor to the end, merged into one report; exit status 1 if a
    job failed."""
    request = bulk_request(args)
    report: dict[str, Any] = {"action": args.bulk_action, "dryRun": args.dry_run, "matched": 0, "jobIds": []}
    report.update({"changed": [], "unchanged": [], "failed": [], "nextCursor": None})
    for answer in api_client(args).iter_bulk_jobs(request):
        report["matched"] += answer["matched"]
        for key in ("jobIds", "changed", "unchanged", "failed"):
            report[key] += answer[key]
        report["nextCursor"] = answer.get("nextCursor")

    def text(value: dict[str, Any]) -> str:
        if value["dryRun"]:
            counted = f"{value['matched']} jobs" + (" (counted so far)" if value["nextCursor"] else "")
            lines = [f"would {args.bulk_action} {counted}"] + [f"  {job_id}" for job_id in value["jobIds"]]
            if value["matched"] > len(value["jobIds"]):
                lines.append("  ...")
            if value["nextCursor"]:
                lines.append(f"(count on: --dry-run --cursor {value['nextCursor']})")
            lines += [f"failed {f['jobId']}: {f['code']}: {f['message']}" for f in value["failed"]]
            return "\n".join(lines)
        lines = [f"{BULK_DONE[args.bulk_action]} {len(value['changed'])}"] + [f"  {j}" for j in value["changed"]]
        if value["unchanged"]:
            lines.append(f"unchanged {len(value['unchanged'])}: " + ", ".join(value["unchanged"]))
        lines += [f"failed {f['jobId']}: {f['code']}: {f['message']}" for f in value["failed"]]
        return "\n".join(lines)

    show(args, report, text)
    return EXIT_API_ERROR if report["failed"] else 0


def cmd_run(args: argparse.Namespace) -> None:
    try:
        payload = None if args.payload is None else json.loads(args.payload)
    except ValueError as exc:
        raise ConfigError(f"--payload is not JSON: {exc}") from exc
    show(args, api_client(args).run_now(args.job_id, payload), lambda e: execution_rows([e]))


def cmd_backfill(args: argparse.Namespace) -> None:
    def text(value: dict[str, Any]) -> str:
        rows = [(value["created"], value["present"], value["skipped"], value.get("firstSlot"), value.get("lastSlot"))]
        return table(rows, ("CREATED", "PRESENT", "SKIPPED", "FIRST SLOT", "LAST SLOT"))

    show(args, api_client(args).backfill(args.job_id, args.start, args.end, args.overlap), text)


def cmd_executions(args: argparse.Namespace) -> None:
    page = api_client(args).list_executions(args.job_id, args.limit, args.cursor)

    def text(value: dict[str, Any]) -> str:
        more = f"\n(more: --cursor {value['nextCursor']})" if value.get("nextCursor") else ""
        return execution_rows(value["executions"]) + more

    show(args, page, text)


def cmd_retry(args: argparse.Namespace) -> None:
    show(args, api_client(args).retry_execution(args.execution_id), lambda e: execution_rows([e]))


def cmd_dead_letters(args: argparse.Namespace) -> None:
    page = api_client(args).list_dead_letters(args.limit, args.cursor)

    def text(value: dict[str, Any]) -> str:
        more = f"\n(more: --cursor {value['nextCursor']})" if value.get("nextCursor") else ""
        return execution_rows(value["executions"]) + more

    show(args, page, text)


def cmd_redrive(args: argparse.Namespace) -> None:
    optional = {
        "jobId": args.job,
        "failedAfter": args.failed_after,
        "failedBefore": args.failed_before,
        "limit": args.limit,
        "cursor": args.cursor,
    }
    selection: dict[str, Any] = {k: v for k, v in optional.items() if v is not None}
    if args.execution_id:
        selection["executionIds"] = args.execution_id
    if args.all:
        selection["all"] = True
    report = api_client(args).redrive(selection)

    def text(value: dict[str, Any]) -> str:
        lines = [f"retried {len(value['retried'])}"]
        lines += [f"  {e['executionId']}" for e in value["retried"]]
        lines += [f"refused {r['executionId']}: {r['code']}: {r['message']}" for r in value["refused"]]
        if value.get("nextCursor"):
            lines.append(f"(more: --cursor {value['nextCursor']})")
        return "\n".join(lines)

    show(args, report, text)


def cmd_execution_get(args: argparse.Namespace) -> None:
    show(args, api_client(args).get_execution(args.execution_id), execution_detail)


def execution_detail(execution: dict[str, Any]) -> str:
    """One execution as a row, then its last checkpoint: what its next attempt resumes from."""
    checkpoint = execution.get("checkpoint")
    if not checkpoint:
        return execution_rows([execution]) + "\ncheckpoint: none"
    state = json.dumps(checkpoint["state"], ensure_ascii=False)
    return (
        execution_rows([execution])
        + f"\ncheckpoint (attempt {checkpoint['attempt']}, {checkpoint['recordedAt']}): {state}"
    )


def cmd_executions_or_retry(args: argparse.Namespace) -> None:
    """`executions JOBID` lists a job's executions; `executions retry ID` retries a failed one and
    `executions get ID` shows one with its checkpoint (no job id is `retry` or `get`: ids start with j_)."""
    if args.job_id == "retry":
        if not args.execution_id:
            raise ConfigError("give the execution to retry: duetime executions retry EXECUTIONID")
        cmd_retry(args)
        return
    if args.job_id == "get":
        if not args.execution_id:
            raise ConfigError("give the execution to show: duetime executions get EXECUTIONID")
        cmd_execution_get(args)
        return
    if args.execution_id:
        raise ConfigError(f"unexpected argument {args.execution_id!r}")
    cmd_executions(args)


def calendar_rows(calendars: Sequence[dict[str, Any]]) -> str:
    rows = [(c["name"], len(c["dates"]), c["updatedAt"], " ".join(c["dates"])) for c in calendars]
    return table(rows, ("NAME", "ENTRIES", "UPDATED", "DATES"))


def cmd_calendars_list(args: argparse.Namespace) -> None:
    show(args, {"calendars": api_client(args).list_calendars()}, lambda v: calendar_rows(v["calendars"]))


def cmd_calendars_get(args: argparse.Namespace) -> None:
    show(args, api_client(args).get_calendar(args.name), lambda c: calendar_rows([c]))


def cmd_calendars_put(args: argparse.Namespace) -> None:
    dates = list(args.date or [])
    if args.file:
        try:
            dates += [line.strip() for line in Path(args.file).read_text().splitlines() if line.strip()]
        except OSError as exc:
            raise ConfigError(f"cannot read the dates: {exc}") from exc
    show(args, api_client(args).put_calendar(args.name, dates), lambda c: calendar_rows([c]))


def cmd_calendars_delete(args: argparse.Namespace) -> None:
    api_client(args).delete_calendar(args.name)
    show(args, {"name": args.name, "deleted": True}, lambda v: f"calendar {v['name']} deleted")


def _spec_flags(parser: argparse.ArgumentParser) -> None:
    """The job spec's flags, as `jobs create` and `jobs edit` take them."""
    parser.add_argument("--name")
    parser.add_argument("--handler", help="a registered handler name, or lambda:/ecs: kinds")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--cron", help="a cron expression: 5 fields, or 6 with seconds first (*/5 * * * * *)")
    when.add_argument("--at", help="one run at this ISO 8601 time")
    when.add_argument("--every", help="an interval of elapsed time: 30s, 90m, 1h30m, 2d or rate(90 minutes) (from 1 s)")
    parser.add_argument(
        "--start-at", dest="start_at", help="an interval's anchor (default: now); a cron's first run is not before it"
    )
    parser.add_argument(
        "--dst-gap",
        dest="dst_gap",
        choices=("shift", "skip"),
        help="a cron time the clock skips: run at its end, or not",
    )
    parser.add_argument(
        "--dst-fold", dest="dst_fold", choices=("first", "last", "both"), help="a cron time the clock shows twice"
    )
    parser.add_argument("--end-at", dest="end_at", help="no run after this ISO 8601 time (the job then completes)")
    parser.add_argument("--max-runs", dest="max_runs", type=int, help="at most this many runs (then completed)")
    parser.add_argument("--jitter", type=int, help="jitterSeconds: spread each run up to this many seconds late")
    parser.add_argument(
        "--pause-after-failures", dest="pause_after_failures", type=int, help="pause after N failed runs in a row"
    )
    parser.add_argument("--tag", action="append", help="a tag key:value (repeatable)")
    parser.add_argument(
        "--exclude",
        action="append",
        help="a date YYYY-MM-DD, range YYYY-MM-DD/YYYY-MM-DD or calendar:NAME to skip (repeatable)",
    )
    parser.add_argument("--tz", help="the schedule's IANA time zone (default UTC)")
    parser.add_argument("--payload", help="a JSON object handed to the handler")
    parser.add_argument("--timeout", type=int, help="timeoutSeconds")
    parser.add_argument("--max-attempts", type=int)
    parser.add_argument("--base-delay", type=float, help="retry baseDelaySeconds")
    parser.add_argument("--max-delay", type=float, help="retry maxDelaySeconds")
    parser.add_argument("--overlap", choices=("allow", "forbid", "replace"))
    parser.add_argument("--catch-up", choices=("latest", "all", "none"))
    parser.add_argument("--starting-deadline", type=int, help="startingDeadlineSeconds")
    parser.add_argument("--job-class")
    parser.add_argument("--rate-limit", dest="rate_limit", help="rateLimit: the name of one of your limits")
    parser.add_argument(
        "--late-after",
        dest="late_after",
        type=int,
        help="lateAfterSeconds: a run not started this long after it is due is late (event, notice, health)",
    )
    parser.add_argument(
        "--delivery",
        choices=("at-least-once", "at-most-once"),
        help="at-most-once: never start a slot twice (no retries; a lost run's result is unknown)",
    )
    parser.add_argument(
        "--max-concurrent", dest="max_concurrent", type=int, help="maxConcurrent: at most N runs of the job at once"
    )
    # Where the owner hears of failures (notify.onFailure; given, they replace the whole list on edit).
    parser.add_argument("--notify-webhook", action="append", metavar="URL", help="POST failures here (repeatable)")
    parser.add_argument(
        "--notify-sns", action="append", metavar="ARN", help="publish failures to your duetime-notify-* SNS topic"
    )
    parser.add_argument("--notify-email", action="append", metavar="ADDRESS", help="mail failures here (repeatable)")


def add_client_commands(sub: Any) -> None:
    """Register `jobs ...`, `executions` and `calendars ...` on the `duetime` command's subparsers."""
    jobs = sub.add_parser("jobs", help="create, list, inspect and control jobs over the API")
    actions = jobs.add_subparsers(dest="action", required=True)

    create = actions.add_parser("create", help="submit a job")
    create.add_argument("--file", help="a JSON job spec (POST /jobs body); flags override its fields")
    _spec_flags(create)
    create.add_argument("--idempotency-key", help="resending with the same key returns the first job")
    create.add_argument(
        "--batch",
        metavar="FILE",
        help="a JSON Lines file of jobs (POST /jobs bodies, each with an optional idempotencyKey; - for stdin), "
        "sent through POST /jobs/batch 500 a request",
    )
    connection_flags(create)
    create.set_defaults(fn=reporting_errors(cmd_create))

    edit = actions.add_parser(
        "edit", help="edit a job in place under the version read (`jobs get`); flags replace those fields whole"
    )
    edit.add_argument("job_id", metavar="JOBID")
    edit.add_argument("--version", type=int, required=True, help="the job's version as read: a lost update is 409")
    edit.add_argument("--spec", "--file", dest="file", help="a JSON object of the spec fields to replace")
    _spec_flags(edit)
    connection_flags(edit)
    edit.set_defaults(fn=reporting_errors(cmd_edit))

    listing = actions.add_parser("list", help="list your jobs, newest first")
    listing.add_argument("--limit", type=int)
    listing.add_argument("--cursor")
    listing.add_argument("--all", action="store_true", help="follow nextCursor to the end")
    listing.add_argument("--status", choices=("active", "paused", "cancelled", "completed"))
    listing.add_argument("--handler", help="only jobs of this handler")
    listing.add_argument("--tag", action="append", help="only jobs with this tag key:value (repeatable)")
    connection_flags(listing)
    listing.set_defaults(fn=reporting_errors(cmd_list))

    for name, fn, text in (
        ("get", cmd_get, "show a job"),
        ("pause", cmd_pause, "pause a job: no new runs start"),
        ("resume", cmd_resume, "resume a paused job"),
        ("cancel", cmd_cancel, "cancel a job and its waiting executions"),
        ("run", cmd_run, "run a job now, outside its schedule"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("job_id", metavar="JOBID")
        if name in ("pause", "resume"):
            action.add_argument("--note", help="why, stored on the job and shown by `jobs get`")
        if name == "run":
            action.add_argument("--payload", help="a JSON object used instead of the job's payload, for this run")
        connection_flags(action)
        action.set_defaults(fn=reporting_errors(fn))

    bulk = actions.add_parser(
        "bulk", help="pause, resume or cancel many jobs, by ids or by filter (following nextCursor to the end)"
    )
    bulk.add_argument("bulk_action", choices=tuple(BULK_DONE), metavar="pause|resume|cancel")
    bulk.add_argument("job_id", metavar="JOBID", nargs="*", help="jobs to change (at most 100)")
    bulk.add_argument("--status", choices=("active", "paused", "cancelled", "completed"), help="only jobs in it")
    bulk.add_argument("--handler", help="only jobs of this handler")
    bulk.add_argument("--tag", action="append", help="only jobs with this tag key:value (repeatable)")
    bulk.add_argument("--all", action="store_true", help="every job (a filter that matches all)")
    bulk.add_argument("--dry-run", action="store_true", help="change nothing: the count and the first ids")
    bulk.add_argument("--limit", type=int, help="jobs one request looks at (1..100)")
    bulk.add_argument("--cursor", help="go on from a nextCursor")
    bulk.add_argument("--note", help="why, stored on each job paused or resumed")
    connection_flags(bulk)
    bulk.set_defaults(fn=reporting_errors(cmd_bulk))

    backfill = actions.add_parser("backfill", help="run every slot of a past range once (kind backfill)")
    backfill.add_argument("job_id", metavar="JOBID")
    backfill.add_argument("--from", dest="start", required=True, help="the range's start, ISO 8601 (included)")
    backfill.add_argument("--to", dest="end", required=True, help="the range's end, ISO 8601, not after now (excluded)")
    backfill.add_argument(
        "--overlap", choices=("allow", "forbid"), help="forbid (default): one run at a time; allow: run together"
    )
    connection_flags(backfill)
    backfill.set_defaults(fn=reporting_errors(cmd_backfill))

    executions = sub.add_parser(
        "executions",
        help="a job's executions, newest scheduled first; `executions retry ID` retries a failed one; "
        "`executions get ID` shows one with its checkpoint",
    )
    executions.add_argument("job_id", metavar="JOBID", help="a job id, or `retry` or `get` followed by an execution id")
    executions.add_argument("execution_id", metavar="EXECUTIONID", nargs="?", help="after retry or get: the execution")
    executions.add_argument("--limit", type=int)
    executions.add_argument("--cursor")
    connection_flags(executions)
    executions.set_defaults(fn=reporting_errors(cmd_executions_or_retry))

    dead = sub.add_parser("dead-letters", help="your executions that failed for good, newest first; `redrive` them")
    dead.add_argument("--limit", type=int)
    dead.add_argument("--cursor")
    connection_flags(dead)
    dead.set_defaults(fn=reporting_errors(cmd_dead_letters))
    dead_actions = dead.add_subparsers(dest="action")
    redrive = dead_actions.add_parser("redrive", help="retry failed executions by id, or those matching a filter")
    redrive.add_argument("execution_id", metavar="EXECUTIONID", nargs="*", help="executions to retry (at most 100)")
    redrive.add_argument("--job", help="retry the dead letters of this job")
    redrive.add_argument("--failed-after", dest="failed_after", help="retry those that failed at or after this time")
    redrive.add_argument("--failed-before", dest="failed_before", help="retry those that failed before this time")
    redrive.add_argument("--all", action="store_true", help="retry every dead letter (a page of --limit at a time)")
    redrive.add_argument("--limit", type=int, help="how many dead letters one request looks at (1..100)")
    redrive.add_argument("--cursor", help="go on from the nextCursor of the last redrive")
    connection_flags(redrive)
    redrive.set_defaults(fn=reporting_errors(cmd_redrive))

    calendars = sub.add_parser("calendars", help="named calendars of dates that jobs exclude (calendar:NAME)")
    calendar_actions = calendars.add_subparsers(dest="action", required=True)
    listed = calendar_actions.add_parser("list", help="your calendars")
    connection_flags(listed)
    listed.set_defaults(fn=reporting_errors(cmd_calendars_list))
    for name, fn, text in (
        ("get", cmd_calendars_get, "show a calendar"),
        ("put", cmd_calendars_put, "create or replace a calendar (jobs see it from their next planned slot)"),
        ("delete", cmd_calendars_delete, "delete a calendar no job excludes"),
    ):
        action = calendar_actions.add_parser(name, help=text)
        action.add_argument("name", metavar="NAME")
        if name == "put":
            action.add_argument("--date", action="append", help="YYYY-MM-DD or YYYY-MM-DD/YYYY-MM-DD (repeatable)")
            action.add_argument("--file", help="a file of dates and ranges, one a line")
        connection_flags(action)
        action.set_defaults(fn=reporting_errors(fn))

    add_limit_commands(sub)
