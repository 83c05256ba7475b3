"""Storage: the tables are exactly duetime.definitions.TABLES, on demand, recoverable, protected, with TTL."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match
from duetime.definitions import TABLES, Settings, TableDef

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
