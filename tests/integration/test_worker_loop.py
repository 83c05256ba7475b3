"""The worker's receive loop against moto: it runs what is due and deletes handled messages in batches."""

from __future__ import annotations

from collections import Counter

from duetime.domain.models import ExecutionStatus, JobSpec
from duetime.service.jobs import submit_job
from duetime.worker.observe import CountingObserver
from duetime.worker.runtime import Worker

from tests.integration.succeeded import first_runs_once_succeeded, worker_loop


def test_the_receive_loop_runs_due_executions_and_batches_its_deletes(ports, clock):
    calls: Counter[str] = Counter()
    ports.queues.client.meta.events.register("before-call.sqs.*", lambda model, **_: calls.update([model.name]))
    jobs = [
        submit_job(
            ports,
            "alice",
            JobSpec.model_validate(
                {"name": f"t{i}", "handler": "demo.echo", "schedule": {"at": "2026-12-01T09:00:00Z"}}
            ),
        )[0]
        for i in range(20)
    ]
    worker = Worker(ports, "default", "w1", concurrency=8, observer=CountingObserver())
    with worker_loop(worker):
        rows = first_runs_once_succeeded(ports, jobs)
    assert all(r.status == ExecutionStatus.SUCCEEDED for r in rows)
    assert calls["DeleteMessage"] == 0
    assert 2 <= calls["DeleteMessageBatch"] <= 20
    assert ports.queues.receive("default", 10, 0, 0) == []
