"""End to end over `duetime local`, through the CLI: a job that fails for good shows in `duetime dead-letters`,
is retried (`duetime executions retry`) and redriven (`duetime dead-letters redrive`), and fails again each
time with its attempt numbers going on and a fresh budget of attempts."""

from __future__ import annotations

import json
import secrets
from typing import Any

from duetime.cli.main import main

from tests.e2e.helpers import iso_in, wait_for


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(out: str) -> Any:
    """The CLI's --json document (indented, from a line that is just `{`): on the moto backend the emulated
    Lambdas' one-line JSON logs are printed to the same stdout around it."""
    lines = out.splitlines()
    start = max(i for i, line in enumerate(lines) if line == "{")
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    return json.loads("\n".join(lines[start : end + 1]))


def executions_of(capsys: Any, job_id: str, conn: list[str]) -> list[dict[str, Any]]:
    code, out, err = run(capsys, "executions", job_id, "--json", *conn)
    assert code == 0, err
    return list(cli_json(out)["executions"])


def test_a_failed_execution_is_listed_retried_and_redriven_with_attempts_going_on(local_system, capsys):
    owner = f"redrive-{secrets.token_hex(3)}"  # an owner of its own: its dead letters are this test's only
    conn = ["--data-dir", str(local_system.data_dir), "--owner", owner]
    # A job whose handler fails its first 9 attempts, 2 attempts per budget
    code, out, err = run(
        capsys, "jobs", "create", "--name", "always-fails", "--handler", "demo.fail", "--payload", '{"times": 9}',
        "--at", iso_in(1), "--max-attempts", "2", "--base-delay", "0.5", "--max-delay", "1", "--json", *conn,
    )  # fmt: skip
    assert code == 0, err
    job_id = cli_json(out)["jobId"]

    def dead_letter(attempt: int) -> dict[str, Any] | None:
        code, text, _ = run(capsys, "dead-letters", "--json", *conn)
        assert code == 0
        listed = cli_json(text)["executions"]
        return listed[0] if listed and listed[0]["attempt"] == attempt else None

    # It fails for good after attempts 1 and 2 and shows among the owner's dead letters, with its error
    failed = wait_for(lambda: dead_letter(2), 30, what="the failure in the dead letters")
    assert failed["jobId"] == job_id and failed["status"] == "failed" and "attempt 2" in failed["error"]
    code, out, _ = run(capsys, "dead-letters", *conn)
    assert code == 0 and failed["executionId"] in out and "failed" in out
    # Retried: waiting again, same id, its budget counted from attempt 2
    code, out, err = run(capsys, "executions", "retry", failed["executionId"], "--json", *conn)
    assert code == 0, err
    retried = cli_json(out)
    assert (retried["executionId"], retried["status"], retried["retryBase"]) == (failed["executionId"], "scheduled", 2)
    # ...and it fails for good again, after attempts 3 and 4
    again = wait_for(lambda: dead_letter(4), 30, what="the retried execution to fail again")
    assert again["executionId"] == failed["executionId"] and "attempt 4" in again["error"]
    assert [a["outcome"] for a in again["attempts"]] == ["failed"] * 4
    # Redriven: waiting again, its budget counted from attempt 4
    code, out, err = run(capsys, "dead-letters", "redrive", "--job", job_id, "--json", *conn)
    assert code == 0, err
    assert [e["executionId"] for e in cli_json(out)["retried"]] == [failed["executionId"]]
    # A retry of an execution that is not failed is refused (exit 1, 409 naming the status). Shown on a run due
    # in an hour: the redriven one fails again within a second or two (0.5-1 s backoff), so whether it is still
    # waiting when a second retry arrives depends on the machine's speed.
    code, out, err = run(
        capsys, "jobs", "create", "--name", "later", "--handler", "demo.echo", "--at", iso_in(3600), "--json", *conn
    )  # fmt: skip
    assert code == 0, err
    [waiting] = [e for e in executions_of(capsys, cli_json(out)["jobId"], conn) if e["status"] == "scheduled"]
    code, _, err = run(capsys, "executions", "retry", waiting["executionId"], "--json", *conn)
    assert code == 1 and json.loads(err)["error"]["status"] == 409 and json.loads(err)["error"]["field"] == "status"
    third = wait_for(lambda: dead_letter(6), 30, what="the redriven execution to fail again")
    assert third["executionId"] == failed["executionId"] and third["retryBase"] == 4
