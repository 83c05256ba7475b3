"""A Python handler's child process imports what running a handler needs and nothing more: a batch of ten runs
ten children, and pydantic alone (through duetime's models) cost each of them about a second of CPU."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import pytest
from duetime.worker.isolation import run_in_child
from duetime.worker.registry import JobContext, get_registered, load_modules

PROBE = """
import sys

from duetime import handler


@handler("probe_child.modules")
def modules(ctx):
    ctx.checkpoint({"step": 1})  # the checkpoint path stays light too
    heavy = {"pydantic", "boto3", "botocore", "aws_lambda_powertools"}
    return sorted({name.split(".")[0] for name in sys.modules} & heavy)
"""


def test_a_handlers_child_process_imports_neither_pydantic_nor_the_aws_sdk(tmp_path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "probe_child.py").write_text(PROBE)
    monkeypatch.syspath_prepend(str(tmp_path))  # the child gets this process's sys.path (child_command)
    load_modules(["probe_child"])
    registered = get_registered("probe_child.modules")
    assert registered is not None
    assert "pydantic" in sys.modules  # here, in the worker, it is: the child starts from nothing
    ctx = JobContext("e_1", "j_1", 1, datetime(2026, 12, 1, 9, 0, tzinfo=UTC), {}, "alice")
    outcome = run_in_child(registered, ctx)
    assert outcome.succeeded, outcome.error
    assert outcome.result == []
