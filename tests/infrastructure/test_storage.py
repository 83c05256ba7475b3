"""Storage: the tables are exactly duetime.definitions.TABLES, on demand, recoverable, protected, with TTL."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match
from duetime.definitions import TABLES, Settings, TableDef

from infra.context import DeployContext, ProvisionedCapacity

PREFIX = Settings().prefix


def _table(synthesized, definition: TableDef) -> dict:
    name = definition.table_name(PREFIX)
    found = [t for t in synthesized.resources("AWS::DynamoDB::Table").values() if t["Properties"]["TableName"] == name]
    assert len(found) == 1, f"one table named {name}"
    return found[0]


def test_one_table_per_definition(synthesized):
    assert len(synthesized.resources("AWS::DynamoDB::Table")) == len(TABLES)


@pytest.mark.parametrize("definition", TABLES, ids=lambda t: t.logical_name)
def test_keys_and_indexes_equal_the_shared_definitions(synthesized, definition):
    props = _table(synthesized, definition)["Properties"]
    expected_keys = [{"AttributeName": definition.partition_key, "KeyType": "HASH"}]
    if definition.sort_key:
        expected_keys.append({"AttributeName": definition.sort_key, "KeyType": "RANGE"})
    assert props["KeySchema"] == expected_keys
    assert sorted(a["AttributeName"] for a in props["AttributeDefinitions"]) == sorted(definition.attribute_names())
    assert {a["AttributeType"] for a in props["AttributeDefinitions"]} == {"S"}
    indexes = {i["IndexName"]: i for i in props.get("GlobalSecondaryIndexes", [])}
    assert set(indexes) == {i.name for i in definition.indexes}
    for index in definition.indexes:
        keys = [{"AttributeName": index.partition_key, "KeyType": "HASH"}]
        if index.sort_key:
            keys.append({"AttributeName": index.sort_key, "KeyType": "RANGE"})
        assert indexes[index.name]["KeySchema"] == keys


@pytest.mark.parametrize("definition", TABLES, ids=lambda t: t.logical_name)
def test_tables_are_on_demand_recoverable_protected_and_retained(synthesized, definition):
    table = _table(synthesized, definition)
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["DeletionProtectionEnabled"] is True
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize("definition", TABLES, ids=lambda t: t.logical_name)
def test_ttl_attribute_is_the_definitions(synthesized, definition):
    props = _table(synthesized, definition)["Properties"]
    if definition.ttl_attribute:
        assert props["TimeToLiveSpecification"] == {"AttributeName": definition.ttl_attribute, "Enabled": True}
    else:
        assert "TimeToLiveSpecification" not in props


def test_execution_history_expires(synthesized):
    synthesized.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {"TableName": f"{PREFIX}-executions", "TimeToLiveSpecification": Match.object_like({"Enabled": True})},
    )


def test_billing_provisioned_gives_every_table_and_index_capacity_scaled_to_the_utilisation_target(variants):
    # billing provisioned, provisionedTargetUtilization 80, provisionedMaxUnits 900 (conftest.VARIANTS_CONTEXT)
    synthesized = variants
    for definition in TABLES:
        props = _table(synthesized, definition)["Properties"]
        assert props.get("BillingMode", "PROVISIONED") == "PROVISIONED"  # CloudFormation's default
        assert props["ProvisionedThroughput"] == {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
        for index in props.get("GlobalSecondaryIndexes", []):
            assert index["ProvisionedThroughput"] == {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
    # Reads and writes of each table and of each index, each scaled on utilisation at the target
    targets = {
        name: t
        for name, t in synthesized.resources("AWS::ApplicationAutoScaling::ScalableTarget").items()
        if t["Properties"]["ServiceNamespace"] == "dynamodb"
    }
    dimensions = [t["Properties"]["ScalableDimension"] for t in targets.values()]
    indexes = sum(len(d.indexes) for d in TABLES)
    assert sorted(set(dimensions)) == [
        "dynamodb:index:ReadCapacityUnits",
        "dynamodb:index:WriteCapacityUnits",
        "dynamodb:table:ReadCapacityUnits",
        "dynamodb:table:WriteCapacityUnits",
    ]
    assert len(dimensions) == 2 * (len(TABLES) + indexes)
    assert {(t["Properties"]["MinCapacity"], t["Properties"]["MaxCapacity"]) for t in targets.values()} == {(5, 900)}
    policies = [
        p["Properties"]
        for p in synthesized.resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
        if p["Properties"].get("ScalingTargetId", {}).get("Ref") in targets
    ]
    assert len(policies) == len(dimensions)
    assert {p["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] for p in policies} == {80}


def test_billing_is_on_demand_unless_provisioned_is_asked_for_and_its_settings_are_checked():
    assert DeployContext.from_node(cdk.App().node).provisioned is None
    chosen = DeployContext.from_node(cdk.App(context={"billing": "provisioned", "provisionedMinUnits": "20"}).node)
    assert chosen.provisioned == ProvisionedCapacity(target_utilization=70, min_units=20, max_units=40_000)
    with pytest.raises(ValueError, match="billing"):
        DeployContext.from_node(cdk.App(context={"billing": "reserved"}).node)
    with pytest.raises(ValueError, match="provisionedTargetUtilization"):
        DeployContext.from_node(cdk.App(context={"billing": "provisioned", "provisionedTargetUtilization": 95}).node)
