"""Lateness budgets (issue 34): a run not started by dueAt + lateAfterSeconds is found late once (by the
reconciler while it waits, or by the claim that starts it late), emits `Execution Late`, tells the owner
once, and counts in the share of runs started within budget that GET /jobs/{id} shows. Both stores."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from duetime.definitions import METRIC_RUNS_LATE, METRIC_RUNS_ON_TIME
from duetime.domain.events import LATE_DETAIL_TYPE
from duetime.domain.models import JobSpec, JobStatus
from duetime.event_sinks import emf_owner_count
from duetime.service import executions as cases
from duetime.service.deadletters import drain_dead_letters
from duetime.service.dispatch import reconcile, reconcile_after
from duetime.service.jobs import get_job, submit_job
from pydantic import ValidationError

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS


class Recorded:
    """An event sink that keeps what it was given."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def publish(self, events: Any) -> None:
        self.events.extend(events)

    def late(self) -> list[Any]:
        return [e for e in self.events if e.detail_type == LATE_DETAIL_TYPE]


@pytest.fixture
def recorded(ports):
    sink = Recorded()
    return replace(ports, events=sink), sink


def spec(**overrides):
    body = {
        "name": "report",
        "handler": "demo.echo",
        "schedule": {"at": "2026-12-01T09:00:05Z"},
        "lateAfterSeconds": 10,
    }
    body.update(overrides)
    return JobSpec.model_validate(body, by_alias=True, by_name=False)


def the_message(ports):
    [received] = ports.queues.receive("default", 10, 0, 30)
    return received.message


def late_notices(ports):
    drain_dead_letters(ports, "default")
    return [(owner, detail) for owner, _, detail in ports.notifier.sent if detail.get("kind") == "late"]


def shares(ports, job_id):
    return [(s.days, s.on_time, s.late, s.share) for s in get_job(ports, "alice", job_id).health.within_budget]


def test_a_budget_must_be_a_positive_number_of_seconds_up_to_a_week(backend):
    for bad in (0, -1, 7 * 86400 + 1, "soon"):
        with pytest.raises(ValidationError) as refused:
            spec(lateAfterSeconds=bad)
        assert refused.value.errors()[0]["loc"] == ("lateAfterSeconds",)
    assert spec().late_after_seconds == 10 and spec(lateAfterSeconds=None).late_after_seconds is None


def test_a_run_started_within_budget_counts_in_time_and_announces_nothing(recorded, clock):
    ports, sink = recorded
    job, _ = submit_job(ports, "alice", spec())
    clock.advance(5 + 9)  # claimed 9 s after its dueAt: within the 10 s budget
    claim = cases.claim_execution(ports, the_message(ports), "w1")
    assert claim.verdict == cases.ClaimVerdict.CLAIMED and claim.execution.late_at is None
    assert sink.late() == [] and late_notices(ports) == []
    assert shares(ports, job.job_id) == [(7, 1, 0, 1.0), (30, 1, 0, 1.0)]


def test_a_run_that_starts_late_is_announced_once_at_its_claim(recorded, clock):
    ports, sink = recorded
    job, _ = submit_job(ports, "alice", spec())
    clock.advance(5 + 11)  # claimed 11 s after its dueAt
    message = the_message(ports)
    claim = cases.claim_execution(ports, message, "w1")
    assert claim.verdict == cases.ClaimVerdict.CLAIMED
    row = ports.store.get_execution(message.key)
    assert row.late_at == clock.now
    [event] = sink.late()
    assert event.detail["executionId"] == row.execution_id and event.detail["latenessMs"] == 11_000
    assert event.detail["startedAt"] is not None and event.owner == "alice"
    [(owner, notice)] = late_notices(ports)
    assert owner == "alice" and notice["executionId"] == row.execution_id and notice["lateAfterSeconds"] == 10
    # The reconciler finds nothing more to say about it
    clock.advance(reconcile_after(ports).total_seconds() + 60)
    for shard in range(ports.settings.shards):
        reconcile(ports, shard, clock.now)
    assert len(sink.late()) == 1 and late_notices(ports) == [(owner, notice)]
    assert shares(ports, job.job_id) == [(7, 0, 1, 0.0), (30, 0, 1, 0.0)]


def test_a_run_that_has_not_started_is_found_late_by_the_reconciler_once(recorded, clock):
    ports, sink = recorded
    job, _ = submit_job(ports, "alice", spec())
    message = the_message(ports)  # received and lost: no worker starts it
    # When the reconciler looks, long past the run's budget
    clock.advance(5 + reconcile_after(ports).total_seconds() + 60)
    for _ in range(2):  # two cycles: the second finds it marked already
        for shard in range(ports.settings.shards):
            reconcile(ports, shard, clock.now)
    # Then it is late once: one event (no startedAt), one notice, one late run counted
    [event] = sink.late()
    assert event.detail["startedAt"] is None and event.detail["status"] == "scheduled"
    assert ports.store.get_execution(message.key).late_at is not None
    assert len(late_notices(ports)) == 1
    # And when it finally starts, its claim neither announces nor counts it again
    cases.claim_execution(ports, message, "w1")
    assert len(sink.late()) == 1 and len(late_notices(ports)) == 1
    assert shares(ports, job.job_id) == [(7, 0, 1, 0.0), (30, 0, 1, 0.0)]


def test_a_job_without_a_budget_shows_no_share_and_writes_nothing_for_it(recorded, clock):
    ports, sink = recorded
    job, _ = submit_job(ports, "alice", spec(lateAfterSeconds=None))
    clock.advance(5 + 600)
    cases.claim_execution(ports, the_message(ports), "w1")
    assert sink.late() == [] and shares(ports, job.job_id) == []


def test_a_cancelled_jobs_waiting_run_is_not_announced_late(recorded, clock):
    ports, sink = recorded
    job, _ = submit_job(ports, "alice", spec())
    message = the_message(ports)
    # A cancel that died before it reached the job's waiting run: the job is cancelled, its row still waits
    ports.store.update_job_status(job, JobStatus.CANCELLED, clock.now)
    clock.advance(5 + reconcile_after(ports).total_seconds() + 60)
    for shard in range(ports.settings.shards):
        reconcile(ports, shard, clock.now)
    assert sink.late() == [] and late_notices(ports) == []
    assert ports.store.get_execution(message.key).late_at is None


def test_on_aws_each_counted_run_is_a_metric_of_its_owner_named_or_other(recorded, clock, capsys):
    # The stack names alice in its lateness metrics (metricOwners); bob is one of the rest
    ports, _ = recorded
    ports = replace(ports, settings=replace(ports.settings, metric_owners=("alice",)), owner_metric=emf_owner_count)
    capsys.readouterr()
    submit_job(ports, "alice", spec())
    clock.advance(5 + 11)  # alice's run is claimed 11 s after its dueAt: late
    cases.claim_execution(ports, the_message(ports), "w1")
    submit_job(ports, "bob", spec(schedule={"at": "2026-12-01T09:00:20Z"}))
    clock.advance(4 + 9)  # bob's within its 10 s
    cases.claim_execution(ports, the_message(ports), "w1")
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    counted = [
        (doc["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"], doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"])
        for doc in documents
    ]
    assert counted == [(METRIC_RUNS_LATE, [["Owner"]]), (METRIC_RUNS_ON_TIME, [["Owner"]])]
    assert [doc["Owner"] for doc in documents] == ["alice", "other"]
    assert documents[0][METRIC_RUNS_LATE] == [1.0] and documents[1]["_aws"]["CloudWatchMetrics"][0]["Namespace"]
