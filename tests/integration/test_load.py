"""`duetime load` against a real `duetime local` (SQLite and moto backends, its own process, over HTTP) and
its CloudWatch reader against moto's CloudWatch: the figures come from the executions' history."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from duetime.cli import load
from duetime.cli.main import main
from duetime.client import DuetimeClient
from duetime.definitions import JOB_CLASSES

ROOT = Path(__file__).resolve().parents[2]


class Local:
    """`duetime local` in a process of its own on a temporary data dir."""

    def __init__(self, data_dir: Path, *extra: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "layers" / "core" / "python")}
        command = [sys.executable, "-m", "duetime.cli", "local", "--port", "0", "--data-dir", str(data_dir), *extra]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
        )
        self.data_dir = data_dir
        self.api_url = ""
        deadline = time.monotonic() + 120
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            if line.strip().startswith("API:"):
                self.api_url = line.split(None, 1)[1].strip()
                return
        self.stop()
        raise AssertionError("duetime local did not start")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@pytest.fixture
def local_sqlite(tmp_path: Path) -> Iterator[Local]:
    system = Local(tmp_path / "data", "--shards", "4")
    try:
        yield system
    finally:
        system.stop()


def owner_client(system: Local, owner: str) -> DuetimeClient:
    return DuetimeClient.connect(system.api_url, data_dir=system.data_dir, owner=owner)


def run_load(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["load", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_one_offs_over_owners_are_each_found_run_once_and_timed_from_their_history(local_sqlite, capsys):
    # When one-off jobs are created at 6/s for 4 s over three owners of a duetime local on SQLite
    code, result = run_load(
        capsys, "--rate", "6", "--duration", "4", "--mix", "oneoff=1", "--lead", "3",
        "--owners", "3", "--data-dir", str(local_sqlite.data_dir), "--drain", "30",
    )  # fmt: skip
    # Then every one was accepted, spread over the owners, found in the history and started
    assert code == 0, result
    assert result["owners"] == 3 and result["jobs"]["oneOff"] == 24 == result["submission"]["accepted"]
    assert result["executions"] == 24 and result["notStarted"] == 0 and result["unreadable"] == 0
    # And each owner holds a third of the run's jobs (tagged with the run)
    for owner in result["ownerNames"]:
        jobs = list(owner_client(local_sqlite, owner).iter_jobs(tags=[f"duetime-load:{result['runId']}"]))
        assert len(jobs) == 8
    late = result["latenessMs"]
    assert 0 <= late["p50"] <= late["p99"] <= late["max"] < 5000
    assert result["executionsPerSecond"] == pytest.approx(6, rel=0.25)
    assert result["deadLetters"] == 0 and result["submission"]["throttled"] == 0
    assert result["costPerMillion"]["total"] > 0


def test_executions_nobody_runs_are_reported_not_started_and_the_run_fails(tmp_path, capsys):
    # Given a duetime local without workers
    system = Local(tmp_path / "data", "--workers", "0")
    try:
        code, result = run_load(
            capsys, "--rate", "3", "--duration", "2", "--mix", "oneoff=1", "--lead", "2",
            "--data-dir", str(system.data_dir), "--drain", "3",
        )  # fmt: skip
    finally:
        system.stop()
    # Then each execution is found but none started: exit 1, no lateness to report
    assert code == 1
    assert result["executions"] == 6 and result["notStarted"] == 6
    assert result["latenessMs"] == {"p50": 0.0, "p99": 0.0, "max": 0.0} and result["executionsPerSecond"] == 0


def test_answers_429_are_counted_as_throttles_and_fail_the_run(tmp_path, capsys):
    # Given a duetime local whose owners may create 5 jobs a minute
    system = Local(tmp_path / "data", "--job-creates-per-minute", "5")
    try:
        # all in one quota window: windows start on the minute, and the submissions take ~3 s (a run that
        # crossed into the next minute had 6 accepted, by the next window's room)
        into_minute = time.time() % 60
        if into_minute > 50:
            time.sleep(61 - into_minute)
        code, result = run_load(
            capsys, "--rate", "4", "--duration", "3", "--mix", "oneoff=1", "--lead", "2", "--owners", "1",
            "--data-dir", str(system.data_dir), "--drain", "30",
        )  # fmt: skip
    finally:
        system.stop()
    # Then 5 of the 12 are accepted and run, the other 7 are throttles, and the run exits 1
    assert result["submission"]["accepted"] == 5 and result["submission"]["throttled"] == 7
    assert result["executions"] == 5 and result["notStarted"] == 0
    assert code == 1


def test_a_token_alone_is_one_owner_and_the_report_says_so(local_sqlite, capsys):
    token = DuetimeClient.connect(data_dir=local_sqlite.data_dir).token
    code, result = run_load(
        capsys, "--rate", "2", "--duration", "2", "--mix", "oneoff=1", "--lead", "2", "--owners", "5",
        "--api", local_sqlite.api_url, "--token", token, "--drain", "30",
    )  # fmt: skip
    assert code == 0 and result["owners"] == 1 and "--owners 5 ignored" in result["ownersNote"]
    assert result["executions"] == 4 and result["notStarted"] == 0


@pytest.mark.bench  # waits for the next minute start (cron runs): up to ~90 s; `make bench-smoke` runs it
@pytest.mark.timeout(300)
def test_cron_jobs_run_inside_the_window_and_are_cancelled_at_the_end(local_sqlite, capsys):
    code, result = run_load(
        capsys, "--rate", "4", "--duration", "10", "--mix", "oneoff=0.5,cron=0.5", "--lead", "3",
        "--owners", "2", "--data-dir", str(local_sqlite.data_dir), "--drain", "60",
    )  # fmt: skip
    assert code == 0, result
    assert result["jobs"]["cron"] == 120 and result["cronJobsCancelled"] == 120
    # 120 every-minute jobs spread over their minute: ~20 runs in a 10-s window, beside the 20 one-offs
    assert 20 < result["executions"] < 20 + 45 and result["notStarted"] == 0
    # And the cron jobs are cancelled at the end: no job of the run is active any more
    statuses: list[str] = []
    for owner in result["ownerNames"]:
        jobs = owner_client(local_sqlite, owner).iter_jobs(tags=[f"duetime-load:{result['runId']}"])
        statuses += [j["status"] for j in jobs]
    assert len(statuses) == 140 and statuses.count("cancelled") == 120


@pytest.mark.bench  # `duetime local --backend moto` starts a moto server and its tables first (~20-40 s)
@pytest.mark.timeout(300)
def test_the_moto_backend_runs_every_one_off_the_load_creates(tmp_path, capsys):
    system = Local(tmp_path / "data", "--backend", "moto")
    endpoint = json.loads((system.data_dir / "local.json").read_text())["endpointUrl"]
    try:
        code, result = run_load(
            capsys, "--rate", "2", "--duration", "4", "--mix", "oneoff=1", "--lead", "4",
            "--data-dir", str(system.data_dir), "--drain", "60", "--cloudwatch", "--endpoint-url", endpoint,
        )  # fmt: skip
    finally:
        system.stop()
    assert code == 0, result
    assert result["executions"] == 8 and result["notStarted"] == 0
    assert result["latenessMs"]["max"] >= result["latenessMs"]["p99"] >= 0
    # And --cloudwatch read the (moto) CloudWatch of the stack's prefix: its DLQs, each empty
    dlqs = result["cloudwatch"]["dlqDepth"]
    assert dlqs == {job_class.dlq_name("duetime"): 0 for job_class in JOB_CLASSES.values()}


def test_the_cloudwatch_reader_takes_the_stacks_metrics_from_cloudwatch(ports):
    # Given the stack's metrics as its workers (EMF) and AWS publish them
    client = boto3.client("cloudwatch", region_name="us-east-1")
    now = datetime.now(UTC).replace(microsecond=0)
    worker = [{"Name": "service", "Value": "worker"}]
    client.put_metric_data(
        Namespace="duetime",
        MetricData=[
            {"MetricName": "StartLatenessMs", "Dimensions": worker, "Values": [5, 40, 900], "Counts": [1, 1, 1],
             "Timestamp": now},
            {"MetricName": "Started", "Dimensions": worker, "Value": 600, "Timestamp": now},
        ],
    )  # fmt: skip
    client.put_metric_data(
        Namespace="AWS/Lambda", MetricData=[{"MetricName": "Throttles", "Value": 3, "Timestamp": now}]
    )
    dlq = JOB_CLASSES["default"].dlq_name("duetime")
    client.put_metric_data(
        Namespace="AWS/SQS",
        MetricData=[
            {"MetricName": "ApproximateNumberOfMessagesVisible", "Dimensions": [{"Name": "QueueName", "Value": dlq}],
             "Value": 2, "Timestamp": now},
        ],
    )  # fmt: skip
    # When the load generator reads them for its window
    figures = load.cloudwatch_figures(client, "duetime", now - timedelta(seconds=30), now + timedelta(seconds=30))
    # Then it reports the worst lateness, the runs started per second, the throttles and the DLQ's depth
    assert figures["latenessMs"]["max"] == 900
    assert figures["started"] == 600 and figures["executionsPerSecond"] == 10
    assert figures["lambdaThrottles"] == 3
    assert figures["dlqDepth"][dlq] == 2 and figures["dlqDepth"][JOB_CLASSES["long"].dlq_name("duetime")] == 0
    # (moto computes no percentiles: p50/p99 are CloudWatch's own on AWS, None here)
    assert figures["latenessMs"]["p99"] is None
