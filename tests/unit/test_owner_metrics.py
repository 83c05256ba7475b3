"""The lateness metrics' `Owner` dimension is bounded (issue 34): the owners a stack names keep their own
value, every other owner counts as `other`, and a list past the bound is refused at cold start."""

from __future__ import annotations

import pytest
from duetime.config import RuntimeConfig, runtime_environment
from duetime.definitions import MAX_METRIC_OWNERS, METRIC_OTHER_OWNERS, Settings
from duetime.service.lateness import owner_dimension
from pydantic import ValidationError


def test_a_named_owner_is_its_own_value_and_every_other_owner_is_other():
    named = ("payments", "reports")
    assert owner_dimension("payments", named) == "payments"
    assert owner_dimension("reports", named) == "reports"
    seen = {owner_dimension(f"team-{n}", named) for n in range(10_000)}
    assert seen == {METRIC_OTHER_OWNERS}  # ten thousand owners, one series
    assert owner_dimension("payments", ()) == METRIC_OTHER_OWNERS  # nobody named: one series in all


def test_the_named_owners_reach_every_function_and_a_list_past_the_bound_is_refused():
    settings = Settings(metric_owners=("payments", "reports"))
    env = runtime_environment(settings, "us-east-1", {"default": "q"}, {"default": "dlq"})
    assert env["DUETIME_METRIC_OWNERS"] == '["payments","reports"]'
    assert RuntimeConfig.from_env(env).settings().metric_owners == ("payments", "reports")
    # A stack naming none keeps its environment as it was
    assert "DUETIME_METRIC_OWNERS" not in runtime_environment(Settings(), "us-east-1", {"default": "q"}, {})
    too_many = [f"team-{n}" for n in range(MAX_METRIC_OWNERS + 1)]
    for bad, says in ((too_many, f"at most {MAX_METRIC_OWNERS}"), (["other"], "cannot name 'other'"), ([""], "1 to")):
        with pytest.raises(ValidationError, match="DUETIME_METRIC_OWNERS") as refused:
            RuntimeConfig(metric_owners=bad)
        assert says in str(refused.value)
