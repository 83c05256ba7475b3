"""Queues: one due queue and one DLQ per job class, encrypted, TLS-only, redriven after MAX_RECEIVE_COUNT."""

from __future__ import annotations

import pytest
from duetime.definitions import JOB_CLASSES, MAX_RECEIVE_COUNT, Settings

PREFIX = Settings().prefix
CLASSES = sorted(JOB_CLASSES)


def _queue(synthesized, name: str) -> tuple[str, dict]:
    found = [
        (k, v) for k, v in synthesized.resources("AWS::SQS::Queue").items() if v["Properties"]["QueueName"] == name
    ]
    assert len(found) == 1, f"one queue named {name}"
    return found[0]


def test_a_due_queue_and_a_dlq_per_job_class(synthesized):
    names = {q["Properties"]["QueueName"] for q in synthesized.resources("AWS::SQS::Queue").values()}
    expected = {c.queue_name(PREFIX) for c in JOB_CLASSES.values()} | {c.dlq_name(PREFIX) for c in JOB_CLASSES.values()}
    assert names == expected


@pytest.mark.parametrize("job_class", CLASSES)
def test_due_queue_redrives_to_its_dlq_after_max_receive_count(synthesized, job_class):
    definition = JOB_CLASSES[job_class]
    dlq_id, _ = _queue(synthesized, definition.dlq_name(PREFIX))
    _, due = _queue(synthesized, definition.queue_name(PREFIX))
    assert due["Properties"]["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": MAX_RECEIVE_COUNT,
    }


@pytest.mark.parametrize("job_class", CLASSES)
def test_queues_and_dlqs_are_encrypted(synthesized, job_class):
    definition = JOB_CLASSES[job_class]
    for name in (definition.queue_name(PREFIX), definition.dlq_name(PREFIX)):
        assert _queue(synthesized, name)[1]["Properties"]["SqsManagedSseEnabled"] is True


@pytest.mark.parametrize("job_class", CLASSES)
def test_queues_and_dlqs_refuse_requests_without_tls(synthesized, job_class):
    definition = JOB_CLASSES[job_class]
    policies = synthesized.resources("AWS::SQS::QueuePolicy").values()
    for name in (definition.queue_name(PREFIX), definition.dlq_name(PREFIX)):
        queue_id, _ = _queue(synthesized, name)
        denies = [
            s
            for p in policies
            if {"Ref": queue_id} in p["Properties"]["Queues"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        ]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denies
        ), f"{name} must deny non-TLS requests"


def test_lambda_class_visibility_covers_the_worker_timeout(synthesized):
    for name, definition in JOB_CLASSES.items():
        _, due = _queue(synthesized, definition.queue_name(PREFIX))
        visibility = due["Properties"]["VisibilityTimeout"]
        if definition.worker_kind == "lambda":
            worker = synthesized.stack.functions.workers[name]
            timeout = synthesized.raw["Resources"][synthesized.logical_id(worker)]["Properties"]["Timeout"]
            assert visibility >= timeout
        else:
            assert visibility == definition.lease_seconds
