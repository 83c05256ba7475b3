"""End to end over `duetime local`: retries by policy, the dead-letter path and the owner's notice."""

from __future__ import annotations

from tests.e2e.helpers import iso_in, submit, wait_for, wait_terminal

FAST_RETRY = {"baseDelaySeconds": 0.5, "maxDelaySeconds": 1}


def test_demo_fail_twice_with_three_attempts_succeeds_on_the_third(api):
    job = submit(
        api,
        handler="demo.fail",
        payload={"times": 2},
        schedule={"at": iso_in(1)},
        retry={"maxAttempts": 3, **FAST_RETRY},
    )
    [execution] = wait_terminal(api, job["jobId"], timeout=30)
    assert execution["status"] == "succeeded"
    assert execution["attempt"] == 3
    assert [a["outcome"] for a in execution["attempts"]] == ["failed", "failed", "succeeded"]
    assert execution["result"] == {"succeededOnAttempt": 3}


def test_exhausted_attempts_end_failed_in_the_dlq_and_the_owner_is_told(api, local_system):
    job = submit(
        api,
        handler="demo.fail",
        payload={"times": 5},
        schedule={"at": iso_in(1)},
        retry={"maxAttempts": 2, **FAST_RETRY},
    )
    [execution] = wait_terminal(api, job["jobId"], timeout=30)
    assert execution["status"] == "failed" and execution["attempt"] == 2
    assert "attempt 2" in execution["error"]
    notifier = local_system.ports.notifier

    def told():
        return [d for owner, _, d in notifier.sent if owner == "alice" and d.get("jobId") == job["jobId"]]

    [notice] = wait_for(told, timeout=10, what="the owner's notice")
    assert notice["executionId"] == execution["executionId"] and notice["attempt"] == 2


def test_a_permanent_failure_fails_after_one_attempt(api):
    job = submit(
        api,
        handler="demo.fail",
        payload={"times": 1, "permanent": True},
        schedule={"at": iso_in(1)},
        retry={"maxAttempts": 5, **FAST_RETRY},
    )
    [execution] = wait_terminal(api, job["jobId"], timeout=30)
    assert execution["status"] == "failed" and execution["attempt"] == 1
    assert execution["error"].startswith("PermanentFailure")


def test_a_job_over_its_timeout_is_stopped_and_retried_as_a_timeout(api):
    job = submit(
        api,
        handler="demo.sleep",
        payload={"seconds": 30},
        schedule={"at": iso_in(1)},
        timeoutSeconds=1,
        retry={"maxAttempts": 2, **FAST_RETRY},
    )
    [execution] = wait_terminal(api, job["jobId"], timeout=30)
    assert execution["status"] == "failed" and execution["attempt"] == 2
    assert "timeout after 1 s" in execution["error"]
