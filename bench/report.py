"""The benchmark's figures as a printed table, and issue 7's, 13's and 32's targets checked against them."""

from __future__ import annotations

from typing import Any

from bench import cpu, loadcheck
from bench.sidebyside import SEARCH_P99_MS, passes


def _steady_25(results: dict[str, Any]) -> dict[str, Any] | None:
    """The 25/s scheduled-ahead run with duetime local's own settings (not the 4-thread or window runs)."""
    for run in results.get("steady", []):
        if (
            run.get("rate") == 25
            and run.get("workers") != 4
            and run.get("mode") == "ahead"
            and "window" not in run["name"]
        ):
            return dict(run)
    return None


def _scenario(results: dict[str, Any], prefix: str) -> dict[str, Any] | None:
    for scenario in results.get("calls", {}).get("scenarios", []):
        if scenario.get("scenario", "").startswith(prefix):
            return dict(scenario)
    return None


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of issue 7 with the measured value and whether it was met."""
    out: list[dict[str, Any]] = []
    steady = _steady_25(results)
    if steady:
        p99 = steady["lateness"]["p99Ms"]
        out.append({"target": "p99 start lateness < 1 s at 25/s", "measured": f"{p99:.0f} ms", "met": p99 < 1000})
    ceiling, burst = results.get("ceiling"), results.get("burst")
    if ceiling and burst:
        share = burst["executionsPerSecond"] / ceiling["runPerSecond"]
        out.append(
            {
                "target": "executions/s >= 70% of the backend's ceiling (burst drain vs raw run calls)",
                "measured": f"{burst['executionsPerSecond']:.1f} of {ceiling['runPerSecond']:.1f}/s = {share:.0%}",
                "met": share >= 0.7,
            }
        )
    submit = [r for r in results.get("steady", []) if r.get("mode") == "submit"]
    if ceiling and submit:
        achieved = submit[0]["executionsPerSecond"]
        share = achieved / ceiling["fullPathPerSecond"]
        out.append(
            {
                "target": "executions/s >= 70% of the backend's ceiling (submit-and-run vs raw create+run calls)",
                "measured": f"{achieved:.1f} of {ceiling['fullPathPerSecond']:.1f}/s = {share:.0%}",
                "met": share >= 0.7,
            }
        )
    cron = _scenario(results, "cron")
    if cron:
        writes = cron["writesPerExecution"].get("executions", 0)
        sqs = cron["requestsPerExecution"].get("sqs", 0)
        out.append(
            {"target": "<= 3 executions-table writes per cron run", "measured": f"{writes:g}", "met": writes <= 3}
        )
        out.append({"target": "<= 1 SQS request per cron run on average", "measured": f"{sqs:g}", "met": sqs <= 1})
    failover = results.get("failover")
    if failover and failover.get("maxDetectionSeconds") is not None:
        worst, limit = failover["maxDetectionSeconds"], failover["targetSeconds"]
        out.append(
            {
                "target": f"failure detection <= lease + 2 s ({limit} s)",
                "measured": f"{worst:.1f} s",
                "met": worst <= limit and failover["restarted"] == failover["trials"],
            }
        )
    return out


def _row(cells: list[Any], widths: list[int]) -> str:
    pairs = enumerate(zip(cells, widths, strict=True))
    return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in pairs)


def render(results: dict[str, Any]) -> str:
    lines = [
        "",
        f"duetime bench  {results['startedAt']}  {results['machine']['cpus']} CPUs  load average "
        f"{results['machine']['loadAverageAtStart'][0]} at start, {results['machine']['loadAverageAtEnd'][0]} at end",
    ]
    if "pacing" in results:
        paced = results["pacing"]
        lines += [
            "",
            f"Pacing: {paced['name']}: {paced['achievedPerSecond']}/s achieved, at most {paced['maxInOneSecond']}"
            f" in one second, {paced['notFirstTimeSuccess']} not successful first time, longest wait"
            f" {paced['waitedForLimitMaxMs']} ms",
        ]
    if "cpu" in results:
        lines += cpu.render(results["cpu"])
    if "loadCheck" in results:
        lines += loadcheck.render(results["loadCheck"])
    runs = [*results.get("steady", []), *([results["burst"]] if "burst" in results else [])]
    if runs:
        lines += [
            "",
            f"Start lateness of one-off jobs on duetime local ({results['submission']}; "
            f"{results['workerThreads']} worker threads unless noted)",
        ]
        widths = [40, 6, 6, 8, 8, 8, 8, 7, 10]
        lines.append(_row(["run", "jobs", "undone", "p50 ms", "p95 ms", "p99 ms", "max ms", "exec/s", "note"], widths))
        for run in runs:
            late = run["lateness"]
            if "drainSeconds" in run:
                note = f"drain {run['drainSeconds']:.1f} s"
            elif run.get("saturated"):
                note = "saturated"
            elif run.get("mode") == "ahead":
                note = f"late-in {run['submittedLate']}"
            else:
                note = f"lag {run['submitLagP99Ms']:.0f}"
            lines.append(
                _row(
                    [
                        run["name"],
                        run["accepted"],
                        run["unfinished"] + run["missing"],
                        late["p50Ms"],
                        late["p95Ms"],
                        late["p99Ms"],
                        late["maxMs"],
                        run["executionsPerSecond"],
                        note,
                    ],
                    widths,
                )
            )
        lines.append(
            "  (undone: accepted but not succeeded when the run ended; every execution was found unless 'missing' says"
            " otherwise in results.json; late-in: submitted < 2 s before due; lag: submit lag p99 in ms)"
        )
        for run in runs:
            if run.get("missing"):
                lines.append(f"  ! {run['name']}: {run['missing']} executions missing")
        for run in runs:
            slow = ", ".join(f"{k} {v}" for k, v in list(run.get("serverMsPerCall", {}).items())[:4])
            lines.append(f"  moto service ms/call, {run['name']}: {slow}")
    if "ceiling" in results:
        c = results["ceiling"]
        lines += [
            "",
            f"Backend ceiling (duetime's calls replayed raw on embedded moto): run {c['runPerSecond']}/s, "
            f"create {c['createPerSecond']}/s, create+run {c['fullPathPerSecond']}/s",
        ]
    scenarios = results.get("calls", {}).get("scenarios", [])
    if scenarios:
        lines += ["", "AWS calls and DynamoDB write units per execution (botocore hooks, duetime's own code)"]
        widths = [34, 9, 5, 12, 9, 10, 9]
        lines.append(_row(["scenario", "dynamodb", "sqs", "exec writes", "exec WCU", "index WCU", "jobs WCU"], widths))
        for s in scenarios:
            if not s:
                continue
            units = s["writeUnitsPerExecution"]
            lines.append(
                _row(
                    [
                        s["scenario"],
                        s["requestsPerExecution"].get("dynamodb", 0),
                        s["requestsPerExecution"].get("sqs", 0),
                        s["writesPerExecution"].get("executions", 0),
                        units.get("executions", 0),
                        round(sum(v for k, v in units.items() if k.startswith("executions.")), 3),
                        units.get("jobs", 0) + units.get("jobs.byOwner", 0),
                    ],
                    widths,
                )
            )
            detail = ", ".join(f"{k} {v:g}" for k, v in s["callsPerExecution"].items())
            lines.append(f"    {detail}")
            index = ", ".join(f"{k} {v:g}" for k, v in units.items() if k.startswith("executions."))
            lines.append(f"    index write units: {index}")
        api = results.get("calls", {}).get("apiCpu")
        if api:
            lines.append(
                f"  API function CPU a job on one core: alone {api['cpuMsAlone']} ms (the model's "
                f"{api['modelCpuMsAlone']:g}), batched {api['cpuMsBatched']} ms ({api['batchJobs']} a request; the "
                f"model's {api['modelCpuMsBatched']:g}), host probe {api['hostProbeMs']} ms"
            )
        for run in results.get("steady", []):
            merged = {**run["submitCallsPerExecution"]}
            for k, v in run["systemCallsPerExecution"].items():
                merged[k] = round(merged.get(k, 0) + v, 3)
            sqs = sum(v for k, v in merged.items() if k.startswith("sqs:"))
            detail = ", ".join(f"{k} {v:g}" for k, v in merged.items())
            lines.append(f"  under load, {run['name']}: SQS {sqs:.2f}/execution ({detail})")
    if "failover" in results:
        f = results["failover"]
        lines += [
            "",
            f"Failure detection (SIGKILL of `duetime worker` mid-job, lease {f['leaseSeconds']} s): "
            f"{f['restarted']}/{f['trials']} restarted after {f['detectionSeconds']} s; "
            f"{f['afterLeaseEndSeconds']} s after the lease ended",
        ]
    if "profile" in results:
        p = results["profile"]
        lines += [
            "",
            f"Hot path, one execution at a time: {p['wallMsPerExecution']} ms wall, {p['serverMsPerExecution']} ms in "
            f"moto, {p['processCpuMsPerExecution']} ms CPU per execution",
            "  moto ms per call: " + ", ".join(f"{k} {v}" for k, v in p["serverMsPerCall"].items()),
        ]
    if "sideBySide" in results:
        lines.append(render_side(results["sideBySide"]))
    if "goals" in results:
        lines.append(render_goals(results["goals"]))
    if results.get("targets"):
        lines += ["", "Issue 7 targets"]
        for t in results["targets"]:
            lines.append(f"  [{'met' if t['met'] else 'MISSED'}] {t['target']}: {t['measured']}")
    return "\n".join(lines)


# --- issue 13: the side-by-side benchmark ---------------------------------------------------------------

SQLITE = "duetime sqlite"
WITHIN = 0.10  # "within 10%" with 1,000,000 stored
WITHIN_FLOOR_MS = 5.0  # ...or this close: a few milliseconds of p99 move with the machine's other load


def _find(runs: list[dict[str, Any]], system: str, scenario: str, rate: float | None = None) -> dict[str, Any] | None:
    for run in runs:
        if run["system"] == system and run["scenario"] == scenario and (rate is None or run.get("rate") == rate):
            return run
    return None


def _cell(run: dict[str, Any] | None) -> str:
    """p50 / p99 ms of one run, with what makes the figure partial."""
    if run is None:
        return "-"
    if "skipped" in run:
        return "skipped"
    late = run["lateness"]
    text = f"{late['p50Ms']:,.0f} / {late['p99Ms']:,.0f}"
    if run.get("saturated") or run.get("refused"):
        text += f" sat {run['accepted']}/{run['planned']}"
    if run.get("undone"):
        text += f" undone {run['undone']}"
    return text


def _side_cell(runs: list[dict[str, Any]], system: str, scenario: str, rate: float | None, burst: str) -> str:
    """One system's cell of a side-by-side row; a burst run's count and drain are put in by `burst`."""
    run = next(
        (r for r in runs if r["system"] == system and r["scenario"] == scenario and r.get("rate") == rate),
        None,
    )
    cell = _cell(run)
    if run and run.get("drainSeconds") is not None:
        return burst.format(count=run["count"], drain=run["drainSeconds"], cell=cell)
    return cell


def _highest(search: dict[str, Any] | None) -> str:
    """The search's answer: the highest rate that passed, or below the lowest tried when none did."""
    if search is None:
        return "-"
    if search["highestPassingPerSecond"]:
        return f"{search['highestPassingPerSecond']:g}/s"
    return f"< {search['lowestFailingPerSecond']:g}/s" if search["lowestFailingPerSecond"] else "-"


def side_targets(side: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 13's targets, judged on the SQLite default."""
    runs, out = side.get("runs", []), []
    for rate, limit in ((20.0, 10.0), (100.0, 100.0)):
        run = _find(runs, SQLITE, "one-off", rate)
        if run and "skipped" not in run:
            p99 = run["lateness"]["p99Ms"]
            out.append(
                {
                    "target": f"p99 start lateness < {limit:.0f} ms at {rate:.0f}/s submitted over the API",
                    "measured": f"{p99:,.1f} ms ({run['accepted']}/{run['planned']} in, {run['undone']} undone)",
                    "met": p99 < limit and not run["undone"] and run["accepted"] == run["planned"],
                }
            )
    search = next((s for s in side.get("searches", []) if s["system"] == SQLITE), None)
    if search:
        best = search["highestPassingPerSecond"]
        out.append(
            {
                "target": ">= 500 executions/s sustained with p99 < 1 s",
                "measured": f"{best:g}/s passed"
                + (f", {search['lowestFailingPerSecond']:g}/s failed" if search["lowestFailingPerSecond"] else ""),
                "met": best >= 500,
            }
        )
    burst = _find(runs, SQLITE, "burst")
    if burst and "skipped" not in burst:
        drain = burst.get("drainSeconds")
        full = burst["count"] >= 10_000
        out.append(
            {
                "target": "10,000 due at one instant drained in < 20 s",
                "measured": f"{burst['count']:,} in {drain} s" + ("" if full else " (not the full 10,000)"),
                "met": full and drain is not None and drain < 20 and not burst["undone"],
            }
        )
    stored = side.get("stored")
    if stored:
        compared = []
        fresh = _fresh_runs(side)
        for scenario, rate in dict.fromkeys((r["scenario"], r.get("rate")) for r in stored["runs"]):
            before_runs = _usable(fresh, scenario, rate)
            after_runs = _usable(stored["runs"], scenario, rate)
            if not before_runs or not after_runs:
                continue
            before, after = _median_figure(before_runs), _median_figure(after_runs)
            ok = after <= before * (1 + WITHIN) or after - before <= WITHIN_FLOOR_MS
            name = f"{scenario} {rate if rate is not None else after_runs[0].get('count'):g}"
            if len(after_runs) > 1:
                name += f" (medians of {len(before_runs)} and {len(after_runs)} runs)"
            compared.append((name, before, after, ok and not any(r.get("undone") for r in after_runs)))
        if compared:
            out.append(
                {
                    "target": f"figures within 10% with {side['plan']['stored']:,} future executions stored",
                    "measured": "; ".join(f"{n}: {_ms(b)} -> {_ms(a)}" for n, b, a, _ in compared),
                    "met": all(ok for *_, ok in compared),
                }
            )
    return out


def _fresh_runs(side: dict[str, Any]) -> list[dict[str, Any]]:
    """The SQLite runs on a fresh data dir: the first pass's, then the paired repeats'."""
    fresh = [r for r in side.get("runs", []) if r["system"] == SQLITE]
    return fresh + side["stored"].get("baseRepeats", [])


def _stored_pairs(side: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each stored run with the fresh-data-dir run it is compared with: the n-th of its scenario and rate
    with the n-th (the first pass's run, then the paired repeats in turn)."""
    fresh = _fresh_runs(side)
    seen: dict[tuple[str, Any], int] = {}
    pairs = []
    for run in side["stored"]["runs"]:
        key = (run["scenario"], run.get("rate"))
        index = seen.get(key, 0)
        seen[key] = index + 1
        matching = [r for r in fresh if (r["scenario"], r.get("rate")) == key]
        pairs.append((run, matching[index] if index < len(matching) else None))
    return pairs


def _usable(runs: list[dict[str, Any]], scenario: str, rate: float | None) -> list[dict[str, Any]]:
    """The runs of one scenario and rate that measured something (not skipped)."""
    return [r for r in runs if r["scenario"] == scenario and r.get("rate") == rate and "skipped" not in r]


def _median_figure(runs: list[dict[str, Any]]) -> float:
    """What the stored comparison compares, in ms: a burst's drain time, else p99 start lateness; the
    median over repeated runs (a run saturated or with jobs undone counts as the worst of them)."""
    figures = sorted(_figure(r) for r in runs)
    return figures[len(figures) // 2]


def _ms(figure: float) -> str:
    return "saturated" if figure == float("inf") else f"{figure:,.0f} ms"


def _figure(run: dict[str, Any]) -> float:
    if run.get("saturated") or run.get("undone"):
        return float("inf")
    if run["scenario"] == "burst":
        return float("inf") if run.get("drainSeconds") is None else run["drainSeconds"] * 1000
    return float(run["lateness"]["p99Ms"])


def render_side(side: dict[str, Any]) -> str:
    runs = side.get("runs", [])
    systems = list(dict.fromkeys(r["system"] for r in runs))
    lines = ["", "Side by side: start lateness p50 / p99 ms (start recorded by the worker - due time)"]
    widths = [26, *([30] * len(systems))]
    lines.append(_row(["run", *systems], widths))
    rows = list(dict.fromkeys((r["scenario"], r.get("rate")) for r in runs if r["scenario"] != "search"))
    for scenario, rate in rows:
        label = f"{scenario} {rate:g}/s" if rate is not None else f"{scenario} (count, drain)"
        cells = [_side_cell(runs, system, scenario, rate, "{count:,} {drain} s, {cell}") for system in systems]
        lines.append(_row([label, *cells], widths))
    searches = {s["system"]: s for s in side.get("searches", [])}
    lines.append(
        _row(
            [
                "highest rate, p99 < 1 s",
                *[_highest(searches.get(s)) for s in systems],
            ],
            widths,
        )
    )
    peaks = {s: max((r.get("rssPeakMb", 0) for r in runs if r["system"] == s), default=0) for s in systems}
    idles = {
        s: min((r.get("rssIdleMb", 0) for r in runs if r["system"] == s and "rssIdleMb" in r), default=0)
        for s in systems
    }
    lines.append(_row(["RSS MB idle / peak", *[f"{idles[s]:.0f} / {peaks[s]:.0f}" for s in systems]], widths))
    lines.append(
        "  (sat: submission fell behind the rate and stopped, accepted/planned; undone: accepted but not run when "
        "the run ended; RSS: the whole process tree, duetime local + its moto process, Celery worker + redis-server)"
    )
    stored = side.get("stored")
    if stored:
        seed = stored["seed"]
        lines += [
            "",
            f"duetime sqlite with {seed['executions']:,} future executions stored (seeded in {seed['seconds']} s, "
            f"database {seed['databaseMb']:,.0f} MB; RSS idle {stored['rssIdleMb']:.0f} MB)",
        ]
        for run, base in _stored_pairs(side):
            label = f"{run['scenario']} " + (f"{run['rate']:g}/s" if "rate" in run else f"of {run['count']:,}")
            extra = f", drain {run['drainSeconds']} s" if run.get("drainSeconds") is not None else ""
            lines.append(f"  {label}: {_cell(run)}{extra}  (without: {_cell(base)})")
    for name, reason in side.get("skipped", {}).items():
        lines.append(f"  skipped {name}: {reason}")
    targets13 = side.get("targets", [])
    if targets13:
        lines += ["", "Issue 13 targets (duetime sqlite)"]
        for t in targets13:
            lines.append(f"  [{'met' if t['met'] else 'MISSED'}] {t['target']}: {t['measured']}")
    return "\n".join(lines)


def markdown_side(side: dict[str, Any]) -> str:
    """The side-by-side figures as the markdown tables of docs/performance.md (`python -m bench.report`)."""
    runs = side.get("runs", [])
    systems = list(dict.fromkeys(r["system"] for r in runs))
    lines = [
        "| run | " + " | ".join(systems) + " |",
        "| --- | " + " | ".join("---:" for _ in systems) + " |",
    ]
    for scenario, rate in dict.fromkeys((r["scenario"], r.get("rate")) for r in runs):
        label = f"{scenario}, {rate:g}/s" if rate is not None else f"{scenario}: jobs, drain, p50 / p99"
        cells = [_side_cell(runs, system, scenario, rate, "{count:,}, {drain} s, {cell}") for system in systems]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    searches = {s["system"]: s for s in side.get("searches", [])}
    best = [_highest(searches.get(s)) for s in systems]
    lines.append("| highest one-off rate with p99 < 1 s | " + " | ".join(best) + " |")
    rss = []
    for system in systems:
        mine = [r for r in runs if r["system"] == system and "rssIdleMb" in r]
        idle = min((r["rssIdleMb"] for r in mine), default=0)
        peak = max((r["rssPeakMb"] for r in mine), default=0)
        rss.append(f"{idle:.0f} / {peak:.0f}")
    lines.append("| RSS MB, idle / peak | " + " | ".join(rss) + " |")
    stored = side.get("stored")
    if stored:
        header = f"| run | duetime sqlite | with {stored['seed']['executions']:,} stored | host probe, ms |"
        lines += ["", header, "| --- | ---: | ---: | ---: |"]
        for run, base in _stored_pairs(side):
            label = f"{run['scenario']}, " + (f"{run['rate']:g}/s" if "rate" in run else f"{run['count']:,} jobs")
            if run.get("repeat"):
                label += f" (paired repeat {run['repeat']})"
            before, after = _cell(base), _cell(run)
            if run.get("drainSeconds") is not None and base:
                before, after = f"{base.get('drainSeconds')} s, {before}", f"{run['drainSeconds']} s, {after}"
            probes = " / ".join(f"{r['hostProbeMs']:g}" if "hostProbeMs" in r else "-" for r in (base or {}, run))
            lines.append(f"| {label} | {before} | {after} | {probes} |")
    targets13 = side.get("targets", [])
    if targets13:
        lines += ["", "| target | measured | |", "| --- | --- | --- |"]
        lines += [f"| {t['target']} | {t['measured']} | {'met' if t['met'] else 'missed'} |" for t in targets13]
    return "\n".join(lines)


# --- issue 32: its goals side by side ------------------------------------------------------------------

CELERY = "celery+redis"
BATCH_GOAL_PER_SECOND = 5_000.0
INTAKE_GOAL_PER_SECOND = 500.0
SUSTAINED_GOAL_PER_SECOND = 1_000.0
SUSTAINED_GOAL_SECONDS = 60.0
BURST_SHARE = 0.8  # duetime's burst drains in at most this share of Celery's, in the same round


def _goal_runs(goals: dict[str, Any], system: str, scenario: str, rate: float | None = None) -> list[dict[str, Any]]:
    """One system's runs of a scenario (and rate), one a round, in round order."""
    runs = [r for r in goals.get("runs", []) if r["system"] == system and r["scenario"] == scenario]
    return [r for r in runs if rate is None or r.get("rate") == rate]


def _late(run: dict[str, Any]) -> str:
    """p50 / p99 start lateness and what makes the figure partial."""
    late = run["lateness"]
    flags = [
        *(["saturated"] if run.get("saturated") else []),
        *([f"{run['refused']:,} refused"] if run.get("refused") else []),
        *([f"{run['undone']:,} undone"] if run.get("undone") else []),
    ]
    return ", ".join([f"p50 / p99 {late['p50Ms']:,.0f} / {late['p99Ms']:,.0f} ms", *flags])


def _ran(run: dict[str, Any]) -> str:
    return f"{run['started']:,}/{run['planned']:,} run, {_late(run)}"


def _goal_figure(run: dict[str, Any]) -> str:
    """The one figure a run is judged by, with what qualifies it."""
    if "skipped" in run:
        return f"skipped: {run['skipped']}"
    scenario = run["scenario"]
    if scenario == "intake":
        return (
            f"{run['accepted']:,}/{run['planned']:,} taken at {run['submitPerSecond']:,.0f}/s, "
            f"{run['refused']:,} refused ({run['created']}, {run['clients']} clients)"
        )
    if scenario == "burst":
        return f"drain {run['drainSeconds']} s, {_ran(run)}"
    if scenario == "sustained":
        return f"{_ran(run)}, {run['executionsPerSecond']:,.0f}/s"
    return f"{run['accepted']:,}/{run['planned']:,} in, {_late(run)}"


def _by_round(runs: list[dict[str, Any]], text: Any) -> str:
    return "; ".join(f"round {r['round']}: {text(r)}" for r in runs) or "not run"


def _pairs(goals: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each duetime run with Celery's of the same round, scenario and size (None: Celery did not run)."""

    def key(run: dict[str, Any]) -> tuple[Any, ...]:
        return run["round"], run["scenario"], run.get("rate"), run.get("count")

    celery = {key(r): r for r in goals.get("runs", []) if r["system"] == CELERY}
    return [(r, celery.get(key(r))) for r in goals.get("runs", []) if r["system"] == SQLITE]


def goal_targets(goals: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 32's goals for duetime on SQLite, each met only when met in every round."""
    out: list[dict[str, Any]] = []
    one_offs = _goal_runs(goals, SQLITE, "one-off", INTAKE_GOAL_PER_SECOND)
    if one_offs:
        out.append(
            {
                "target": f"intake: {INTAKE_GOAL_PER_SECOND:.0f} one-offs/s over POST /jobs, every job taken and run, "
                f"p99 < {SEARCH_P99_MS:.0f} ms",
                "measured": _by_round(one_offs, _goal_figure),
                "met": all("skipped" not in r and passes(r) for r in one_offs),
            }
        )
    intakes = _goal_runs(goals, SQLITE, "intake")
    if intakes:
        peer = _goal_runs(goals, CELERY, "intake")
        out.append(
            {
                "target": f"batch create: >= {BATCH_GOAL_PER_SECOND:,.0f} jobs/s over POST /jobs/batch, all 201",
                "measured": _by_round(intakes, _goal_figure)
                + (f" (Celery: {_by_round(peer, _goal_figure)})" if peer else ""),
                "met": all(
                    r["submitPerSecond"] >= BATCH_GOAL_PER_SECOND and r["accepted"] == r["planned"] and not r["refused"]
                    for r in intakes
                ),
            }
        )
    bursts = [(r, c) for r, c in _pairs(goals) if r["scenario"] == "burst"]
    if bursts:

        def drains(pair: tuple[dict[str, Any], dict[str, Any] | None]) -> float | None:
            mine, theirs = (run.get("drainSeconds") if run else None for run in pair)
            return mine / theirs if mine is not None and theirs else None

        out.append(
            {
                "target": f"burst: drained in <= {BURST_SHARE:g} x Celery's drain in the same round",
                "measured": "; ".join(
                    f"round {r['round']}: {r.get('drainSeconds')} s against "
                    + (f"{c.get('drainSeconds')} s" if c else "no Celery run")
                    + (f" ({share:.2f} x)" if (share := drains((r, c))) is not None else "")
                    for r, c in bursts
                ),
                "met": all(
                    (share := drains((r, c))) is not None and share <= BURST_SHARE and not r["undone"]
                    for r, c in bursts
                ),
            }
        )
    sustained = _goal_runs(goals, SQLITE, "sustained")
    if sustained:
        sized_down = [
            r for r in sustained if r["rate"] < SUSTAINED_GOAL_PER_SECOND or r["seconds"] < SUSTAINED_GOAL_SECONDS
        ]
        out.append(
            {
                "target": f"sustained: {SUSTAINED_GOAL_PER_SECOND:,.0f}/s for {SUSTAINED_GOAL_SECONDS:.0f} s "
                f"(batch-created), every job run, p99 < {SEARCH_P99_MS:.0f} ms",
                "measured": _by_round(sustained, lambda r: f"{r['rate']:g}/s for {r['seconds']:g} s: {_goal_figure(r)}")
                + (" (sized down: not the goal's size)" if sized_down else ""),
                "met": not sized_down and all("skipped" not in r and passes(r) for r in sustained),
            }
        )
    pairs = [(r, c) for r, c in _pairs(goals) if "rssPeakMb" in r]
    if pairs:
        under = [(r, c) for r, c in pairs if c and "rssPeakMb" in c and r["rssPeakMb"] < c["rssPeakMb"]]
        mine = [r["rssPeakMb"] for r, _ in pairs]
        theirs = [c["rssPeakMb"] for _, c in pairs if c and "rssPeakMb" in c]
        out.append(
            {
                "target": "RSS peak under Celery's in every run",
                "measured": f"under in {len(under)} of {len(pairs)} runs; duetime {min(mine):.0f}-{max(mine):.0f} MB"
                + (f", Celery {min(theirs):.0f}-{max(theirs):.0f} MB" if theirs else ", no Celery runs"),
                "met": len(under) == len(pairs),
            }
        )
    return out


GOAL_TITLES = {  # a scenario's heading, filled from its run and the one-offs' lead
    "one-off": "one-off {rate:g}/s for {seconds:g} s over POST /jobs, due {low:g}-{high:g} s after submit",
    "intake": "intake of {count:,} jobs due beyond the dispatch horizon, as fast as taken",
    "burst": "burst of {count:,} due at one instant",
    "sustained": "sustained {rate:g}/s for {seconds:g} s, created ahead",
}


def render_goals(goals: dict[str, Any]) -> str:
    runs = goals.get("runs", [])
    lines = ["", "Issue 32 goals side by side (host probe: ms for a fixed Python loop, just after each run)"]
    widths = [16, 5, 9, 8]
    for group in dict.fromkeys((r["scenario"], r.get("rate"), r.get("count")) for r in runs):
        members = [r for r in runs if (r["scenario"], r.get("rate"), r.get("count")) == group]
        low, high = goals["plan"]["side"]["lead"]
        lines += ["", GOAL_TITLES[members[0]["scenario"]].format(**members[0], low=low, high=high)]
        lines.append(_row(["system", "round", "probe ms", "RSS MB"], widths) + "  figure")
        for run in members:
            cells = [run["system"], run["round"], run.get("hostProbeMs", "-"), run.get("rssPeakMb", "-")]
            lines.append(_row(cells, widths) + "  " + _goal_figure(run))
    for name, reason in goals.get("skipped", {}).items():
        lines.append(f"  skipped {name}: {reason}")
    if goals.get("targets"):
        lines += ["", "Issue 32 goals (duetime sqlite)"]
        lines += [f"  [{'met' if t['met'] else 'NOT MET'}] {t['target']}: {t['measured']}" for t in goals["targets"]]
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    from pathlib import Path

    print(markdown_side(json.loads(Path(__file__).with_name("results.json").read_text())["sideBySide"]))
