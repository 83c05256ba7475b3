"""Over `duetime local`'s HTTP API: an owner's failure reaches the webhook its job names (a real receiver on
127.0.0.1, verifying the signature), and no other owner's; `notify` on create, PATCH and GET, refused
naming the field; the CLI's --notify flags; events POSTed to `--events-webhook`, signed."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from duetime.adapters.aws.secrets import FileSecrets
from duetime.cli.main import main
from duetime.definitions import LOCAL_EVENTS_SIGNER

from tests.e2e.helpers import command_output, iso_in, new_local_system, submit, wait_for, wait_terminal
from tests.http_client import Api
from tests.webhook_receiver import receiver

pytestmark = pytest.mark.e2e


def failing(hook_url: str | None, **extra: object) -> dict[str, object]:
    body: dict[str, object] = {
        "name": "export",
        "handler": "demo.fail",
        "payload": {"times": 9, "permanent": True, "apiKey": "k-123"},
        "schedule": {"at": iso_in(1)},
        "retry": {"maxAttempts": 1},
        **extra,
    }
    if hook_url:
        body["notify"] = {"onFailure": [{"webhook": hook_url}]}
    return body


def test_an_owners_failure_reaches_that_owners_webhook_and_not_another_owners(local_system):
    alice, bob = f"alice-{secrets.token_hex(3)}", f"bob-{secrets.token_hex(3)}"
    alice_api = Api(local_system.api_url, local_system.token(alice))
    bob_api = Api(local_system.api_url, local_system.token(bob))
    secret_of = FileSecrets(local_system.data_dir).secret_for
    with receiver(secret_of) as alice_hook, receiver(secret_of) as bob_hook:
        job = submit(alice_api, **failing(alice_hook.url))
        bob_job = submit(bob_api, **failing(bob_hook.url, payload={"times": 0}))  # bob's succeeds
        [execution] = wait_terminal(alice_api, job["jobId"], timeout=60)
        assert execution["status"] == "failed"
        wait_terminal(bob_api, bob_job["jobId"], timeout=60)
        [request] = wait_for(lambda: alice_hook.requests, timeout=30, what="alice's failure notice")
    assert request.verified and request.headers["Duetime-Owner"] == alice
    assert request.json["executionId"] == execution["executionId"] and request.json["owner"] == alice
    assert "k-123" not in request.body.decode()
    assert bob_hook.requests == []


def test_notify_is_set_shown_edited_and_refused_naming_the_field(api):
    hook = "https://hooks.example.com/duetime"
    job = submit(api, **failing(hook, schedule={"cron": "0 3 * * *"}))
    assert job["notify"] == {"onFailure": [{"webhook": hook}]}
    read = api.get(f"/jobs/{job['jobId']}").json()
    mail = {"onFailure": [{"email": "ops@example.com"}]}
    edited = api.patch(f"/jobs/{job['jobId']}", json={"version": read["version"], "notify": mail})
    assert edited.status_code == 200, edited.text
    assert api.get(f"/jobs/{job['jobId']}").json()["notify"] == mail
    bad_topic = {"onFailure": [{"snsTopicArn": "arn:aws:sns:us-east-1:123456789012:payroll"}]}
    refused = api.post("/jobs", json={**failing(None), "notify": bad_topic})
    assert refused.status_code == 400
    assert refused.json()["error"]["field"] == "notify.onFailure.snsTopicArn"
    metadata = {"onFailure": [{"webhook": "http://169.254.169.254/latest"}]}
    refused = api.post("/jobs", json={**failing(None), "notify": metadata})
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "notify.onFailure[0].webhook"


def test_the_cli_sets_destinations_with_notify_flags(local_system, capsys):
    owner = f"cli-{secrets.token_hex(3)}"
    conn = ["--data-dir", str(local_system.data_dir), "--owner", owner, "--json"]
    flags = ["--notify-webhook", "https://hooks.example.com/a", "--notify-email", "me@example.com"]
    code = main(["jobs", "create", "--name", "n", "--handler", "demo.echo", "--cron", "0 4 * * *", *flags, *conn])
    out, err = command_output(capsys)
    assert code == 0, err
    assert json.loads(out)["notify"] == {
        "onFailure": [{"webhook": "https://hooks.example.com/a"}, {"email": "me@example.com"}]
    }


def test_events_are_posted_signed_to_the_events_webhook(tmp_path: Path):
    data_dir = tmp_path / "events"
    data_dir.mkdir()
    secret = FileSecrets(data_dir).secret_for(LOCAL_EVENTS_SIGNER)
    with receiver(lambda owner: secret) as hook:
        system = new_local_system(data_dir, port=0, workers=1, shards=2, events_webhook=hook.url).start()
        try:
            api = Api(system.api_url, system.token("erin"))
            job = submit(api, name="e", handler="demo.echo", schedule={"at": iso_in(1)})
            wait_terminal(api, job["jobId"], timeout=60)

            def types() -> list[str] | None:
                seen = [r.json["detail-type"] for r in hook.requests]
                return seen if "Execution Succeeded" in seen else None

            seen = wait_for(types, timeout=30, what="the run's event")
        finally:
            system.stop()
    assert seen[0] == "Job Created"
    assert all(r.verified and r.headers["Duetime-Owner"] == LOCAL_EVENTS_SIGNER for r in hook.requests)
    [run] = [r.json for r in hook.requests if r.json["detail-type"] == "Execution Succeeded"]
    assert run["source"] == "duetime" and run["detail"]["owner"] == "erin" and run["detail"]["jobId"] == job["jobId"]
