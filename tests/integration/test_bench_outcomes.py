"""The bench reads duetime's results from its SQLite file while a run drains (an API request a job would take
the system's CPU from the runs it measures): what it reads is what the API shows, and its check against the
API finds a result read wrong."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta

import pytest

from bench.systems import DuetimeLocal


@pytest.mark.timeout(120)
def test_results_read_from_the_store_are_those_the_api_shows_and_a_wrong_one_is_caught() -> None:
    system = DuetimeLocal("sqlite")
    system.start()
    try:
        submitter = system.submitter()
        due = datetime.now(UTC) + timedelta(seconds=1)
        keys = [submitter.submit(n, due) for n in range(3)]
        submitter.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = system.outcomes(keys)
            if len(found) == 3 and all(o.finished_ms is not None for o in found.values()):
                break
            time.sleep(0.2)
        assert {o.status for o in found.values()} == {"succeeded"}
        assert all(o.scheduled_ms == int(due.timestamp() * 1000) and o.runs == 1 for o in found.values())
        assert system.outcomes_over_api(keys) == found
        assert system.api_mismatches(found) == []
        wrong = dict(found)
        wrong[keys[1]] = dataclasses.replace(found[keys[1]], finished_ms=(found[keys[1]].finished_ms or 0) + 1)
        assert system.api_mismatches(wrong) == [keys[1]]
    finally:
        system.stop()
