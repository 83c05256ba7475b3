"""Create the tables of duetime.definitions (tests and benchmarks; CDK does it on AWS, and `duetime local
--backend moto` creates them from the synthesized template: duetime.local.template_stack).

As infra/storage.py declares them (tests/infrastructure/test_template_stack.py compares the two): keys, indexes
and projections, on demand, encrypted, deletion-protected, with point-in-time recovery and each table's TTL
attribute enabled (one call each after the table, as CloudFormation does)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from duetime.definitions import TABLES, Settings


def create_tables(client: Any, settings: Settings) -> None:
    for table in TABLES:
        name = settings.table_name(table)
        keys = [{"AttributeName": table.partition_key, "KeyType": "HASH"}]
        if table.sort_key:
            keys.append({"AttributeName": table.sort_key, "KeyType": "RANGE"})
        kwargs: dict[str, Any] = {
            "TableName": name,
            "KeySchema": keys,
            "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"} for a in table.attribute_names()],
            "BillingMode": "PAY_PER_REQUEST",
            "SSESpecification": {"Enabled": True},
            "DeletionProtectionEnabled": True,
        }
        if table.indexes:
            kwargs["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": index.name,
                    "KeySchema": [{"AttributeName": index.partition_key, "KeyType": "HASH"}]
                    + ([{"AttributeName": index.sort_key, "KeyType": "RANGE"}] if index.sort_key else []),
                    "Projection": {"ProjectionType": index.projection},
                }
                for index in table.indexes
            ]
        try:
            client.create_table(**kwargs)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceInUseException":
                raise
            continue  # created before, with its TTL and recovery
        if table.ttl_attribute:
            client.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"AttributeName": table.ttl_attribute, "Enabled": True}
            )
        client.update_continuous_backups(
            TableName=name, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
        )
