"""Storage: the DynamoDB tables of duetime.definitions.TABLES, recoverable and protected; on demand, or with
provisioned capacity kept at a utilisation target by auto-scaling (CDK context billing=provisioned)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct
from duetime.definitions import TABLES, Settings, TableDef

from infra.context import ProvisionedCapacity


def _key(name: str | None) -> dynamodb.Attribute | None:
    # Every key attribute of duetime is a string (definitions.TableDef).
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING) if name else None


class Storage(Construct):
    """One table per TableDef: its name, keys, indexes and TTL attribute all read from the definition."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        key: kms.IKey | None = None,
        provisioned: ProvisionedCapacity | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = key
        self.provisioned = provisioned
        self.tables: dict[str, dynamodb.Table] = {}
        for definition in TABLES:
            self.tables[definition.logical_name] = self._table(definition, settings)

    def _table(self, definition: TableDef, settings: Settings) -> dynamodb.Table:
        capacity = self.provisioned
        units: dict[str, int] = {}
        if capacity is not None:
            units = {"read_capacity": capacity.min_units, "write_capacity": capacity.min_units}
        table = dynamodb.Table(
            self,
            definition.logical_name.capitalize(),
            table_name=settings.table_name(definition),
            partition_key=_key(definition.partition_key),  # type: ignore[arg-type]
            sort_key=_key(definition.sort_key),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST if capacity is None else dynamodb.BillingMode.PROVISIONED,
            **units,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=True,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED if self.key else dynamodb.TableEncryption.AWS_MANAGED,
            encryption_key=self.key,
            time_to_live_attribute=definition.ttl_attribute,
            removal_policy=RemovalPolicy.RETAIN,
        )
        for index in definition.indexes:
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_key(index.partition_key),  # type: ignore[arg-type]
                sort_key=_key(index.sort_key),
                projection_type=dynamodb.ProjectionType[index.projection],
                **units,
            )
        if capacity is not None:
            self._auto_scale(table, definition, capacity)
        return table

    @staticmethod
    def _auto_scale(table: dynamodb.Table, definition: TableDef, capacity: ProvisionedCapacity) -> None:
        """Reads and writes of the table and of each index scaled to the utilisation target: an index has
        capacity of its own, and an index short of writes throttles the table's writes."""
        bounds = {"min_capacity": capacity.min_units, "max_capacity": capacity.max_units}
        target = {"target_utilization_percent": capacity.target_utilization}
        table.auto_scale_read_capacity(**bounds).scale_on_utilization(**target)
        table.auto_scale_write_capacity(**bounds).scale_on_utilization(**target)
        for index in definition.indexes:
            table.auto_scale_global_secondary_index_read_capacity(index.name, **bounds).scale_on_utilization(**target)
            table.auto_scale_global_secondary_index_write_capacity(index.name, **bounds).scale_on_utilization(**target)
