"""The data dir of a running `duetime local`: local.json, what other commands need to reach it (no moto or boto3
import, so the API client reads it too)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from duetime.definitions import DEFAULT_REGION

STATE_FILE = "local.json"


class LocalConnection(BaseModel):
    """The part of local.json the API client needs (`duetime jobs ... --data-dir`): where the API listens and
    the secret its tokens are signed with. Only these are required, so the client needs nothing else."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    api_url: str
    jwt_secret: str
    # Who this data dir is: the audience of its tokens, so a token of another data dir (or of this one
    # before `duetime local --reset`) is refused even if it were signed with the same key. None: a
    # local.json written before audiences were recorded (the next start gives it one).
    instance_id: str | None = None


class LocalState(LocalConnection):
    """What `duetime local` records in its data dir at start: the backend it runs on and how to reach it.

    `duetime worker --data-dir`, `duetime token` and `duetime audit` read it; a restart on the same data
    dir reads it too, to keep the secret (tokens stay valid) and the pre-loader's owner (it resumes its
    own shard leases at once instead of waiting them out).
    """

    # A local.json written before the backend was recorded came from the moto-only `duetime local`.
    backend: str = "moto"
    endpoint_url: str | None = None  # moto: the embedded server
    database_file: str | None = None  # sqlite: the database's file name inside the data dir
    region: str = DEFAULT_REGION
    prefix: str
    shards: int = Field(ge=1)
    lease_seconds: int = Field(ge=1)
    preload_interval_seconds: int = Field(ge=1)
    preload_window_seconds: int = Field(ge=1)
    preloader_id: str | None = None
    # The grant rules of `--grants` (None: everyone may use everything), for attached workers' claim checks.
    handler_grants: list[dict[str, Any]] | None = None
    pid: int = 0
    # Events (`--events`, `--events-webhook`): attached workers publish their runs' events the same way.
    events_console: bool = False
    events_webhook: str | None = None
    # `--class-queues`: the classes spread over more than one due queue, so attached workers read them all.
    class_queues: dict[str, int] = Field(default_factory=dict)

    def write(self, data_dir: str | Path) -> None:
        """Write local.json readable by its owner alone (it holds the token secret and moto's endpoint).

        The temporary file is created 0600 by the open call itself (never world-readable, even for an
        instant or under a lax umask) and exclusively (a link planted under its name is not followed),
        then renamed over local.json."""
        path = Path(data_dir) / STATE_FILE
        temporary = path.with_suffix(".tmp")
        temporary.unlink(missing_ok=True)  # left by a run killed between open and rename
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(json.dumps(self.model_dump(by_alias=True), indent=2))
        os.replace(temporary, path)  # a reader never sees half a file, even if we are killed mid-write


def read_state(data_dir: str | Path) -> dict[str, Any]:
    """What other commands need to reach a running `duetime local` (written at its start)."""
    path = Path(data_dir) / STATE_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: is `duetime local --data-dir {data_dir}` running?")
    state: dict[str, Any] = json.loads(path.read_text())
    return state


def load_connection(data_dir: str | Path) -> LocalConnection:
    """The API URL and token secret of the `duetime local` on `data_dir`; raises FileNotFoundError without one,
    ValueError when local.json is not JSON or lacks them."""
    return LocalConnection.model_validate(read_state(data_dir))


def load_state(data_dir: str | Path) -> LocalState:
    """The typed local.json of the `duetime local` on `data_dir`; raises FileNotFoundError without one."""
    return LocalState.model_validate(read_state(data_dir))


def previous_state(data_dir: str | Path) -> LocalState | None:
    """The local.json a previous run left in `data_dir`, if it is there and readable."""
    try:
        return load_state(data_dir)
    except (FileNotFoundError, ValueError):
        return None
