"""`https:` webhook jobs through the worker against moto and a real HTTP receiver on 127.0.0.1: signed
requests, the same Idempotency-Key on every attempt, what each answer does, timeouts, refused targets,
and owners' secrets in files and in Secrets Manager."""

from __future__ import annotations

import os
import stat
import time
from dataclasses import replace

import pytest
from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.secrets import FileSecrets, MissingWebhookSecret, SecretsManagerSecrets
from duetime.cli.main import main
from duetime.config import RuntimeConfig, build_targets
from duetime.domain.errors import InvalidInput
from duetime.domain.models import Execution, ExecutionStatus, JobSpec
from duetime.service.jobs import submit_job
from duetime.targets.webhook import WebhookRefused, WebhookTarget
from duetime.worker.kinds import Targets, resolve_handler
from duetime.worker.registry import JobContext, PermanentFailure
from duetime.worker.runtime import Worker
from moto import mock_aws

from tests.webhook_receiver import Answer, receiver


@pytest.fixture
def secrets(tmp_path):
    return FileSecrets(tmp_path)


@pytest.fixture
def local_ports(ports):
    """The ports of a `duetime local`: webhooks may call this machine."""
    ports.settings = replace(ports.settings, allow_loopback_webhooks=True)
    return ports


def submit(ports, url, **overrides):
    body = {
        "name": "hook",
        "handler": url,
        "payload": {"region": "IN"},
        "schedule": {"at": "2026-12-01T09:00:00Z"},
        "retry": {"maxAttempts": 3, "baseDelaySeconds": 1, "maxDelaySeconds": 1},
    }
    body.update(overrides)
    return submit_job(ports, "alice", JobSpec.model_validate(body))[0]


def run_to_the_end(ports, clock, job, targets, rounds=6) -> Execution:
    """Receive and process what is due, as a worker does, until the job's execution ends."""
    worker = Worker(ports, "default", "w1", targets=targets)
    for _ in range(rounds):
        for received in ports.queues.receive("default", 10, 0, 30):
            worker.process(received)
        [execution] = ports.store.executions_of_job(job.job_id)
        if execution.status.is_terminal:
            return execution
        clock.advance(1)
    raise AssertionError(f"the execution did not end: {execution}")


def test_500_then_200_takes_two_signed_attempts_with_one_idempotency_key(local_ports, clock, secrets):
    with receiver(secrets.secret_for, [Answer(500, b"busy"), Answer(200, b'{"invoices": 3}')]) as hook:
        job = submit(local_ports, hook.url)
        execution = run_to_the_end(local_ports, clock, job, Targets(webhook_target=WebhookTarget(secrets, True)))
    assert execution.status == ExecutionStatus.SUCCEEDED and execution.attempt == 2
    assert execution.result == {"invoices": 3}
    assert "HTTP 500: busy" in (execution.attempts[0].error or "")
    first, second = hook.requests
    assert first.verified and second.verified  # the snippet of docs/handlers.md, with the owner's secret
    assert {r.headers["Idempotency-Key"] for r in hook.requests} == {execution.execution_id}
    assert [r.headers["Duetime-Attempt"] for r in hook.requests] == ["1", "2"]
    assert first.headers["Duetime-Owner"] == "alice" and first.path == "/hook"
    assert first.json == {
        "executionId": execution.execution_id,
        "jobId": job.job_id,
        "owner": "alice",
        "attempt": 1,
        "scheduledAt": "2026-12-01T09:00:00.000Z",
        "payload": {"region": "IN"},
    }


def test_404_fails_at_once_for_good(local_ports, clock, secrets):
    with receiver(secrets.secret_for, [Answer(404, b"no such hook")]) as hook:
        job = submit(local_ports, hook.url)
        execution = run_to_the_end(local_ports, clock, job, Targets(webhook_target=WebhookTarget(secrets, True)))
    assert execution.status == ExecutionStatus.FAILED and execution.attempt == 1
    assert "HTTP 404" in (execution.error or "") and "PermanentFailure" in (execution.error or "")
    assert len(hook.requests) == 1


def test_an_empty_2xx_body_is_a_null_result_and_text_is_kept_as_text(local_ports, clock, secrets):
    with receiver(secrets.secret_for, [Answer(204), Answer(200, b"OK")]) as hook:
        targets = Targets(webhook_target=WebhookTarget(secrets, True))
        empty = run_to_the_end(local_ports, clock, submit(local_ports, hook.url), targets)
        text = run_to_the_end(local_ports, clock, submit(local_ports, hook.url, name="t"), targets)
    assert empty.status == text.status == ExecutionStatus.SUCCEEDED
    assert empty.result is None and text.result == "OK"


def test_a_hang_past_the_timeout_is_a_retried_timeout(local_ports, clock, secrets):
    with receiver(secrets.secret_for, [Answer(hang=True), Answer(200, b"{}")]) as hook:
        job = submit(local_ports, hook.url, timeoutSeconds=1)
        started = time.monotonic()
        execution = run_to_the_end(local_ports, clock, job, Targets(webhook_target=WebhookTarget(secrets, True)))
        took = time.monotonic() - started
    assert execution.status == ExecutionStatus.SUCCEEDED and execution.attempt == 2
    assert execution.attempts[0].error == "timeout after 1 s"
    assert len(hook.requests) == 2
    # The worker closed the hung connection at the timeout instead of leaving it to the receiver (30 s)
    closed = hook.requests[0].closed_by_client_after
    assert closed is not None and closed < 4, closed
    assert took < 15


def test_a_connection_refused_is_retried(local_ports, clock, secrets):
    with receiver(secrets.secret_for) as hook:
        url = hook.url
    job = submit(local_ports, url, retry={"maxAttempts": 2, "baseDelaySeconds": 1, "maxDelaySeconds": 1})
    execution = run_to_the_end(local_ports, clock, job, Targets(webhook_target=WebhookTarget(secrets, True)))
    assert execution.status == ExecutionStatus.FAILED and execution.attempt == 2
    assert "refused" in (execution.error or "")


@pytest.mark.parametrize(
    "url",
    [
        "https://169.254.169.254/latest/meta-data/",
        "https://10.0.0.7/hook",
        "https://[fe80::1]/hook",
        "http://127.0.0.1:9000/hook",
        "https://localhost/hook",
        "http://hooks.example.com/hook",
        "https://hooks example.com/hook",
    ],
)
def test_forbidden_targets_are_refused_at_submit_on_aws(ports, url):
    with pytest.raises(InvalidInput) as caught:
        submit(ports, url)
    assert caught.value.field == "handler"


def test_locally_loopback_is_allowed_but_metadata_is_not(local_ports):
    assert submit(local_ports, "http://127.0.0.1:9000/hook").handler == "http://127.0.0.1:9000/hook"
    with pytest.raises(InvalidInput):
        submit(local_ports, "http://169.254.169.254/latest/meta-data/")


def context(owner: str = "alice") -> JobContext:
    from datetime import UTC, datetime

    return JobContext("j_1.1796169600000", "j_1", 1, datetime(2026, 12, 1, 9, tzinfo=UTC), {}, owner=owner)


def test_a_name_resolving_to_a_forbidden_address_is_refused_before_connecting(secrets):
    resolved: list[str] = []

    def metadata(host: str, port: int) -> list[str]:
        resolved.append(host)
        return ["93.184.215.14", "169.254.169.254"]  # one public, one metadata: refused whole

    run = resolve_handler(
        "https://rebind.example.com/hook", Targets(webhook_target=WebhookTarget(secrets, resolve=metadata))
    )
    with pytest.raises(PermanentFailure, match=r"169\.254\.169\.254, a link-local"):
        run(context())
    assert resolved == ["rebind.example.com"]


def test_the_connection_goes_to_the_checked_address_without_resolving_again(secrets):
    lookups: list[str] = []

    def pinned(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    # No resolver but ours knows this name: only the checked address can have been connected to.
    with receiver(secrets.secret_for, host="duetime-pinned-check.localhost") as hook:
        port = hook.url.split(":")[2].split("/")[0]
        url = hook.url
        target = WebhookTarget(secrets, allow_loopback=True, resolve=pinned)
        assert resolve_handler(url, Targets(webhook_target=target))(context()) == {"ok": True}
    assert lookups == ["duetime-pinned-check.localhost"]
    [request] = hook.requests
    assert request.headers["Host"] == f"duetime-pinned-check.localhost:{port}" and request.verified


def test_on_aws_the_worker_refuses_loopback_even_for_a_job_stored_earlier(secrets):
    with receiver(secrets.secret_for) as hook:
        run = resolve_handler(hook.url, Targets(webhook_target=WebhookTarget(secrets)))
        with pytest.raises(PermanentFailure, match="loopback"):
            run(context())
    assert hook.requests == []


def test_file_secrets_are_private_stable_and_printed_by_the_cli(tmp_path, capsys):
    assert main(["webhook-secret", "--owner", "alice", "--data-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.strip()
    secrets = FileSecrets(tmp_path)
    assert printed.startswith("whsec_") and secrets.secret_for("alice") == printed
    assert stat.S_IMODE(os.stat(secrets.path("alice")).st_mode) == 0o600
    assert secrets.secret_for("bob") != printed
    assert secrets.path("../../etc/passwd").parent == secrets.folder  # owners cannot name paths
    assert main(["webhook-secret", "--owner", "alice", "--data-dir", str(tmp_path / "absent")]) == 2


@mock_aws
def test_secrets_manager_secrets_are_made_by_the_cli_read_once_and_cached(monkeypatch, capsys):
    client = make_client("secretsmanager", "us-east-1")
    gets: list[str] = []
    client.meta.events.register("before-call.secrets-manager.GetSecretValue", lambda **_: gets.append("get"))
    now = [1000.0]
    store = SecretsManagerSecrets(client, "duetime", cache_seconds=300, monotonic=lambda: now[0])
    with pytest.raises(MissingWebhookSecret, match="duetime webhook-secret --owner alice"):
        store.secret_for("alice")
    monkeypatch.setenv("DUETIME_REGION", "us-east-1")
    assert main(["webhook-secret", "--owner", "alice", "--aws"]) == 0
    printed = capsys.readouterr().out.strip()
    assert client.describe_secret(SecretId="duetime/webhook-secrets/alice")["Name"] == "duetime/webhook-secrets/alice"
    gets.clear()
    assert store.secret_for("alice") == printed == store.secret_for("alice")
    assert len(gets) == 1  # cached
    now[0] += 301
    assert store.secret_for("alice") == printed and len(gets) == 2  # a rotated value is seen within the TTL
    assert main(["webhook-secret", "--owner", "alice", "--aws"]) == 0  # idempotent
    assert capsys.readouterr().out.strip() == printed


@mock_aws
def test_a_missing_secret_on_aws_fails_the_run_for_good_without_a_request(secrets):
    store = SecretsManagerSecrets(make_client("secretsmanager", "us-east-1"), "duetime")
    with receiver(secrets.secret_for) as hook:
        target = WebhookTarget(store, allow_loopback=True)
        with pytest.raises(PermanentFailure, match="no webhook secret for owner 'carol'"):
            resolve_handler(hook.url, Targets(webhook_target=target))(context("carol"))
        with pytest.raises(WebhookRefused):
            target.deliver(hook.url, "carol", "j_1.1", 1, b"{}", context().cancelled)
    assert hook.requests == []


def test_an_owner_that_is_no_valid_header_value_is_percent_encoded_in_its_header(secrets):
    owner = "zoë\r\nX-Injected: 1"
    with receiver(secrets.secret_for) as hook:
        run = resolve_handler(hook.url, Targets(webhook_target=WebhookTarget(secrets, allow_loopback=True)))
        assert run(context(owner)) == {"ok": True}
    [request] = hook.requests
    assert request.headers["Duetime-Owner"] == "zo%C3%AB%0D%0AX-Injected%3A%201" and "X-Injected" not in request.headers
    assert request.json["owner"] == owner


def test_wiring_signs_with_data_dir_files_locally_and_with_secrets_manager_on_aws(tmp_path):
    local = build_targets(RuntimeConfig(endpoint_url="http://127.0.0.1:1", webhook_secrets_dir=str(tmp_path)))
    assert local.webhook_target is not None and local.webhook_target.allow_loopback
    assert isinstance(local.webhook_target.secrets, FileSecrets)
    aws = build_targets(RuntimeConfig(prefix="team"))
    assert aws.webhook_target is not None and not aws.webhook_target.allow_loopback
    assert isinstance(aws.webhook_target.secrets, SecretsManagerSecrets)
    assert aws.webhook_target.secrets.name("alice") == "team/webhook-secrets/alice"
    assert aws.webhook_target.secrets._client is None  # made at the first webhook run, not at cold start
