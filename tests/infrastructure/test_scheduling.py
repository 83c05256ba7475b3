"""Scheduling: the pre-loader and the DLQ notifier run every minute from EventBridge."""

from __future__ import annotations

from duetime.definitions import Settings


def _rule_targeting(synthesized, function) -> dict:
    function_id = synthesized.logical_id(function)
    rules = [
        r["Properties"]
        for r in synthesized.resources("AWS::Events::Rule").values()
        if any(t["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]} for t in r["Properties"]["Targets"])
    ]
    assert len(rules) == 1
    return rules[0]


def test_preloader_runs_every_preload_interval(synthesized):
    assert Settings().preload_interval_seconds == 60
    rule = _rule_targeting(synthesized, synthesized.stack.functions.preloader)
    assert rule["ScheduleExpression"] == "rate(1 minute)"
    assert rule["State"] == "ENABLED"


def test_dlq_notifier_runs_every_minute(synthesized):
    rule = _rule_targeting(synthesized, synthesized.stack.functions.dlq_notifier)
    assert rule["ScheduleExpression"] == "rate(1 minute)"


def test_eventbridge_may_invoke_the_scheduled_functions(synthesized):
    for function in (synthesized.stack.functions.preloader, synthesized.stack.functions.dlq_notifier):
        synthesized.template.has_resource_properties(
            "AWS::Lambda::Permission",
            {
                "Action": "lambda:InvokeFunction",
                "Principal": "events.amazonaws.com",
                "FunctionName": {"Fn::GetAtt": [synthesized.logical_id(function), "Arn"]},
            },
        )


def test_shard_groups_fan_a_cycle_out_over_one_rule_per_group():
    import aws_cdk as cdk
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk.assertions import Template

    from infra.scheduling import Scheduling

    stack = cdk.Stack(cdk.App(), "Groups")

    def function(name: str) -> lambda_.Function:
        code = lambda_.Code.from_inline("def handler(event, context):\n    return event\n")
        return lambda_.Function(stack, name, runtime=lambda_.Runtime.PYTHON_3_12, handler="index.handler", code=code)

    Scheduling(
        stack, "Scheduling", settings=Settings(), preloader=function("P"), dlq_notifier=function("D"), shard_groups=3
    )
    rules = Template.from_stack(stack).find_resources("AWS::Events::Rule")
    inputs = sorted(t["Input"] for r in rules.values() for t in r["Properties"]["Targets"] if "Input" in t)
    assert inputs == [f'{{"shardGroup":{g},"shardGroups":3}}' for g in range(3)]
    assert len(rules) == 4  # three pre-load groups and the DLQ notifier


def _props(synthesized, function) -> dict:
    return synthesized.raw["Resources"][synthesized.logical_id(function)]["Properties"]


def test_the_preloader_may_run_every_shard_group_of_a_tick_and_one_overlap_each(synthesized, hardened):
    # Issue 29: a reservation of 2 throttled some of the groups' invocations every minute once there were more.
    for stack, groups in ((synthesized, 1), (hardened, 4)):
        functions = stack.stack.functions
        rules = [
            r for r in stack.resources("AWS::Events::Rule").values() if "pre-load" in r["Properties"]["Description"]
        ]
        assert len(rules) == groups
        assert _props(stack, functions.preloader)["ReservedConcurrentExecutions"] == 2 * groups
        # One DLQ rule whatever the groups: its run of the minute and one overlap.
        assert _props(stack, functions.dlq_notifier)["ReservedConcurrentExecutions"] == 2


def test_lambda_never_retries_a_scheduled_run_on_its_own(synthesized):
    # Lambda retries a failed asynchronous invocation twice by default; the next tick does the work instead.
    configs = synthesized.resources("AWS::Lambda::EventInvokeConfig").values()
    retries = {c["Properties"]["FunctionName"]["Ref"]: c["Properties"]["MaximumRetryAttempts"] for c in configs}
    for function in (synthesized.stack.functions.preloader, synthesized.stack.functions.dlq_notifier):
        assert retries[synthesized.logical_id(function)] == 0
