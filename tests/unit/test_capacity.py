"""The capacity model: partition writes, Little's law, shard counts and cost, from the measured profile."""

from __future__ import annotations

import json

import pytest
from duetime.cli.capacity import render, render_scenarios
from duetime.definitions import MAX_METRIC_OWNERS, METRIC_RUNS_LATE, OPEN_INDEX_SPREAD
from duetime.domain import capacity
from duetime.domain.capacity import (
    CRON_RUN,
    ONE_OFF,
    ONE_OFF_BATCH,
    OPEN_BY_JOB_INDEX_WCU,
    Inputs,
    call_profile,
    estimate,
    heartbeats,
    parse_class,
    smallest_shards,
)
from duetime.event_sinks import emf_owner_count


def test_heartbeats_come_every_third_of_a_lease_while_the_job_runs():
    assert heartbeats(2, 30) == 0
    assert heartbeats(10, 30) == 0
    assert heartbeats(30, 30) == 2
    assert heartbeats(31, 30) == 3


def test_writes_per_partition_are_the_rate_per_shard_times_the_write_units_of_one_execution():
    result = estimate(Inputs(rate=1000, shards=10, avg_seconds=2))
    assert result.partition_wcu_per_second == 100 * ONE_OFF.executions_wcu
    assert result.partition_wcu_share == pytest.approx(0.5)


def test_heartbeats_add_one_write_per_beat_on_the_partition():
    quiet = estimate(Inputs(rate=1000, shards=10, avg_seconds=2, profile="cron"))
    beating = estimate(Inputs(rate=1000, shards=10, avg_seconds=30, profile="cron"))
    assert beating.partition_wcu_per_second - quiet.partition_wcu_per_second == 100 * 2


def test_the_smallest_shard_count_keeps_every_partition_within_1000_write_units():
    shards = smallest_shards(10_000, ONE_OFF, 0)
    assert shards == 50
    assert estimate(Inputs(rate=10_000, shards=shards)).fits
    assert not estimate(Inputs(rate=10_000, shards=shards - 1)).fits


def test_10000_per_second_does_not_fit_the_default_32_shards_for_one_off_jobs_but_does_for_cron_runs():
    one_off = estimate(Inputs(rate=10_000, shards=32))
    cron = estimate(Inputs(rate=10_000, shards=32, profile="cron"))
    assert not one_off.fits and one_off.smallest_shards == 50
    assert cron.fits and cron.partition_wcu_per_second == pytest.approx(937.5)


def test_in_flight_messages_follow_littles_law():
    result = estimate(Inputs(rate=10_000, shards=64, avg_seconds=2))
    held = 2 + capacity.EARLY_HOLD_SECONDS + capacity.CALL_OVERHEAD_SECONDS
    assert result.in_flight == pytest.approx(10_000 * held)
    assert result.in_flight_share == pytest.approx(10_000 * held / 120_000, abs=1e-3)
    # Cron runs travel ten to a message: the same runs held, a tenth of the messages in flight
    cron = estimate(Inputs(rate=10_000, shards=64, avg_seconds=2, profile="cron"))
    assert cron.worker_slots == result.worker_slots == pytest.approx(10_000 * held)
    assert cron.in_flight == pytest.approx(10_000 * held / 10)
    assert cron.ecs_tasks == result.ecs_tasks  # an ECS slot holds a run, whatever message it came in


def test_long_jobs_at_high_rates_exceed_the_sqs_in_flight_limit():
    # 10,000/s of 30-s one-offs, each a message of its own: 335,500 messages in flight
    result = estimate(Inputs(rate=10_000, shards=64, avg_seconds=30))
    assert not result.fits
    assert any("in flight" in w for w in result.warnings)
    # As cron runs, ten to a message: 33,550, within a queue's 120,000
    packed = estimate(Inputs(rate=10_000, shards=64, avg_seconds=30, profile="cron"))
    assert packed.in_flight == pytest.approx(result.in_flight / 10)
    assert not any("in flight" in w for w in packed.warnings)


def test_cost_per_million_is_the_sum_of_its_parts_at_the_stated_prices():
    result = estimate(Inputs(rate=100, shards=32, avg_seconds=0, profile="cron"))
    cost = result.cost_per_million
    prices = capacity.Prices()
    units = CRON_RUN.executions_wcu + CRON_RUN.index_wcu + CRON_RUN.jobs_wcu
    assert cost["dynamodbWrites"] == pytest.approx(units * prices.dynamodb_write_per_million, abs=1e-4)
    # A send, a receive and a delete, each of 10 messages of 10 runs; and the Lambda worker's visibility change
    # at claim, one a message, shared by its 10 runs
    assert (CRON_RUN.sqs_requests, CRON_RUN.claim_visibility_changes) == pytest.approx((3 / (10 * 10), 1 / 10))
    assert cost["sqs"] == pytest.approx((3 / 100 + 1 / 10) * prices.sqs_per_million, abs=1e-4)
    # An invocation a batch of 10 messages: 100 runs
    assert cost["lambdaRequests"] == pytest.approx(prices.lambda_requests_per_million / 100, abs=1e-4)
    assert cost["apiGateway"] == 0
    parts = sum(v for k, v in cost.items() if k != "total")
    assert cost["total"] == pytest.approx(parts, abs=1e-3)
    assert prices.as_of == capacity.PRICES_AS_OF


def test_lateness_budgets_add_a_counter_write_a_run_and_the_late_runs_mark_and_notice():
    plain = estimate(Inputs(rate=100, shards=32, avg_seconds=0, profile="cron")).cost_per_million
    budgeted = estimate(Inputs(rate=100, shards=32, avg_seconds=0, profile="cron", late_budgets=0.5))
    prices = capacity.Prices()
    extra_units = 0.5 * 1 + 0.5 * 0.01 * 1  # a counter write a run; 1% of them late: one more (the mark)
    added = budgeted.cost_per_million["dynamodbWrites"] - plain["dynamodbWrites"]
    assert added == pytest.approx(extra_units * prices.dynamodb_write_per_million, abs=1e-3)
    added_sqs = budgeted.cost_per_million["sqs"] - plain["sqs"]
    assert added_sqs == pytest.approx(0.5 * 0.01 * 3 * prices.sqs_per_million, abs=1e-3)
    with pytest.raises(ValueError):
        estimate(Inputs(rate=100, late_budgets=1.5))


def test_nonsense_inputs_are_refused():
    with pytest.raises(ValueError):
        estimate(Inputs(rate=0))
    with pytest.raises(ValueError):
        estimate(Inputs(rate=10, shards=0))


def test_the_cli_prints_the_estimate_and_exits_nonzero_when_it_does_not_fit(capsys):
    from duetime.cli.main import main

    assert main(["capacity", "--rate", "10000", "--shards", "32"]) == 1
    out = capsys.readouterr().out
    assert "smallest shard count that fits 50" in out
    assert main(["capacity", "--rate", "100", "--shards", "32", "--lease", "30", "--avg-seconds", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["smallest_shards"] == 1


def test_the_preloader_cycle_at_10000_cron_runs_per_second_needs_shard_groups():
    # bench/preloader.py measured 11,230 calls for 10,000 cron runs due on one shard while a run was a message
    # (32 shards: 4 a shard); packed, a SendMessageBatch carries 100 runs: a job read per 100, the due Query's
    # pages, a send per 100 and the next slot's PutItem per run, and 5 calls a shard
    one_shard = capacity.preload_estimate(Inputs(rate=10_000 / 60, shards=1, profile="cron"))
    assert one_shard.calls == pytest.approx(10_000 * (1 / 100 + 2 / 5000 + 1 / 100 + 1) + 5, rel=1e-3)
    alone = estimate(Inputs(rate=10_000, shards=32, profile="cron"))
    assert alone.preload_cycle_seconds > 60 and any("pre-load cycle" in w for w in alone.warnings)
    fanned = estimate(Inputs(rate=10_000, shards=32, profile="cron", preload_shard_groups=4))
    assert fanned.preload_cycle_seconds < 60 and not any("pre-load cycle" in w for w in fanned.warnings)
    assert fanned.preload_lambda_gb_seconds == pytest.approx(4 * fanned.preload_cycle_seconds * 0.5, rel=0.01)


# --- issue 18: mixes, the `open` index's keys, job classes on Lambda or ECS, herds --------------------------


def test_a_mix_weights_the_measured_per_execution_counts_by_share():
    mix = capacity.parse_mix("oneoff=3,cron=1")
    assert dict(mix) == {"one-off": 0.75, "cron": 0.25}
    blended = capacity.blend_calls(mix)
    assert blended.executions_wcu == pytest.approx(0.75 * ONE_OFF.executions_wcu + 0.25 * CRON_RUN.executions_wcu)
    assert blended.api_requests == pytest.approx(0.75)
    result = estimate(Inputs(rate=1000, shards=10, mix=mix))
    assert result.partition_wcu_per_second == pytest.approx(100 * blended.executions_wcu)


def test_a_mix_naming_an_unknown_kind_or_no_share_is_refused():
    with pytest.raises(ValueError, match="unknown kind"):
        capacity.parse_mix("batch=1")
    with pytest.raises(ValueError, match="more than 0"):
        capacity.parse_mix("oneoff=0")


def test_a_run_that_ends_before_the_sweep_costs_the_open_index_nothing_and_a_longer_one_three_units():
    short = estimate(Inputs(rate=1000, shards=32, profile="cron", avg_seconds=2))
    assert short.open_index_wcu_per_key == 0 and short.open_index_wcu_per_second == 0
    # Runs of 5 minutes are still running when the sweep passes them, 180 s after their due time: the sweep's
    # UpdateItem, the entry, and its removal at the end; their first heartbeat entered them in openByJob (2 more)
    long = estimate(Inputs(rate=1000, shards=32, profile="cron", avg_seconds=300))
    base, swept = (
        call_profile(Inputs(rate=1000, profile="cron")),
        call_profile(Inputs(rate=1000, avg_seconds=300, profile="cron")),
    )
    assert (swept.executions_wcu - base.executions_wcu, swept.index_wcu - base.index_wcu) == (1, 2 + 2)
    assert swept.open_index_wcu == 2 and long.open_index_wcu_per_second == pytest.approx(1000 / 32 * 2)
    # Runs of 20 s heartbeat once (a third of the 30-s lease) and end before the sweep: openByJob's 2 units only
    beating = call_profile(Inputs(rate=1000, avg_seconds=20, profile="cron"))
    assert (beating.index_wcu - base.index_wcu, beating.open_index_wcu) == (2, 0)
    # Half the runs in a long class: half the cost
    mixed = call_profile(
        Inputs(rate=1000, profile="cron", classes=(parse_class("default:1:2"), parse_class("long:1:600")))
    )
    assert mixed.open_index_wcu == 1


def test_the_open_index_load_per_key_falls_with_the_keys_it_is_spread_over():
    # Runs longer than the sweep's delay enter the index; as deployed, each shard's entries are split
    # OPEN_INDEX_SPREAD ways
    deployed = estimate(Inputs(rate=10_000, shards=16, profile="cron", avg_seconds=600))
    assert deployed.open_index_keys == 16 * OPEN_INDEX_SPREAD
    assert deployed.open_index_wcu_per_key == pytest.approx(10_000 * 2 / (16 * OPEN_INDEX_SPREAD))
    assert not any("open index" in w for w in deployed.warnings)
    narrow = estimate(Inputs(rate=10_000, shards=2, profile="cron", avg_seconds=600))
    assert any("open index" in w for w in narrow.warnings) and not narrow.fits
    spread = estimate(Inputs(rate=10_000, shards=32, profile="cron", avg_seconds=600, open_index_keys=64))
    assert spread.open_index_wcu_per_key == pytest.approx(10_000 * 2 / 64)
    too_few = estimate(Inputs(rate=10_000, shards=32, profile="cron", avg_seconds=600, open_index_keys=16))
    assert not too_few.fits and any("at least 20 keys" in w for w in too_few.warnings)


def test_a_lambda_class_within_the_event_source_ceiling_gets_a_maximum_concurrency():
    [plan] = estimate(Inputs(rate=1000, shards=32, avg_seconds=2)).classes
    assert plan.lambda_batches == pytest.approx(1000 * 3.55 / 10)
    assert plan.runs_on == "lambda" and "maximum concurrency to 444" in plan.fix
    # Cron runs, ten to a message: a batch of 10 messages is 100 runs at once
    [cron] = estimate(Inputs(rate=1000, shards=32, avg_seconds=2, profile="cron")).classes
    assert cron.slots == plan.slots and cron.lambda_batches == pytest.approx(1000 * 3.55 / 100)
    assert "maximum concurrency to 45" in cron.fix


def test_packed_runs_take_a_tenth_of_the_lambda_batches_invocations_and_run_time_at_10000_per_second():
    one_off = estimate(Inputs(rate=10_000, shards=50))
    cron = estimate(Inputs(rate=10_000, shards=32, profile="cron"))
    batch = estimate(Inputs(rate=10_000, shards=50, profile="one-off-batch"))
    assert one_off.lambda_batches == pytest.approx(3550) and cron.lambda_batches == pytest.approx(355)
    assert batch.lambda_batches == cron.lambda_batches
    # Within one function's 1,000 batches and the account's 1,000 invocations: no spread over queues
    [plan] = cron.classes
    assert plan.fits and plan.queues == 1 and plan.lambda_batches == pytest.approx(355)
    for name in ("lambdaRequests", "lambdaDuration"):
        assert cron.cost_per_million[name] == pytest.approx(one_off.cost_per_million[name] / 10, abs=1e-3)
    # A one-off sent alone pays a whole visibility change at its claim; a batched one a tenth
    assert (ONE_OFF.claim_visibility_changes, ONE_OFF_BATCH.claim_visibility_changes) == (1, 1 / 10)
    assert ONE_OFF.sqs_requests == pytest.approx(1 + 2 / 10)
    assert ONE_OFF_BATCH.sqs_requests == pytest.approx(3 / 100)


def test_a_mix_shares_messages_by_the_runs_each_kind_packs():
    # 80% one-offs sent alone, 20% cron runs ten to a message: 0.8 + 0.2 / 10 = 0.82 messages a run
    mix = capacity.parse_mix("oneoff=0.8,cron=0.2")
    blended = capacity.blend_calls(mix)
    assert blended.claim_visibility_changes == pytest.approx(0.82)
    assert blended.runs_per_message == pytest.approx(1 / 0.82)
    result = estimate(Inputs(rate=10_000, shards=64, mix=mix))
    assert result.in_flight == pytest.approx(result.worker_slots * 0.82, rel=1e-3)
    assert result.lambda_batches == pytest.approx(result.worker_slots * 0.82 / 10, rel=1e-3)
    [plan] = result.classes
    assert plan.lambda_batches == pytest.approx(result.lambda_batches, rel=1e-3)


def test_a_class_past_the_1000_batches_spills_over_queues_then_moves_to_ecs():
    # 10,000/s of 2-s jobs: 3,550 batches, four functions' worth
    [spill] = estimate(Inputs(rate=10_000, shards=40, avg_seconds=2)).classes
    assert spill.queues == 4 and "4 queues by shard" in spill.fix
    # 100,000/s: 35,500 batches, more queues than is sensible: ECS
    [ecs] = estimate(Inputs(rate=100_000, shards=400, avg_seconds=2)).classes
    assert ecs.runs_on == "ecs" and ecs.ecs_tasks == 44_375
    assert "3 queues by shard" in ecs.fix  # 355,000 in flight, 120,000 a queue


def test_the_spill_over_fix_names_the_class_queues_setting_and_a_deployed_spread_fits():
    # The fix is a deploy setting: the class's queues by shard
    [spill] = estimate(Inputs(rate=10_000, shards=40, avg_seconds=2)).classes
    assert "`-c classQueues=default:4`" in spill.fix and not spill.fits
    # Deployed with it (and an account quota raised for the 3,550 invocations), each queue's function carries a
    # quarter of the 3,550 batches: within the ceiling
    deployed = Inputs(
        rate=10_000, shards=40, avg_seconds=2, class_queues=(("default", 4),), lambda_account_concurrency=5000
    )
    [spread] = estimate(deployed).classes
    assert spread.fits and spread.runs_on == "lambda" and spread.queues == 4
    assert "888 batches a queue" in spread.fix and "`-c workerMaxConcurrency=1000`" in spread.fix
    # Too few deployed queues: the plan still names how many are needed
    [short] = estimate(Inputs(rate=10_000, shards=40, avg_seconds=2, class_queues=(("default", 2),))).classes
    assert not short.fits and "`-c classQueues=default:4`" in short.fix
    # ECS past the queues it would take, with the split SQS's in-flight cap asks for named as a setting
    [ecs] = estimate(Inputs(rate=100_000, shards=400, avg_seconds=2)).classes
    assert "`-c classQueues=default:3`" in ecs.fix


def test_duetime_capacity_takes_the_deployed_class_queues(capsys):
    from duetime.cli.main import main

    assert main(["capacity", "--rate", "10000", "--shards", "40", "--class-queues", "default=4"]) in (0, 1)
    out = capsys.readouterr().out
    assert "Lambda over 4 queues by shard (`-c classQueues=default:4`): 888 batches a queue" in out
    assert main(["capacity", "--rate", "10000", "--class-queues", "default=11"]) == 2
    assert "must be 1..10, got 11" in capsys.readouterr().out


def test_each_job_class_is_planned_on_its_own_share_and_run_time():
    classes = (capacity.parse_class("default:0.9:1"), capacity.parse_class("long:0.1:1200"))
    result = estimate(Inputs(rate=1000, shards=32, classes=classes))
    short, long = result.classes
    assert short.rate == 900 and short.runs_on == "lambda"
    assert long.rate == 100 and long.runs_on == "ecs"  # the long class is an ECS class (definitions.py)
    assert long.slots == pytest.approx(100 * capacity.held_seconds(1200))
    over = capacity.parse_class("slow:1:1200:lambda")
    [slow] = estimate(Inputs(rate=10, shards=32, classes=(over,))).classes
    assert slow.runs_on == "ecs" and "exceed Lambda" in slow.fix


def test_a_herd_without_jitter_starts_late_and_the_jitter_the_tool_asks_for_bounds_it():
    herd = Inputs(rate=10_000, shards=32, profile="cron", herd=1_000_000, preload_shard_groups=4)
    plan = estimate(herd).herd
    assert plan is not None
    assert plan.due_per_second == 1_000_000 and plan.drain_per_second == 10_000
    assert plan.drain_seconds == 100 and plan.last_start_late_seconds == 99
    assert plan.jitter_needed_seconds == 100
    # The herd's runs travel ten to a message, a SendMessageBatch 100 runs
    assert plan.in_flight_runs == pytest.approx(10_000 * 3.55) and plan.in_flight == pytest.approx(3550)
    assert plan.send_message_batches_per_second == pytest.approx(1_000_000 / 100 / plan.preload_send_seconds, rel=0.01)
    assert not estimate(herd).fits
    spread = estimate(Inputs(**{**herd.__dict__, "jitter_seconds": 100}))
    assert spread.herd is not None and spread.herd.last_start_late_seconds == 0 and spread.fits


def test_a_herd_drained_faster_than_its_partitions_take_writes_is_bounded_by_the_partitions():
    # 8 shards take 8 x 1,000 / 2 (claim and finish) = 4,000 runs a second, below the 10,000/s fleet
    plan = estimate(Inputs(rate=10_000, shards=8, profile="cron", herd=100_000, preload_shard_groups=8)).herd
    assert plan is not None and plan.drain_per_second == 4000
    assert plan.partition_wcu_per_second == pytest.approx(1000)


def test_a_herd_the_preloader_cannot_send_within_its_window_names_the_window_setting():
    slow = Inputs(rate=1000, shards=4, profile="cron", herd=1_000_000, preload_dispatch_threads=1, jitter_seconds=3600)
    plan = estimate(slow).herd
    assert plan is not None and plan.preload_send_seconds > plan.preload_seconds_ahead
    assert any("preloadWindowSeconds" in w for w in plan.warnings)


def test_the_preloader_detail_per_shard_counts_sends_reads_and_next_slot_writes():
    result = estimate(Inputs(rate=1000, shards=10, profile="cron"))
    detail = result.preload_per_shard
    assert detail.due == 6000  # 1,000/s x 60 s over 10 shards
    # a SendMessageBatch of 10 messages of 10 runs: 100 runs a send
    assert detail.send_message_batches == 60 and detail.job_reads == 60 and detail.follower_writes == 6000
    # One-offs due later are sent by the pre-loader too, as packed as cron runs
    one_off = estimate(Inputs(rate=1000, shards=10, profile="one-off")).preload_per_shard
    assert one_off.send_message_batches == 60 and one_off.follower_writes == 0


def test_the_scenarios_are_sized_to_fit_their_partitions_and_print_every_plan(capsys):
    from duetime.cli.main import main

    for title, inputs in capacity.scenarios():
        result = estimate(inputs)
        assert result.partition_wcu_share <= capacity.PLAN_HEADROOM + 0.01, title
        assert result.open_index_wcu_per_key <= 1000, title
    assert main(["capacity", "--scenarios"]) == 0
    out = capsys.readouterr().out
    assert out.count("#### ") == 8 and "herd with jitterSeconds 100" in out


def test_the_cli_takes_the_new_inputs_and_names_the_fix(capsys):
    from duetime.cli.main import main

    code = main(["capacity", "--rate", "10000", "--shards", "40", "--mix", "oneoff=0.8,cron=0.2", "--herd", "1000000"])
    out = capsys.readouterr().out
    assert code == 1 and "jitterSeconds >= 100" in out and "per execution" in out
    assert main(["capacity", "--rate", "5", "--mix", "nonsense=1"]) == 2


def test_docs_performance_holds_the_current_output_of_duetime_capacity_scenarios():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "performance.md").read_text()
    recorded = text.split("<!-- capacity-scenarios:start -->\n", 1)[1].split("\n<!-- capacity-scenarios:end -->", 1)[0]
    assert recorded == render_scenarios(), "regenerate it: duetime capacity --scenarios"


def test_the_plan_says_what_account_concurrency_the_stack_needs_to_deploy():
    # Issue 29: the stack reserves 104 at defaults, and Lambda keeps 100 unreserved: an account limited to less
    # than 204 fails `cdk deploy`; the plan says so before a deploy.
    reserved = estimate(Inputs(rate=100)).reserved_concurrency
    assert reserved == capacity.ReservedConcurrency(
        api=50, workers=50, preloader=2, dlq_notifier=2, total=104, account_needed=204
    )
    assert estimate(Inputs(rate=100, lambda_account_concurrency=204)).fits
    short = estimate(Inputs(rate=100, lambda_account_concurrency=203))
    assert not short.fits
    assert any("below 204" in w and "apiReservedConcurrency" in w for w in short.warnings)
    # Each due queue of a Lambda class has a worker function reserving workerMaxConcurrency; each shard group a
    # pre-loader run and its overlap.
    spread = estimate(Inputs(rate=100, class_queues=(("default", 4),), preload_shard_groups=3)).reserved_concurrency
    assert (spread.workers, spread.preloader, spread.total) == (200, 6, 258)
    assert "reserved Lambda concurrency     104" in render(estimate(Inputs(rate=100)))


def test_provisioned_capacity_prices_unit_hours_at_the_auto_scaling_target():
    on_demand = estimate(Inputs(rate=10_000, profile="cron")).cost_per_million
    provisioned = estimate(Inputs(rate=10_000, profile="cron", billing="provisioned", utilisation=0.7))
    prices = capacity.Prices()
    units = CRON_RUN.executions_wcu + CRON_RUN.index_wcu + CRON_RUN.jobs_wcu
    # A unit-hour serves 3,600 units at 100%; held at 70%, a million units take 1e6 / 3600 / 0.7 unit-hours
    assert provisioned.cost_per_million["dynamodbWrites"] == pytest.approx(
        units * prices.dynamodb_wcu_hour * 1e6 / 3600 / 0.7, abs=1e-4
    )
    assert provisioned.cost_per_million["dynamodbReads"] == pytest.approx(
        CRON_RUN.read_units * prices.dynamodb_rcu_hour * 1e6 / 3600 / 0.7, abs=1e-4
    )
    assert provisioned.cost_per_million["dynamodbWrites"] < on_demand["dynamodbWrites"] / 2
    # A higher target wastes less of what is provisioned
    higher = estimate(Inputs(rate=10_000, profile="cron", billing="provisioned", utilisation=0.9))
    assert higher.cost_per_million["dynamodbWrites"] < provisioned.cost_per_million["dynamodbWrites"]
    with pytest.raises(ValueError):
        estimate(Inputs(rate=1, billing="reserved"))
    with pytest.raises(ValueError):
        estimate(Inputs(rate=1, billing="provisioned", utilisation=1.0))


def test_api_gateway_requests_are_priced_at_the_month_s_volume_by_aws_s_tiers():
    prices = capacity.Prices()
    # A month of a few requests pays the first tier, REST's and HTTP's
    assert prices.api_gateway_per_million("rest", 1e6) == 3.50 and prices.api_gateway_per_million("http", 1e6) == 1.00
    assert prices.api_gateway_per_million("rest", 333e6) == 3.50
    # 10,000 one-offs a second are 26.28 billion requests a month: each tier's requests at its price
    month = 10_000 * 365 * 86_400 / 12
    rest = (333e6 * 3.50 + 667e6 * 2.80 + 19e9 * 2.38 + (month - 20e9) * 1.51) / month
    http = (300e6 * 1.00 + (month - 300e6) * 0.90) / month
    assert prices.api_gateway_per_million("rest", month) == pytest.approx(rest)
    assert prices.api_gateway_per_million("http", month) == pytest.approx(http)
    priced = estimate(Inputs(rate=10_000, profile="one-off")).cost_per_million["apiGateway"]
    assert priced == pytest.approx(rest, abs=1e-4)
    # One request a second is 2.6 million a month: the first tier's price
    assert estimate(Inputs(rate=1, profile="one-off")).cost_per_million["apiGateway"] == 3.50


def test_the_scheduler_s_own_cost_is_everything_but_the_jobs_run_time_and_the_api_type_prices_submissions():
    rest = estimate(Inputs(rate=10_000, profile="one-off"))
    http = estimate(Inputs(rate=10_000, profile="one-off", api="http"))
    cost = rest.cost_per_million
    assert rest.scheduler_cost_per_million == pytest.approx(cost["total"] - cost["lambdaDuration"], abs=1e-3)
    gateway = cost["apiGateway"] - http.cost_per_million["apiGateway"]
    assert gateway > 1.0 and rest.scheduler_cost_per_million - http.scheduler_cost_per_million == pytest.approx(
        gateway, abs=1e-3
    )
    # A batch's jobs share one API request per 500 and the owner's counter per transaction of 49 jobs
    batch = estimate(Inputs(rate=10_000, profile="one-off-batch")).cost_per_million
    assert batch["apiGateway"] == pytest.approx(3.50 / 500, abs=1e-4)
    assert batch["dynamodbWrites"] < cost["dynamodbWrites"]


def test_a_submission_pays_the_api_function_an_invocation_its_calls_waits_and_its_cpu_at_its_share_of_a_vcpu():
    # POST /jobs: one invocation ($0.20 a million), two calls of 10 ms, and its CPU on a core at the
    # 1,024/1,769 of a vCPU 1,024 MB buys: ~27 ms billed at 1 GB
    alone = ONE_OFF.api_function_seconds
    assert alone == pytest.approx(2 * 0.01 + ONE_OFF.api_cpu_seconds * 1769 / 1024)
    priced = estimate(Inputs(rate=10_000, profile="one-off")).cost_per_million["lambdaApi"]
    assert priced == pytest.approx(0.20 + 1e6 * alone * 0.0000133334, abs=1e-4)
    # A batch of 500 shares an invocation and its 11 transactions and 5 sends; a cron run submits nothing
    assert ONE_OFF_BATCH.api_calls * 500 == pytest.approx(11 + 5)
    batched = estimate(Inputs(rate=10_000, profile="one-off-batch")).cost_per_million["lambdaApi"]
    assert batched < priced / 10
    assert estimate(Inputs(rate=10_000, profile="cron")).cost_per_million["lambdaApi"] == 0


def test_duetime_capacity_takes_billing_utilisation_and_api(capsys):
    from duetime.cli.main import main

    argv = ["capacity", "--rate", "10000", "--profile", "cron", "--billing", "provisioned", "--utilisation", "0.8"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "provisioned, auto-scaled to 80% utilisation" in out and "the scheduler's own" in out
    assert main(["capacity", "--rate", "100", "--api", "http"]) in (0, 1)
    assert "HTTP API" in capsys.readouterr().out


def test_a_one_second_job_costs_its_2628000_cron_runs_a_month(capsys):
    """`duetime capacity --every 1s`: one job every second is a cron run a second, 2,628,000 a month, priced at
    the per-execution figures (the scheduler's own, and with the runs' Lambda time)."""
    from duetime.cli.main import main

    assert main(["capacity", "--every", "1s", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["inputs"]["rate"] == 1.0 and answer["inputs"]["profile"] == "cron"
    # Its runs repeat within a minute: each claim enters its run in openByJob, and its end removes it (2 units a
    # cron run on time spends never); the claim reads no more than a cron run's (only runs claimed and not ended
    # are in the index)
    assert answer["inputs"]["extra_index_wcu"] == 2
    plan = answer["schedule"]
    assert plan["runs_per_month"] == 2_628_000
    assert plan["scheduler_cost_per_month"] == pytest.approx(2.628 * answer["scheduler_cost_per_million"], abs=0.01)
    assert plan["total_cost_per_month"] == pytest.approx(2.628 * answer["cost_per_million"]["total"], abs=0.01)
    # A thousand of them every 5 seconds: 200 runs a second, each job a fifth of the 1-second one's runs.
    assert main(["capacity", "--every", "5s", "--jobs", "1000", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["inputs"]["rate"] == 200.0
    assert answer["schedule"]["runs_per_month_per_job"] == 525_600
    assert answer["inputs"]["extra_index_wcu"] == 2
    assert capacity.job_index_units("1m") == 0 and capacity.job_index_units("59s") == 2
    assert main(["capacity", "--every", "1s"]) == 0
    assert "1 job(s) every 1s" in capsys.readouterr().out


def test_capacity_refuses_an_interval_below_a_second_naming_every(capsys):
    from duetime.cli.main import main

    assert main(["capacity", "--every", "0s"]) == 2
    assert "--every" in capsys.readouterr().out
    assert main(["capacity", "--every", "1s", "--jobs", "0"]) == 2
    assert "--jobs" in capsys.readouterr().out
    assert main(["capacity", "--every", "1s", "--rate", "5"]) == 2


def test_the_lateness_metrics_by_owner_are_a_fixed_count_priced_a_month(capsys):
    # Issue 34: RunsOnTime and RunsLate for each owner the stack names and for `other`, an alarm per named owner
    prices = capacity.Prices()
    owners = estimate(Inputs(rate=1000, late_budgets=0.3, metric_owners=5)).owner_metrics
    assert owners is not None and (owners.metrics, owners.alarms) == (12, 5)
    assert owners.cost_per_month == pytest.approx(12 * 0.30 + 5 * 0.10)
    assert prices.cloudwatch_metric_month == 0.30 and owners.prices_as_of == capacity.CLOUDWATCH_PRICES_AS_OF
    # The count does not grow with the rate: the bound is the stack's list, not the owners who run jobs
    faster = estimate(Inputs(rate=100_000, shards=400, late_budgets=0.3, metric_owners=5)).owner_metrics
    assert faster is not None and faster.cost_per_month == owners.cost_per_month
    # Each budgeted run writes one EMF document: its bytes priced per million executions at the budgeted share
    emf_owner_count(METRIC_RUNS_LATE, "other")
    [document] = capsys.readouterr().out.splitlines()
    assert abs(len(document) - capacity.EMF_BYTES_PER_COUNTED_RUN) < 20
    assert owners.logs_cost_per_million == pytest.approx(0.3 * 190 / 1000 * prices.cloudwatch_logs_per_gb, abs=1e-4)
    # Nobody named and no budgets: no such figure; past the bound: refused
    assert estimate(Inputs(rate=1000)).owner_metrics is None
    with pytest.raises(ValueError, match="metric-owners"):
        estimate(Inputs(rate=1000, metric_owners=MAX_METRIC_OWNERS + 1))
    from duetime.cli.main import main

    assert main(["capacity", "--rate", "1000", "--late-budgets", "0.3", "--metric-owners", "5"]) == 0
    out = capsys.readouterr().out
    assert "lateness metrics by owner       12 metrics" in out and "$4.10 a month" in out


def test_a_lease_longer_than_the_job_index_window_prices_every_claims_open_by_job_entry():
    # A claim holding a lease over BY_JOB_LEASE_SECONDS enters its run in openByJob (domain/job_index.py): 2 units
    # a run more, as a run that heartbeats pays.
    plain = call_profile(Inputs(rate=10_000, profile="cron", lease_seconds=40))
    long = call_profile(Inputs(rate=10_000, profile="cron", lease_seconds=41))
    assert long.index_wcu == plain.index_wcu + OPEN_BY_JOB_INDEX_WCU
    cost = estimate(Inputs(rate=10_000, profile="cron", lease_seconds=41)).scheduler_cost_per_million
    assert cost > estimate(Inputs(rate=10_000, profile="cron", lease_seconds=40)).scheduler_cost_per_million
