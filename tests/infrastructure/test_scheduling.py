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
