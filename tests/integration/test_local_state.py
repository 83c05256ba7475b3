"""local.json: what `duetime local` records for the processes that attach to it, and how they fail without it."""

from __future__ import annotations

import json
import stat

import pytest
from duetime.cli.main import main
from duetime.local.backends import SQLITE, attach_ports
from duetime.local.state import STATE_FILE, LocalState, load_state


def state(**overrides: object) -> LocalState:
    values: dict[str, object] = {
        "backend": SQLITE,
        "api_url": "http://127.0.0.1:8080",
        "database_file": "duetime.sqlite3",
        "prefix": "duetime",
        "shards": 4,
        "lease_seconds": 30,
        "preload_interval_seconds": 5,
        "preload_window_seconds": 60,
        "jwt_secret": "s3cret",
        "preloader_id": "local-preloader-abc",
    }
    values.update(overrides)
    return LocalState.model_validate(values)


def test_local_json_round_trips_and_only_its_owner_reads_it(tmp_path):
    state().write(tmp_path)
    assert load_state(tmp_path) == state()
    assert json.loads((tmp_path / STATE_FILE).read_text())["backend"] == "sqlite"
    assert stat.S_IMODE((tmp_path / STATE_FILE).stat().st_mode) == 0o600


def test_a_local_json_from_before_backends_reads_as_moto(tmp_path):
    old = {
        "apiUrl": "http://127.0.0.1:8080",
        "endpointUrl": "http://127.0.0.1:5000",
        "region": "us-east-1",
        "prefix": "duetime",
        "shards": 8,
        "leaseSeconds": 30,
        "preloadIntervalSeconds": 5,
        "preloadWindowSeconds": 10,
        "jwtSecret": "s3cret",
        "pid": 1,
    }
    (tmp_path / STATE_FILE).write_text(json.dumps(old))
    assert load_state(tmp_path).backend == "moto"


def test_attaching_to_a_sqlite_data_dir_without_its_database_fails_without_creating_one(tmp_path):
    state().write(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"duetime\.sqlite3 not found"):
        attach_ports(tmp_path, load_state(tmp_path))
    assert not (tmp_path / "duetime.sqlite3").exists()


@pytest.mark.parametrize("command", [["worker"], ["audit"], ["token", "--owner", "alice"]])
def test_commands_that_attach_say_what_is_missing(tmp_path, capsys, command):
    assert main([*command, "--data-dir", str(tmp_path)]) == 2
    assert "local.json not found" in capsys.readouterr().err
