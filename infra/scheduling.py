"""Scheduling: EventBridge rules that run the pre-loader and the DLQ notifier every interval."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct
from duetime.definitions import Settings


class Scheduling(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        preloader: lambda_.IFunction,
        dlq_notifier: lambda_.IFunction,
        shard_groups: int = 1,
    ) -> None:
        super().__init__(scope, construct_id)
        every_interval = events.Schedule.rate(Duration.seconds(settings.preload_interval_seconds))
        # A missed tick is covered by the next one (the pre-loader also loads what is overdue): no retries.
        # With shard groups, one rule per group invokes the pre-loader for its shards: a cycle fans out.
        self.preload_rules = [
            events.Rule(
                self,
                "Preload" if shard_groups == 1 else f"Preload{group}",
                description="duetime: pre-load executions due in the next window"
                + ("" if shard_groups == 1 else f" (shard group {group} of {shard_groups})"),
                schedule=every_interval,
                targets=[
                    targets.LambdaFunction(
                        preloader,
                        retry_attempts=0,
                        max_event_age=Duration.seconds(60),
                        event=None
                        if shard_groups == 1
                        else events.RuleTargetInput.from_object({"shardGroup": group, "shardGroups": shard_groups}),
                    )
                ],
            )
            for group in range(shard_groups)
        ]
        self.preload_rule = self.preload_rules[0]
        self.dlq_rule = events.Rule(
            self,
            "DrainDeadLetters",
            description="duetime: record dead letters and tell owners",
            schedule=events.Schedule.rate(Duration.minutes(1)),
            targets=[targets.LambdaFunction(dlq_notifier, retry_attempts=0, max_event_age=Duration.seconds(60))],
        )
