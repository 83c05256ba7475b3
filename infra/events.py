"""Events and owners' failure destinations: the EventBridge bus duetime publishes to (context eventBus), who
may publish there, and what the DLQ notifier may publish to in owners' names (docs/events.md)."""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct
from duetime.config import RuntimeConfig
from duetime.domain.destinations import OWNER_TOPIC_NAME_PREFIX

from infra.common import suppress
from infra.context import CREATE_EVENT_BUS, NO_EVENT_BUS, DeployContext


class EventBus(Construct):
    """Context eventBus: "create" (default) a bus of the stack, `<prefix>-events`, so rules on duetime's
    events live apart from the account's; "default" the account's default bus; "none" no events at all
    (`bus` is None and nothing publishes)."""

    def __init__(self, scope: Construct, construct_id: str, *, ctx: DeployContext) -> None:
        super().__init__(scope, construct_id)
        self.bus: events.IEventBus | None = None
        if ctx.event_bus == CREATE_EVENT_BUS:
            self.bus = events.EventBus(self, "Bus", event_bus_name=f"{ctx.settings.prefix}-events")
        elif ctx.event_bus != NO_EVENT_BUS:
            self.bus = events.EventBus.from_event_bus_name(self, "Bus", "default")

    def environment(self) -> dict[str, str]:
        """DUETIME_EVENT_BUS_NAME for every publisher (none without a bus)."""
        if self.bus is None:
            return {}
        return RuntimeConfig(event_bus_name=self.bus.event_bus_name).to_env()

    def grant_publish(self, roles: Iterable[iam.IRole]) -> None:
        """events:PutEvents on this bus only, for each role."""
        if self.bus is None:
            return
        for role in roles:
            self.bus.grant_put_events_to(role)  # type: ignore[arg-type]


def grant_owner_destinations(role: iam.IRole, ctx: DeployContext) -> None:
    """What the DLQ notifier needs to tell owners: publish to owners' own topics, named duetime-notify-*
    (in the accounts of context ownerTopicAccounts; each owner's topic policy must also allow this role),
    and create, subscribe mail addresses to and publish to the per-owner mail topics `<prefix>-owner-*` of
    this account and region. Never a topic of another name: a tenant cannot make duetime publish to the
    operator's alarm topic or any other topic in the account."""
    stack = Stack.of(role)
    owner_topics = [
        stack.format_arn(service="sns", region="*", account=account, resource=f"{OWNER_TOPIC_NAME_PREFIX}*")
        for account in ctx.owner_topic_accounts
    ]
    role.add_to_principal_policy(iam.PolicyStatement(actions=["sns:Publish"], resources=owner_topics))
    mail_topics = stack.format_arn(
        service="sns", resource=f"{ctx.settings.prefix}-owner-*", arn_format=ArnFormat.NO_RESOURCE_NAME
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["sns:CreateTopic", "sns:Subscribe", "sns:Publish"], resources=[mail_topics])
    )
    findings = {
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sns:*:{account}:{OWNER_TOPIC_NAME_PREFIX}*]": (
            "Owners' own topics, named by the owners on their jobs: only names starting duetime-notify-, "
            "publish only, and each topic's own policy must allow this role too."
        )
        for account in ctx.owner_topic_accounts
    }
    findings[
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sns:<AWS::Region>:<AWS::AccountId>:"
        f"{ctx.settings.prefix}-owner-*]"
    ] = "One mail topic per owner, created as owners name mail addresses: this stack's name prefix only."
    suppress(role, findings)
