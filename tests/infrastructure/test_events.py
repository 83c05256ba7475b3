"""The event bus (context eventBus) and who may publish to it; what the DLQ notifier may publish to in
owners' names (their duetime-notify-* topics, the stack's per-owner mail topics) and nothing wider."""

from __future__ import annotations

import json

from tests.infrastructure.helpers import actions_of, actions_on, statements_of


def _env(synthesized, function) -> dict:
    return synthesized.raw["Resources"][synthesized.logical_id(function)]["Properties"]["Environment"]["Variables"]


def test_the_stack_creates_a_bus_and_every_function_and_worker_may_put_events_on_it_only(synthesized):
    [(bus_id, bus)] = synthesized.resources("AWS::Events::EventBus").items()
    assert bus["Properties"]["Name"] == "duetime-events"
    stack = synthesized.stack
    roles = [fn.role for fn in stack.functions.all] + list(stack.workers.task_roles)
    for role in roles:
        assert "events:PutEvents" in actions_on(synthesized, role, bus_id)
        put = [s for s in statements_of(synthesized, role) if "events:PutEvents" in json.dumps(s["Action"])]
        assert all(bus_id in json.dumps(s["Resource"]) for s in put)
    for function in stack.functions.all:
        assert _env(synthesized, function)["DUETIME_EVENT_BUS_NAME"] == {"Ref": bus_id}


def test_the_notifier_publishes_only_to_owner_topics_and_its_own_mail_topics(synthesized):
    role = synthesized.stack.functions.dlq_notifier.role
    sns_statements = [s for s in statements_of(synthesized, role) if "sns:" in json.dumps(s["Action"])]
    resources = json.dumps([s["Resource"] for s in sns_statements])
    assert ":sns:*:*:duetime-notify-*" in resources
    assert ":duetime-owner-*" in resources
    wide = [s for s in sns_statements if s["Resource"] == "*" or ":sns:*:*:*" in json.dumps(s["Resource"])]
    assert wide == []
    assert {"sns:Publish", "sns:CreateTopic", "sns:Subscribe"} <= actions_of(synthesized, role)
    # Webhook destinations are signed with the owner's secret
    assert "secretsmanager:GetSecretValue" in actions_of(synthesized, role)


def test_no_event_bus_means_no_events_permission_or_variable(variants):
    synthesized = variants  # eventBus none, ownerTopicAccounts 111122223333 (conftest.VARIANTS_CONTEXT)
    assert synthesized.resources("AWS::Events::EventBus") == {}
    stack = synthesized.stack
    for function in stack.functions.all:
        assert "DUETIME_EVENT_BUS_NAME" not in _env(synthesized, function)
        assert "events:PutEvents" not in actions_of(synthesized, function.role)
    role = stack.functions.dlq_notifier.role
    resources = json.dumps([s["Resource"] for s in statements_of(synthesized, role)])
    assert ":sns:*:111122223333:duetime-notify-*" in resources and ":sns:*:*:duetime-notify-*" not in resources
