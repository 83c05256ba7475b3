"""`python -m bench` (`make bench`): run every benchmark, print the figures, write bench/results.json.

`--quick` runs each part briefly (for developing the benchmarks); `--only NAME...` runs some parts; a part
not run keeps its figures from the last run in results.json (`parts` says when each was measured).
`side` is issue 13's side-by-side run (duetime on SQLite, on moto, Celery + Redis); `goals` is issue 32's
(duetime on SQLite against Celery + Redis, `--rounds` times). `--smoke` runs `side` alone (or the part
`--only` names) for a few seconds a system (the test that keeps the harness from rotting).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import calls, ceiling, cpu, failover, goals, hotpath, lateness, loadcheck, pacing, report, sidebyside

RESULTS = Path(__file__).with_name("results.json")
PARTS = ("calls", "ceiling", "steady", "burst", "failover", "profile", "side", "goals", "pacing", "load", "cpu")
WORKERS = 64  # worker threads per job class in the measured `duetime local` (its --workers)


def plan(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "steady": [(10, 8), (25, 8)],
            "defaultWorkers": (25, 6),
            "window": (25, 8, 30),
            "submitAndRun": (25, 6),
            "burst": 150,
            "ceiling": 150,
            "failoverLease": 6,
            "heartbeatJob": (6, 6),
            "profile": 40,
            "pacing": 200,
            "cpu": 400,
        }
    return {
        "steady": [(10, 20), (25, 30), (50, 10)],
        "defaultWorkers": (25, 10),
        "window": (25, 30, 30),
        "submitAndRun": (25, 15),
        "burst": 500,
        "ceiling": 300,
        "failoverLease": 30,
        "heartbeatJob": (30, 30),
        "profile": 120,
        "pacing": 1000,
        "cpu": 4000,
    }


def side_by_side_plan(options: argparse.Namespace, side: sidebyside.Plan) -> sidebyside.Plan:
    """`side` with the sizes the command line gives."""
    changes = {
        "rates": options.rates,
        "seconds": options.seconds,
        "burst": options.burst,
        "stored": options.stored,
        "workers": options.workers,
        "api_processes": options.api_processes,
        "worker_processes": options.worker_processes,
        "submitters": options.submitters,
    }
    return replace(side, **{name: value for name, value in changes.items() if value is not None})


def goals_plan(options: argparse.Namespace) -> goals.Plan:
    """Issue 32's plan (its smoke run's with --smoke) with the sizes the command line gives."""
    base = goals.Plan.smoke() if options.smoke else goals.Plan()
    changes = {
        "rounds": options.rounds,
        "intake": options.intake,
        "sustained_rate": options.sustained_rate,
        "sustained_seconds": options.sustained_seconds,
    }
    chosen = {name: value for name, value in changes.items() if value is not None}
    return replace(base, side=side_by_side_plan(options, base.side), **chosen)


# Each part's keys in results.json.
PART_KEYS = {
    "calls": ("calls",),
    "ceiling": ("ceiling",),
    "steady": ("steady",),
    "burst": ("burst",),
    "failover": ("failover",),
    "profile": ("profile",),
    "side": ("sideBySide",),
    "goals": ("goals",),
    "pacing": ("pacing",),
    "load": ("loadCheck",),
    "cpu": ("cpu",),
}


def carry_over(results: dict[str, Any], output: Path, ran: list[str]) -> dict[str, Any]:
    """`results` with the figures of the parts not run now taken from the previous file, and when each
    part was measured (`parts`), so `--only` refreshes some figures without losing the others."""
    previous: dict[str, Any] = {}
    if output.exists():
        try:
            previous = json.loads(output.read_text())
        except ValueError:
            previous = {}
    measured = dict(previous.get("parts") or {})
    for part, keys in PART_KEYS.items():
        if part in ran:
            measured[part] = results["startedAt"]
            continue
        for key in keys:
            if key in previous and key not in results:
                results[key] = previous[key]
                measured.setdefault(part, previous.get("startedAt"))
    results["parts"] = measured
    return results


def timed(name: str, fn: Callable[[], Any], timings: dict[str, float]) -> Any:
    print(f"... {name}", flush=True)
    started = time.monotonic()
    result = fn()
    timings[name] = round(time.monotonic() - started, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    args.add_argument("--quick", action="store_true", help="short runs, for developing the benchmarks")
    args.add_argument("--only", nargs="*", choices=PARTS, help="the parts to run (default: all; --smoke: side)")
    args.add_argument("--output", help=f"where the figures go (default {RESULTS}; a --smoke run writes none)")
    args.add_argument("--smoke", action="store_true", help="side (or --only goals) alone, a few seconds a system")
    args.add_argument("--systems", nargs="*", choices=sidebyside.SYSTEMS, default=list(sidebyside.SYSTEMS))
    args.add_argument("--rates", nargs="*", type=float, help="side by side and goals: one-off rates per second")
    args.add_argument("--seconds", type=float, help="side by side and goals: seconds of each rate run")
    args.add_argument("--burst", type=int, help="side by side and goals: jobs due at one instant")
    args.add_argument("--stored", type=int, help="side by side: future executions stored for the last figures")
    args.add_argument("--workers", type=int, help="side by side: duetime local --workers")
    args.add_argument("--api-processes", type=int, help="side by side: duetime local --api-processes (SQLite)")
    args.add_argument("--worker-processes", type=int, help="side by side: duetime local --worker-processes (SQLite)")
    args.add_argument("--submitters", type=int, help="side by side: client threads, a keep-alive connection each (8)")
    args.add_argument("--rounds", type=int, help="goals: rounds of every scenario on each system (2)")
    args.add_argument("--intake", type=int, help="goals: jobs of the intake run (20,000)")
    args.add_argument("--sustained-rate", type=float, help="goals: executions a second of the sustained run (1,000)")
    args.add_argument("--sustained-seconds", type=float, help="goals: seconds of the sustained run (60)")
    options = args.parse_args(argv)
    if options.only is None:
        options.only = ["side"] if options.smoke else list(PARTS)
    settings = plan(options.quick)
    base = sidebyside.Plan.smoke() if options.smoke else sidebyside.Plan.quick() if options.quick else sidebyside.Plan()
    side_plan = side_by_side_plan(options, base)
    started = time.monotonic()
    timings: dict[str, float] = {}
    results: dict[str, Any] = {
        "startedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadAverageAtStart": [round(x, 2) for x in os.getloadavg()],
        },
        "quick": options.quick,
        "workerThreads": WORKERS,
        "submission": "service.jobs.submit_job in the benchmark's process, with its own boto3 clients",
    }
    if "calls" in options.only:
        results["calls"] = timed("calls per execution", lambda: calls.run(include_heartbeat=False), timings)
    if "ceiling" in options.only:
        count = settings["ceiling"]
        runs = [
            timed(f"backend ceiling, {t} thread(s)", lambda t=t: ceiling.measure(count, t), timings) for t in (1, 4)
        ]
        # duetime's submit path is slower than the raw calls: budget the scheduled-ahead leads from it.
        lateness.set_submit_rate(0.5 * max(r["createPerSecond"] for r in runs))
        results["ceiling"] = {
            "runs": runs,
            "runPerSecond": max(r["runPerSecond"] for r in runs),
            "fullPathPerSecond": max(r["fullPathPerSecond"] for r in runs),
            "createPerSecond": max(r["createPerSecond"] for r in runs),
        }
    if "steady" in options.only:
        runs = [
            timed(
                f"{rate}/s for {seconds} s, scheduled ahead",
                lambda r=rate, s=seconds: lateness.steady(r, s, WORKERS),
                timings,
            )
            for rate, seconds in settings["steady"]
        ]
        rate, seconds = settings["defaultWorkers"]
        default = timed(
            f"{rate}/s scheduled ahead, duetime local's default 4 worker threads",
            lambda: lateness.steady(rate, seconds, workers=4),
            timings,
        )
        default["name"] += ", 4 threads"
        rate, seconds, window = settings["window"]
        narrow = timed(
            f"{rate}/s scheduled ahead, pre-load window {window} s instead of the local 10 s",
            lambda: lateness.steady(rate, seconds, WORKERS, window=window),
            timings,
        )
        rate, seconds = settings["submitAndRun"]
        submit = timed(
            f"{rate}/s submit-and-run", lambda: lateness.steady(rate, seconds, WORKERS, ahead=False), timings
        )
        results["steady"] = [*runs, default, narrow, submit]
    if "burst" in options.only:
        count = settings["burst"]
        results["burst"] = timed(f"burst of {count}", lambda: lateness.burst(count, WORKERS), timings)
    if "failover" in options.only:
        beat: dict[str, Any] = {}
        seconds, lease = settings["heartbeatJob"]
        thread = threading.Thread(target=lambda: beat.update(calls.heartbeating_job(seconds, lease)), daemon=True)
        thread.start()  # mostly sleeping: it runs alongside failure detection to save wall time
        lease_seconds = settings["failoverLease"]
        results["failover"] = timed(
            "failure detection (and a heartbeating job alongside)",
            lambda: failover.measure(3, lease_seconds=lease_seconds, job_seconds=lease_seconds * 3),
            timings,
        )
        thread.join(timeout=seconds + 60)
        results.setdefault("calls", {"scenarios": []})["scenarios"].append(beat)
    if "profile" in options.only:
        results["profile"] = timed("hot path profile", lambda: hotpath.run(settings["profile"]), timings)
    if "side" in options.only:
        side = timed("side by side", lambda: sidebyside.run(side_plan, options.systems), timings)
        side["targets"] = report.side_targets(side)
        results["sideBySide"] = side
    if "goals" in options.only:
        found = timed("issue 32 goals", lambda: goals.run(goals_plan(options), options.systems), timings)
        found["targets"] = report.goal_targets(found)
        results["goals"] = found
    if "pacing" in options.only:
        count = settings["pacing"]
        results["pacing"] = timed(f"{count} runs paced by a 50/s limit", lambda: pacing.measure(count), timings)
    if "load" in options.only:
        check = loadcheck.Plan.quick() if options.quick else loadcheck.Plan()
        if options.rates:
            check = replace(check, rates=tuple(options.rates))
        if options.seconds:
            check = replace(check, seconds=options.seconds)
        results["loadCheck"] = timed("duetime load against the bench", lambda: loadcheck.run(check), timings)
    if "cpu" in options.only:
        count = settings["cpu"]
        results["cpu"] = timed(f"CPU per job over {count} jobs", lambda: cpu.measure(count), timings)
    results["machine"]["loadAverageAtEnd"] = [round(x, 2) for x in os.getloadavg()]
    results["timings"] = timings
    results["totalSeconds"] = round(time.monotonic() - started, 1)
    output = Path(options.output) if options.output else None if options.smoke else RESULTS
    if output is not None:
        results = carry_over(results, output, [part for part in PARTS if part in options.only])
    results["targets"] = report.targets(results)
    if output is not None:
        output.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(report.render(results))
    print(f"\nwritten to {output} in {results['totalSeconds']:.0f} s" if output else "\n(smoke run: nothing written)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
