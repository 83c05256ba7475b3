"""The API handler against moto, event in and response out: every 400/401/404/409/422 case of docs/api.md and
issue 4, owner isolation, idempotency and paging (the same events `duetime local` and API Gateway send)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from duetime.api.app import build_app
from duetime.api.auth import ISSUER, issue_token
from duetime.api.routes import ROUTES as DECLARED_ROUTES
from duetime.api.routing import Access
from duetime.local.http_bridge import to_event
from duetime.service import executions as execution_cases

from tests.conftest import BOTH_BACKENDS

# The API's contract holds on every adapter (paging cursors are the store's own).
pytestmark = BOTH_BACKENDS

SECRET = "integration-secret-of-thirty-two-bytes!"
AT = "2026-12-01T09:10:00Z"  # the hand clock starts at 09:00


class Client:
    """Calls the API handler with API Gateway events, as one caller."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app, self.token = app, token

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        raw: str | bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        sent = dict(headers or {})
        if self.token is not None:
            sent.setdefault("Authorization", f"Bearer {self.token}")
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        response = self.app.resolve(to_event(method, path, sent, data), None)
        text = response.get("body") or ""
        return response["statusCode"], json.loads(text) if text else None


@pytest.fixture
def app(ports):
    return build_app(ports, local_secret=SECRET)


@pytest.fixture
def alice(app):
    return Client(app, issue_token(SECRET, "alice"))


@pytest.fixture
def bob(app):
    return Client(app, issue_token(SECRET, "bob"))


@pytest.fixture
def worker(app):
    return Client(app, issue_token(SECRET, "worker", worker=True))


def job_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "t", "handler": "demo.echo", "schedule": {"at": AT}}
    body.update(overrides)
    return body


def created(client: Client, **overrides: Any) -> dict[str, Any]:
    status, job = client.call("POST", "/jobs", job_body(**overrides))
    assert status == 201, job
    return dict(job)


def assert_error(result: tuple[int, Any], status: int, field: str | None = None) -> None:
    code, body = result
    assert code == status, body
    assert set(body) == {"error"} and body["error"]["code"] and body["error"]["message"]
    if field is not None:
        assert body["error"].get("field") == field, body


# --- 400: invalid input names the field -------------------------------------------------------------

BIG = "x" * (256 * 1024)

INVALID_JOBS: list[tuple[str, dict[str, Any], str]] = [
    ("unknown top-level field", job_body(nmae="x"), "nmae"),
    ("unknown nested field", job_body(schedule={"at": AT, "tz": "UTC"}), "schedule.tz"),
    ("snake_case instead of camelCase", job_body(timeout_seconds=60), "timeout_seconds"),
    ("missing name", {"handler": "demo.echo", "schedule": {"at": AT}}, "name"),
    ("missing schedule", {"name": "t", "handler": "demo.echo"}, "schedule"),
    ("empty name", job_body(name=""), "name"),
    ("name too long", job_body(name="n" * 129), "name"),
    ("handler too long", job_body(handler="h" * 257), "handler"),
    ("name not a string", job_body(name=["a"]), "name"),
    ("bad cron value", job_body(schedule={"cron": "61 * * * *"}), "schedule.cron"),
    ("cron with seven fields", job_body(schedule={"cron": "0 0 0 * * * 2026"}), "schedule.cron"),
    ("cron seconds out of range", job_body(schedule={"cron": "60 * * * * *"}), "schedule.cron"),
    ("cron seconds step of zero", job_body(schedule={"cron": "*/0 * * * * *"}), "schedule.cron"),
    ("cron that never runs", job_body(schedule={"cron": "0 0 31 2 *"}), "schedule.cron"),
    ("cron L-n beyond a month", job_body(schedule={"cron": "0 9 L-31 * *"}), "schedule.cron"),
    ("cron nth weekday beyond 5", job_body(schedule={"cron": "0 9 ? * 2#6"}), "schedule.cron"),
    ("cron W day that February lacks", job_body(schedule={"cron": "0 9 30W 2 *"}), "schedule.cron"),
    ("interval below a second", job_body(schedule={"every": "0s"}), "schedule.every"),
    ("interval in fractions of a second", job_body(schedule={"every": "0.5s"}), "schedule.every"),
    ("interval in milliseconds", job_body(schedule={"every": "500ms"}), "schedule.every"),
    (
        "jitterSeconds a seconds cron's period",
        job_body(schedule={"cron": "*/5 * * * * *"}, jitterSeconds=5),
        "jitterSeconds",
    ),
    ("interval of zero", job_body(schedule={"every": "rate(0 minutes)"}), "schedule.every"),
    ("interval and cron", job_body(schedule={"every": "90m", "cron": "* * * * *"}), "schedule"),
    ("startAt with at", job_body(schedule={"at": AT, "startAt": AT}), "schedule.startAt"),
    ("endAt with at", job_body(schedule={"at": AT, "endAt": AT}), "schedule.endAt"),
    ("maxRuns with at", job_body(schedule={"at": AT, "maxRuns": 2}), "schedule.maxRuns"),
    ("maxRuns 0", job_body(schedule={"cron": "* * * * *", "maxRuns": 0}), "schedule.maxRuns"),
    (
        "endAt before startAt",
        job_body(schedule={"every": "1h", "startAt": AT, "endAt": "2026-12-01T00:00:00Z"}),
        "schedule.endAt",
    ),
    ("endAt not a time", job_body(schedule={"cron": "* * * * *", "endAt": "later"}), "schedule.endAt"),
    ("jitterSeconds over an hour", job_body(schedule={"cron": "0 0 * * *"}, jitterSeconds=3601), "jitterSeconds"),
    ("jitterSeconds negative", job_body(jitterSeconds=-1), "jitterSeconds"),
    ("jitterSeconds a period", job_body(schedule={"every": "2m"}, jitterSeconds=120), "jitterSeconds"),
    ("pauseAfterFailures 0", job_body(pauseAfterFailures=0), "pauseAfterFailures"),
    ("tags not strings", job_body(tags={"team": 1}), "tags.team"),
    ("tags too many", job_body(tags={f"k{i}": "v" for i in range(21)}), "tags"),
    ("tag key with a colon", job_body(tags={"a:b": "v"}), "tags"),
    ("note on create", job_body(note="hello"), "note"),
    ("exclude not a date", job_body(schedule={"cron": "0 9 * * *"}, exclude=["2026-02-30"]), "exclude"),
    ("exclude range reversed", job_body(schedule={"cron": "0 9 * * *"}, exclude=["2026-12-26/2026-12-24"]), "exclude"),
    ("exclude on a one-off job", job_body(exclude=["2026-12-25"]), "exclude"),
    ("startAt unparseable", job_body(schedule={"every": "90m", "startAt": "soon"}), "schedule.startAt"),
    (
        "unknown time zone (cron)",
        job_body(schedule={"cron": "0 2 * * *", "timeZone": "Mars/Olympus"}),
        "schedule.timeZone",
    ),
    ("unknown time zone (at)", job_body(schedule={"at": AT, "timeZone": "Not/AZone"}), "schedule.timeZone"),
    ("a directory, not a zone", job_body(schedule={"cron": "0 2 * * *", "timeZone": "America"}), "schedule.timeZone"),
    ("at unparseable", job_body(schedule={"at": "tomorrow at nine"}), "schedule.at"),
    ("at out of range in UTC", job_body(schedule={"at": "0001-01-01T00:00:00+01:00"}), "schedule.at"),
    ("at more than a year out", job_body(schedule={"at": "2027-12-05T09:00:00Z"}), "schedule.at"),
    ("at before 1970", job_body(schedule={"at": "1969-12-31T23:59:59.999Z"}), "schedule.at"),
    ("at more than a year ago", job_body(schedule={"at": "2025-11-01T00:00:00Z"}), "schedule.at"),
    ("both at and cron", job_body(schedule={"at": AT, "cron": "* * * * *"}), "schedule"),
    ("neither at nor cron", job_body(schedule={"timeZone": "UTC"}), "schedule"),
    ("timeoutSeconds 0", job_body(timeoutSeconds=0), "timeoutSeconds"),
    ("timeoutSeconds over 12 hours", job_body(timeoutSeconds=43201, jobClass="long"), "timeoutSeconds"),
    ("timeoutSeconds over its class", job_body(timeoutSeconds=3600), "timeoutSeconds"),
    ("timeoutSeconds not a number", job_body(timeoutSeconds="soon"), "timeoutSeconds"),
    ("retry.maxAttempts 0", job_body(retry={"maxAttempts": 0}), "retry.maxAttempts"),
    ("retry.maxAttempts 101", job_body(retry={"maxAttempts": 101}), "retry.maxAttempts"),
    ("retry.baseDelaySeconds negative", job_body(retry={"baseDelaySeconds": -1}), "retry.baseDelaySeconds"),
    ("retry.maxDelaySeconds over a day", job_body(retry={"maxDelaySeconds": 86401}), "retry.maxDelaySeconds"),
    ("retry max below base", job_body(retry={"baseDelaySeconds": 60, "maxDelaySeconds": 10}), "retry.maxDelaySeconds"),
    ("unknown retry field", job_body(retry={"jitter": True}), "retry.jitter"),
    ("unknown handler", job_body(handler="billing.nope"), "handler"),
    ("unknown jobClass", job_body(jobClass="gpu"), "jobClass"),
    ("payload over 256 KB", job_body(payload={"blob": BIG}), "payload"),
    ("payload not an object", job_body(payload=[1, 2]), "payload"),
    ("bad overlap", job_body(overlap="sometimes"), "overlap"),
    ("bad catchUp", job_body(catchUp="most"), "catchUp"),
    ("startingDeadlineSeconds 0", job_body(startingDeadlineSeconds=0), "startingDeadlineSeconds"),
]


@pytest.mark.parametrize(("body", "field"), [(b, f) for _, b, f in INVALID_JOBS], ids=[c for c, _, _ in INVALID_JOBS])
def test_an_invalid_job_is_400_naming_its_field_and_nothing_is_written(alice, ports, body, field):
    assert_error(alice.call("POST", "/jobs", body), 400, field)
    status, page = alice.call("GET", "/jobs")
    assert status == 200 and page["jobs"] == []


MALFORMED_BODIES: list[tuple[str, str | bytes]] = [
    ("truncated JSON", '{"name": "t"'),
    ("not JSON", "name=t"),
    ("empty body", ""),
    ("a JSON array", "[]"),
    ("a JSON string", '"job"'),
    ("NaN", '{"name": "t", "handler": "demo.echo", "schedule": {"at": "' + AT + '"}, "payload": {"x": NaN}}'),
    ("Infinity", '{"name": "t", "handler": "demo.echo", "schedule": {"at": "' + AT + '"}, "timeoutSeconds": Infinity}'),
    ("a lone surrogate", '{"name": "\\ud800", "handler": "demo.echo", "schedule": {"at": "' + AT + '"}}'),
    ("deep nesting", "[" * 100_000 + "]" * 100_000),
    ("not UTF-8", b"\xff\xfe{}"),
    ("over the body limit", json.dumps(job_body(payload={"a": BIG, "b": BIG}))),
]


@pytest.mark.parametrize("raw", [r for _, r in MALFORMED_BODIES], ids=[c for c, _ in MALFORMED_BODIES])
def test_a_malformed_body_is_400_naming_the_body(alice, raw):
    assert_error(alice.call("POST", "/jobs", raw=raw), 400, "body")


def test_a_base64_encoded_body_that_is_not_utf8_is_400(app, alice):
    event = to_event("POST", "/jobs", {"Authorization": f"Bearer {alice.token}"}, b"")
    event.update(body=base64.b64encode(b"\xff\xff").decode(), isBase64Encoded=True)
    response = app.resolve(event, None)
    assert response["statusCode"] == 400 and json.loads(response["body"])["error"]["field"] == "body"


def test_handler_kinds_lambda_and_ecs_are_accepted_without_registration(alice):
    assert created(alice, handler="lambda:arn:aws:lambda:eu-west-1:1:function:f")["handler"].startswith("lambda:")
    assert created(alice, handler="ecs:reports", jobClass="long", timeoutSeconds=43200)["timeoutSeconds"] == 43200


def test_a_payload_of_just_under_256_kb_is_accepted(alice):
    job = created(alice, payload={"blob": "x" * (256 * 1024 - 20)})
    assert len(job["payload"]["blob"]) == 256 * 1024 - 20


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=0", "limit"), ("limit=101", "limit"), ("limit=ten", "limit"), ("limit=%C2%B2", "limit"),
     ("limit=-1", "limit"), ("cursor=%%%", "cursor"), ("cursor=bm90LWpzb24", "cursor")],
)  # fmt: skip
def test_bad_paging_parameters_are_400(alice, query, field):
    assert_error(alice.call("GET", f"/jobs?{query}"), 400, field)


def test_a_hand_made_cursor_naming_another_owners_key_is_400(alice, bob):
    # Given a real page boundary in bob's listing
    for _ in range(2):
        created(bob)
    status, page = bob.call("GET", "/jobs?limit=1")
    assert status == 200 and page["nextCursor"]
    key = json.loads(base64.urlsafe_b64decode(page["nextCursor"] + "=="))["k"]
    # When alice re-labels bob's key as her own scope
    forged = base64.urlsafe_b64encode(json.dumps({"s": "owner:alice", "k": key}).encode()).decode().rstrip("=")
    # Then the cursor is refused, not passed to DynamoDB
    assert_error(alice.call("GET", f"/jobs?cursor={forged}"), 400, "cursor")
    # And bob's own cursor is refused to alice as well
    assert_error(alice.call("GET", f"/jobs?cursor={page['nextCursor']}"), 400, "cursor")


@pytest.mark.parametrize(
    ("body", "field"),
    [({"status": "cancelled"}, "status"), ({}, "status"), ({"status": "paused", "x": 1}, "x")],
)
def test_patch_takes_only_paused_or_active(alice, body, field):
    job = created(alice)
    assert_error(alice.call("PATCH", f"/jobs/{job['jobId']}", body), 400, field)


@pytest.mark.parametrize(
    ("body", "field"),
    [({"cron": "not a cron"}, "cron"), ({"cron": "0 2 * * *", "timeZone": "Nowhere/City"}, "timeZone"),
     ({"cron": "* * * * *", "count": 0}, "count"), ({"cron": "* * * * *", "count": 101}, "count"),
     ({"cron": "* * * * *", "from": "yesterday"}, "from"), ({"cron": "* * * * *", "at": AT}, "body"),
     ({"cron": "* * * * *", "tz": "UTC"}, "tz")],
)  # fmt: skip
def test_bad_previews_are_400(alice, body, field):
    assert_error(alice.call("POST", "/schedules/preview", body), 400, field)


def test_a_preview_with_from_gives_the_runs_in_utc(alice):
    body = {"cron": "30 2 * * *", "timeZone": "Asia/Kolkata", "from": "2026-11-30T00:00:00Z", "count": 2}
    assert alice.call("POST", "/schedules/preview", body) == (
        200,
        {"runs": ["2026-11-30T21:00:00.000Z", "2026-12-01T21:00:00.000Z"]},
    )


def test_a_preview_of_quartz_day_fields_names_the_reason_or_gives_the_runs(alice):
    code, body = alice.call("POST", "/schedules/preview", {"cron": "0 9 ? * 2#6"})
    assert (code, body["error"]["field"]) == (400, "cron")
    assert "2#6" in body["error"]["message"] and "1-5" in body["error"]["message"]
    # The last business day of the month and the second Tuesday, in Berlin (UTC+1 in winter).
    last_business_day = {"cron": "0 9 LW * *", "timeZone": "Europe/Berlin", "from": "2026-01-01T00:00:00Z", "count": 2}
    assert alice.call("POST", "/schedules/preview", last_business_day) == (
        200,
        {"runs": ["2026-01-30T08:00:00.000Z", "2026-02-27T08:00:00.000Z"]},
    )
    second_tuesday = {"cron": "0 9 ? * TUE#2", "timeZone": "Europe/Berlin", "from": "2026-01-01T00:00:00Z", "count": 1}
    assert alice.call("POST", "/schedules/preview", second_tuesday) == (200, {"runs": ["2026-01-13T08:00:00.000Z"]})


def test_a_preview_of_an_interval_counts_elapsed_time_from_its_anchor(alice):
    # New York springs forward on 2026-03-08 at 07:00Z: the runs stay 90 minutes apart in UTC.
    body = {"every": "rate(90 minutes)", "startAt": "2026-03-08T05:00:00Z", "timeZone": "America/New_York",
            "from": "2026-03-08T05:30:00Z", "count": 3}  # fmt: skip
    assert alice.call("POST", "/schedules/preview", body) == (
        200,
        {"runs": ["2026-03-08T06:30:00.000Z", "2026-03-08T08:00:00.000Z", "2026-03-08T09:30:00.000Z"]},
    )
    assert_error(alice.call("POST", "/schedules/preview", {"every": "0s"}), 400, "every")
    every_5s = {"every": "5s", "startAt": "2026-03-08T06:59:58Z", "from": "2026-03-08T06:59:58Z", "count": 2}
    assert alice.call("POST", "/schedules/preview", every_5s) == (
        200,
        {"runs": ["2026-03-08T07:00:03.000Z", "2026-03-08T07:00:08.000Z"]},
    )


def test_a_preview_of_a_seconds_cron_crosses_a_dst_gap_to_the_second(alice):
    # New York springs forward at 07:00Z on 2026-03-08 (01:59:59 EST -> 03:00:00 EDT): every 20 s goes on.
    body = {"cron": "*/20 * * * * *", "timeZone": "America/New_York", "from": "2026-03-08T06:59:30Z", "count": 3}
    assert alice.call("POST", "/schedules/preview", body) == (
        200,
        {"runs": ["2026-03-08T06:59:40.000Z", "2026-03-08T07:00:00.000Z", "2026-03-08T07:00:20.000Z"]},
    )
    # A fixed time in the gap (02:30:15) runs at the gap's end by default, not at all under gap=skip.
    fixed = {"cron": "15 30 2 * * *", "timeZone": "America/New_York", "from": "2026-03-08T00:00:00Z", "count": 1}
    assert alice.call("POST", "/schedules/preview", fixed) == (200, {"runs": ["2026-03-08T07:00:00.000Z"]})
    skip = {**fixed, "dst": {"gap": "skip"}}
    assert alice.call("POST", "/schedules/preview", skip) == (200, {"runs": ["2026-03-09T06:30:15.000Z"]})
    # Excluded dates are left out at seconds granularity too: 23:59:50 and :55 of the 24th, then the 26th.
    excluded = {"cron": "*/5 59 23 * * *", "from": "2026-12-24T23:59:45Z", "count": 3, "exclude": ["2026-12-25"]}
    assert alice.call("POST", "/schedules/preview", excluded) == (
        200,
        {"runs": ["2026-12-24T23:59:50.000Z", "2026-12-24T23:59:55.000Z", "2026-12-26T23:59:00.000Z"]},
    )
    assert_error(alice.call("POST", "/schedules/preview", {"cron": "0 60 * * * *"}), 400, "cron")


def test_a_preview_forecasts_a_one_second_job(alice):
    body = {"every": "1s", "from": "2026-12-01T00:00:00Z", "count": 2, "forecast": True}
    status, answer = alice.call("POST", "/schedules/preview", body)
    assert status == 200
    forecast = answer["forecast"]
    assert forecast["runsPerDay"] == 86_400
    assert forecast["runsPerMonth"] == 2_628_000  # 365 days of 86,400 over 12 months
    assert forecast["costPerMonthUsd"] == pytest.approx(forecast["costPerRunUsd"] * 2_628_000, rel=1e-6)
    every_5s = {"cron": "*/5 * * * * *", "from": "2026-12-01T00:00:00Z", "count": 1, "forecast": True}
    status, answer = alice.call("POST", "/schedules/preview", every_5s)
    assert status == 200 and answer["forecast"]["runsPerDay"] == 17_280


def test_a_preview_leaves_out_excluded_dates(alice):
    body = {"cron": "0 9 * * 1-5", "timeZone": "Europe/Berlin", "from": "2026-12-23T00:00:00Z", "count": 2,
            "exclude": ["2026-12-24/2026-12-28"]}  # fmt: skip
    assert alice.call("POST", "/schedules/preview", body) == (
        200,
        {"runs": ["2026-12-23T08:00:00.000Z", "2026-12-29T08:00:00.000Z"]},
    )
    assert_error(alice.call("POST", "/schedules/preview", {**body, "exclude": ["24.12.2026"]}), 400, "exclude")


def test_calendars_are_put_read_listed_and_deleted_per_owner(alice, bob, clock):
    dates = ["2026-12-24/2026-12-26", "2027-01-01"]
    assert alice.call("PUT", "/calendars/holidays-de", {"dates": dates}) == (
        201,
        {"name": "holidays-de", "dates": dates, "updatedAt": "2026-12-01T09:00:00.000Z"},
    )
    clock.advance(60)
    status, replaced = alice.call("PUT", "/calendars/holidays-de", {"dates": ["2026-12-25"]})
    assert (status, replaced["dates"], replaced["updatedAt"]) == (200, ["2026-12-25"], "2026-12-01T09:01:00.000Z")
    assert alice.call("GET", "/calendars/holidays-de") == (200, replaced)
    assert alice.call("GET", "/calendars") == (200, {"calendars": [replaced]})
    # Another owner sees none of it
    assert bob.call("GET", "/calendars") == (200, {"calendars": []})
    assert_error(bob.call("GET", "/calendars/holidays-de"), 404, "name")
    assert_error(bob.call("DELETE", "/calendars/holidays-de"), 404, "name")
    assert alice.call("DELETE", "/calendars/holidays-de") == (204, None)
    assert_error(alice.call("GET", "/calendars/holidays-de"), 404, "name")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/calendars/holidays-de", {"dates": ["24.12.2026"]}, "dates"),
        ("/calendars/holidays-de", {"dates": ["calendar:other"]}, "dates"),
        ("/calendars/holidays-de", {"dates": ["2026-12-26/2026-12-24"]}, "dates"),
        ("/calendars/holidays-de", {"dates": ["2026-12-25"] * 367}, "dates"),
        ("/calendars/holidays-de", {}, "dates"),
        ("/calendars/holidays-de", {"dates": [], "owner": "bob"}, "owner"),
    ],
)
def test_a_calendar_with_bad_dates_is_refused_naming_the_field(alice, path, body, field):
    assert_error(alice.call("PUT", path, body), 400, field)


def test_a_calendar_name_out_of_the_rule_is_refused_on_put_and_not_found_otherwise(alice):
    assert_error(alice.call("PUT", "/calendars/Holidays%20DE", {"dates": []}), 400, "name")
    assert_error(alice.call("PUT", "/calendars/" + "x" * 65, {"dates": []}), 400, "name")
    assert_error(alice.call("GET", "/calendars/" + "x" * 65), 404, "name")
    assert_error(alice.call("DELETE", "/calendars/Holidays%20DE"), 404, "name")


def test_a_job_excludes_a_calendar_by_name_and_the_calendar_cannot_go_while_it_does(alice):
    alice.call("PUT", "/calendars/holidays-de", {"dates": ["2026-12-02/2026-12-04"]})
    body = job_body(schedule={"cron": "0 9 * * 1-5", "timeZone": "Europe/Berlin"}, exclude=["calendar:holidays-de"])
    assert_error(alice.call("POST", "/jobs", {**body, "exclude": ["calendar:nope"]}), 400, "exclude")
    assert_error(alice.call("POST", "/jobs", {**body, "exclude": ["calendar:Bad Name"]}), 400, "exclude")
    job = created(alice, **body)
    assert job["exclude"] == ["calendar:holidays-de"]
    # nextRuns leave the calendar's dates out: Monday 7 December comes after Tuesday the 1st
    assert job["nextRuns"][:2] == ["2026-12-07T08:00:00.000Z", "2026-12-08T08:00:00.000Z"]
    status, error = alice.call("DELETE", "/calendars/holidays-de")
    assert_error((status, error), 409, "name")
    assert job["jobId"] in error["error"]["message"]
    assert alice.call("DELETE", f"/jobs/{job['jobId']}")[0] == 204
    assert alice.call("DELETE", "/calendars/holidays-de") == (204, None)


def test_a_preview_leaves_out_a_named_calendars_dates(alice, bob):
    alice.call("PUT", "/calendars/holidays-de", {"dates": ["2026-12-24/2026-12-28"]})
    body = {"cron": "0 9 * * 1-5", "timeZone": "Europe/Berlin", "from": "2026-12-23T00:00:00Z", "count": 2,
            "exclude": ["calendar:holidays-de"]}  # fmt: skip
    assert alice.call("POST", "/schedules/preview", body) == (
        200,
        {"runs": ["2026-12-23T08:00:00.000Z", "2026-12-29T08:00:00.000Z"]},
    )
    assert_error(bob.call("POST", "/schedules/preview", body), 400, "exclude")


def test_idempotency_key_must_be_short_printable_ascii(alice):
    assert_error(
        alice.call("POST", "/jobs", job_body(), headers={"Idempotency-Key": "k" * 256}), 400, "Idempotency-Key"
    )
    assert_error(alice.call("POST", "/jobs", job_body(), headers={"Idempotency-Key": ""}), 400, "Idempotency-Key")


# --- 401: no token or a bad one, on every route ------------------------------------------------------

# Every route that takes a token, from the route table itself, with sample path values and its example body.
SAMPLE_PATH_VALUES = {
    "jobId": "j_0000000000000001",
    "name": "holidays-de",
    "executionId": "j_0000000000000001.1796115600000",
}
ROUTES = [
    (route.method, route.path.format(**SAMPLE_PATH_VALUES), route.example)
    for route in DECLARED_ROUTES
    if route.access is not Access.PUBLIC
]


def raw_token(subject: str, lifetime: timedelta = timedelta(days=1)) -> str:
    """A token signed with the right secret that issue_token would refuse to make (its subject or lifetime)."""
    now = datetime.now(UTC)
    return jwt.encode({"sub": subject, "iss": ISSUER, "iat": now, "exp": now + lifetime}, SECRET, "HS256")


BAD_AUTH = {
    "no header": None,
    "not bearer": "Basic YWxpY2U6cHc=",
    "bearer without token": "Bearer ",
    "garbage token": "Bearer not.a.jwt",
    "wrong secret": "Bearer " + issue_token("another-secret-also-thirty-two-bytes", "alice"),
    "expired": "Bearer " + raw_token("alice", lifetime=timedelta(seconds=-1)),
    "no subject": "Bearer " + raw_token(""),
    "subject with #": "Bearer " + raw_token("alice#x"),
    "non-latin text": "Bearer \u00e9\u00e8",
}


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_every_route_is_401_without_a_valid_token(app, method, path, body):
    for name, header in BAD_AUTH.items():
        headers = {} if header is None else {"Authorization": header}
        result = Client(app, None).call(method, path, body, headers=headers)
        assert result[0] == 401, (name, result)
        assert_error(result, 401)


def test_openapi_json_needs_no_token(app):
    status, document = Client(app, None).call("GET", "/openapi.json")
    assert status == 200 and document["openapi"].startswith("3.0")


def test_on_aws_the_owner_comes_from_authorizer_claims_and_a_role_claim_does_not_make_a_worker(ports):
    app = build_app(ports, local_secret=None)
    event = to_event("POST", "/jobs", {}, json.dumps(job_body()).encode())
    event["requestContext"]["authorizer"] = {"claims": {"sub": "carol", "role": "worker"}}
    response = app.resolve(event, None)
    assert response["statusCode"] == 201 and json.loads(response["body"])["owner"] == "carol"
    beat = to_event(
        "POST",
        "/executions/j_0000000000000001.1796115600000/heartbeat",
        {},
        b'{"attempt": 1, "workerId": "w1", "claimToken": "t"}',
    )
    beat["requestContext"]["authorizer"] = {"claims": {"sub": "carol", "role": "worker"}}
    assert_error((app.resolve(beat, None)["statusCode"], json.loads(app.resolve(beat, None)["body"])), 404)
    # And with neither claims nor an IAM identity the request is refused
    bare = to_event("GET", "/jobs", {}, b"")
    assert app.resolve(bare, None)["statusCode"] == 401


# --- 404: another owner's job or execution, on every route -------------------------------------------


def test_another_owners_job_is_404_on_every_job_route_and_is_left_untouched(alice, bob):
    job = created(alice)
    path = f"/jobs/{job['jobId']}"
    assert_error(bob.call("GET", path), 404, "jobId")
    assert_error(bob.call("PATCH", path, {"status": "paused"}), 404, "jobId")
    assert_error(bob.call("DELETE", path), 404, "jobId")
    assert_error(bob.call("GET", f"{path}/executions"), 404, "jobId")
    assert_error(bob.call("POST", f"{path}/run"), 404, "jobId")
    assert bob.call("GET", "/jobs")[1]["jobs"] == []
    status, after = alice.call("GET", path)
    assert status == 200 and after["status"] == "active" and after["version"] == 1


def test_paging_into_another_owners_executions_with_their_cursor_is_404(alice, bob, ports):
    # Given alice's job with three executions (two run-now requests)
    job = created(alice)
    for _ in range(2):
        ports.clock.advance(1)
        assert alice.call("POST", f"/jobs/{job['jobId']}/run")[0] == 201
    status, page = alice.call("GET", f"/jobs/{job['jobId']}/executions?limit=1")
    assert status == 200 and page["nextCursor"]
    # When bob pages on with alice's cursor: 404, the job is not his
    assert_error(bob.call("GET", f"/jobs/{job['jobId']}/executions?cursor={page['nextCursor']}"), 404, "jobId")
    # And on a job of his own, alice's cursor is not valid
    own = created(bob)
    assert_error(bob.call("GET", f"/jobs/{own['jobId']}/executions?cursor={page['nextCursor']}"), 400, "cursor")


@pytest.mark.parametrize("job_id", ["j_nothex", "x_0000000000000001", "j_" + "0" * 65, "%00", "j_0000000000000099"])
def test_a_job_id_that_names_no_job_is_404(alice, job_id):
    assert_error(alice.call("GET", f"/jobs/{job_id}"), 404, "jobId")
    assert_error(alice.call("GET", f"/jobs/{job_id}/executions"), 404, "jobId")


def test_worker_tokens_do_not_reach_job_routes_nor_owner_tokens_worker_routes(alice, worker):
    job = created(alice)
    assert_error(worker.call("GET", f"/jobs/{job['jobId']}"), 404)
    assert_error(worker.call("POST", "/jobs", job_body()), 404)
    execution_id = f"{job['jobId']}.1796115000000"
    assert_error(
        alice.call(
            "POST", f"/executions/{execution_id}/heartbeat", {"attempt": 1, "workerId": "w1", "claimToken": "t"}
        ),
        404,
        "executionId",
    )
    assert_error(
        alice.call(
            "POST",
            f"/executions/{execution_id}/complete",
            {"attempt": 1, "workerId": "w1", "claimToken": "t", "result": "failed"},
        ),
        404,
    )


@pytest.mark.parametrize("execution_id", ["nope", "j_1.123", "j_1.1796115000000.x", "j_zz.1796115000000", "a.b.c.d"])
def test_an_execution_id_that_names_no_execution_is_404_for_workers(worker, execution_id):
    assert_error(
        worker.call(
            "POST", f"/executions/{execution_id}/heartbeat", {"attempt": 1, "workerId": "w1", "claimToken": "t"}
        ),
        404,
        "executionId",
    )


def test_an_unknown_route_is_404(alice):
    assert_error(alice.call("GET", "/nothing/here"), 404)


# --- 409: state conflicts and stale attempts ---------------------------------------------------------


def test_a_cancelled_job_cannot_be_paused_resumed_or_run(alice):
    job = created(alice)
    path = f"/jobs/{job['jobId']}"
    assert alice.call("DELETE", path) == (204, None)
    assert_error(alice.call("PATCH", path, {"status": "paused"}), 409, "status")
    assert_error(alice.call("PATCH", path, {"status": "active"}), 409, "status")
    assert_error(alice.call("POST", f"{path}/run"), 409, "status")
    assert alice.call("GET", path)[1]["status"] == "cancelled"


def test_a_paused_job_cannot_run_now(alice):
    job = created(alice)
    assert alice.call("PATCH", f"/jobs/{job['jobId']}", {"status": "paused"})[0] == 200
    assert_error(alice.call("POST", f"/jobs/{job['jobId']}/run"), 409, "status")


def test_worker_routes_are_fenced_by_attempt(alice, worker, ports):
    # Given an execution due now, claimed (attempt 1)
    job = created(alice, schedule={"at": "2026-12-01T09:00:05Z"})
    ports.clock.advance(5)
    [received] = ports.queues.receive("default", 10, 0, 30)
    claim = execution_cases.claim_execution(ports, received.message, "w1")
    execution_id = claim.execution.execution_id
    assert execution_id.startswith(job["jobId"])
    w1 = {"workerId": "w1", "claimToken": claim.execution.claim_token}
    beat = f"/executions/{execution_id}/heartbeat"
    # Then the holder's heartbeat extends the lease, a stale or future attempt's is 409
    status, body = worker.call("POST", beat, {"attempt": 1, **w1})
    assert status == 200 and body["leaseUntil"].endswith("Z")
    assert_error(worker.call("POST", beat, {"attempt": 2, **w1}), 409)
    assert_error(worker.call("POST", beat, {"attempt": 0, **w1}), 400, "attempt")
    assert_error(worker.call("POST", beat, {"attempt": 10**40, **w1}), 400, "attempt")
    # When the lease ends and a second worker claims attempt 2
    ports.clock.advance(timedelta(minutes=2).total_seconds())
    second = execution_cases.claim_execution(ports, received.message, "w2").execution
    assert second.attempt == 2
    w2 = {"workerId": "w2", "claimToken": second.claim_token}
    # Then attempt 1 is fenced out of both heartbeat and complete
    assert_error(worker.call("POST", beat, {"attempt": 1, **w1}), 409)
    done = f"/executions/{execution_id}/complete"
    assert_error(worker.call("POST", done, {"attempt": 1, **w1, "result": "succeeded"}), 409)
    assert_error(worker.call("POST", done, {"attempt": 2, **w2, "result": "maybe"}), 400, "result")
    status, ended = worker.call("POST", done, {"attempt": 2, **w2, "result": "succeeded", "output": {"ok": True}})
    assert status == 200 and ended["status"] == "succeeded" and ended["result"] == {"ok": True}
    # And a completed execution refuses further writes
    assert_error(worker.call("POST", done, {"attempt": 2, **w2, "result": "failed"}), 409)


def test_a_forged_complete_with_the_right_attempt_but_another_worker_id_is_409_and_changes_nothing(
    alice, worker, ports
):
    # Given an execution claimed by worker w1 (attempt 1)
    created(alice, schedule={"at": "2026-12-01T09:00:05Z"})
    ports.clock.advance(5)
    [received] = ports.queues.receive("default", 10, 0, 30)
    claimed = execution_cases.claim_execution(ports, received.message, "w1").execution
    done = f"/executions/{claimed.execution_id}/complete"
    beat = f"/executions/{claimed.execution_id}/heartbeat"
    # When another caller with a worker token presents attempt 1 under another worker id (or none)
    guess = {"claimToken": "guessed"}
    forged = {"attempt": 1, "workerId": "w-forger", **guess, "result": "succeeded", "output": {"forged": True}}
    assert_error(worker.call("POST", done, forged), 409, "workerId")
    assert_error(worker.call("POST", beat, {"attempt": 1, "workerId": "w-forger", **guess}), 409, "workerId")
    assert_error(worker.call("POST", done, {"attempt": 1, **guess, "result": "failed"}), 400, "workerId")
    # Then nothing changed: the row still runs under w1's lease
    after = execution_cases.find_execution(ports, claimed.execution_id)
    assert after.status == "running" and after.worker_id == "w1" and after.lease_until == claimed.lease_until
    assert after.result is None
    # And the holder itself still completes it
    holder = {"workerId": "w1", "claimToken": claimed.claim_token}
    status, ended = worker.call("POST", done, {"attempt": 1, **holder, "result": "succeeded"})
    assert status == 200 and ended["status"] == "succeeded"


def test_heartbeats_never_extend_a_run_past_its_jobs_timeout(alice, worker, ports):
    # Given a job with a 100 s timeout, claimed by w1 at 09:00:05 (a 30 s lease)
    created(alice, schedule={"at": "2026-12-01T09:00:05Z"}, timeoutSeconds=100)
    ports.clock.advance(5)
    [received] = ports.queues.receive("default", 10, 0, 30)
    claimed = execution_cases.claim_execution(ports, received.message, "w1").execution
    beat = f"/executions/{claimed.execution_id}/heartbeat"
    w1 = {"attempt": 1, "workerId": "w1", "claimToken": claimed.claim_token}
    run_ends = "2026-12-01T09:01:45.000Z"  # startedAt + timeoutSeconds
    # When w1 heartbeats well inside the timeout, the lease is one lease from now
    ports.clock.advance(20)
    status, body = worker.call("POST", beat, w1)
    assert status == 200 and body["leaseUntil"] < run_ends
    # When it heartbeats within one lease of the timeout, the lease ends at the timeout, not later
    ports.clock.advance(70)
    status, body = worker.call("POST", beat, w1)
    assert status == 200 and body["leaseUntil"] == run_ends
    # And once the timeout has come, the heartbeat is refused and the lease stays where it was
    ports.clock.advance(10)
    assert_error(worker.call("POST", beat, w1), 409, "attempt")
    after = execution_cases.find_execution(ports, claimed.execution_id)
    assert after.lease_until is not None and after.lease_until.strftime("%Y-%m-%dT%H:%M:%S.000Z") == run_ends


# --- idempotency and paging --------------------------------------------------------------------------


def test_idempotency_key_replays_the_first_job_and_refuses_another_body_with_422(alice, bob):
    key = {"Idempotency-Key": "order-42"}
    first = alice.call("POST", "/jobs", job_body(), headers=key)
    assert first[0] == 201
    # Same key, same body (in another order, with a default spelled out): the first job, 200
    again = alice.call("POST", "/jobs", {"schedule": {"at": AT}, "handler": "demo.echo", "name": "t", "payload": {}},
                       headers={"idempotency-key": "order-42"})  # fmt: skip
    assert again == (200, first[1])
    # Same key, another body: 422 naming the header
    assert_error(alice.call("POST", "/jobs", job_body(name="other"), headers=key), 422, "Idempotency-Key")
    # Another owner's keys are their own
    assert bob.call("POST", "/jobs", job_body(name="other"), headers=key)[0] == 201
    assert len(alice.call("GET", "/jobs")[1]["jobs"]) == 1


def test_paging_walks_every_job_once_newest_first(alice, ports):
    ids = []
    for _ in range(5):
        ports.clock.advance(1)
        ids.append(created(alice)["jobId"])
    seen, cursor = [], None
    while True:
        status, page = alice.call("GET", "/jobs?limit=2" + (f"&cursor={cursor}" if cursor else ""))
        assert status == 200 and len(page["jobs"]) <= 2
        seen += [j["jobId"] for j in page["jobs"]]
        cursor = page["nextCursor"]
        if not cursor:
            break
    assert seen == ids[::-1]


# -- operating jobs: spread, bounds, notes, run-now payload, filters, health ----------------------------


def test_a_preview_with_a_job_id_shows_each_runs_due_time_spread_the_same_every_time(alice):
    body = {"cron": "0 * * * *", "from": "2026-12-01T00:00:00Z", "count": 3, "jitterSeconds": 300, "jobId": "j_ab12"}
    code, first = alice.call("POST", "/schedules/preview", body)
    assert code == 200 and first["runs"] == [s["scheduledAt"] for s in first["slots"]]
    for slot in first["slots"]:
        delay = datetime.fromisoformat(slot["dueAt"]) - datetime.fromisoformat(slot["scheduledAt"])
        assert timedelta(0) <= delay < timedelta(seconds=300)
    assert alice.call("POST", "/schedules/preview", body) == (200, first)
    assert_error(alice.call("POST", "/schedules/preview", {"cron": "0 * * * *", "jitterSeconds": 60}), 400, "jobId")
    bounded = {"cron": "0 * * * *", "from": "2026-12-01T00:00:00Z", "maxRuns": 2, "count": 5}
    assert len(alice.call("POST", "/schedules/preview", bounded)[1]["runs"]) == 2
    assert_error(alice.call("POST", "/schedules/preview", {"at": AT, "maxRuns": 2}), 400, "maxRuns")


def test_run_now_takes_an_optional_payload_for_that_execution_only(alice):
    _, job = alice.call("POST", "/jobs", job_body(schedule={"cron": "0 0 * * *"}, payload={"region": "US"}))
    path = f"/jobs/{job['jobId']}/run"
    code, manual = alice.call("POST", path, {"payload": {"region": "EU"}})
    assert code == 201 and manual["payload"] == {"region": "EU"} and manual["kind"] == "manual"
    assert alice.call("POST", path)[0] == 409  # the same instant: a second run-now is refused, as before
    assert_error(alice.call("POST", path, {"payload": "EU"}), 400, "payload")
    assert_error(alice.call("POST", path, {"payload": {"x": "y" * (256 * 1024)}}), 400, "payload")
    assert_error(alice.call("POST", path, {"payloads": {}}), 400, "payloads")
    assert alice.call("GET", f"/jobs/{job['jobId']}")[1]["payload"] == {"region": "US"}


def test_pause_and_resume_take_a_note_shown_on_the_job(alice):
    _, job = alice.call("POST", "/jobs", job_body(schedule={"cron": "0 0 * * *"}))
    path = f"/jobs/{job['jobId']}"
    code, paused = alice.call("PATCH", path, {"status": "paused", "note": "waiting for the new API key"})
    assert code == 200 and paused["status"] == "paused" and paused["note"] == "waiting for the new API key"
    assert alice.call("GET", path)[1]["note"] == "waiting for the new API key"
    assert alice.call("PATCH", path, {"status": "active"})[1]["note"] is None
    assert_error(alice.call("PATCH", path, {"status": "paused", "note": "n" * 501}), 400, "note")


def test_jobs_are_listed_filtered_by_tag_status_and_handler(alice, bob):
    ids = {}
    for name, tags, handler in (
        ("a", {"team": "billing", "tier": "gold"}, "demo.echo"),
        ("b", {"team": "billing"}, "demo.sleep"),
        ("c", {"team": "search"}, "demo.echo"),
    ):
        ids[name] = alice.call("POST", "/jobs", job_body(name=name, tags=tags, handler=handler))[1]["jobId"]
    bob.call("POST", "/jobs", job_body(tags={"team": "billing"}))

    def listed(query: str) -> list[str]:
        code, page = alice.call("GET", f"/jobs?{query}")
        assert code == 200, page
        return [j["name"] for j in page["jobs"]]

    assert listed("tag=team:billing") == ["b", "a"]
    assert listed("tag=team:billing&tag=tier:gold") == ["a"]
    assert listed("handler=demo.echo&tag=team:billing") == ["a"]
    assert listed("status=paused") == []
    alice.call("PATCH", f"/jobs/{ids['c']}", {"status": "paused"})
    assert listed("status=paused") == ["c"]
    code, first = alice.call("GET", "/jobs?tag=team:billing&limit=1")
    assert [j["name"] for j in first["jobs"]] == ["b"] and first["nextCursor"]
    code, second = alice.call("GET", f"/jobs?tag=team:billing&limit=1&cursor={first['nextCursor']}")
    assert [j["name"] for j in second["jobs"]] == ["a"]
    assert_error(alice.call("GET", "/jobs?status=sleeping"), 400, "status")
    assert_error(alice.call("GET", "/jobs?tag=team"), 400, "tag")
    assert_error(alice.call("GET", "/jobs?tag=a%22b:c"), 400, "tag")


def test_a_job_shows_its_schedule_health(alice, clock):
    _, job = alice.call("POST", "/jobs", job_body(schedule={"cron": "* * * * *", "maxRuns": 5}, jitterSeconds=30))
    code, shown = alice.call("GET", f"/jobs/{job['jobId']}")
    assert code == 200
    assert shown["lastRun"] is None and shown["lastSuccess"] is None and shown["lastFailure"] is None
    assert shown["pastDue"] is None and shown["schedule"]["maxRuns"] == 5 and shown["jitterSeconds"] == 30
    assert len(shown["nextRuns"]) == 5
    clock.advance(600)  # nothing dispatched it: the waiting run is past due
    late = alice.call("GET", f"/jobs/{job['jobId']}")[1]["pastDue"]
    assert late["status"] == "scheduled" and late["executionId"].startswith(job["jobId"])


# --- PATCH /jobs/{id} edits a job in place ------------------------------------------------------------


def test_an_edit_under_the_version_read_replaces_the_next_run_and_a_lost_update_gets_409(alice, bob):
    job = created(alice, schedule={"cron": "0 * * * *"})
    path = f"/jobs/{job['jobId']}"
    read = alice.call("GET", path)[1]
    code, edited = alice.call("PATCH", path, {"version": read["version"], "schedule": {"cron": "30 * * * *"}})
    assert code == 200, edited
    assert edited["schedule"]["cron"] == "30 * * * *" and edited["version"] == read["version"] + 1
    assert edited["nextRunAt"].endswith(":30:00.000Z") and edited["nextRunAt"] < job["nextRunAt"]
    assert edited["name"] == job["name"] and edited["jobId"] == job["jobId"]
    # A second editor that read the same version loses, and nothing changes
    assert_error(alice.call("PATCH", path, {"version": read["version"], "payload": {"a": 1}}), 409, "version")
    assert alice.call("GET", path)[1]["payload"] == {}
    # Another owner cannot edit it
    assert_error(bob.call("PATCH", path, {"version": edited["version"], "name": "mine"}), 404, "jobId")
    # Pause and resume still take status without a version; a version given with one is checked
    assert alice.call("PATCH", path, {"status": "paused"})[0] == 200
    assert_error(alice.call("PATCH", path, {"status": "active", "version": edited["version"]}), 409, "version")
    assert alice.call("PATCH", path, {"status": "active", "version": edited["version"] + 1})[0] == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"schedule": {"cron": "0 * * * *"}}, "version"),
        ({"version": 1, "schedule": {"cron": "61 * * * *"}}, "schedule.cron"),
        ({"version": 1, "timeoutSeconds": 0}, "timeoutSeconds"),
        ({"version": 1, "name": None}, "name"),
        ({"version": 1, "status": "paused", "name": "x"}, "status"),
        ({"version": 1, "jobId": "j_1"}, "jobId"),
        ({"version": 0, "name": "x"}, "version"),
    ],
)
def test_an_edit_is_checked_as_a_post_naming_the_field(alice, body, field):
    job = created(alice, schedule={"cron": "0 * * * *"})
    assert_error(alice.call("PATCH", f"/jobs/{job['jobId']}", body), 400, field)


# --- backfill --------------------------------------------------------------------------------------------


def test_a_backfill_answers_what_it_created_and_a_second_creates_nothing(alice, bob, clock):
    job = created(alice, schedule={"cron": "0 * * * *", "timeZone": "UTC"})
    clock.advance(3 * 86400)
    path = f"/jobs/{job['jobId']}/backfill"
    day = {"from": "2026-12-02T00:00:00Z", "to": "2026-12-03T00:00:00Z"}
    status, first = alice.call("POST", path, day)
    assert status == 200, first
    assert first == {
        "created": 24,
        "present": 0,
        "skipped": 0,
        "firstSlot": "2026-12-02T00:00:00.000Z",
        "lastSlot": "2026-12-02T23:00:00.000Z",
        "overlap": "forbid",
    }
    status, again = alice.call("POST", path, {**day, "overlap": "allow"})
    assert status == 200 and (again["created"], again["present"]) == (0, 24)
    status, page = alice.call("GET", f"/jobs/{job['jobId']}/executions?limit=100")
    assert sum(1 for e in page["executions"] if e["kind"] == "backfill") == 24
    # Bad input names the field; another owner's job is 404
    assert_error(alice.call("POST", path, {"to": day["to"]}), 400, "from")
    assert_error(alice.call("POST", path, {**day, "to": "2026-12-30T00:00:00Z"}), 400, "to")
    assert_error(alice.call("POST", path, {**day, "to": day["from"]}), 400, "to")
    assert_error(alice.call("POST", path, {**day, "overlap": "replace"}), 400, "overlap")
    assert_error(alice.call("POST", path, {"from": "2026-10-01T00:00:00Z", "to": day["to"]}), 400, "to")  # > 1000 slots
    assert_error(bob.call("POST", path, day), 404, "jobId")


def test_the_jobs_list_carries_each_jobs_next_run_and_last_run(alice, app, ports, clock):
    from duetime.worker.runtime import Worker

    # Given a one-off job that has run, and a cron job waiting for its first slot
    once = created(alice, name="once", schedule={"at": "2026-12-01T09:00:05Z"})
    cron = created(alice, name="cron", schedule={"cron": "0 10 * * *"})
    worker = Worker(ports, "default", "w1", concurrency=1)
    clock.advance(5)
    for received in ports.queues.receive("default", 10, 0, 30):
        worker.process(received)
    # When the owner lists its jobs
    status, page = alice.call("GET", "/jobs")
    assert status == 200
    listed = {job["name"]: job for job in page["jobs"]}
    # Then each carries what GET /jobs/{id} shows of its next and last run, with no request per job
    assert listed["once"]["status"] == "completed" and listed["once"]["nextRunAt"] is None
    assert listed["once"]["lastRun"]["status"] == "succeeded"
    assert listed["once"]["lastRun"]["executionId"].startswith(once["jobId"])
    assert listed["cron"]["nextRunAt"] == "2026-12-01T10:00:00.000Z" and listed["cron"]["lastRun"] is None
    _, detail = alice.call("GET", f"/jobs/{cron['jobId']}")
    assert detail["nextRunAt"] == listed["cron"]["nextRunAt"]


def test_requests_served_side_by_side_each_get_their_own_answer(ports):
    # `duetime local` answers on many threads. The console asks for a job, its history and its next runs at
    # once; each answer must be to its own request (a shared resolver once answered the history with the job).
    import sys
    import threading

    from duetime.api.app import one_at_a_time

    handler = one_at_a_time(build_app(ports, local_secret=SECRET))
    alice = Client(type("Pooled", (), {"resolve": staticmethod(handler)})(), issue_token(SECRET, "alice"))
    job = created(alice, name="side-by-side", schedule={"cron": "*/5 * * * *"})
    asks: list[tuple[str, str, Any, str]] = [
        ("GET", f"/jobs/{job['jobId']}", None, "jobId"),
        ("GET", f"/jobs/{job['jobId']}/executions?limit=5", None, "executions"),
        ("POST", "/schedules/preview", {"cron": "*/5 * * * *", "count": 3}, "runs"),
        ("GET", "/jobs?limit=5", None, "jobs"),
    ]
    start = threading.Barrier(8)
    wrong: list[str] = []

    def ask(n: int) -> None:
        start.wait()
        for i in range(40):
            method, path, body, key = asks[(n + i) % len(asks)]
            status, answer = alice.call(method, path, body)
            if status != 200 or key not in answer:
                wrong.append(f"{method} {path} answered {status}: {answer}")

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads trade places often, as on a loaded machine: a shared resolver shows
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    assert wrong == []


def test_catch_up_all_is_refused_for_slots_under_five_seconds_apart_on_create_and_edit(alice):
    # Issue 34: a catch-up backlog runs one after another behind the job's own runs; a job every second or two
    # would never drain it, so `all` is refused there (400 naming catchUp, offering latest or none)
    for schedule in ({"cron": "*/2 * * * * *"}, {"cron": "0,3 0 9 * * *"}, {"every": "1s"}, {"every": "4s"}):
        code, body = alice.call("POST", "/jobs", job_body(schedule=schedule, catchUp="all"))
        assert_error((code, body), 400, "catchUp")
        assert "'latest'" in body["error"]["message"] and "'none'" in body["error"]["message"]
    # Five seconds apart and more, and any other policy, are taken
    for schedule, policy in (({"cron": "*/5 * * * * *"}, "all"), ({"every": "5s"}, "all"), ({"every": "1s"}, "latest")):
        assert alice.call("POST", "/jobs", job_body(schedule=schedule, catchUp=policy))[0] == 201
    # An edit is held to the same rule: to `all` on a 1-second job, or a catch-up-all job to every second
    _, every_second = alice.call("POST", "/jobs", job_body(schedule={"every": "1s"}, catchUp="none"))
    edit = {"version": every_second["version"], "catchUp": "all"}
    assert_error(alice.call("PATCH", f"/jobs/{every_second['jobId']}", edit), 400, "catchUp")
    _, minutely = alice.call("POST", "/jobs", job_body(schedule={"cron": "* * * * *"}, catchUp="all"))
    edit = {"version": minutely["version"], "schedule": {"cron": "* * * * * *"}}
    assert_error(alice.call("PATCH", f"/jobs/{minutely['jobId']}", edit), 400, "catchUp")
