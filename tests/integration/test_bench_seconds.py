"""bench/seconds.py runs end to end for a few seconds (so the precision figure's harness cannot rot): a
`*/5 * * * * *` job on `duetime local` (SQLite), its runs read back and their lateness summarised."""

from __future__ import annotations

import pytest

from bench import seconds


@pytest.mark.bench  # ~20 s of a local system waiting for slots: `make bench-smoke`, not `make test`
@pytest.mark.timeout(120)
def test_the_seconds_bench_measures_each_run_against_its_slot():
    result = seconds.measure(seconds=12)
    assert result["runs"] >= 1  # a loaded machine may miss a slot; the figures say how late, not this test
    assert result["notFirstAttempt"] == 0
    assert result["claimed"]["p50Ms"] >= 0 and result["handlerRuns"] == result["runs"]
    assert "claimed - slot" in seconds.render(result)
