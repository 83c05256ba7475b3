"""End to end over `duetime local`: a lateness budget (issue 34). A run that starts past dueAt +
lateAfterSeconds is marked late once, its owner is told once, and GET /jobs/{id} shows the share of runs
started within budget over 7 and 30 days; bad budgets are 400 naming the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.e2e.helpers import iso_in, submit, wait_for, wait_terminal


def iso_ago(seconds: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_a_late_run_is_told_once_and_counts_against_the_share_within_budget(api, local_system):
    for bad in (0, 7 * 86400 + 1, "soon"):
        refused = api.post(
            "/jobs", json={"name": "r", "handler": "demo.echo", "schedule": {"at": iso_in(60)}, "lateAfterSeconds": bad}
        )
        assert refused.status_code == 400 and refused.json()["error"]["field"] == "lateAfterSeconds"
    # A one-off due 30 s ago starts now: 30 s past its dueAt, beyond its 5 s budget
    late = submit(api, handler="demo.echo", schedule={"at": iso_ago(30)}, lateAfterSeconds=5)
    assert late["lateAfterSeconds"] == 5
    [execution] = wait_terminal(api, late["jobId"], timeout=30)
    assert execution["status"] == "succeeded" and execution["lateAt"] is not None
    shown = api.get(f"/jobs/{late['jobId']}").json()
    assert shown["withinBudget"] == [
        {"days": 7, "onTime": 0, "late": 1, "share": 0.0},
        {"days": 30, "onTime": 0, "late": 1, "share": 0.0},
    ]
    notifier = local_system.ports.notifier

    def told():
        return [d for _, _, d in notifier.sent if d.get("kind") == "late" and d.get("jobId") == late["jobId"]]

    [notice] = wait_for(told, timeout=30, what="the owner's late notice")
    assert notice["executionId"] == execution["executionId"] and notice["owner"] == "alice"
    # A run within a generous budget counts in time; a job without a budget shows none
    on_time = submit(api, handler="demo.echo", schedule={"at": iso_in(1)}, lateAfterSeconds=600)
    [execution] = wait_terminal(api, on_time["jobId"], timeout=30)
    assert execution["lateAt"] is None
    assert api.get(f"/jobs/{on_time['jobId']}").json()["withinBudget"][0] == {
        "days": 7,
        "onTime": 1,
        "late": 0,
        "share": 1.0,
    }
    plain = submit(api, handler="demo.echo", schedule={"at": iso_in(60)})
    assert api.get(f"/jobs/{plain['jobId']}").json()["withinBudget"] == []
    assert len(told()) == 1
