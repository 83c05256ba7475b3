"""POST /jobs/bulk through the API handler on both backends: pause, resume and cancel many jobs by filter or by
ids, a dry run, bounded pages going on by cursor, each job changed as its own route changes it (its event, held
rows, the grant of the caller's groups on resume) and each failure reported with its job."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from duetime.api.app import build_app
from duetime.api.auth import issue_token
from duetime.domain.events import Event
from duetime.domain.grants import Grants
from duetime.domain.models import ExecutionStatus

from tests.conftest import BOTH_BACKENDS
from tests.integration.test_api_contract import SECRET, Client, assert_error

pytestmark = BOTH_BACKENDS


class Recorded:
    """An event sink that keeps what it is given."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def publish(self, events: list[Event]) -> None:
        self.events.extend(events)


@pytest.fixture
def recorded() -> Recorded:
    return Recorded()


@pytest.fixture
def loud_ports(ports: Any, recorded: Recorded) -> Any:
    return replace(ports, events=recorded)


@pytest.fixture
def app(loud_ports: Any) -> Any:
    return build_app(loud_ports, local_secret=SECRET)


@pytest.fixture
def alice(app: Any) -> Client:
    return Client(app, issue_token(SECRET, "alice"))


@pytest.fixture
def bob(app: Any) -> Client:
    return Client(app, issue_token(SECRET, "bob"))


def create(client: Client, name: str, tags: dict[str, str] | None = None, handler: str = "demo.echo") -> str:
    body = {"name": name, "handler": handler, "schedule": {"cron": "0 * * * *"}, "tags": tags or {}}
    code, job = client.call("POST", "/jobs", body)
    assert code == 201, job
    return str(job["jobId"])


def status(client: Client, job_id: str) -> str:
    code, job = client.call("GET", f"/jobs/{job_id}")
    assert code == 200, job
    return str(job["status"])


def bulk(client: Client, **body: Any) -> dict[str, Any]:
    code, answer = client.call("POST", "/jobs/bulk", body)
    assert code == 200, answer
    return dict(answer)


def test_a_dry_run_counts_the_jobs_a_filter_would_change_and_changes_nothing(alice, bob):
    payments = [create(alice, f"p{i}", {"team": "payments"}) for i in range(3)]
    create(alice, "other", {"team": "search"})
    create(bob, "bobs", {"team": "payments"})  # another owner's: never selected
    answer = bulk(alice, action="pause", filter={"tag": ["team:payments"]}, dryRun=True)
    assert answer["matched"] == 3 and sorted(answer["jobIds"]) == sorted(payments)
    assert answer["changed"] == [] and answer["failed"] == [] and answer["nextCursor"] is None
    assert {status(alice, job_id) for job_id in payments} == {"active"}
    # Resume would change none of them (none is paused)
    assert bulk(alice, action="resume", filter={"tag": ["team:payments"]}, dryRun=True)["matched"] == 0


def test_pause_by_filter_changes_each_matching_job_as_its_own_route_does(alice, loud_ports, recorded):
    payments = [create(alice, f"p{i}", {"team": "payments"}, "demo.sleep") for i in range(3)]
    other = create(alice, "other", {"team": "payments"})  # another handler
    answer = bulk(alice, action="pause", filter={"tag": ["team:payments"], "handler": "demo.sleep"}, note="incident")
    assert sorted(answer["changed"]) == sorted(payments) and answer["matched"] == 3
    assert answer["failed"] == [] and answer["unchanged"] == [] and answer["nextCursor"] is None
    for job_id in payments:
        code, job = alice.call("GET", f"/jobs/{job_id}")
        assert job["status"] == "paused" and job["note"] == "incident"
        # Its waiting run is held: out of the reconciler's open index, still the job's open row
        [waiting] = loud_ports.store.open_executions_of_job(job_id)
        assert waiting.status == ExecutionStatus.SCHEDULED
        shard = int(loud_ports.store.key_of(waiting).pk.rsplit("#", 1)[1])
        assert waiting.execution_id not in [
            e.execution_id for e in loud_ports.store.open_page(shard, 2**42, 100).executions
        ]
    assert status(alice, other) == "active"
    paused = [e.detail["jobId"] for e in recorded.events if e.detail_type == "Job Paused"]
    assert sorted(paused) == sorted(payments)
    # Resume and cancel by the same filter
    assert sorted(bulk(alice, action="resume", filter={"tag": ["team:payments"]})["changed"]) == sorted(payments)
    cancelled = bulk(alice, action="cancel", filter={"tag": ["team:payments"]})["changed"]
    assert sorted(cancelled) == sorted([*payments, other])
    assert {status(alice, job_id) for job_id in [*payments, other]} == {"cancelled"}
    for job_id in payments:
        assert loud_ports.store.open_executions_of_job(job_id) == []


def test_a_filter_goes_on_by_cursor_a_bounded_page_at_a_time(alice):
    jobs = [create(alice, f"j{i}", {"fleet": "a"}) for i in range(5)]
    dry = bulk(alice, action="cancel", filter={"tag": ["fleet:a"]}, dryRun=True, limit=2)
    assert dry["matched"] == 5  # a dry run counts past one request's limit
    changed: list[str] = []
    cursor = None
    requests = 0
    while True:
        body: dict[str, Any] = {"action": "cancel", "filter": {"tag": ["fleet:a"]}, "limit": 2}
        if cursor:
            body["cursor"] = cursor
        answer = bulk(alice, **body)
        requests += 1
        assert len(answer["changed"]) <= 2
        changed += answer["changed"]
        cursor = answer["nextCursor"]
        if cursor is None:
            break
    assert sorted(changed) == sorted(jobs) and len(changed) == len(set(changed)) and requests >= 3


def test_by_ids_each_job_is_changed_or_reported_with_its_own_error(alice, bob):
    active, already, ended = create(alice, "a"), create(alice, "b"), create(alice, "c")
    bobs = create(bob, "bobs")
    assert alice.call("PATCH", f"/jobs/{already}", {"status": "paused"})[0] == 200
    assert alice.call("DELETE", f"/jobs/{ended}")[0] == 204
    ids = [active, already, ended, bobs, "not-a-job", active]
    # A dry run counts the one job a pause changes, and reports the ids that name none of alice's jobs
    dry = bulk(alice, action="pause", jobIds=ids, dryRun=True)
    assert dry["matched"] == 1 and dry["jobIds"] == [active] and status(alice, active) == "active"
    assert sorted(f["jobId"] for f in dry["failed"]) == sorted([bobs, "not-a-job"]) and dry["changed"] == []
    answer = bulk(alice, action="pause", jobIds=ids)
    assert answer["changed"] == [active] and answer["unchanged"] == [already]
    failures = {f["jobId"]: (f["code"], f["message"]) for f in answer["failed"]}
    assert set(failures) == {ended, bobs, "not-a-job"}
    assert failures[ended][0] == "conflict" and "cancelled" in failures[ended][1]
    assert failures[bobs][0] == "not_found" and failures["not-a-job"][0] == "not_found"
    assert status(alice, active) == "paused" and status(bob, bobs) == "active"


def test_a_resume_checks_each_jobs_handler_against_the_callers_current_groups(app, loud_ports):
    loud_ports.grants = Grants.parse(
        [{"owners": ["*"], "handlers": ["demo.echo"]}, {"owners": ["group:ops"], "handlers": ["demo.sleep"]}]
    )
    in_ops = Client(app, issue_token(SECRET, "carol", groups=["ops"]))
    left_ops = Client(app, issue_token(SECRET, "carol"))
    guarded, open_to_all = create(in_ops, "guarded", handler="demo.sleep"), create(in_ops, "open")
    assert sorted(bulk(left_ops, action="pause", jobIds=[guarded, open_to_all])["changed"]) == sorted(
        [guarded, open_to_all]
    )  # a pause needs no grant
    answer = bulk(left_ops, action="resume", filter={})
    assert answer["changed"] == [open_to_all]
    assert [(f["jobId"], f["code"]) for f in answer["failed"]] == [(guarded, "forbidden")]
    assert status(in_ops, guarded) == "paused"
    assert bulk(in_ops, action="resume", jobIds=[guarded])["changed"] == [guarded]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"action": "stop", "filter": {}}, "action"),
        ({"action": "pause"}, "body"),
        ({"action": "pause", "filter": {}, "jobIds": ["j_1"]}, "body"),
        ({"action": "pause", "jobIds": []}, "jobIds"),
        ({"action": "pause", "jobIds": ["j_1"] * 101}, "jobIds"),
        ({"action": "pause", "filter": {}, "limit": 0}, "limit"),
        ({"action": "pause", "filter": {}, "limit": 101}, "limit"),
        ({"action": "pause", "filter": {"tag": ["no-colon"]}}, "filter.tag"),
        ({"action": "pause", "filter": {"status": "sleeping"}}, "filter.status"),
        ({"action": "pause", "filter": {"owner": "bob"}}, "filter.owner"),
        ({"action": "pause", "jobIds": ["j_1"], "cursor": "x"}, "cursor"),
        ({"action": "cancel", "filter": {}, "note": "why"}, "note"),
        ({"action": "pause", "filter": {}, "cursor": "not-a-cursor"}, "cursor"),
    ],
)
def test_a_bad_bulk_request_is_400_naming_the_field(alice, body, field):
    create(alice, "kept")
    assert_error(alice.call("POST", "/jobs/bulk", body), 400, field)


def test_by_ids_a_version_given_is_checked_as_patch_checks_it(alice):
    stale, fresh = create(alice, "stale"), create(alice, "fresh")
    read = {job_id: alice.call("GET", f"/jobs/{job_id}")[1]["version"] for job_id in (stale, fresh)}
    assert alice.call("PATCH", f"/jobs/{stale}", {"version": read[stale], "name": "renamed"})[0] == 200
    answer = bulk(alice, action="pause", jobIds=[stale, fresh], versions=read)
    assert answer["changed"] == [fresh]
    [failure] = answer["failed"]
    assert failure["jobId"] == stale and failure["code"] == "conflict" and "version" in failure["message"]
    assert status(alice, stale) == "active"
    assert_error(alice.call("POST", "/jobs/bulk", {"action": "pause", "filter": {}, "versions": read}), 400, "body")
    body = {"action": "pause", "jobIds": [fresh], "versions": read}
    assert_error(alice.call("POST", "/jobs/bulk", body), 400, "versions")


class ChangedMeanwhile:
    """The store, but each job a listing returns is changed (renamed: a new version) right after it is read,
    as another request would change it between the listing and the bulk action's write."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def list_jobs(self, *args: Any, **kwargs: Any) -> Any:
        page = self._store.list_jobs(*args, **kwargs)
        for job in page.items[:1]:  # the first job of the page moves on
            self._store.update_job_status(job, job.status, job.updated_at, "changed meanwhile")
        return page


def test_a_job_changed_between_the_listing_and_the_write_is_reported_and_left_as_it_is(loud_ports, recorded):
    from duetime.domain.models import JobSpec
    from duetime.service.bulk import bulk_change
    from duetime.service.jobs import job_filter, submit_job

    spec = {"name": "j", "handler": "demo.echo", "schedule": {"cron": "0 * * * *"}, "tags": {"race": "yes"}}
    ids = [submit_job(loud_ports, "alice", JobSpec.model_validate(spec))[0].job_id for _ in range(3)]
    racing = replace(loud_ports, store=ChangedMeanwhile(loud_ports.store))
    report = bulk_change(racing, "alice", "pause", selection=job_filter(None, None, ["race:yes"]))
    [failure] = report.failed
    assert failure.code == "conflict" and len(report.changed) == 2 and failure.job_id not in report.changed
    assert sorted([failure.job_id, *report.changed]) == sorted(ids)
    stored = loud_ports.store.get_job(failure.job_id)
    assert stored.status.value == "active" and stored.note == "changed meanwhile"  # the other change stands
    assert failure.job_id not in [e.detail["jobId"] for e in recorded.events if e.detail_type == "Job Paused"]
