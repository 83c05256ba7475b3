"""`duetime load`'s arithmetic: the lateness percentiles, the window, the report from an execution history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from duetime.cli import load
from duetime.cli.load import BearerSigner, LoadPlan, LoadRun
from duetime.domain import capacity


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert load.percentile(values, 0.5) == 50
    assert load.percentile(values, 0.99) == 99
    assert load.percentile([7.0], 0.99) == 7
    assert load.percentile([], 0.5) == 0


def test_the_lead_is_one_figure_or_a_range():
    assert load.parse_lead("10") == (10, 10)
    assert load.parse_lead("8:18") == (8, 18)
    with pytest.raises(ValueError):
        load.parse_lead("0.5")
    with pytest.raises(ValueError):
        load.parse_lead("9:3")


def test_the_window_opens_at_a_minute_start_when_cron_jobs_run_in_it():
    opens = load.window_start(True, 3)
    assert opens.second == 0 and opens.microsecond == 0
    assert timedelta(seconds=2) <= opens - datetime.now(UTC) <= timedelta(seconds=121)
    quick = load.window_start(False, 3) - datetime.now(UTC)
    assert timedelta(seconds=3) <= quick <= timedelta(seconds=4)


def execution(due: datetime, started_ms: int | None, finished_ms: int | None = None, **extra):
    row = {"executionId": f"e{due.timestamp()}{started_ms}", "dueAt": load.iso_ms(due), **extra}
    if started_ms is not None:
        row["attempts"] = [{"attempt": 1, "startedAt": load.iso_ms(due + timedelta(milliseconds=started_ms))}]
        row["finishedAt"] = load.iso_ms(due + timedelta(milliseconds=finished_ms or started_ms + 5))
    return row


def test_the_report_times_attempt_one_from_due_and_counts_what_never_started():
    plan = LoadPlan("http://x", BearerSigner({"o": "t"}), ("o",), rate=10, duration=10, mix=(("one-off", 1.0),))
    run = LoadRun(plan)
    opens = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [execution(opens + timedelta(seconds=i / 10), started_ms=i) for i in range(100)]  # 0..99 ms late
    # A retried execution: its startedAt is attempt 2's, its lateness attempt 1's
    retried = execution(opens, started_ms=7, startedAt=load.iso_ms(opens + timedelta(seconds=30)))
    rows.append(retried)
    rows.append(execution(opens, started_ms=None))
    run.tally.requests = 102
    result = load.report(plan, run, {str(i): r for i, r in enumerate(rows)}, 0, 0, 0, opens, opens + timedelta(10))
    assert result["executions"] == 102 and result["notStarted"] == 1
    assert result["latenessMs"] == {"p50": 49.0, "p99": 98.0, "max": 99.0}
    # 101 finished between the first due and the last finish (9.9 s + 104 ms later); 102 fell due over 9.9 s
    assert result["executionsPerSecond"] == pytest.approx(101 / 10.004, abs=0.01)
    assert result["dueRate"] == pytest.approx(102 / 9.9, abs=0.01)
    expected = capacity.estimate(capacity.Inputs(rate=101 / 10, mix=(("one-off", 1.0),))).cost_per_million
    assert result["costPerMillion"]["total"] == expected["total"]
    assert result["costPerMillion"]["apiRequestsPerExecutionCounted"] == 1.0


def test_sigv4_signs_for_execute_api_in_the_region_with_the_callers_credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    headers = load.SigV4Signer("eu-west-1").headers(
        "iam", "POST", "https://abc.execute-api.eu-west-1.amazonaws.com/prod/jobs", b"{}"
    )
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in headers["Authorization"]
    assert "X-Amz-Date" in headers
