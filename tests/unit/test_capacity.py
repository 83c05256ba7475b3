"""The capacity model: partition writes, Little's law, shard counts and cost, from the measured profile."""

from __future__ import annotations

import json

import pytest
from duetime.cli import capacity
from duetime.cli.capacity import CRON_RUN, ONE_OFF, Inputs, estimate, heartbeats, smallest_shards


def test_heartbeats_come_every_third_of_a_lease_while_the_job_runs():
    assert heartbeats(2, 30) == 0
    assert heartbeats(10, 30) == 0
    assert heartbeats(30, 30) == 2
    assert heartbeats(31, 30) == 3


def test_writes_per_partition_are_the_rate_per_shard_times_the_write_units_of_one_execution():
    result = estimate(Inputs(rate=1000, shards=10, avg_seconds=2))
    assert result.partition_wcu_per_second == 100 * ONE_OFF.executions_wcu
    assert result.partition_wcu_share == pytest.approx(0.4)


def test_heartbeats_add_one_write_per_beat_on_the_partition():
    quiet = estimate(Inputs(rate=1000, shards=10, avg_seconds=2, profile="cron"))
    beating = estimate(Inputs(rate=1000, shards=10, avg_seconds=30, profile="cron"))
    assert beating.partition_wcu_per_second - quiet.partition_wcu_per_second == 100 * 2


def test_the_smallest_shard_count_keeps_every_partition_within_1000_write_units():
    shards = smallest_shards(10_000, ONE_OFF, 0)
    assert shards == 40
    assert estimate(Inputs(rate=10_000, shards=shards)).fits
    assert not estimate(Inputs(rate=10_000, shards=shards - 1)).fits


def test_10000_per_second_does_not_fit_the_default_32_shards_for_one_off_jobs_but_does_for_cron_runs():
    one_off = estimate(Inputs(rate=10_000, shards=32))
    cron = estimate(Inputs(rate=10_000, shards=32, profile="cron"))
    assert not one_off.fits and one_off.smallest_shards == 40
    assert cron.fits and cron.partition_wcu_per_second == pytest.approx(937.5)


def test_in_flight_messages_follow_littles_law():
    result = estimate(Inputs(rate=10_000, shards=64, avg_seconds=2))
    held = 2 + capacity.EARLY_HOLD_SECONDS + capacity.CALL_OVERHEAD_SECONDS
    assert result.in_flight == pytest.approx(10_000 * held)
    assert result.in_flight_share == pytest.approx(10_000 * held / 120_000, abs=1e-3)


def test_long_jobs_at_high_rates_exceed_the_sqs_in_flight_limit():
    result = estimate(Inputs(rate=10_000, shards=64, avg_seconds=30, profile="cron"))
    assert not result.fits
    assert any("in flight" in w for w in result.warnings)


def test_cost_per_million_is_the_sum_of_its_parts_at_the_stated_prices():
    result = estimate(Inputs(rate=100, shards=32, avg_seconds=0, profile="cron"))
    cost = result.cost_per_million
    prices = capacity.Prices()
    units = CRON_RUN.executions_wcu + CRON_RUN.index_wcu + CRON_RUN.jobs_wcu
    assert cost["dynamodbWrites"] == pytest.approx(units * prices.dynamodb_write_per_million, abs=1e-4)
    assert cost["sqs"] == pytest.approx(CRON_RUN.sqs_requests * prices.sqs_per_million, abs=1e-4)
    assert cost["apiGateway"] == 0
    parts = sum(v for k, v in cost.items() if k != "total")
    assert cost["total"] == pytest.approx(parts, abs=1e-3)
    assert prices.as_of == capacity.PRICES_AS_OF


def test_nonsense_inputs_are_refused():
    with pytest.raises(ValueError):
        estimate(Inputs(rate=0))
    with pytest.raises(ValueError):
        estimate(Inputs(rate=10, shards=0))


def test_the_cli_prints_the_estimate_and_exits_nonzero_when_it_does_not_fit(capsys):
    from duetime.cli.main import main

    assert main(["capacity", "--rate", "10000", "--shards", "32"]) == 1
    out = capsys.readouterr().out
    assert "smallest shard count that fits 40" in out
    assert main(["capacity", "--rate", "100", "--shards", "32", "--lease", "30", "--avg-seconds", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["smallest_shards"] == 1


def test_the_preloader_cycle_at_10000_cron_runs_per_second_needs_shard_groups():
    # bench/preloader.py measured 11,230 calls for 10,000 cron runs due on one shard (32 shards: 4 a shard)
    one_shard = capacity.preload_estimate(Inputs(rate=10_000 / 60, shards=1, profile="cron"))
    assert one_shard["calls"] == pytest.approx(10_000 * 1.1102 + 4, rel=1e-3)
    alone = estimate(Inputs(rate=10_000, shards=32, profile="cron"))
    assert alone.preload_cycle_seconds > 60 and any("pre-load cycle" in w for w in alone.warnings)
    fanned = estimate(Inputs(rate=10_000, shards=32, profile="cron", preload_shard_groups=4))
    assert fanned.preload_cycle_seconds < 60 and not any("pre-load cycle" in w for w in fanned.warnings)
    assert fanned.preload_lambda_gb_seconds == pytest.approx(4 * fanned.preload_cycle_seconds * 0.5, rel=0.01)
