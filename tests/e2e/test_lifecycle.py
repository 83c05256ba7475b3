"""End to end over `duetime local`: one-off jobs run on time, retries, the dead-letter path."""

from __future__ import annotations

from tests.e2e.helpers import iso_in, parse, submit, wait_terminal


def test_a_one_off_echo_job_runs_within_two_seconds_of_its_time(api):
    # Given a demo.echo job due in 5 s
    job = submit(api, handler="demo.echo", payload={"hello": "world"}, schedule={"at": iso_in(5)})
    # When it runs
    [execution] = wait_terminal(api, job["jobId"], timeout=20)
    # Then it succeeded with the payload as result, started under 2 s after its slot
    assert execution["status"] == "succeeded"
    assert execution["result"] == {"hello": "world"}
    lateness = (parse(execution["startedAt"]) - parse(execution["scheduledAt"])).total_seconds()
    assert -0.05 <= lateness < 2.0
    assert execution["attempt"] == 1
