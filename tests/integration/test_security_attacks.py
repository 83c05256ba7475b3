"""Attacks on the service and the local edges, over real HTTP through the local bridge: each is refused."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import stat
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest.mock import ANY

import jwt
import pytest
import requests
from duetime.adapters.cursors import encode_cursor
from duetime.api.app import build_app
from duetime.api.auth import DEFAULT_TOKEN_TTL, ISSUER, issue_token
from duetime.cli.main import main as cli_main
from duetime.definitions import API_MAX_BODY_BYTES, MAX_CURSOR_CHARS, MAX_CURSOR_KEY_BYTES, MAX_RECEIVE_COUNT
from duetime.domain.errors import InvalidInput
from duetime.domain.quotas import ACTIVE_JOBS, JOB_CREATES_PER_MINUTE, RUN_NOWS_PER_MINUTE, Quotas
from duetime.local.http_bridge import ApiServer, body_length
from duetime.local.system import LocalSystem
from duetime.service import executions as execution_cases
from duetime.service.deadletters import drain_dead_letters
from duetime.service.dispatch import preload
from duetime.service.outcomes import RunOutcome
from duetime.worker.runtime import Worker
from moto import mock_aws

from tests.http_client import Api

SECRET = "security-secret-of-thirty-two-bytes!!"
ANY_TEXT = ANY  # the message is for people; the code and field are the contract
SOCKET_TIMEOUT = 10.0  # a refusal comes at once; a thread blocked reading a body would never answer


@pytest.fixture
def backend() -> str:
    """SQLite: the bridge serves each connection on its own thread, as `duetime local` does (moto in-process
    is not thread-safe)."""
    return "sqlite"


@pytest.fixture
def server(ports) -> Iterator[ApiServer]:
    app = build_app(ports, local_secret=SECRET)
    bridge = ApiServer(app.resolve, port=0).start()
    try:
        yield bridge
    finally:
        bridge.stop()


def call(
    server: ApiServer, method: str, path: str, token: str | None, body: Any = None
) -> tuple[int, dict[str, Any] | None]:
    host, port = server.server.server_address[:2]
    response = Api(f"http://{host}:{port}", token, timeout=SOCKET_TIMEOUT).request(method, path, json=body)
    return response.status_code, response.json() if response.content else None


def raw_request(server: ApiServer, head: str, body: bytes = b"") -> tuple[int, dict[str, Any]]:
    """Send a hand-written request (headers a client library would not send) and read the answer."""
    host, port = server.server.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=SOCKET_TIMEOUT) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    status_line, _, rest = reply.partition(b"\r\n")
    _, _, payload = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), json.loads(payload)


def post_head(token: str, length: str) -> str:
    return f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: {length}\r\n"


def claimed_execution(ports, server: ApiServer, token: str, **job: Any) -> Any:
    body = {"name": "t", "handler": "demo.echo", "schedule": {"at": "2026-12-01T09:00:05Z"}, **job}
    status, _ = call(server, "POST", "/jobs", token, body)
    assert status == 201
    ports.clock.advance(5)
    [received] = ports.queues.receive("default", 10, 0, 30)
    return execution_cases.claim_execution(ports, received.message, "w-holder").execution


# --- worker routes bound to the claim ------------------------------------------------------------------


def test_a_forged_complete_from_another_worker_with_the_right_attempt_is_409_and_changes_nothing(ports, server):
    alice = issue_token(SECRET, "alice")
    intruder = issue_token(SECRET, "intruder", worker=True)  # any principal that may call worker routes
    claimed = claimed_execution(ports, server, alice)
    done = f"/executions/{claimed.execution_id}/complete"
    intruder_claim = {"attempt": claimed.attempt, "workerId": "w-intruder", "claimToken": "guessed"}
    forged = {**intruder_claim, "result": "succeeded", "output": "forged"}
    status, error = call(server, "POST", done, intruder, forged)
    assert status == 409 and error is not None and error["error"]["field"] == "workerId"
    failed = {**intruder_claim, "result": "failed", "retryable": False}
    assert call(server, "POST", done, intruder, failed)[0] == 409
    beat = intruder_claim
    assert call(server, "POST", f"/executions/{claimed.execution_id}/heartbeat", intruder, beat)[0] == 409
    after = execution_cases.find_execution(ports, claimed.execution_id)
    assert after.status == "running" and after.result is None and after.lease_until == claimed.lease_until


def test_a_forged_complete_with_a_guessed_attempt_and_the_known_worker_id_but_no_claim_token_is_refused(ports, server):
    # Given an execution claimed by w-holder: its attempt is small and its workerId is not secret
    alice = issue_token(SECRET, "alice")
    intruder = issue_token(SECRET, "intruder", worker=True)
    claimed = claimed_execution(ports, server, alice)
    done = f"/executions/{claimed.execution_id}/complete"
    beat = f"/executions/{claimed.execution_id}/heartbeat"
    known = {"attempt": claimed.attempt, "workerId": "w-holder"}
    # When an intruder sends them without the claim's token, the request is refused naming the token
    forged = {**known, "result": "succeeded", "output": "forged"}
    status, error = call(server, "POST", done, intruder, forged)
    assert status == 400 and error is not None and error["error"]["field"] == "claimToken"
    # And with a guessed token (every attempt number tried), each write is 409 and names the token
    for attempt in range(1, 4):
        guessed = {**known, "attempt": attempt, "claimToken": "A" * 22}
        for body in ({**guessed, "result": "succeeded", "output": "forged"}, {**guessed, "result": "failed"}):
            status, error = call(server, "POST", done, intruder, body)
            assert status == 409 and error is not None
            assert error["error"]["field"] == ("claimToken" if attempt == claimed.attempt else "attempt")
        assert call(server, "POST", beat, intruder, guessed)[0] == 409
    # Then nothing changed, and the holder, who has the token, still completes it
    after = execution_cases.find_execution(ports, claimed.execution_id)
    assert after.status == "running" and after.result is None and after.lease_until == claimed.lease_until
    holder = {**known, "claimToken": claimed.claim_token, "result": "succeeded", "output": "real"}
    status, ended = call(server, "POST", done, intruder, holder)
    assert status == 200 and ended is not None and ended["result"] == "real"
    assert "claimToken" not in ended  # the token is never shown


def test_a_heartbeat_cannot_hold_a_run_past_its_timeout(ports, server):
    alice = issue_token(SECRET, "alice")
    worker = issue_token(SECRET, "worker", worker=True)
    claimed = claimed_execution(ports, server, alice, timeoutSeconds=60)
    run_ends = claimed.started_at + timedelta(seconds=60)
    beat_path = f"/executions/{claimed.execution_id}/heartbeat"
    beat = {"attempt": claimed.attempt, "workerId": "w-holder", "claimToken": claimed.claim_token}
    leases = []
    for _ in range(5):  # a worker that heartbeats every 20 s, forever
        ports.clock.advance(20)
        status, body = call(server, "POST", beat_path, worker, beat)
        if status != 200:
            assert status == 409 and body is not None and body["error"]["field"] == "attempt"
            break
        assert body is not None
        leases.append(datetime.fromisoformat(body["leaseUntil"]))
    else:
        pytest.fail("heartbeats went on past the timeout")
    assert leases and max(leases) == run_ends
    after = execution_cases.find_execution(ports, claimed.execution_id)
    assert after.lease_until == run_ends and not after.lease_live(run_ends)


# --- the HTTP bridge trusts no Content-Length ------------------------------------------------------------


@pytest.mark.parametrize("length", ["-1", "-99999", "abc", "1e3", "0x10", " 5 5", "\u0661"])
def test_a_negative_or_malformed_content_length_is_400_at_once(ports, server, length):
    token = issue_token(SECRET, "alice")
    status, error = raw_request(server, post_head(token, length), b"{}")
    assert status == 400 and error["error"]["field"] == "Content-Length"


@pytest.mark.parametrize("length", [str(API_MAX_BODY_BYTES + 1), "9" * 5000])
def test_a_body_above_the_limit_is_413_without_being_read(ports, server, length):
    token = issue_token(SECRET, "alice")
    status, error = raw_request(server, post_head(token, length))  # not one byte of the body is sent
    assert status == 413 and error["error"]["field"] == "Content-Length"
    assert call(server, "GET", "/jobs", token)[1] == {"jobs": [], "nextCursor": None}


def test_two_differing_content_lengths_are_400(ports, server):
    token = issue_token(SECRET, "alice")
    head = post_head(token, "2") + "Content-Length: 3\r\n"
    assert raw_request(server, head, b"{}")[0] == 400


def test_body_length_accepts_the_limit_itself_and_no_header():
    assert body_length([str(API_MAX_BODY_BYTES)]) == (API_MAX_BODY_BYTES, None)
    assert body_length([]) == (0, None)
    assert body_length(["0"]) == (0, None)
    assert body_length(["000012"]) == (12, None)
    assert body_length(["7", "7"]) == (7, None)


# --- names that would make the system host-dependent or ambiguous ------------------------------------------


@pytest.mark.parametrize("zone", ["localtime", "posixrules", "Factory", "right/UTC", "posix/UTC", "../etc/passwd"])
def test_a_time_zone_that_is_not_an_iana_name_is_400_naming_the_field(ports, server, zone):
    alice = issue_token(SECRET, "alice")
    job = {"name": "t", "handler": "demo.echo", "schedule": {"cron": "0 9 * * *", "timeZone": zone}}
    status, error = call(server, "POST", "/jobs", alice, job)
    assert status == 400 and error is not None and error["error"]["field"] == "schedule.timeZone"
    status, error = call(server, "POST", "/schedules/preview", alice, {"cron": "0 9 * * *", "timeZone": zone})
    assert status == 400 and error is not None and error["error"]["field"] == "timeZone"
    assert call(server, "GET", "/jobs", alice)[1] == {"jobs": [], "nextCursor": None}


def test_iana_names_are_still_accepted(ports, server):
    alice = issue_token(SECRET, "alice")
    for zone in ("Europe/Paris", "UTC", "America/Argentina/Buenos_Aires", "Etc/GMT+5"):
        body = {"cron": "0 9 * * *", "timeZone": zone}
        assert call(server, "POST", "/schedules/preview", alice, body)[0] == 200, zone


def test_an_owner_name_with_a_hash_gets_no_token_and_is_refused_by_the_api(ports, server, tmp_path, capsys):
    with pytest.raises(InvalidInput) as refused:
        issue_token(SECRET, "alice#orders")
    assert refused.value.field == "owner"
    assert cli_main(["token", "--data-dir", str(tmp_path), "--owner", "alice#orders"]) == 2
    assert "without '#'" in capsys.readouterr().err
    # A token signed with the right secret but such a subject (as a leaked secret could make) is 401
    now = datetime.now(UTC)
    claims = {"sub": "alice#orders", "iss": ISSUER, "iat": now, "exp": now + timedelta(hours=1)}
    status, error = call(server, "GET", "/jobs", jwt.encode(claims, SECRET, "HS256"))
    assert status == 401 and error is not None


def test_a_cursor_key_is_limited_in_bytes_not_characters(ports, server):
    alice = issue_token(SECRET, "alice")
    under = "é" * (MAX_CURSOR_KEY_BYTES // 2)  # 1024 bytes: at the limit
    over = "é" * (MAX_CURSOR_KEY_BYTES // 2 + 1)  # 514 characters but 1026 bytes
    for created_key, expected in ((under, 200), (over, 400)):
        cursor = encode_cursor("owner:alice", {"owner": "alice", "jobId": "j_1", "createdKey": created_key})
        status, body = call(server, "GET", f"/jobs?cursor={cursor}", alice)
        assert status == expected, body
        if expected == 400:
            assert body is not None and body["error"]["field"] == "cursor"
    status, body = call(server, "GET", f"/jobs?cursor={'A' * (MAX_CURSOR_CHARS + 1)}", alice)
    assert status == 400 and body is not None and body["error"]["field"] == "cursor"
    surrogate = encode_cursor("owner:alice", {"owner": "alice", "jobId": "j_1", "createdKey": "\ud800"})
    status, body = call(server, "GET", f"/jobs?cursor={surrogate}", alice)
    assert status == 400 and body is not None and body["error"]["field"] == "cursor"


# --- per-owner quotas --------------------------------------------------------------------------------------


def call_for_headers(server: ApiServer, method: str, path: str, token: str, body: Any = None):
    """(status, body, headers) of one request."""
    host, port = server.server.server_address[:2]
    response = requests.request(
        method,
        f"http://{host}:{port}{path}",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=SOCKET_TIMEOUT,
    )
    text = response.content
    return response.status_code, json.loads(text) if text else None, {k.lower(): v for k, v in response.headers.items()}


def cron_job(n: int) -> dict[str, Any]:
    return {"name": f"q{n}", "handler": "demo.echo", "schedule": {"cron": "0 9 * * *"}}


def test_an_owner_past_its_job_creation_rate_gets_429_with_retry_after_and_nothing_is_created(ports, server):
    ports.quotas = Quotas(job_creates_per_minute=3)
    alice, bob = issue_token(SECRET, "alice"), issue_token(SECRET, "bob")
    for n in range(3):
        assert call(server, "POST", "/jobs", alice, cron_job(n))[0] == 201
    status, error, headers = call_for_headers(server, "POST", "/jobs", alice, cron_job(3))
    assert status == 429 and error is not None
    assert error["error"] == {"code": "quota_exceeded", "field": JOB_CREATES_PER_MINUTE, "message": ANY_TEXT}
    assert 1 <= int(headers["retry-after"]) <= 60
    assert len(call(server, "GET", "/jobs", alice)[1]["jobs"]) == 3
    # Another owner is not held back by alice's quota, and alice's next minute has room again
    assert call(server, "POST", "/jobs", bob, cron_job(0))[0] == 201
    ports.clock.advance(int(headers["retry-after"]))
    assert call(server, "POST", "/jobs", alice, cron_job(3))[0] == 201


def test_an_owner_at_its_active_jobs_gets_429_until_it_deletes_one(ports, server):
    ports.quotas = Quotas(max_active_jobs=2)
    alice = issue_token(SECRET, "alice")
    created = [call(server, "POST", "/jobs", alice, cron_job(n))[1]["jobId"] for n in range(2)]
    status, error, headers = call_for_headers(server, "POST", "/jobs", alice, cron_job(2))
    assert status == 429 and error["error"]["field"] == ACTIVE_JOBS and int(headers["retry-after"]) > 0
    assert call(server, "PATCH", f"/jobs/{created[0]}", alice, {"status": "paused"})[0] == 200  # still held
    assert call(server, "POST", "/jobs", alice, cron_job(2))[0] == 429
    assert call(server, "DELETE", f"/jobs/{created[0]}", alice)[0] == 204
    assert call(server, "POST", "/jobs", alice, cron_job(2))[0] == 201


def test_an_owner_past_its_run_now_rate_gets_429_and_no_run(ports, server):
    ports.quotas = Quotas(run_nows_per_minute=1)
    alice = issue_token(SECRET, "alice")
    job_id = call(server, "POST", "/jobs", alice, cron_job(0))[1]["jobId"]
    assert call(server, "POST", f"/jobs/{job_id}/run", alice)[0] == 201
    ports.clock.advance(0.001)  # another instant: not the same run asked twice
    status, error, headers = call_for_headers(server, "POST", f"/jobs/{job_id}/run", alice)
    assert status == 429 and error["error"]["field"] == RUN_NOWS_PER_MINUTE and "retry-after" in headers
    manual = [
        e for e in call(server, "GET", f"/jobs/{job_id}/executions", alice)[1]["executions"] if e["kind"] == "manual"
    ]
    assert len(manual) == 1


# --- one owner's dates cannot stall a shard, nor reach a 500 (issue 31) -------------------------------------


def test_a_calendar_excluding_up_to_year_9999_is_400_and_one_up_to_the_horizon_pauses_only_its_own_job(ports, server):
    mallory, alice = issue_token(SECRET, "mallory"), issue_token(SECRET, "alice")
    # The review's calendar: refused, naming the field
    status, error = call(server, "PUT", "/calendars/hol2", mallory, {"dates": ["2026-12-01/9999-12-31"]})
    assert status == 400 and error is not None and error["error"]["field"] == "dates"
    # Up to the horizon's last day it is a calendar; a job excluding it is created and paused, saying why
    assert call(server, "PUT", "/calendars/hol2", mallory, {"dates": ["2026-12-01/2200-12-31"]})[0] in (200, 201)
    every_minute = {"name": "m", "handler": "demo.echo", "schedule": {"every": "1m"}, "exclude": ["calendar:hol2"]}
    status, created = call(server, "POST", "/jobs", mallory, every_minute)
    assert status == 201 and created is not None and created["nextRuns"] == []
    status, other = call(server, "POST", "/jobs", alice, {**every_minute, "exclude": []})
    assert status == 201 and other is not None
    ports.clock.advance(60)
    report = preload(ports, "p")
    assert (report.errors, report.paused) == (0, 1)
    status, read = call(server, "GET", f"/jobs/{created['jobId']}", mallory)
    assert status == 200 and read is not None and read["status"] == "paused"
    assert "up to 2200-12-31 is excluded" in read["note"]
    # And a preview excluding up to the horizon shows no run, where it used to answer 500
    preview = {"every": "1m", "exclude": ["2026-12-01/2200-12-31"], "count": 3}
    status, runs = call(server, "POST", "/schedules/preview", mallory, preview)
    assert status == 200 and runs is not None and runs["runs"] == []
    # While another owner's job was sent in the same pass and runs on as before
    assert other["jobId"] in {r.message.job_id for r in ports.queues.receive("default", 10, 0, 30)}
    status, other = call(server, "GET", f"/jobs/{other['jobId']}", alice)
    assert status == 200 and other is not None and other["status"] == "active" and other["nextRuns"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"schedule": {"cron": "* * * * *", "endAt": "9999-12-31T00:00:00Z"}}, "schedule.endAt"),
        ({"schedule": {"cron": "* * * * *", "startAt": "1960-01-01T00:00:00Z"}}, "schedule.startAt"),
        ({"schedule": {"every": "1m", "startAt": "0001-01-01T00:00:00Z"}}, "schedule.startAt"),
        ({"schedule": {"every": "1m"}, "exclude": ["2026-12-01/9999-12-31"]}, "exclude"),
        ({"schedule": {"every": "1m"}, "exclude": ["1960-01-01"]}, "exclude"),
        ({"schedule": {"at": "9999-12-31T00:00:00Z"}}, "schedule.at"),
    ],
)
def test_a_job_date_outside_the_horizon_is_400_naming_the_field(ports, server, body, field):
    token = issue_token(SECRET, "mallory")
    status, error = call(server, "POST", "/jobs", token, {"name": "m", "handler": "demo.echo", **body})
    assert status == 400 and error is not None and error["error"]["field"] == field


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"every": "1m", "exclude": ["2026-12-01/9999-12-31"]}, "exclude"),
        ({"cron": "* * * * *", "from": "1960-01-01T00:00:00Z"}, "from"),
        ({"cron": "* * * * *", "endAt": "9999-12-31T00:00:00Z"}, "endAt"),
    ],
)
def test_a_preview_date_outside_the_horizon_is_400_naming_the_field(ports, server, body, field):
    status, error = call(server, "POST", "/schedules/preview", issue_token(SECRET, "mallory"), body)
    assert status == 400 and error is not None and error["error"]["field"] == field


@pytest.mark.parametrize(("start", "field"), [("1960-01-01T00:00:00Z", "from"), ("0001-01-01T00:00:00Z", "from")])
def test_a_backfill_from_1960_or_year_1_is_400_naming_from_not_500(ports, server, start, field):
    token = issue_token(SECRET, "mallory")
    job = {"name": "m", "handler": "demo.echo", "schedule": {"cron": "0 0 1 1 *"}}
    status, created = call(server, "POST", "/jobs", token, job)
    assert status == 201 and created is not None
    body = {"from": start, "to": "2026-01-02T00:00:00Z"}
    status, error = call(server, "POST", f"/jobs/{created['jobId']}/backfill", token, body)
    assert status == 400 and error is not None and error["error"]["field"] == field


def test_a_serial_backfill_slot_waiting_longer_than_the_receive_limit_is_never_failed_as_poison(ports, server):
    # The review's attack: a serial backfill whose later slots wait, each wait one more receive of the same
    # message until SQS redrove it and the DLQ drain failed the slot ("poison message") without running it
    alice = issue_token(SECRET, "alice")
    yearly = {"name": "y", "handler": "demo.echo", "schedule": {"cron": "0 0 1 1 *"}}
    status, job = call(server, "POST", "/jobs", alice, yearly)
    assert status == 201 and job is not None
    backfill = {"from": "2024-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z", "overlap": "forbid"}
    assert call(server, "POST", f"/jobs/{job['jobId']}/backfill", alice, backfill)[0] == 200
    first, second = sorted(drain_queue(ports), key=lambda r: r.message.execution_id)
    assert execution_cases.claim_execution(ports, first.message, "w-long").verdict.value == "claimed"
    worker = Worker(ports, "default", "w1", concurrency=1)
    received = second
    for _ in range(MAX_RECEIVE_COUNT + 5):  # the second waits its turn, looking again each time
        assert worker.process(received) == RunOutcome.BUSY
        ports.clock.advance(10)
        execution_cases.heartbeat(ports, first.message.key, 1)
        [received] = drain_queue(ports)
        assert received.receive_count == 1  # a fresh copy each time: nothing ages towards the DLQ
    assert drain_dead_letters(ports, "default") == 0
    execution_cases.complete(ports, first.message.key, 1, succeeded=True)
    assert worker.process(received) == RunOutcome.SUCCEEDED
    status, history = call(server, "GET", f"/jobs/{job['jobId']}/executions", alice)
    assert status == 200 and history is not None
    assert sorted(e["status"] for e in history["executions"] if e["kind"] == "backfill") == ["succeeded"] * 2


def drain_queue(ports) -> list[Any]:
    out = []
    while batch := ports.queues.receive("default", 10, 0, 900):
        out += batch
    return out


# --- local tokens: a lifetime and an audience -------------------------------------------------------------------


def test_an_expired_token_and_one_for_another_data_dir_are_refused(ports):
    app = build_app(ports, local_secret=SECRET, local_audience="duetime-local-this")
    bridge = ApiServer(app.resolve, port=0).start()
    try:
        mine = issue_token(SECRET, "alice", audience="duetime-local-this")
        assert call(bridge, "GET", "/jobs", mine)[0] == 200
        another = issue_token(SECRET, "alice", audience="duetime-local-other")  # same key, other data dir
        no_audience = issue_token(SECRET, "alice")
        now = datetime.now(UTC)
        expired = jwt.encode(
            {"sub": "alice", "iss": ISSUER, "aud": "duetime-local-this", "iat": now, "exp": now - timedelta(seconds=1)},
            SECRET,
            "HS256",
        )
        for token in (another, no_audience, expired):
            status, error = call(bridge, "GET", "/jobs", token)
            assert status == 401 and error is not None and error["error"]["code"] == "unauthorized"
    finally:
        bridge.stop()


def test_a_token_verified_once_is_still_refused_once_it_expires_or_after_a_reset(ports):
    # Verified tokens are kept (a client sends the same one on every request): keeping must not outlive them.
    app = build_app(ports, local_secret=SECRET, local_audience="duetime-local-this")
    bridge = ApiServer(app.resolve, port=0).start()
    try:
        short = issue_token(SECRET, "alice", ttl=timedelta(seconds=2), audience="duetime-local-this")
        assert call(bridge, "GET", "/jobs", short)[0] == 200
        assert call(bridge, "GET", "/jobs", short)[0] == 200  # from what was kept
        deadline = jwt.decode(short, SECRET, algorithms=["HS256"], audience="duetime-local-this")["exp"]
        while datetime.now(UTC).timestamp() < deadline + 0.1:
            time.sleep(0.05)
        assert call(bridge, "GET", "/jobs", short)[0] == 401
    finally:
        bridge.stop()
    # The same token against a reset data dir (a new secret) is verified again, and refused.
    reset = ApiServer(build_app(ports, local_secret="another-secret-of-thirty-two-bytes!").resolve, port=0).start()
    try:
        live = issue_token(SECRET, "alice", audience="duetime-local-this")
        assert call(reset, "GET", "/jobs", live)[0] == 401
    finally:
        reset.stop()


def test_tokens_last_a_day_by_default_and_no_longer_than_thirty_days():
    claims = jwt.decode(issue_token(SECRET, "alice"), SECRET, algorithms=["HS256"], issuer=ISSUER)
    assert claims["exp"] - claims["iat"] == DEFAULT_TOKEN_TTL.total_seconds() == 24 * 3600
    with pytest.raises(InvalidInput) as refused:
        issue_token(SECRET, "alice", ttl=timedelta(days=31))
    assert refused.value.field == "ttl"


def test_a_reset_data_dir_refuses_every_token_issued_before_it(tmp_path):
    def started(reset: bool = False) -> LocalSystem:
        return LocalSystem(tmp_path, port=0, workers=0, backend="sqlite", reset=reset).start()

    system = started()
    try:
        before = system.token("alice")
        assert Api(system.api_url, before).get("/jobs").status_code == 200
        state = json.loads((tmp_path / "local.json").read_text())
    finally:
        system.stop()
    assert stat.S_IMODE((tmp_path / "local.json").stat().st_mode) == 0o600
    restarted = started()  # a plain restart keeps the key and the instance: tokens stay valid
    try:
        assert Api(restarted.api_url, before).get("/jobs").status_code == 200
    finally:
        restarted.stop()
    reset = started(reset=True)
    try:
        assert Api(reset.api_url, before).get("/jobs").status_code == 401
        assert Api(reset.api_url, reset.token("alice")).get("/jobs").status_code == 200
        after = json.loads((tmp_path / "local.json").read_text())
        assert after["jwtSecret"] != state["jwtSecret"] and after["instanceId"] != state["instanceId"]
    finally:
        reset.stop()


# --- the moto backend's server is no one else's ---------------------------------------------------------------


def test_the_moto_server_refuses_a_plain_request_to_its_reset_route_and_serves_duetimes_clients():
    from duetime.adapters.aws.client import make_client
    from duetime.local.moto_server import EmbeddedMoto

    moto = EmbeddedMoto().start()
    try:
        sqs = make_client("sqs", "us-east-1", moto.endpoint_url)
        url = sqs.create_queue(QueueName="kept")["QueueUrl"]
        host, port = moto.server.server_address[:2]
        for path in ("/moto-api/reset", "/moto-api/", "/", f"/x{moto.secret}/moto-api/reset"):
            refused = requests.post(
                f"http://{host}:{port}{path}",
                data=b"",
                headers={"Origin": "https://evil.example"},
                timeout=SOCKET_TIMEOUT,
            )
            assert refused.status_code == 403, path
        # The queue survived: nothing reached moto
        assert sqs.get_queue_url(QueueName="kept")["QueueUrl"] == url
        assert moto.secret not in url  # what moto hands out does not leak the secret either
    finally:
        moto.stop()


# --- `ecs:` payloads never travel in RunTask overrides (DescribeTasks, CloudTrail) --------------------------------


@mock_aws
def test_an_ecs_run_starts_its_task_without_the_payload_in_what_cloudtrail_records():
    from duetime.adapters.aws.client import make_client
    from duetime.targets.aws import EcsSettings, EcsTarget
    from duetime.worker.kinds import Targets, resolve_handler
    from duetime.worker.registry import JobContext

    ecs = make_client("ecs", "us-east-1")
    ecs.create_cluster(clusterName="jobs")
    ecs.register_task_definition(family="report", containerDefinitions=[{"name": "job", "image": "r:1", "memory": 512}])
    sent: list[dict[str, Any]] = []
    ecs.meta.events.register("provide-client-params.ecs.RunTask", lambda params, **_: sent.append(dict(params)))
    run = resolve_handler("ecs:report", Targets(ecs_target=EcsTarget(ecs, EcsSettings(cluster="jobs"))))
    ctx = JobContext(
        "j_1.1796169600000", "j_1", 1, datetime(2026, 12, 1, tzinfo=UTC), {"token": "tok-5ecret"}, owner="alice"
    )
    ctx.cancelled.set()  # stop at once: only the start matters here
    with pytest.raises(InterruptedError):
        run(ctx)
    [request] = sent
    assert "tok-5ecret" not in json.dumps(request)
    [task] = ecs.describe_tasks(
        cluster="jobs", tasks=ecs.list_tasks(cluster="jobs", desiredStatus="STOPPED")["taskArns"]
    )["tasks"]
    assert "tok-5ecret" not in json.dumps(task, default=str)


def test_quotas_default_on_aws_none_locally_and_zero_means_none():
    from duetime.config import RuntimeConfig, quota_environment
    from duetime.definitions import (
        DEFAULT_BACKFILL_SLOTS_PER_HOUR,
        DEFAULT_JOB_CREATES_PER_MINUTE,
        DEFAULT_MAX_ACTIVE_JOBS,
        DEFAULT_RUN_NOWS_PER_MINUTE,
    )

    assert RuntimeConfig().quotas() == Quotas(
        DEFAULT_MAX_ACTIVE_JOBS,
        DEFAULT_JOB_CREATES_PER_MINUTE,
        DEFAULT_RUN_NOWS_PER_MINUTE,
        DEFAULT_BACKFILL_SLOTS_PER_HOUR,
    )
    assert RuntimeConfig(endpoint_url="http://127.0.0.1:1/x").quotas() == Quotas()
    configured = Quotas(max_active_jobs=5, run_nows_per_minute=2, backfill_slots_per_hour=7)
    assert RuntimeConfig.from_env(quota_environment(configured)).quotas() == configured


def test_duetime_local_on_moto_enforces_its_quota_flags_in_the_emulated_api_and_hides_its_moto_server(tmp_path):
    # Given `duetime local --backend moto --run-nows-per-minute 1`: the real API handler, configured by env
    system = LocalSystem(tmp_path, port=0, workers=0, backend="moto", quotas=Quotas(run_nows_per_minute=1)).start()
    try:
        alice = Api(system.api_url, system.token("alice"))
        job = alice.post("/jobs", json=cron_job(0)).json()
        assert alice.post(f"/jobs/{job['jobId']}/run").status_code == 201
        # The quota counts per minute of the wall clock: on a loaded machine the second request can fall in the
        # next minute, and then the third cannot (three requests take far less than a minute)
        answers = [alice.post(f"/jobs/{job['jobId']}/run") for _ in range(2)]
        refused = next(a for a in answers if a.status_code != 201)
        assert refused.status_code == 429 and refused.json()["error"]["field"] == RUN_NOWS_PER_MINUTE
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        # And its moto server answers a plain request to the reset route with 403, the data intact
        endpoint = json.loads((tmp_path / "local.json").read_text())["endpointUrl"]
        root = endpoint.rsplit("/", 1)[0]
        assert requests.post(root + "/moto-api/reset", timeout=10).status_code == 403
        assert alice.get(f"/jobs/{job['jobId']}").status_code == 200
    finally:
        system.stop()


def test_local_json_is_created_owner_only_even_under_a_lax_umask_and_follows_no_planted_link(tmp_path):
    from duetime.local.state import STATE_FILE, LocalState

    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    (tmp_path / "local.tmp").symlink_to(target)  # planted where the temporary file is made
    state = LocalState(
        api_url="http://127.0.0.1:1",
        prefix="p",
        shards=1,
        lease_seconds=3,
        jwt_secret="k",
        preload_interval_seconds=5,
        preload_window_seconds=10,
    )
    previous = os.umask(0)
    try:
        state.write(tmp_path)
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / STATE_FILE).stat().st_mode) == 0o600
    assert target.read_text() == "untouched" and not (tmp_path / "local.tmp").exists()


def test_duetime_token_names_the_data_dirs_instance_and_its_lifetime(tmp_path, capsys):
    from duetime.local.state import LocalState

    state = LocalState(
        api_url="http://127.0.0.1:1",
        prefix="p",
        shards=1,
        lease_seconds=3,
        jwt_secret=SECRET,
        instance_id="duetime-local-abc",
        preload_interval_seconds=5,
        preload_window_seconds=10,
    )
    state.write(tmp_path)
    assert cli_main(["token", "--owner", "alice", "--ttl", "2", "--data-dir", str(tmp_path)]) == 0
    token = capsys.readouterr().out.strip()
    claims = jwt.decode(token, SECRET, algorithms=["HS256"], issuer=ISSUER, audience="duetime-local-abc")
    assert claims["sub"] == "alice" and claims["exp"] - claims["iat"] == 2 * 3600
    assert cli_main(["token", "--owner", "alice", "--ttl", "1000", "--data-dir", str(tmp_path)]) == 2
    assert "30 days" in capsys.readouterr().err


# --- grants over webhook URLs match the parsed URL -------------------------------------------------------------


@pytest.mark.parametrize("url", ["https://evil.test/.example.com/x", "https://evil.test?.example.com/"])
def test_a_url_whose_string_meets_a_grant_glob_but_whose_host_does_not_is_403(ports, server, url):
    from duetime.domain.grants import Grants

    ports.grants = Grants.parse([{"owners": ["*"], "handlers": ["demo.*", "https://*.example.com/*"]}])
    alice = issue_token(SECRET, "alice")
    status, error = call(server, "POST", "/jobs", alice, {**cron_job(0), "handler": url})
    assert status == 403 and error is not None and error["error"]["field"] == "handler"
    granted = {**cron_job(1), "handler": "https://hooks.example.com/x"}
    status, job = call(server, "POST", "/jobs", alice, granted)
    assert status == 201 and job is not None
    version = job["version"]
    status, error = call(server, "PATCH", f"/jobs/{job['jobId']}", alice, {"version": version, "handler": url})
    assert status == 403 and error is not None and error["error"]["field"] == "handler"


# --- webhook hosts: every form of a forbidden address is refused at POST --------------------------------------


@pytest.mark.parametrize(
    "host", ["[::7f00:1]", "[::ffff:0:7f00:1]", "[::a9fe:a9fe]", "127.1", "2130706433", "0x7f.1", "169.254.43518"]
)
def test_a_webhook_to_a_loopback_or_metadata_address_in_another_form_is_400_at_post(ports, server, host):
    ports.settings = dataclasses.replace(ports.settings, allow_loopback_webhooks=False)  # as on AWS
    alice = issue_token(SECRET, "alice")
    status, error = call(server, "POST", "/jobs", alice, {**cron_job(0), "handler": f"https://{host}/latest/x"})
    assert status == 400 and error is not None and error["error"]["field"] == "handler"
    assert call(server, "GET", "/jobs", alice)[1] == {"jobs": [], "nextCursor": None}


# --- failure destinations are granted as handlers are ----------------------------------------------------------


@pytest.mark.parametrize(
    ("destination", "field"),
    [
        ({"webhook": "http://127.0.0.1:18943/not-granted"}, "webhook"),
        ({"snsTopicArn": "arn:aws:sns:us-east-1:123456789012:duetime-notify-x"}, "snsTopicArn"),
        ({"email": "victim@example.com"}, "email"),
    ],
)
def test_a_failure_destination_the_owner_is_not_granted_is_403_at_create_and_edit(ports, server, destination, field):
    from duetime.domain.grants import Grants

    ports.settings = dataclasses.replace(ports.settings, allow_loopback_webhooks=True)  # as `duetime local`
    ports.grants = Grants.parse([{"owners": ["*"], "handlers": ["demo.*"]}])
    alice = issue_token(SECRET, "alice")
    notify = {"onFailure": [destination]}
    status, error = call(server, "POST", "/jobs", alice, {**cron_job(0), "notify": notify})
    assert status == 403 and error is not None and error["error"]["field"] == f"notify.onFailure[0].{field}"
    status, job = call(server, "POST", "/jobs", alice, cron_job(1))
    assert status == 201 and job is not None
    edit = {"version": job["version"], "notify": notify}
    status, error = call(server, "PATCH", f"/jobs/{job['jobId']}", alice, edit)
    assert status == 403 and error is not None and error["error"]["field"] == f"notify.onFailure[0].{field}"


# --- the local database is its owner's alone -------------------------------------------------------------------


def test_duetime_local_makes_its_data_dir_0700_and_the_database_and_its_journals_0600(tmp_path):
    data_dir = tmp_path / "fresh" / ".duetime"
    previous = os.umask(0o022)  # the usual umask: what an unprotected file would get is 0644
    try:
        system = LocalSystem(data_dir, port=0, workers=0, backend="sqlite").start()
        try:
            assert Api(system.api_url, system.token("alice")).post("/jobs", json=cron_job(0)).status_code == 201
            names = {p.name: stat.S_IMODE(p.stat().st_mode) for p in data_dir.iterdir() if p.is_file()}
        finally:
            system.stop()
    finally:
        os.umask(previous)
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert {"duetime.sqlite3", "duetime.sqlite3-wal", "duetime.sqlite3-shm"} <= set(names)
    assert all(mode == 0o600 for mode in names.values()), names


def test_a_database_an_earlier_version_left_world_readable_is_made_private_at_its_next_open(tmp_path):
    from duetime.adapters.sqlite.db import Database

    first = Database(tmp_path / "duetime.sqlite3")
    with first.write() as conn:
        conn.execute("SELECT 1")
    first.close()
    for name in ("duetime.sqlite3", "duetime.sqlite3-wal", "duetime.sqlite3-shm"):
        if (tmp_path / name).exists():
            os.chmod(tmp_path / name, 0o644)
    again = Database(tmp_path / "duetime.sqlite3")
    with again.write() as conn:
        conn.execute("SELECT 1")
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    again.close()
    assert "duetime.sqlite3-wal" in modes and set(modes.values()) == {0o600}, modes


# --- the HTTP bridge frames every body, waits for none for ever, and queues a burst ------------------------------


def exchange(server: ApiServer, data: bytes, timeout: float = SOCKET_TIMEOUT) -> bytes:
    """Send `data` as it is and read every byte the server answers until it closes the connection."""
    host, port = server.server.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=timeout) as sock:
        sock.sendall(data)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def statuses(reply: bytes) -> list[int]:
    return [int(line.split()[1]) for line in reply.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]


def test_a_chunked_body_is_read_as_the_body_and_never_served_as_a_second_request(ports, server):
    alice = issue_token(SECRET, "alice")
    body = json.dumps(cron_job(0)).encode()
    # The chunks carry a job; a request smuggled after a bare header block would be a second one
    chunked = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in (body[:10], body[10:])) + b"0\r\n\r\n"
    head = f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alice}\r\nTransfer-Encoding: chunked\r\n"
    reply = exchange(server, head.encode() + b"Connection: close\r\n\r\n" + chunked)
    assert statuses(reply) == [201]
    assert [j["name"] for j in call(server, "GET", "/jobs", alice)[1]["jobs"]] == ["q0"]
    # The old attack: a chunked "body" that is itself a request is not answered as one
    smuggled = f"GET /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alice}\r\n\r\n".encode()
    chunk = f"{len(smuggled):x}\r\n".encode() + smuggled + b"\r\n0\r\n\r\n"
    attack = head.encode() + b"Connection: close\r\n\r\n" + chunk
    assert statuses(exchange(server, attack)) == [400]  # one answer: the body is not JSON


@pytest.mark.parametrize(
    ("extra", "body"),
    [
        ("Transfer-Encoding: chunked\r\nContent-Length: 7\r\n", b"2\r\n{}\r\n0\r\n\r\n"),  # both: not guessed
        ("Transfer-Encoding: gzip, chunked\r\n", b"2\r\n{}\r\n0\r\n\r\n"),
        ("Transfer-Encoding: chunked\r\n", b"zz\r\n{}\r\n0\r\n\r\n"),  # a malformed size line
    ],
)
def test_an_ambiguous_or_malformed_transfer_encoding_is_400_and_nothing_after_it_is_served(ports, server, extra, body):
    alice = issue_token(SECRET, "alice")
    head = f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alice}\r\n{extra}\r\n"
    after = f"GET /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alice}\r\nConnection: close\r\n\r\n"
    reply = exchange(server, head.encode() + body + after.encode())
    assert statuses(reply) == [400], reply
    assert json.loads(reply.partition(b"\r\n\r\n")[2])["error"]["field"] in ("Transfer-Encoding", "Content-Length")


def test_a_chunked_body_above_the_limit_is_413(ports, server):
    alice = issue_token(SECRET, "alice")
    head = f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alice}\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert statuses(exchange(server, head.encode() + f"{API_MAX_BODY_BYTES + 1:x}\r\n".encode())) == [413]


def test_a_body_that_stops_arriving_is_answered_408_and_frees_its_thread(ports):
    # Given a bridge that waits a short while for each read (the default is 10 s, 30 s for a whole body)
    bridge = ApiServer(build_app(ports, local_secret=SECRET).resolve, port=0, read_timeout=0.5).start()
    try:
        alice = issue_token(SECRET, "alice")
        # When a client declares 100 bytes and sends 2, then nothing
        head = post_head(alice, "100") + "\r\n"
        reply = exchange(bridge, head.encode() + b"{}")  # no timeout of ours could end this: the server must
        assert statuses(reply) == [408]
        # And a connection that never sends its request line is closed
        assert exchange(bridge, b"") == b""
    finally:
        bridge.stop()


def test_a_burst_of_connections_before_the_server_accepts_is_queued_not_reset(ports):
    # Given a bridge whose accept loop has not started: every connection waits in the listen backlog
    bridge = ApiServer(build_app(ports, local_secret=SECRET).resolve, port=0)
    host, port = bridge.server.server_address[:2]
    alice = issue_token(SECRET, "alice")
    sockets = [socket.create_connection((str(host), int(port)), timeout=SOCKET_TIMEOUT) for _ in range(64)]
    try:
        request = f"GET /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alice}\r\nConnection: close\r\n\r\n"
        for sock in sockets:
            sock.sendall(request.encode())
        bridge.start()
        for sock in sockets:  # then each is served once the server runs
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
            assert statuses(reply) == [200]
    finally:
        for sock in sockets:
            sock.close()
        bridge.stop()


# --- a signed webhook request cannot be replayed to another of the owner's endpoints ---------------------------


def test_a_delivered_request_replayed_to_another_endpoint_of_the_same_owner_fails_the_readme_check(tmp_path):
    import threading

    from duetime.adapters.aws.secrets import FileSecrets
    from duetime.targets.webhook import WebhookTarget

    from tests.webhook_receiver import readme_verify, receiver

    secrets = FileSecrets(tmp_path)
    with receiver(secrets.secret_for) as hook:
        target = WebhookTarget(secrets, allow_loopback=True)
        assert target.deliver(hook.url, "alice", "j_1.1", 1, b'{"n":1}', threading.Event()).status == 200
    [request] = hook.requests
    assert request.verified  # at the endpoint it was sent to
    verify = readme_verify()
    # Captured there and sent to the owner's other endpoint (its failure notices, say) within 300 s
    elsewhere = hook.url.replace("/hook", "/notices")
    assert not verify(secrets.secret_for("alice"), request.headers, request.body, elsewhere)
    # What the v1 check alone accepted
    assert request.headers["Duetime-Signature"].startswith("v1=")


# --- a handler's process gets none of the worker's credentials ------------------------------------------------------


def test_a_child_process_handler_gets_no_aws_credentials_nor_duetimes_settings(monkeypatch):
    import threading

    from duetime.worker.isolation import run_in_child
    from duetime.worker.registry import JobContext, get_registered

    from tests.integration import sample_handlers

    worker_only = {
        "AWS_ACCESS_KEY_ID": "AKIAWORKER",
        "AWS_SECRET_ACCESS_KEY": "worker-secret",
        "AWS_SESSION_TOKEN": "worker-session",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/worker",
        "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001",
        "DUETIME_HANDLER_GRANTS": "[]",
        "TEAM_API_TOKEN": "not-listed",
    }
    for name, value in worker_only.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("BILLING_URL", "https://billing.example.com")  # listed by the operator below
    monkeypatch.setenv("DUETIME_HANDLER_ENV", "BILLING_URL")
    registered = get_registered("sample.environment")
    assert registered is not None and sample_handlers.environment
    ctx = JobContext("j_1.1", "j_1", 1, datetime(2026, 12, 1, tzinfo=UTC), {}, owner="alice")
    ctx.cancelled = threading.Event()
    outcome = run_in_child(registered, ctx)
    seen = outcome.result
    assert isinstance(seen, dict), outcome
    assert not set(worker_only) & set(seen)
    assert not [name for name in seen if name.startswith(("AWS_", "DUETIME_"))]
    assert seen["BILLING_URL"] == "https://billing.example.com" and seen["LC_ALL"] == "C.UTF-8"
    assert seen["TZ"] == "UTC" and seen["PATH"] == os.environ["PATH"]


# --- a group's grant ends with the membership: every edit, run now and backfill reads the caller's groups ----------


def test_a_member_removed_from_a_group_can_no_longer_edit_run_or_backfill_a_job_its_grant_allowed(ports, server):
    from duetime.domain.grants import Grants

    ports.grants = Grants.parse(
        [{"owners": ["*"], "handlers": ["demo.echo"]}, {"owners": ["group:ops"], "handlers": ["demo.sleep"]}]
    )
    in_ops = issue_token(SECRET, "carol", groups=["ops"])
    left_ops = issue_token(SECRET, "carol")  # the same user, once removed from ops
    job = {"name": "t", "handler": "demo.sleep", "schedule": {"cron": "0 9 * * *"}}
    status, created = call(server, "POST", "/jobs", in_ops, job)
    assert status == 201 and created is not None
    path = f"/jobs/{created['jobId']}"
    backfill = {"from": "2026-11-20T00:00:00Z", "to": "2026-11-22T00:00:00Z"}
    for method, where, body in (
        ("PATCH", path, {"version": created["version"], "name": "renamed"}),
        ("POST", f"{path}/run", None),
        ("POST", f"{path}/backfill", backfill),
    ):
        status, error = call(server, method, where, left_ops, body)
        assert status == 403 and error is not None and error["error"]["field"] == "handler", (where, error)
    executions = call(server, "GET", f"{path}/executions", in_ops)[1]["executions"]
    assert [e["kind"] for e in executions] == ["scheduled"]
    # While a member, the same requests pass, and an edit keeps the editor's groups for the claim's check
    status, edited = call(server, "PATCH", path, in_ops, {"version": created["version"], "name": "renamed"})
    assert status == 200 and edited is not None and edited["name"] == "renamed"
    assert call(server, "POST", f"{path}/run", in_ops)[0] == 201
    assert call(server, "POST", f"{path}/backfill", in_ops, backfill)[0] == 200
    # Nor resume it once paused (pausing needs no grant)
    assert call(server, "PATCH", path, left_ops, {"status": "paused"})[0] == 200
    status, error = call(server, "PATCH", path, left_ops, {"status": "active"})
    assert status == 403 and error is not None and error["error"]["field"] == "handler"
    assert call(server, "PATCH", path, in_ops, {"status": "active"})[0] == 200
    # Switching to a handler granted to everyone is an edit the former member may make
    version = call(server, "GET", path, left_ops)[1]["version"]  # reading needs no grant
    status, _ = call(server, "PATCH", path, left_ops, {"version": version, "handler": "demo.echo"})
    assert status == 200
    from duetime.service.jobs import get_owned_job

    assert get_owned_job(ports, "carol", created["jobId"]).owner_groups == []  # what the claim checks from now


# --- backfill is no way around the quotas -----------------------------------------------------------------------


def test_backfilled_slots_count_against_a_quota_of_their_own_with_retry_after(ports, server):
    from duetime.domain.quotas import BACKFILL_SLOTS_PER_HOUR

    ports.quotas = Quotas(run_nows_per_minute=1, backfill_slots_per_hour=30)
    alice = issue_token(SECRET, "alice")
    hourly = {"name": "h", "handler": "demo.echo", "schedule": {"cron": "0 * * * *"}}
    job_id = call(server, "POST", "/jobs", alice, hourly)[1]["jobId"]
    path = f"/jobs/{job_id}/backfill"
    # Days before the job existed: what backfill is for, within the quota
    assert call(server, "POST", path, alice, {"from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z"})[0] == 200
    # The next 24 slots would pass 30 this hour: 429 naming the quota, and not one of them created
    second = {"from": "2026-11-02T00:00:00Z", "to": "2026-11-03T00:00:00Z"}
    status, error, headers = call_for_headers(server, "POST", path, alice, second)
    assert status == 429 and error["error"]["field"] == BACKFILL_SLOTS_PER_HOUR
    assert 1 <= int(headers["retry-after"]) <= 3600
    listed = call(server, "GET", f"{path.removesuffix('/backfill')}/executions?limit=100", alice)[1]["executions"]
    assert sum(1 for e in listed if e["kind"] == "backfill") == 24
    # More than the quota in one request could never pass: 400 naming the range's end
    status, error = call(server, "POST", path, alice, {"from": "2026-10-01T00:00:00Z", "to": "2026-10-03T00:00:00Z"})
    assert status == 400 and error is not None and error["error"]["field"] == "to"
    # The next hour has room again
    ports.clock.advance(int(headers["retry-after"]))
    assert call(server, "POST", path, alice, second)[0] == 200


def test_a_webhook_secret_made_before_duetime_local_makes_the_data_dir_0700(tmp_path):
    from duetime.adapters.aws.secrets import FileSecrets

    previous = os.umask(0o022)
    try:
        FileSecrets(tmp_path / ".duetime").secret_for("alice")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / ".duetime").stat().st_mode) == 0o700
