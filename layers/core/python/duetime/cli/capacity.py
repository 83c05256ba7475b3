"""`duetime capacity`: the capacity model's figures (domain/capacity.py) for a rate, as text or JSON.

The command parses its arguments into the model's `Inputs`, asks the model for an `Estimate` and prints it;
`--scenarios` prints the plans docs/performance.md records. The arithmetic is the model's alone.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from duetime.definitions import (
    DEFAULT_API_RESERVED_CONCURRENCY,
    DEFAULT_WORKER_MAX_CONCURRENCY,
    JOB_CLASSES,
    LAMBDA_UNRESERVED_CONCURRENCY,
    OPEN_INDEX_SPREAD,
    PRELOAD_DISPATCH_THREADS,
    PRELOAD_THREADS,
    RUNS_PER_MESSAGE,
    Settings,
    parse_class_queues,
)
from duetime.domain.capacity import (
    API_TYPES,
    BILLINGS,
    CALL_OVERHEAD_SECONDS,
    CRON_RUN,
    DEFAULT_UTILISATION,
    EARLY_HOLD_SECONDS,
    LAMBDA_ACCOUNT_CONCURRENCY,
    LAMBDA_SQS_MAX_CONCURRENT_BATCHES,
    ON_DEMAND,
    PARTITION_WCU_PER_SECOND,
    PRICES_AS_OF,
    PROFILES,
    SQS_BATCH,
    SQS_IN_FLIGHT_PER_QUEUE,
    TABLE_ON_DEMAND_WRU_PER_SECOND,
    CallProfile,
    Estimate,
    Inputs,
    api_requests_per_month,
    call_profile,
    estimate,
    job_index_units,
    parse_class,
    parse_mix,
    rate_of,
    scenarios,
    schedule_cost,
)
from duetime.domain.costs import API_MEMORY_MB
from duetime.domain.errors import InvalidSchedule
from duetime.domain.job_index import BY_JOB_LEASE_SECONDS

# Where each per-execution figure comes from: the test that pins it on the real adapters against moto.
COUNTS_SOURCE = "tests/integration/test_call_counts.py"


def per_execution_lines(profile: CallProfile) -> list[str]:
    """The measured counts every figure below is a multiple of."""
    return [
        f"  per execution ({profile.name}; pinned by {COUNTS_SOURCE}, bench/calls.py measures them):",
        f"    executions table   {profile.executions_writes:g} writes, {profile.executions_wcu:g} WCU on its "
        "hour#shard (create; claim; finish: a one-off's create and finish are 2 each, inside its job's transactions)",
        f"    indexes            {profile.index_wcu:g} WCU, {profile.open_index_wcu:g} of them on the `open` index "
        "(byJob only for a run that is not a plain slot's, at its write: a plain run is found by its slot's key;"
        f" openByJob only for a run claimed late or with a lease over {BY_JOB_LEASE_SECONDS} s, that"
        " heartbeats or repeats within a minute, and `open` only for a run the sweep finds open once overdue: an entry"
        " and its removal each)",
        f"    jobs table         {profile.jobs_wcu:.4g} WCU; reads {profile.read_units:g} RCU "
        f"({profile.partition_read_units:g} on the hour#shard)",
        f"    SQS                {profile.run_sqs_requests:.2f} requests: "
        f"{profile.sqs_requests:.2f} to send, receive and delete ({SQS_BATCH} messages a request, "
        f"{runs_text(profile.runs_per_message)} a message), {profile.claim_visibility_changes:.2f} the Lambda "
        "worker's visibility change at claim (one a message)",
        api_line(profile),
    ]


def api_line(profile: CallProfile) -> str:
    """The API requests an execution makes and what they cost the API function behind API Gateway."""
    if not profile.api_requests:
        return "    API Gateway        0 requests (the pre-loader plans the run: nothing goes through the API)"
    return (
        f"    API Gateway        {profile.api_requests:g} request(s), each an invocation of the API function "
        f"({API_MEMORY_MB} MB): {profile.api_calls:.3g} AWS calls and "
        f"{profile.api_cpu_seconds * 1000:.3g} ms of CPU on a core, {profile.api_function_seconds * 1000:.3g} ms billed"
    )


def api_text(result: Estimate) -> str:
    """The API type, and for a profile that submits through it, the month's requests and their average price."""
    i = result.inputs
    requests = api_requests_per_month(i)
    if not requests:
        return f"{i.api.upper()} API"
    price = result.cost_per_million["apiGateway"] / call_profile(i).api_requests  # the estimate's own price
    volume = f"{requests / 1e9:.3g} billion" if requests >= 1e9 else f"{requests / 1e6:.3g} million"
    return f"{i.api.upper()} API: {volume} requests a month, ${price:.2f} a million on average by AWS's volume tiers"


def runs_text(runs: float) -> str:
    return f"{runs:.3g} run" + ("" if runs == 1 else "s")


def billing_text(inputs: Inputs) -> str:
    if inputs.billing == ON_DEMAND:
        return "on demand"
    return f"provisioned, auto-scaled to {inputs.utilisation:.0%} utilisation"


def render(result: Estimate) -> str:
    i = result.inputs
    name = result.profile_name or i.profile
    pre = result.preload_per_shard
    runs_per_message = call_profile(i).runs_per_message
    lines = [
        f"duetime capacity: {i.rate:,.0f} executions/s ({name}), {i.shards} shards, lease {i.lease_seconds} s, "
        f"jobs {i.avg_seconds:g} s on average",
        *per_execution_lines(call_profile(i)),
        f"  heartbeats per execution        {result.heartbeats_per_execution} "
        "(one write and one visibility change each)",
        f"  writes per hour#shard partition {result.partition_wcu_per_second:,.1f} WCU/s "
        f"({result.partition_wcu_share:.0%} of {PARTITION_WCU_PER_SECOND:,}) = rate / shards x WCU on the hour#shard",
        f"  writes per shard, open index    {result.open_index_wcu_per_second:,.1f} WCU/s; per `open` key "
        f"{result.open_index_wcu_per_key:,.1f} WCU/s over {result.open_index_keys} keys = rate x open-index WCU / keys",
        f"  executions table / its indexes  {result.table_wru_per_second:,.0f} / {result.index_wru_per_second:,.0f} "
        f"WRU/s (default quota {TABLE_ON_DEMAND_WRU_PER_SECOND:,} each)",
        f"  in flight per queue             {result.in_flight:,.0f} messages ({result.in_flight_share:.1%} of "
        f"{SQS_IN_FLIGHT_PER_QUEUE:,}; Little's law, {i.avg_seconds:g} s run + {EARLY_HOLD_SECONDS:g} s early hold "
        f"+ {CALL_OVERHEAD_SECONDS:g} s calls, over {runs_text(runs_per_message)} a message)",
        f"  worker slots                    {result.worker_slots:,.0f} = {result.lambda_batches:,.0f} Lambda batches "
        f"of {SQS_BATCH} messages ({SQS_BATCH * runs_per_message:.3g} runs at once) or {result.ecs_tasks:,} ECS "
        f"tasks at concurrency {i.worker_concurrency} (~{result.worker_vcpus:g} vCPU of client work)",
        f"  smallest shard count that fits {result.smallest_shards}",
        f"  pre-loader per cycle           {result.preload_calls_per_cycle:,.0f} calls, "
        f"{result.preload_seconds_per_shard:,.1f} s per shard, {result.preload_cycle_seconds:,.1f} s per "
        f"invocation ({i.preload_shard_groups} group(s), {i.preload_threads} shards x "
        f"{i.preload_dispatch_threads} calls at once), "
        f"{result.preload_lambda_gb_seconds:,.1f} GB-s",
    ]
    lines.append(
        f"  pre-loader per shard and cycle  {pre.due:,.0f} due: {pre.send_message_batches:,.0f} "
        f"SendMessageBatch ({pre.sends_per_second:,.0f}/s; {SQS_BATCH} messages of {RUNS_PER_MESSAGE} runs), "
        f"{pre.job_reads:,.0f} BatchGetItem, "
        f"{pre.follower_writes:,.0f} next-slot PutItem ({pre.follower_wcu_per_second:,.0f} WCU/s), "
        f"{pre.control_writes:g} control writes, {pre.queries:g} queries (bench/preloader.py)"
    )
    for plan in result.classes:
        lines.append(
            f"  class {plan.name:<8} {plan.rate:,.0f}/s x {plan.held_seconds:g} s held = "
            f"{plan.slots:,.0f} runs at once = {plan.lambda_batches:,.0f} Lambda batches "
            f"(ceiling {LAMBDA_SQS_MAX_CONCURRENT_BATCHES:,} a function): {plan.fix}"
        )
    herd = result.herd
    if herd:
        lines += [
            f"  herd: {herd.runs:,} runs on one instant, {herd.per_shard:,.0f} per shard, due over "
            f"{herd.spread_seconds} s ({herd.due_per_second:,.0f}/s)",
            f"    pre-loader      {herd.preload_calls:,.0f} calls in {herd.preload_send_seconds:,.1f} s "
            f"({herd.send_message_batches_per_second:,.0f} SendMessageBatch/s; {herd.preload_seconds_ahead} s "
            f"available ahead), next-slot writes {herd.follower_wcu_per_partition_per_second:,.0f} WCU/s "
            "a partition",
            f"    at the instant  drained at {herd.drain_per_second:,.0f}/s in {herd.drain_seconds:,.1f} s, "
            f"{herd.partition_wcu_per_second:,.0f} WCU/s a partition (claim + finish; unbounded demand "
            f"{herd.unthrottled_partition_wcu_per_second:,.0f}), {herd.in_flight_runs:,.0f} runs in flight "
            f"({herd.in_flight:,.0f} messages), backlog {herd.backlog:,.0f}",
            f"    last start      ~{herd.last_start_late_seconds:,.1f} s late; jitterSeconds that keeps it on "
            f"time: {herd.jitter_needed_seconds:,}",
        ]
    reserved = result.reserved_concurrency
    lines.append(
        f"  reserved Lambda concurrency     {reserved.total:,} (API {reserved.api}, workers "
        f"{reserved.workers}, pre-loader {reserved.preloader}, DLQ notifier {reserved.dlq_notifier}): "
        f"the account's limit must be {reserved.account_needed:,} or more to deploy "
        f"({LAMBDA_UNRESERVED_CONCURRENCY} stay unreserved)"
    )
    lines += [
        f"  cost per million executions    ${result.cost_per_million['total']:.2f} "
        + "("
        + ", ".join(f"{k} ${v:.2f}" for k, v in result.cost_per_million.items() if k != "total")
        + f"; us-east-1 prices as of {PRICES_AS_OF})",
        f"  the scheduler's own            ${result.scheduler_cost_per_million:.2f} per million (all but the jobs' "
        f"run time; DynamoDB {billing_text(i)}, API Gateway {api_text(result)})",
        f"  fits                            {'yes' if result.fits else 'no'}",
    ]
    if result.schedule is not None:
        monthly = result.schedule
        lines.insert(
            len(lines) - 1,
            f"  {monthly.jobs:,} job(s) every {monthly.every:<12}{monthly.runs_per_month:,} runs a month "
            f"({monthly.runs_per_month_per_job:,} each): the scheduler's own ${monthly.scheduler_cost_per_month:,.2f}"
            f" a month, ${monthly.total_cost_per_month:,.2f} with the runs' Lambda time "
            f"(${monthly.total_cost_per_month_per_job:,.2f} a job)",
        )
    if result.owner_metrics is not None:
        owners = result.owner_metrics
        lines.insert(
            len(lines) - 1,
            f"  lateness metrics by owner       {owners.metrics} metrics (RunsOnTime and RunsLate for "
            f"{owners.named_owners} named owner(s) and `other`) and {owners.alarms} alarm(s): "
            f"${owners.cost_per_month:,.2f} a month; their EMF logs ${owners.logs_cost_per_million:.2f} per million "
            f"executions ({owners.log_bytes_per_counted_run} bytes a budgeted run; CloudWatch us-east-1 prices as "
            f"of {owners.prices_as_of})",
        )
    lines += [f"  ! {w}" for w in result.warnings]
    return "\n".join(lines)


def render_scenarios() -> str:
    """Markdown: each scenario's inputs and the tool's output for them."""
    parts = [
        "<!-- generated by `duetime capacity --scenarios`; do not edit by hand -->",
        "",
        "Each plan is sized by the tool (shards, `open` index keys and pre-loader shard groups raised until they",
        "fit; the worker classes say where the runs go). Each line is a multiple of the per-execution counts",
        f"printed first, which {COUNTS_SOURCE} pins.",
    ]
    plans = [(title, estimate(inputs)) for title, inputs in scenarios()]
    parts += [
        "",
        "| plan | shards / `open` keys / pre-loader groups | hour#shard WCU/s | workers | herd: last start late | "
        "$ per million | fits |",
        "| --- | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for title, result in plans:
        i, herd = result.inputs, result.herd
        workers = "; ".join(f"{c.name}: {c.fix}" for c in result.classes)
        late = f"{herd.last_start_late_seconds:,.0f} s" if herd else "-"
        fits = "yes" if result.fits else f"no: {len(result.warnings)} warnings"
        parts.append(
            f"| {title} | {i.shards} / {result.open_index_keys} / {i.preload_shard_groups} | "
            f"{result.partition_wcu_per_second:,.0f} ({result.partition_wcu_share:.0%}) | {workers} | "
            f"{late} | {result.cost_per_million['total']:.2f} | {fits} |"
        )
    for title, result in plans:
        parts += ["", f"#### {title}", "", "```", render(result), "```"]
    return "\n".join(parts)


def cmd_capacity(args: argparse.Namespace) -> int:
    if args.scenarios:
        print(render_scenarios())
        return 0
    if (args.rate is None) == (args.every is None):
        print("duetime capacity: give --rate, or --every (with --jobs) for repeating jobs (or --scenarios)")
        return 2
    try:
        rate = args.rate if args.every is None else rate_of(args.every, args.jobs)
    except InvalidSchedule as exc:
        print(f"duetime capacity: --every: {exc.message}")
        return 2
    except ValueError as exc:
        print(f"duetime capacity: --jobs: {exc}")
        return 2
    try:
        inputs = Inputs(
            rate=rate,
            shards=args.shards,
            lease_seconds=args.lease,
            avg_seconds=args.avg_seconds,
            # Repeating jobs are cron runs (a slot created by the pre-loader) unless told otherwise.
            profile=args.profile or ("one-off" if args.every is None else CRON_RUN.name),
            worker_concurrency=args.worker_concurrency,
            preload_threads=args.preload_threads,
            preload_dispatch_threads=args.preload_dispatch_threads,
            preload_shard_groups=args.preload_shard_groups,
            mix=parse_mix(args.mix) if args.mix else (),
            open_index_keys=args.open_index_keys,
            classes=tuple(parse_class(text) for text in args.job_class),
            herd=args.herd,
            jitter_seconds=args.jitter_seconds,
            preload_window_seconds=args.preload_window,
            lambda_account_concurrency=args.lambda_account_concurrency,
            api_reserved_concurrency=args.api_reserved_concurrency,
            worker_max_concurrency=args.worker_max_concurrency,
            class_queues=tuple(
                parse_class_queues(
                    args.class_queues, "=", {*JOB_CLASSES, *(parse_class(text).name for text in args.job_class)}
                ).items()
            ),
            billing=args.billing,
            utilisation=args.utilisation,
            api=args.api,
            late_budgets=args.late_budgets,
            metric_owners=args.metric_owners,
            extra_index_wcu=0.0 if args.every is None else job_index_units(args.every),
        )
        result = estimate(inputs)
    except ValueError as exc:
        print(f"duetime capacity: {exc}")
        return 2
    if args.every is not None:
        result.schedule = schedule_cost(result, args.every, args.jobs)
    print(json.dumps(result.to_dict(), indent=2) if args.json else render(result))
    return 0 if result.fits else 1


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register `duetime capacity` on the CLI's subparsers."""
    capacity = sub.add_parser("capacity", help="what a peak rate needs on AWS: partitions, queues, workers, cost")
    capacity.add_argument("--rate", type=float, help="executions per second at peak")
    capacity.add_argument(
        "--every",
        metavar="SPAN",
        help="instead of --rate: jobs repeating every SPAN (1s, 30s, 5m, rate(1 hour)); their cost a month",
    )
    capacity.add_argument("--jobs", type=int, default=1, help="with --every: how many such jobs (default 1)")
    capacity.add_argument("--shards", type=int, default=32)
    capacity.add_argument("--lease", type=int, default=30, help="lease seconds")
    capacity.add_argument("--avg-seconds", type=float, default=2.0, help="average run time of a job")
    capacity.add_argument(
        "--profile", choices=sorted(PROFILES), default=None, help="one-off by default; cron with --every"
    )
    capacity.add_argument("--worker-concurrency", type=int, default=8)
    capacity.add_argument("--preload-threads", type=int, default=PRELOAD_THREADS, help="shards at once")
    capacity.add_argument(
        "--preload-dispatch-threads", type=int, default=PRELOAD_DISPATCH_THREADS, help="calls at once per shard"
    )
    capacity.add_argument("--preload-shard-groups", type=int, default=1, help="pre-loader invocations per tick")
    capacity.add_argument("--json", action="store_true")
    capacity.add_argument(
        "--mix", help="kinds of execution and their shares, e.g. oneoff=0.8,cron=0.2 (over --profile)"
    )
    capacity.add_argument(
        "--class-queues",
        default="",
        metavar="CLASS=N[,CLASS=N]",
        help="due queues per class as deployed (-c classQueues): the plan checks each queue's share",
    )
    capacity.add_argument(
        "--open-index-keys",
        type=int,
        default=0,
        metavar="N",
        help=f"keys the `open` index spreads over (0: {OPEN_INDEX_SPREAD} a shard, as deployed)",
    )
    capacity.add_argument(
        "--job-class",
        action="append",
        default=[],
        metavar="NAME:SHARE:AVG_SECONDS[:lambda|ecs]",
        help="a job class's share of the rate and its average run (repeatable; default: all in `default`)",
    )
    capacity.add_argument("--herd", type=int, default=0, metavar="N", help="runs on one cron instant, e.g. 1000000")
    capacity.add_argument("--jitter-seconds", type=int, default=0, help="the herd jobs' jitterSeconds")
    capacity.add_argument(
        "--late-budgets",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="the share of runs whose jobs have a lateAfterSeconds (a counter write a run; 1%% of them late)",
    )
    capacity.add_argument(
        "--metric-owners",
        type=int,
        default=0,
        metavar="N",
        help="owners the stack names in its lateness metrics (-c metricOwners): 2 metrics and an alarm each",
    )
    capacity.add_argument(
        "--preload-window",
        type=int,
        default=Settings().preload_window_seconds,
        metavar="SECONDS",
        help="how far ahead the pre-loader sends (CDK context preloadWindowSeconds, at most 900)",
    )
    capacity.add_argument(
        "--lambda-account-concurrency", type=int, default=LAMBDA_ACCOUNT_CONCURRENCY, help="the account's quota"
    )
    capacity.add_argument(
        "--api-reserved-concurrency",
        type=int,
        default=DEFAULT_API_RESERVED_CONCURRENCY,
        help="as deployed (-c apiReservedConcurrency)",
    )
    capacity.add_argument(
        "--worker-max-concurrency",
        type=int,
        default=DEFAULT_WORKER_MAX_CONCURRENCY,
        help="as deployed (-c workerMaxConcurrency): reserved by each Lambda worker function",
    )
    capacity.add_argument(
        "--billing",
        choices=BILLINGS,
        default=ON_DEMAND,
        help="the tables' billing (CDK context billing): on demand, or provisioned with auto-scaling",
    )
    capacity.add_argument(
        "--utilisation",
        type=float,
        default=DEFAULT_UTILISATION,
        help="provisioned: the auto-scaling target (CDK context provisionedTargetUtilization / 100)",
    )
    capacity.add_argument(
        "--api", choices=API_TYPES, default="rest", help="the API Gateway type one-off submissions go through"
    )
    capacity.add_argument(
        "--scenarios", action="store_true", help="print the recorded plans (docs/performance.md) as markdown"
    )
    capacity.set_defaults(fn=cmd_capacity)
    parser: argparse.ArgumentParser = capacity
    return parser
