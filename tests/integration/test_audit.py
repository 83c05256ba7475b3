"""`duetime audit` finds each broken invariant, and nothing on a healthy system."""

from __future__ import annotations

from datetime import timedelta

import pytest
from duetime.cli import audit as audit_cli
from duetime.cli.main import main
from duetime.domain.keys import preload_record_key, shard_of_partition
from duetime.domain.models import ExecutionStatus, JobSpec, to_ms
from duetime.service import executions as cases
from duetime.service.audit import audit, stale_after
from duetime.service.deadletters import drain_dead_letters
from duetime.service.dispatch import new_execution, preload
from duetime.service.jobs import submit_job


def submit(ports, **overrides):
    body = {"name": "t", "handler": "demo.echo", "schedule": {"at": "2026-12-01T09:00:05Z"}}
    body.update(overrides)
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    return job


def checks(report):
    return sorted(f.check for f in report.findings)


def claim_one(ports, clock, worker="w1"):
    clock.advance(5)
    [received] = ports.queues.receive("default", 10, 0, 30)
    claim = cases.claim_execution(ports, received.message, worker)
    assert claim.verdict == cases.ClaimVerdict.CLAIMED
    return received, claim.execution


def test_a_healthy_system_has_no_findings(ports, clock):
    submit(ports)
    cron = submit(ports, schedule={"cron": "*/5 * * * *", "timeZone": "UTC"})
    received, execution = claim_one(ports, clock)
    cases.complete(ports, received.message.key, execution.attempt, succeeded=True)
    report = audit(ports)
    assert report.ok, report.lines()
    assert report.active_cron_jobs == 1 and report.waiting == 1 and report.dead_letters == {"default": 0, "long": 0}
    assert report.lines()[-1] == "no invariant broken"
    assert cron.job_id


def test_an_execution_stored_outside_its_due_partition_is_found(ports, clock):
    job = submit(ports, schedule={"at": "2026-12-01T11:00:00Z"})
    [row] = ports.store.executions_of_job(job.job_id)
    key = ports.store.key_of(row)
    # Moved to the 09:00 partition while still due at 11:00 (what a move that forgot to re-key would leave)
    table = ports.store.executions_table
    item = ports.store.client.get_item(TableName=table, Key={"pk": {"S": key.pk}, "sk": {"S": key.sk}})["Item"]
    ports.store.client.delete_item(TableName=table, Key={"pk": {"S": key.pk}, "sk": {"S": key.sk}})
    item["pk"] = {"S": "2026120109#" + key.pk.split("#")[1]}
    ports.store.client.put_item(TableName=table, Item=item)
    [finding] = audit(ports).findings
    assert finding.check == "misplaced" and finding.subject == row.execution_id and key.pk in finding.detail


def test_an_open_execution_missing_from_the_open_index_is_found_once_the_sweep_has_passed_it(ports, clock):
    job = submit(ports, schedule={"at": "2026-12-01T11:00:00Z"})
    [row] = ports.store.executions_of_job(job.job_id)
    key = ports.store.key_of(row)
    ports.store.client.update_item(
        TableName=ports.store.executions_table,
        Key={"pk": {"S": key.pk}, "sk": {"S": key.sk}},
        UpdateExpression="REMOVE openShard",
    )
    # A row due later than its shard's sweep has gone is not in the index yet, rightly (dispatch.sweep)
    assert audit(ports).ok
    # Its shard's sweep recorded past its due time, yet the row is still out of the index, and out of its job's
    # (the sweep enters a row it finds open in both): two findings
    record = preload_record_key(shard_of_partition(key.pk))
    ports.store.acquire_lease(record, "p", to_ms(clock()), to_ms(clock()) + 1000)
    ports.store.advance_cursor(record, "p", to_ms(clock()), swept_ms=to_ms(row.due_at))
    assert sorted(checks(audit(ports))) == ["not in the job index", "not in the open index"]


def test_a_running_execution_whose_lease_ended_a_cycle_ago_is_abandoned_until_taken_over(ports, clock):
    # Given a claimed execution whose worker vanished with its message
    submit(ports)
    received, execution = claim_one(ports, clock)
    ports.queues.delete("default", received.receipt)
    # Within the reconciler's grace it is not a finding yet
    clock.advance(30 + stale_after(ports).total_seconds() - 1)
    assert audit(ports).ok
    # After it, it is
    clock.advance(2)
    report = audit(ports)
    assert checks(report) == ["abandoned"] and report.running == 1
    assert execution.execution_id in report.lines()[1]
    # Once the reconciler re-sent it and a worker took attempt 2, nothing is found
    preload(ports, "p")
    [again] = ports.queues.receive("default", 10, 0, 30)
    assert cases.claim_execution(ports, again.message, "w2").execution.attempt == 2
    assert audit(ports).ok


def test_a_waiting_execution_never_picked_up_is_stuck(ports, clock):
    job = submit(ports, schedule={"at": "2026-12-01T11:00:00Z"})
    orphan = new_execution(job, clock.now + timedelta(seconds=5), kind="manual")  # written, never sent
    assert ports.store.put_execution(orphan)
    clock.advance(5 + stale_after(ports).total_seconds() + 1)
    assert checks(audit(ports)) == ["stuck waiting"]


def test_an_active_cron_job_without_a_waiting_execution_is_a_broken_chain(ports, clock):
    job = submit(ports, schedule={"cron": "0 * * * *", "timeZone": "UTC"})
    [waiting] = ports.store.executions_of_job(job.job_id)
    ports.store.end_waiting(ports.store.key_of(waiting), ExecutionStatus.CANCELLED, clock.now, "lost in a test")
    report = audit(ports)
    assert checks(report) == ["cron chain broken"] and report.findings[0].subject == job.job_id


def test_an_open_one_off_job_whose_run_ended_without_completing_it_is_found(ports, clock):
    job = submit(ports)
    [waiting] = ports.store.executions_of_job(job.job_id)
    # Ended the way no path of the service ends it: the run alone, the job left active
    ports.store.end_waiting(ports.store.key_of(waiting), ExecutionStatus.SKIPPED, clock.now, "lost in a test")
    report = audit(ports)
    assert checks(report) == ["one-off not completed"] and report.findings[0].subject == job.job_id


def test_dead_letters_not_yet_handled_are_reported_per_class(ports, clock):
    submit(ports, retry={"maxAttempts": 1})
    received, execution = claim_one(ports, clock)
    cases.complete(ports, received.message.key, execution.attempt, succeeded=False, error="no")
    report = audit(ports)
    assert checks(report) == ["dead letters"] and report.dead_letters["default"] == 1
    drain_dead_letters(ports, "default")
    assert audit(ports).ok


@pytest.fixture
def audited_ports(ports, monkeypatch):
    monkeypatch.setattr(audit_cli, "build_ports", lambda config: ports)
    return ports


def test_the_audit_command_prints_its_findings_and_exits_1_if_any(audited_ports, clock, capsys):
    job = submit(audited_ports, schedule={"cron": "0 * * * *", "timeZone": "UTC"})
    assert main(["audit", "--data-dir", ""]) == 0
    assert "no invariant broken" in capsys.readouterr().out
    [waiting] = audited_ports.store.executions_of_job(job.job_id)
    audited_ports.store.end_waiting(audited_ports.store.key_of(waiting), ExecutionStatus.CANCELLED, clock.now)
    assert main(["audit", "--data-dir", ""]) == 1
    out = capsys.readouterr().out
    assert f"cron chain broken: {job.job_id}" in out and "1 finding(s)" in out
