"""The side-by-side benchmark's harness runs end to end in smoke mode (a few jobs a system), so `make bench`
cannot rot between the runs that measure: real `duetime local` processes over HTTP, the Celery peer when
redis-server is present, figures written to JSON and a table printed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def bench(tmp_path: Path, *args: str, timeout: float = 240) -> tuple[dict[str, Any], str]:
    """`python -m bench ARGS --output` into `tmp_path`: the figures it wrote and what it printed."""
    output = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", *args, "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results: dict[str, Any] = json.loads(output.read_text())
    return results, done.stdout


def smoke(tmp_path: Path, *systems: str) -> tuple[dict[str, Any], str]:
    return bench(tmp_path, "--smoke", "--systems", *systems)


@pytest.mark.bench  # ~45 s of processes starting and waiting for due times: `make bench-smoke`, not `make test`
@pytest.mark.timeout(300)
def test_the_smoke_run_measures_every_job_of_each_system_and_prints_the_table(tmp_path: Path) -> None:
    results, printed = smoke(tmp_path, "sqlite", "celery")
    side = results["sideBySide"]
    assert isinstance(side, dict)
    expected = {"duetime sqlite"} | ({"celery+redis"} if shutil.which("redis-server") else set())
    assert {run["system"] for run in side["runs"]} == expected
    assert "celery+redis" in side["skipped"] or "celery+redis" in expected
    for run in side["runs"]:
        assert run["accepted"] == run["planned"] > 0, run
        assert run["undone"] == 0 and run["started"] == run["planned"], run
        assert run["lateness"]["p99Ms"] >= run["lateness"]["p50Ms"] >= -50, run  # starts are not before due
        assert run["rssPeakMb"] > 10, run
    burst = [run for run in side["runs"] if run["scenario"] == "burst"]
    assert len(burst) == len(expected) and all(run["drainSeconds"] is not None for run in burst)
    stored = side["stored"]
    assert stored["seed"]["executions"] == side["plan"]["stored"]
    assert all(run["undone"] == 0 for run in stored["runs"])
    assert "Side by side" in printed and "Issue 13 targets" in printed
    assert [t["target"] for t in side["targets"]][:1] == ["p99 start lateness < 10 ms at 20/s submitted over the API"]


@pytest.mark.bench  # ~50 s: two short rounds of each tool against one `duetime local`
@pytest.mark.timeout(300)
def test_the_load_check_runs_duetime_load_and_the_bench_against_one_system_and_compares_them(tmp_path: Path) -> None:
    results, printed = bench(tmp_path, "--only", "load", "--quick", timeout=280)
    [rate] = results["loadCheck"]["rates"]
    assert len(rate["bench"]) == len(rate["load"]) == 2
    for run in rate["bench"] + rate["load"]:
        assert run["accepted"] == run["planned"] > 0 and not run["saturated"], run
    assert rate["load"][0]["notStarted"] == rate["load"][1]["notStarted"] == 0
    assert set(rate["compared"]) == {"p50Ms", "p99Ms", "executionsPerSecond"}
    assert "duetime load against the bench" in printed


@pytest.mark.bench  # ~60 s: one round of every issue 32 scenario, a few seconds each, duetime then Celery
@pytest.mark.timeout(300)
def test_the_goals_smoke_run_measures_each_scenario_on_both_systems_and_judges_every_goal(tmp_path: Path) -> None:
    results, printed = bench(tmp_path, "--smoke", "--only", "goals", timeout=280)
    goals = results["goals"]
    expected = {"duetime sqlite"} | ({"celery+redis"} if shutil.which("redis-server") else set())
    scenarios = {"one-off", "intake", "burst", "sustained"}
    assert {(run["system"], run["scenario"]) for run in goals["runs"]} == {(s, c) for s in expected for c in scenarios}
    for run in goals["runs"]:
        assert run["round"] == 1 and run["hostProbeMs"] > 0 and run["rssPeakMb"] > 10, run
        assert run["accepted"] == run["planned"] > 0 and run["refused"] == 0, run
        if run["scenario"] != "intake":  # intake jobs are due long after the run: only their creation counts
            assert run["undone"] == 0 and run["started"] == run["planned"], run
            assert run["lateness"]["p99Ms"] >= run["lateness"]["p50Ms"] >= -50, run
    [intake] = [run for run in goals["runs"] if run["system"] == "duetime sqlite" and run["scenario"] == "intake"]
    assert intake["batch"] == 500 and intake["created"].startswith("POST /jobs/batch")
    assert [t["target"].split(":")[0] for t in goals["targets"]][:2] == ["batch create", "burst"]
    assert "Issue 32 goals side by side" in printed and "[NOT MET] sustained" in printed  # sized down: never met
    assert "sideBySide" not in results
