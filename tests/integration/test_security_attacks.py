"""Attacks on the service and the local edges, over real HTTP through the local bridge: each is refused."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from duetime.adapters.cursors import encode_cursor
from duetime.api.app import build_app
from duetime.api.auth import ISSUER, issue_token
from duetime.cli.main import main as cli_main
from duetime.definitions import API_MAX_BODY_BYTES, MAX_CURSOR_CHARS, MAX_CURSOR_KEY_BYTES
from duetime.domain.errors import InvalidInput
from duetime.local.http_bridge import ApiServer, body_length
from duetime.service import executions as execution_cases

from tests.http_client import Api

SECRET = "security-secret-of-thirty-two-bytes!!"
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
