"""The event schema (domain.events): detail types, what a run's and a job's detail hold, and never hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from duetime.domain.events import DETAIL_TYPES, JobChange, job_event, result_summary, run_event
from duetime.domain.models import Execution, ExecutionStatus, Job, JobSpec

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def job() -> Job:
    spec = JobSpec.model_validate(
        {"name": "n", "handler": "demo.echo", "schedule": {"cron": "* * * * *"}, "payload": {"password": "p"}}
    )
    return Job(**spec.model_dump(), job_id="j_0000000000000001", owner="alice", created_at=NOW, updated_at=NOW)


def execution(status: ExecutionStatus, **extra: object) -> Execution:
    return Execution.model_validate(
        {
            "executionId": "j_0000000000000001.1796029200000",
            "jobId": "j_0000000000000001",
            "scheduledAt": NOW,
            "dueAt": NOW,
            "status": status,
            **extra,
        }
    )


@pytest.mark.parametrize("status", [ExecutionStatus.SCHEDULED, ExecutionStatus.RUNNING, ExecutionStatus.CANCELLED])
def test_a_run_that_has_not_ended_for_good_is_no_event(status):
    assert run_event(execution(status), job()) is None


def test_a_failed_run_tells_its_facts_and_lateness_but_never_the_payload():
    failed = execution(
        ExecutionStatus.FAILED,
        attempt=3,
        startedAt=NOW + timedelta(milliseconds=250),
        finishedAt=NOW + timedelta(seconds=2),
        error="x" * 2000,
    )
    event = run_event(failed, job())
    assert event is not None and event.detail_type == "Execution Failed" and event.time == failed.finished_at
    detail = event.detail
    assert detail["owner"] == "alice" and detail["attempt"] == 3 and detail["latenessMs"] == 250
    assert len(detail["error"]) == 512 and "password" not in str(event.envelope())
    assert event.envelope()["source"] == "duetime" and event.envelope()["detail-type"] == "Execution Failed"


def test_a_result_is_summarised_by_type_and_size():
    assert result_summary(None) is None
    assert result_summary({"a": 1}) == {"type": "object", "bytes": 7}
    assert result_summary([1, 2]) == {"type": "array", "bytes": 5}
    assert result_summary("hi") == {"type": "string", "bytes": 4}
    assert result_summary(True) == {"type": "boolean", "bytes": 4}
    assert result_summary(1.5) == {"type": "number", "bytes": 3}


def test_every_job_change_has_its_detail_type():
    for change in JobChange:
        event = job_event(job(), change, NOW)
        assert event.detail_type == f"Job {change.value}" and event.detail_type in DETAIL_TYPES
        assert event.detail["change"] == change.value and event.detail["jobVersion"] == 1
