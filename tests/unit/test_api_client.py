"""The API client's connection settings, error decoding, and the command line's tables and job specs."""

from __future__ import annotations

import argparse
import json

import jwt
import pytest
from duetime.api.auth import ISSUER
from duetime.cli.client import add_client_commands, spec_from_args, table
from duetime.client import ApiError, ConfigError, _api_error, resolve_connection

SECRET = "a-local-secret-of-at-least-thirty-two-bytes"


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("DUETIME_API_URL", raising=False)
    monkeypatch.delenv("DUETIME_TOKEN", raising=False)
    (tmp_path / "local.json").write_text(json.dumps({"apiUrl": "http://127.0.0.1:9/", "jwtSecret": SECRET}))
    return tmp_path


def test_flags_win_over_the_environment_and_the_data_dir(data_dir, monkeypatch):
    monkeypatch.setenv("DUETIME_API_URL", "http://env")
    monkeypatch.setenv("DUETIME_TOKEN", "env-token")
    assert resolve_connection("http://flag/", "flag-token", data_dir) == ("http://flag", "flag-token")
    assert resolve_connection(None, None, data_dir) == ("http://env", "env-token")


def test_the_data_dir_gives_the_url_and_a_token_for_the_owner(data_dir):
    url, token = resolve_connection(None, None, data_dir, owner="carol")
    assert url == "http://127.0.0.1:9"
    assert jwt.decode(token, SECRET, algorithms=["HS256"], issuer=ISSUER)["sub"] == "carol"
    _, default = resolve_connection(None, None, data_dir)
    assert jwt.decode(default, SECRET, algorithms=["HS256"], issuer=ISSUER)["sub"] == "local-user"


def test_without_any_source_the_error_says_how_to_connect(tmp_path, monkeypatch):
    monkeypatch.delenv("DUETIME_API_URL", raising=False)
    monkeypatch.delenv("DUETIME_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="--api-url"):
        resolve_connection(None, None, tmp_path)


def test_api_errors_are_decoded_and_non_json_answers_kept_readable():
    error = _api_error(400, '{"error": {"code": "invalid_input", "message": "bad", "field": "name"}}')
    assert (error.status, error.code, error.field) == (400, "invalid_input", "name")
    assert "field name" in str(error)
    plain = _api_error(502, "<html>Bad Gateway</html>")
    assert isinstance(plain, ApiError) and plain.code == "http_error" and "Bad Gateway" in plain.message


def test_tables_align_columns_and_show_missing_values_as_a_dash():
    text = table([("j_1", None, 3), ("j_22", "nightly", 10)], ("ID", "NAME", "N"))
    assert text.splitlines() == ["ID    NAME     N", "j_1   -        3", "j_22  nightly  10"]


def parse(*argv: str) -> argparse.Namespace:
    top = argparse.ArgumentParser()
    add_client_commands(top.add_subparsers(dest="command"))
    return top.parse_args(list(argv))


def test_create_flags_build_the_post_body_over_a_spec_file(tmp_path):
    spec_file = tmp_path / "job.json"
    spec_file.write_text(json.dumps({"name": "from-file", "handler": "demo.echo", "retry": {"maxAttempts": 2},
                                     "schedule": {"at": "2026-12-01T09:00:00Z"}}))  # fmt: skip
    args = parse("jobs", "create", "--file", str(spec_file), "--cron", "0 2 * * *", "--tz", "Asia/Kolkata",
                 "--max-delay", "60", "--payload", '{"a": 1}', "--overlap", "allow")  # fmt: skip
    assert spec_from_args(args) == {
        "name": "from-file",
        "handler": "demo.echo",
        "schedule": {"cron": "0 2 * * *", "timeZone": "Asia/Kolkata"},
        "retry": {"maxAttempts": 2, "maxDelaySeconds": 60.0},
        "payload": {"a": 1},
        "overlap": "allow",
    }


def test_create_flags_give_an_interval_with_its_anchor_and_exclusions():
    args = parse("jobs", "create", "--name", "i", "--handler", "demo.echo", "--every", "rate(90 minutes)",
                 "--start-at", "2026-12-01T09:00:00Z",
                 "--exclude", "2026-12-25", "--exclude", "2026-12-31/2027-01-01")  # fmt: skip
    assert spec_from_args(args) == {
        "name": "i",
        "handler": "demo.echo",
        "schedule": {"every": "rate(90 minutes)", "startAt": "2026-12-01T09:00:00Z"},
        "exclude": ["2026-12-25", "2026-12-31/2027-01-01"],
    }


def test_dst_flags_give_the_cron_schedules_policy():
    args = parse("jobs", "create", "--name", "d", "--handler", "demo.echo", "--cron", "30 1 * * *",
                 "--tz", "America/New_York", "--dst-fold", "both")  # fmt: skip
    assert spec_from_args(args)["schedule"] == {
        "cron": "30 1 * * *",
        "timeZone": "America/New_York",
        "dst": {"fold": "both"},
    }
    with pytest.raises(SystemExit):
        parse("jobs", "create", "--cron", "* * * * *", "--dst-gap", "later")


def test_cron_and_at_cannot_both_be_given():
    with pytest.raises(SystemExit):
        parse("jobs", "create", "--cron", "* * * * *", "--at", "2026-12-01T09:00:00Z")
