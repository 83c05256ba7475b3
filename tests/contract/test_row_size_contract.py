"""A row's size on every adapter: an execution's payload and result are measured in the encoding the row
stores (UTF-8, not \\u escapes), so the largest of each is stored whole and read back equal, and a result
that would take the row past DynamoDB's item limit fails the attempt for good with a reason naming its
size, never a succeeded row without its result."""

from __future__ import annotations

from datetime import timedelta

from duetime.definitions import DYNAMODB_MAX_ITEM_BYTES, MAX_ERROR_BYTES, MAX_PAYLOAD_BYTES, MAX_RESULT_BYTES
from duetime.domain.models import AttemptRecord, ExecutionStatus
from duetime.service import executions as execution_cases
from duetime.service.dispatch import new_execution

from tests.contract.conftest import make_job

LARGEST_PAYLOAD = {"blob": "é" * ((MAX_PAYLOAD_BYTES - 20) // 2)}  # 2 bytes of UTF-8, 6 as an escape
LARGEST_RESULT = {"text": "😀" * ((MAX_RESULT_BYTES - 20) // 4)}  # 4 bytes of UTF-8, 12 as escapes


def running(ports, clock, payload, failed_attempts: int = 0):
    """A claimed row of a job whose run carries `payload`, after `failed_attempts` attempts that failed
    with the longest error text each."""
    job = make_job(clock)
    history = [
        AttemptRecord(
            attempt=n,
            worker_id="w0",
            started_at=clock(),
            finished_at=clock(),
            outcome="failed",
            error="x" * MAX_ERROR_BYTES,
        )
        for n in range(1, failed_attempts + 1)
    ]
    execution = new_execution(job, clock()).model_copy(
        update={"payload": payload, "attempts": history, "attempt": failed_attempts}
    )
    ports.store.put_execution(execution)
    key = ports.store.key_of(execution)
    claimed = ports.store.claim(key, "w1", clock(), clock() + timedelta(seconds=30)).claimed
    assert claimed is not None and claimed.attempt == failed_attempts + 1
    return key, claimed, job


def finish(ports, key, claimed, job, result):
    return execution_cases.complete(
        ports, key, claimed.attempt, True, result=result, job=job, current=claimed, claim_token=claimed.claim_token
    )


def test_the_largest_non_ascii_payload_and_result_are_stored_whole_and_read_back_equal(ports, clock):
    key, claimed, job = running(ports, clock, LARGEST_PAYLOAD)
    assert claimed.payload == LARGEST_PAYLOAD
    done = finish(ports, key, claimed, job, LARGEST_RESULT)
    stored = ports.store.get_execution(key)
    assert done.status == stored.status == ExecutionStatus.SUCCEEDED
    assert stored.result == LARGEST_RESULT and stored.payload == LARGEST_PAYLOAD


def test_a_result_that_would_not_fit_its_row_fails_the_attempt_for_good_naming_its_size(ports, clock):
    # Beside the largest payload and 20 attempts' error texts, the largest result passes the item limit
    assert MAX_PAYLOAD_BYTES + MAX_RESULT_BYTES + 20 * MAX_ERROR_BYTES > DYNAMODB_MAX_ITEM_BYTES
    key, claimed, job = running(ports, clock, LARGEST_PAYLOAD, failed_attempts=20)
    ended = finish(ports, key, claimed, job, LARGEST_RESULT)
    stored = ports.store.get_execution(key)
    # Failed for good (the same result would not fit again), with the payload and history kept
    assert ended.status == stored.status == ExecutionStatus.FAILED and stored.attempt == 21
    assert stored.result is None and f"result is {MAX_RESULT_BYTES - 20 + 11} bytes" in (stored.error or "")
    assert stored.payload == LARGEST_PAYLOAD and len(stored.attempts) == 21
