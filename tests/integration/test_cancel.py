"""Cancel touches only what is open: bounded work whatever the job's history holds."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from duetime.adapters.aws.items import execution_to_item
from duetime.domain.models import ExecutionStatus, JobSpec
from duetime.service import executions as cases
from duetime.service.dispatch import new_execution
from duetime.service.jobs import cancel_job, submit_job

from tests.integration.bulk import write_directly

# Enough history that walking it would show in the call counts: its rows 50 BatchGetItems, against the two a
# bounded cancel makes. (It was 50,000 rows, then 20,000, whose byJob keys filled three 1 MB query pages: moto's
# CPU for the puts in every make test, for the same proof.)
HISTORY = 5_000


def test_cancel_of_a_job_with_five_thousand_finished_executions_does_bounded_work(ports, clock):
    # Given an every-minute job with 5,000 finished runs behind it, one running and one waiting
    spec = JobSpec.model_validate({"name": "c", "handler": "demo.echo", "schedule": {"cron": "* * * * *"}})
    job, _ = submit_job(ports, "alice", spec)
    [waiting] = ports.store.executions_of_job(job.job_id)
    first = waiting.scheduled_at - timedelta(minutes=HISTORY + 1)
    finished = [
        new_execution(job, first + timedelta(minutes=i)).model_copy(
            update={"status": ExecutionStatus.SUCCEEDED, "attempt": 1, "finished_at": clock.now}
        )
        for i in range(HISTORY)
    ]
    write_directly(ports, ports.store.executions_table, [execution_to_item(e, ports.store.key_of(e)) for e in finished])
    running = new_execution(job, waiting.scheduled_at - timedelta(minutes=1))
    assert ports.store.put_execution(running)
    running_key = ports.store.key_of(running)
    assert cases.claim_execution(ports, cases.DueMessage.for_execution(running, running_key), "w1").verdict == (
        cases.ClaimVerdict.CLAIMED
    )
    calls: Counter[str] = Counter()
    ports.store.client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.update([model.name]))
    # When it is cancelled
    cancel_job(ports, "alice", job.job_id)
    # Then only its two open rows were ended, after a handful of calls, not a walk of its history: the job's
    # openByJob entries, how far the sweep has gone (the shards' records, with the job and its timings record:
    # a BatchGetItem) and the job's rows due since (a byJob Query of the last hour's keys, and a BatchGetItem of
    # those due after it with the rows of its slots since, by their keys: domain/history.py)
    assert ports.store.get_execution(ports.store.key_of(waiting)).status == ExecutionStatus.CANCELLED
    assert ports.store.get_execution(running_key).status == ExecutionStatus.CANCELLED
    assert calls["Query"] == 2 and calls["BatchGetItem"] == 2, calls
    assert sum(calls.values()) <= 10, calls
