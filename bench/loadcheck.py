"""`duetime load` against the bench's own one-off run: one `duetime local`, the same shape, back to back.

Issue 18 asks that `duetime load` against `duetime local` reproduce the bench's figures within 10%. For each
rate, each round runs the bench's one-off scenario (sidebyside.Runner.one_off: its submitter threads and its
read-back) and `duetime load --mix oneoff=1 --lead 8:18 --owners 1`, run as a user runs it (the CLI in a
process of its own, against the same `--data-dir`), in alternating order. Both submit over 8 keep-alive
connections, each job due 8-18 s after its submit, and read start lateness from the executions' history.

Each tool is compared with itself too (round against round): at a few milliseconds of lateness a p99 moves
by more than 10% between two runs of the same tool, so the difference between the tools is read against
how much each differs from itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import sidebyside
from bench.common import ROOT
from bench.systems import PYTHON, DuetimeLocal, child_env

FIGURES = ("p50Ms", "p99Ms", "executionsPerSecond")


@dataclass(frozen=True)
class Plan:
    rates: tuple[float, ...] = (20.0, 100.0, 300.0)
    seconds: float = 30.0
    rounds: int = 2
    workers: int | None = None  # `duetime local`'s default
    lead: tuple[float, float] = (8.0, 18.0)

    @classmethod
    def quick(cls) -> Plan:
        return cls(rates=(20.0,), seconds=5.0, rounds=2, lead=(2.0, 4.0))


def bench_run(runner: sidebyside.Runner, rate: float, seconds: float) -> dict[str, Any]:
    result = runner.one_off(rate, seconds)
    late = result.get("lateness", {})
    return {
        "accepted": result["accepted"],
        "planned": result["planned"],
        "saturated": result["saturated"],
        "p50Ms": late.get("p50Ms"),
        "p99Ms": late.get("p99Ms"),
        "executionsPerSecond": result["executionsPerSecond"],
    }


def load_run(data_dir: Path, api_url: str, rate: float, seconds: float, lead: tuple[float, float]) -> dict[str, Any]:
    """`duetime load` as a user runs it, against the running `duetime local`; its --json report, cut down."""
    command = [PYTHON, "-m", "duetime.cli", "load", "--api", api_url, "--data-dir", str(data_dir)]
    command += ["--rate", f"{rate:g}", "--duration", f"{seconds:g}", "--mix", "oneoff=1"]
    command += ["--lead", f"{lead[0]:g}:{lead[1]:g}", "--owners", "1", "--connections", "8", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=seconds + 600)
    if done.returncode != 0:
        raise RuntimeError(f"duetime load failed ({done.returncode}): {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    submission = report["submission"]
    return {
        "accepted": submission["accepted"],
        "planned": round(rate * seconds),
        "saturated": submission["saturated"],
        "p50Ms": report["latenessMs"]["p50"],
        "p99Ms": report["latenessMs"]["p99"],
        "executionsPerSecond": report["executionsPerSecond"],
        "notStarted": report["notStarted"],
    }


def spread(values: list[float]) -> float | None:
    """How far apart a figure's values are, as a fraction of their mean (None without two)."""
    if len(values) < 2 or not sum(values):
        return None
    mean = sum(values) / len(values)
    return round((max(values) - min(values)) / mean, 3)


def compare(bench: list[dict[str, Any]], load: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure: each tool's mean, the tools' difference as a fraction of the bench's mean, and each tool's
    round-to-round spread."""
    out: dict[str, Any] = {}
    for figure in FIGURES:
        b = [float(r[figure]) for r in bench if r[figure] is not None]
        g = [float(r[figure]) for r in load if r[figure] is not None]
        if not b or not g:
            continue
        b_mean, g_mean = sum(b) / len(b), sum(g) / len(g)
        out[figure] = {
            "bench": round(b_mean, 1),
            "load": round(g_mean, 1),
            "difference": round((g_mean - b_mean) / b_mean, 3) if b_mean else None,
            "benchSpread": spread(b),
            "loadSpread": spread(g),
        }
    return out


def run(plan: Plan, log: Callable[[str], None] = print) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="duetime-loadcheck-"))
    system = DuetimeLocal("sqlite", workers=plan.workers, data_dir=data_dir)
    side = replace(sidebyside.Plan(), seconds=plan.seconds, lead=plan.lead, reuse=True)
    runner = sidebyside.Runner("duetime sqlite", lambda: system, side, log)
    rates: list[dict[str, Any]] = []
    try:
        system.start()
        runner.shared = system  # both tools drive this one system
        for rate in plan.rates:
            bench: list[dict[str, Any]] = []
            load: list[dict[str, Any]] = []
            for round_ in range(plan.rounds):
                order = ("bench", "load") if round_ % 2 == 0 else ("load", "bench")
                for tool in order:
                    if tool == "bench":
                        bench.append(bench_run(runner, rate, plan.seconds))
                        log(f"    bench {rate:g}/s round {round_ + 1}: {bench[-1]}")
                    else:
                        load.append(load_run(data_dir, system.url, rate, plan.seconds, plan.lead))
                        log(f"    duetime load {rate:g}/s round {round_ + 1}: {load[-1]}")
            rates.append({"rate": rate, "bench": bench, "load": load, "compared": compare(bench, load)})
    finally:
        runner.close()
        shutil.rmtree(data_dir, ignore_errors=True)
    return {"seconds": plan.seconds, "rounds": plan.rounds, "lead": list(plan.lead), "rates": rates}


def render(result: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"duetime load against the bench (one `duetime local` on SQLite, {result['rounds']} rounds of "
        f"{result['seconds']:g} s a rate, alternating)",
        "| rate | figure | bench | duetime load | difference | bench vs itself | load vs itself |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]

    def signed(value: float | None) -> str:
        return "-" if value is None else f"{value * 100:+.0f}%"

    def apart(value: float | None) -> str:
        return "-" if value is None else f"{value * 100:.0f}% apart"

    for entry in result["rates"]:
        for figure, row in entry["compared"].items():
            lines.append(
                f"| {entry['rate']:g}/s | {figure} | {row['bench']} | {row['load']} | {signed(row['difference'])} | "
                f"{apart(row['benchSpread'])} | {apart(row['loadSpread'])} |"
            )
    return lines
