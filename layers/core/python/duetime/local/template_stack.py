"""The local stack created from the synthesized CloudFormation template, not from hand-made look-alikes.

`provision_template(template, client)` reads `cdk synth`'s template (a dict, as `cdk.out/<Stack>.template.json`
holds it: no CDK import here) and creates, through the AWS API of whatever `client` reaches (in-process moto,
`duetime local`'s moto server), every resource of the types below with the properties the template gives it:

- AWS::DynamoDB::Table: keys, attribute definitions, global and local secondary indexes with their projections,
  billing mode and provisioned throughput, stream, SSE (AWS managed or a key of the stack), deletion protection,
  table class, tags; then its TTL and point-in-time recovery, each a call of its own as on AWS.
- AWS::SQS::Queue: FIFO, visibility timeout, retention, delay, receive wait, message size, encryption (SSE-SQS
  or KMS), redrive policy (its dead-letter queue's ARN resolved: queues are created in dependency order) and
  redrive allow policy; AWS::SQS::QueuePolicy.
- AWS::KMS::Key and AWS::KMS::Alias (the keys tables, queues and topics name).
- AWS::SNS::Topic (with inline subscriptions), AWS::SNS::Subscription, AWS::SNS::TopicPolicy.
- AWS::Events::EventBus.
- AWS::IAM::Role (inline policies, managed policies moto holds), AWS::IAM::Policy, AWS::IAM::ManagedPolicy: every
  Ref and Fn::GetAtt resolved to the local resources' names and ARNs.

Names: a name the template sets (TableName, QueueName, TopicName, Name, RoleName, ...) is kept; a resource
without one gets `<stack name>-<logical id>` (CloudFormation adds a random suffix; here the name must be the same
every run), cut to the service's length limit. duetime's own settings then point at them through the
functions' environment, which the template builds from the same Refs: `LocalStack.environment(logical_id)`
gives a function's (or an ECS task's) variables resolved, for RuntimeConfig.from_env.

Resources of other types (functions, log groups, the VPC, the API...) are not created, nor those of the types
left out by `types` (`duetime local` leaves out the roles: duetime.local.iam checks their policies itself). A Ref
or Fn::GetAtt to one resolves to a deterministic stand-in: its name from the template, or `<stack name>-<logical
id>`, and what Ref and Arn give in its service's format (a queue's URL, a topic's ARN), so a role's policy names
the same ARNs CloudFormation would give them. A `LocalStack` nothing was created in resolves a template so from
the template alone: duetime.local.stack_roles reads the roles' policies through it, duetime.local.lambda_process
a function's environment.

`localized(template, prefix, spread)` is the template as a local stack under another name prefix holds it
(`duetime local --prefix`, `--class-queues`): every name made with the template's prefix made with the local
one, an unnamed topic named after its construct (`<prefix>-alerts`, where the local alerts are read), and a
due queue spread over several local queues copied for each, with its queue policy and every role's grant on it.
`LocalStack.skipped` lists what was read but not applied (properties moto does not hold, managed policies
moto does not know), so a caller can see every departure from the template. A policy attached by name to a
role from outside the stack (context handlerTaskRoles) gets that role created empty (`external_roles`), as a
deploy expects it in the account.

Why the template's properties and not moto's CloudFormation: docs/decisions.md (the local stack).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from typing import Any

from botocore.exceptions import ClientError

from duetime.definitions import DEFAULT_REGION

PARTITION = "aws"
URL_SUFFIX = "amazonaws.com"
DEFAULT_STACK_NAME = "DuetimeStack"
# CloudFormation's "no value": a property or list element that resolves to it is left out.
_NO_VALUE = object()

# A client of one AWS service (boto3's `client(service)` over the endpoint the stack is created in).
ClientFactory = Callable[[str], Any]


class TemplateError(ValueError):
    """The template uses something this module cannot resolve (an unknown intrinsic, a missing resource)."""


@dataclass(frozen=True)
class StackResource:
    """One resource of the local stack: what Ref gives (`ref`), what Fn::GetAtt gives (`attributes`), and whether
    it was created (False: a stand-in for a type the local stack does not create)."""

    logical_id: str
    resource_type: str
    ref: str
    attributes: Mapping[str, str] = field(default_factory=dict)
    created: bool = True

    @property
    def arn(self) -> str | None:
        return self.attributes.get("Arn")


@dataclass
class LocalStack:
    """The resources created from a template, by logical id, and the resolution of its intrinsic functions."""

    template: Mapping[str, Any]
    region: str
    account_id: str
    stack_name: str
    resources: dict[str, StackResource] = field(default_factory=dict)
    # What was read but not applied: "<logical id>: <what>" (a property moto does not hold, say).
    skipped: list[str] = field(default_factory=list)
    # Roles from outside the stack that its policies attach to (by name, as a deploy expects them to exist
    # in the account): created empty here, trusted by the account, so they hold what the template gives them.
    external_roles: list[str] = field(default_factory=list)
    # The logical ids created (a reference to one before its creation is a defect of the order); a reference
    # to any other resource is a stand-in.
    creating: frozenset[str] = frozenset()

    # --- what the caller reads ------------------------------------------------------------------------

    def physical_ids(self) -> dict[str, str]:
        """Logical id -> what Ref gives (table and bus names, queue URLs, topic and subscription ARNs, role
        names, key ids), for every created resource."""
        return {logical_id: r.ref for logical_id, r in self.resources.items() if r.created}

    def of_type(self, resource_type: str) -> dict[str, StackResource]:
        return {k: r for k, r in self.resources.items() if r.resource_type == resource_type and r.created}

    def environment(self, logical_id: str) -> dict[str, str]:
        """The environment variables of a Lambda function or of an ECS task definition's first container
        (a duetime worker has one), every Ref resolved: what RuntimeConfig.from_env reads on AWS."""
        resource = self._template_resource(logical_id)
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::Lambda::Function":
            variables = properties.get("Environment", {}).get("Variables", {})
            return {name: str(self.resolve(value)) for name, value in variables.items()}
        if resource["Type"] == "AWS::ECS::TaskDefinition":
            [container, *_] = properties["ContainerDefinitions"]
            return {e["Name"]: str(self.resolve(e["Value"])) for e in container.get("Environment", [])}
        raise TemplateError(f"{logical_id} is a {resource['Type']}, which has no environment")

    # --- intrinsic functions --------------------------------------------------------------------------

    def resolve(self, value: Any) -> Any:
        """`value` with every Ref, Fn::GetAtt, Fn::Join, Fn::Sub, Fn::Select and Fn::Split resolved against the
        local stack (pseudo parameters: this stack's region and account; parameters: their defaults)."""
        resolved = self._resolve(value)
        return None if resolved is _NO_VALUE else resolved

    def _resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [v for v in (self._resolve(item) for item in value) if v is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            [(key, argument)] = value.items()
            if key == "Ref":
                return self.ref(argument)
            if key == "Fn::GetAtt":
                logical_id, attribute = argument.split(".", 1) if isinstance(argument, str) else argument
                return self.get_att(logical_id, self._resolve(attribute))
            if key == "Fn::Join":
                separator, items = argument
                return str(separator).join(str(item) for item in self._resolve(items))
            if key == "Fn::Sub":
                return self._sub(argument)
            if key == "Fn::Select":
                index, items = argument
                return self._resolve(items)[int(self._resolve(index))]
            if key == "Fn::Split":
                separator, text = argument
                return str(self._resolve(text)).split(separator)
            if key.startswith("Fn::"):
                raise TemplateError(f"{key} is not supported by the local stack")
        out: dict[str, Any] = {}
        for key, item in value.items():
            resolved = self._resolve(item)
            if resolved is not _NO_VALUE:
                out[key] = resolved
        return out

    def ref(self, name: str) -> Any:
        pseudo = {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account_id,
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": URL_SUFFIX,
            "AWS::StackName": self.stack_name,
            "AWS::StackId": f"arn:{PARTITION}:cloudformation:{self.region}:{self.account_id}:stack/{self.stack_name}/0",
            "AWS::NoValue": _NO_VALUE,
        }
        if name in pseudo:
            return pseudo[name]
        parameters = self.template.get("Parameters", {})
        if name in parameters:
            if "Default" not in parameters[name]:
                raise TemplateError(f"parameter {name} has no default")
            return parameters[name]["Default"]
        return self._resource(name).ref

    def get_att(self, logical_id: str, attribute: str) -> str:
        resource = self._resource(logical_id)
        if attribute not in resource.attributes:
            if resource.created:
                raise TemplateError(f"{logical_id} ({resource.resource_type}) has no attribute {attribute} locally")
            return f"{resource.ref}-{attribute}"  # a stand-in's other attributes: deterministic, unique
        return resource.attributes[attribute]

    def _sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(self._resolve(variables[name]))
            if "." in name and not name.startswith("AWS::"):
                logical_id, attribute = name.split(".", 1)
                return self.get_att(logical_id, attribute)
            return str(self.ref(name))

        return re.sub(r"\$\{([^}]+)\}", substitute, text)

    def _template_resource(self, logical_id: str) -> dict[str, Any]:
        resources: dict[str, Any] = self.template["Resources"]
        if logical_id not in resources:
            raise TemplateError(f"the template has no resource {logical_id}")
        return dict(resources[logical_id])

    def _resource(self, logical_id: str) -> StackResource:
        if logical_id not in self.resources:
            self.resources[logical_id] = self._stand_in(logical_id)
        return self.resources[logical_id]

    def _stand_in(self, logical_id: str) -> StackResource:
        """A resource of a type the local stack does not create: its name, what Ref gives (its name, a queue's
        URL, a topic's ARN) and its ARN, in its service's format."""
        resource = self._template_resource(logical_id)
        resource_type = str(resource["Type"])
        if logical_id in self.creating:
            raise TemplateError(f"{logical_id} is referred to before it is created (a dependency cycle?)")
        properties = resource.get("Properties", {})
        name_property = _STAND_IN_NAMES.get(resource_type)
        explicit = properties.get(name_property) if name_property else None
        name = str(self.resolve(explicit)) if isinstance(explicit, (str, dict)) else self.derived_name(logical_id, 64)
        arn = self._stand_in_arn(resource_type, name)
        attributes = {"Arn": arn}
        ref = name
        if resource_type == "AWS::SQS::Queue":
            ref = f"https://sqs.{self.region}.{URL_SUFFIX}/{self.account_id}/{name}"
            attributes.update(QueueName=name, QueueUrl=ref)
        elif resource_type == "AWS::SNS::Topic":
            ref = arn
            attributes.update(TopicArn=arn, TopicName=name)
        elif resource_type == "AWS::Events::EventBus":
            attributes["Name"] = name
        return StackResource(logical_id, resource_type, ref, attributes, False)

    def _stand_in_arn(self, resource_type: str, name: str) -> str:
        _, service, kind = [*resource_type.split("::"), "", ""][:3]
        service = service.lower()
        prefix = f"arn:{PARTITION}:{service}:{self.region}:{self.account_id}"
        if resource_type in ("AWS::SQS::Queue", "AWS::SNS::Topic"):
            return f"{prefix}:{name}"
        if resource_type == "AWS::IAM::Role":  # IAM is global: no region
            return f"arn:{PARTITION}:iam::{self.account_id}:role/{name}"
        if resource_type == "AWS::Events::EventBus":
            return f"{prefix}:event-bus/{name}"
        if resource_type == "AWS::Logs::LogGroup":
            return f"{prefix}:log-group:{name}:*"
        if resource_type == "AWS::Lambda::Function":
            return f"{prefix}:function:{name}"
        if resource_type == "AWS::SecretsManager::Secret":
            return f"{prefix}:secret:{name}"
        return f"{prefix}:{kind.lower()}/{name}"

    # --- names ------------------------------------------------------------------------------------------

    def derived_name(self, logical_id: str, limit: int, suffix: str = "") -> str:
        """A resource's local name when the template sets none: `<stack name>-<logical id>`, within `limit`."""
        return f"{self.stack_name}-{logical_id}"[: limit - len(suffix)] + suffix

    def _name(self, properties: Mapping[str, Any], name_property: str, logical_id: str, limit: int) -> str:
        if name_property in properties:
            return str(properties[name_property])
        return self.derived_name(logical_id, limit)

    def _skip(self, logical_id: str, properties: Mapping[str, Any], applied: Iterable[str]) -> None:
        for name in sorted(set(properties) - set(applied)):
            self.skipped.append(f"{logical_id}: property {name} not applied")


# The property that names a resource of a type the local stack does not create (its stand-in's name).
_STAND_IN_NAMES = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::Events::EventBus": "Name",
    "AWS::IAM::Role": "RoleName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::ECS::Cluster": "ClusterName",
    "AWS::SecretsManager::Secret": "Name",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
}


# --- provisioners, one per resource type ------------------------------------------------------------------

# A resource's properties, every intrinsic function resolved.
Properties = dict[str, Any]
Provisioner = Callable[[LocalStack, ClientFactory, str, Properties], StackResource]


def _flag(value: Any) -> str:
    """An SQS or SNS attribute value: booleans as "true"/"false", the rest as text."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _tags(properties: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{"Key": str(t["Key"]), "Value": str(t["Value"])} for t in properties.get("Tags", [])]


_TABLE_PROPERTIES = {
    "TableName",
    "KeySchema",
    "AttributeDefinitions",
    "BillingMode",
    "ProvisionedThroughput",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
    "StreamSpecification",
    "SSESpecification",
    "DeletionProtectionEnabled",
    "TableClass",
    "Tags",
    "TimeToLiveSpecification",
    "PointInTimeRecoverySpecification",
}


def _table(stack: LocalStack, client: ClientFactory, logical_id: str, properties: Properties) -> StackResource:
    dynamodb = client("dynamodb")
    name = stack._name(properties, "TableName", logical_id, 255)
    # CloudFormation's default billing mode is PROVISIONED (then ProvisionedThroughput is required).
    kwargs: dict[str, Any] = {
        "TableName": name,
        "KeySchema": properties["KeySchema"],
        "AttributeDefinitions": properties["AttributeDefinitions"],
        "BillingMode": properties.get("BillingMode", "PROVISIONED"),
    }
    for same in ("ProvisionedThroughput", "GlobalSecondaryIndexes", "LocalSecondaryIndexes", "TableClass"):
        if same in properties:
            kwargs[same] = properties[same]
    if "DeletionProtectionEnabled" in properties:
        kwargs["DeletionProtectionEnabled"] = bool(properties["DeletionProtectionEnabled"])
    if "StreamSpecification" in properties:  # CloudFormation: a view type means a stream
        kwargs["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": properties["StreamSpecification"]["StreamViewType"],
        }
    sse = properties.get("SSESpecification")
    if sse is not None:  # CloudFormation spells the API's Enabled as SSEEnabled
        kwargs["SSESpecification"] = {"Enabled": bool(sse.get("SSEEnabled", False))}
        for key in ("SSEType", "KMSMasterKeyId"):
            if key in sse:
                kwargs["SSESpecification"][key] = sse[key]
    if properties.get("Tags"):
        kwargs["Tags"] = _tags(properties)
    description = dynamodb.create_table(**kwargs)["TableDescription"]
    ttl = properties.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        dynamodb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True}
        )
    recovery = properties.get("PointInTimeRecoverySpecification")
    if recovery and recovery.get("PointInTimeRecoveryEnabled"):
        dynamodb.update_continuous_backups(
            TableName=name, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
        )
    stack._skip(logical_id, properties, _TABLE_PROPERTIES)
    attributes = {"Arn": description["TableArn"]}
    if "LatestStreamArn" in description:
        attributes["StreamArn"] = description["LatestStreamArn"]
    return StackResource(logical_id, "AWS::DynamoDB::Table", name, attributes)


# The queue properties that are queue attributes of the same name (RedrivePolicy and friends are JSON).
_QUEUE_ATTRIBUTES = (
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "DelaySeconds",
    "FifoQueue",
    "FifoThroughputLimit",
    "KmsDataKeyReusePeriodSeconds",
    "KmsMasterKeyId",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "SqsManagedSseEnabled",
    "VisibilityTimeout",
)
_QUEUE_JSON_ATTRIBUTES = ("RedrivePolicy", "RedriveAllowPolicy")


def _queue(stack: LocalStack, client: ClientFactory, logical_id: str, properties: Properties) -> StackResource:
    sqs = client("sqs")
    fifo = bool(properties.get("FifoQueue"))
    name = str(properties.get("QueueName") or stack.derived_name(logical_id, 80, ".fifo" if fifo else ""))
    attributes = {key: _flag(properties[key]) for key in _QUEUE_ATTRIBUTES if key in properties}
    attributes.update({key: json.dumps(properties[key]) for key in _QUEUE_JSON_ATTRIBUTES if key in properties})
    kwargs: dict[str, Any] = {"QueueName": name, "Attributes": attributes}
    if properties.get("Tags"):
        kwargs["tags"] = {t["Key"]: t["Value"] for t in _tags(properties)}
    url = str(sqs.create_queue(**kwargs)["QueueUrl"])
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    stack._skip(logical_id, properties, {"QueueName", "Tags", *_QUEUE_ATTRIBUTES, *_QUEUE_JSON_ATTRIBUTES})
    return StackResource(logical_id, "AWS::SQS::Queue", url, {"Arn": arn, "QueueName": name, "QueueUrl": url})


def _queue_policy(
    stack: LocalStack, client: ClientFactory, logical_id: str, properties: dict[str, Any]
) -> StackResource:
    sqs = client("sqs")
    for url in properties["Queues"]:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(properties["PolicyDocument"])})
    return StackResource(logical_id, "AWS::SQS::QueuePolicy", stack.derived_name(logical_id, 255))


def _key(stack: LocalStack, client: ClientFactory, logical_id: str, properties: Properties) -> StackResource:
    kms = client("kms")
    kwargs: dict[str, Any] = {}
    if "KeyPolicy" in properties:
        kwargs["Policy"] = json.dumps(properties["KeyPolicy"])
    for key in ("Description", "KeyUsage", "KeySpec", "MultiRegion"):
        if key in properties:
            kwargs[key] = properties[key]
    if properties.get("Tags"):
        kwargs["Tags"] = [{"TagKey": t["Key"], "TagValue": t["Value"]} for t in _tags(properties)]
    metadata = kms.create_key(**kwargs)["KeyMetadata"]
    if properties.get("EnableKeyRotation"):
        kms.enable_key_rotation(KeyId=metadata["KeyId"])
    if properties.get("Enabled") is False:
        kms.disable_key(KeyId=metadata["KeyId"])
    stack._skip(
        logical_id,
        properties,
        {"KeyPolicy", "Description", "KeyUsage", "KeySpec", "MultiRegion", "Tags", "EnableKeyRotation", "Enabled"},
    )
    return StackResource(
        logical_id, "AWS::KMS::Key", metadata["KeyId"], {"Arn": metadata["Arn"], "KeyId": metadata["KeyId"]}
    )


def _alias(stack: LocalStack, client: ClientFactory, logical_id: str, properties: Properties) -> StackResource:
    client("kms").create_alias(AliasName=properties["AliasName"], TargetKeyId=properties["TargetKeyId"])
    return StackResource(logical_id, "AWS::KMS::Alias", str(properties["AliasName"]))


_TOPIC_ATTRIBUTES = (
    "DisplayName",
    "KmsMasterKeyId",
    "FifoTopic",
    "ContentBasedDeduplication",
    "SignatureVersion",
    "TracingConfig",
    "ArchivePolicy",
)


def _topic(stack: LocalStack, client: ClientFactory, logical_id: str, properties: Properties) -> StackResource:
    sns = client("sns")
    fifo = bool(properties.get("FifoTopic"))
    name = str(properties.get("TopicName") or stack.derived_name(logical_id, 256, ".fifo" if fifo else ""))
    attributes = {
        key: json.dumps(properties[key]) if isinstance(properties[key], dict) else _flag(properties[key])
        for key in _TOPIC_ATTRIBUTES
        if key in properties
    }
    kwargs: dict[str, Any] = {"Name": name, "Attributes": attributes}
    if properties.get("Tags"):
        kwargs["Tags"] = _tags(properties)
    arn = str(sns.create_topic(**kwargs)["TopicArn"])
    for subscription in properties.get("Subscription", []):
        sns.subscribe(TopicArn=arn, Protocol=subscription["Protocol"], Endpoint=subscription["Endpoint"])
    stack._skip(logical_id, properties, {"TopicName", "Tags", "Subscription", *_TOPIC_ATTRIBUTES})
    return StackResource(logical_id, "AWS::SNS::Topic", arn, {"TopicArn": arn, "TopicName": name})


_SUBSCRIPTION_ATTRIBUTES = ("RawMessageDelivery", "FilterPolicyScope", "SubscriptionRoleArn")
_SUBSCRIPTION_JSON_ATTRIBUTES = ("FilterPolicy", "RedrivePolicy", "DeliveryPolicy", "ReplayPolicy")


def _subscription(
    stack: LocalStack, client: ClientFactory, logical_id: str, properties: dict[str, Any]
) -> StackResource:
    attributes = {key: _flag(properties[key]) for key in _SUBSCRIPTION_ATTRIBUTES if key in properties}
    attributes.update({key: json.dumps(properties[key]) for key in _SUBSCRIPTION_JSON_ATTRIBUTES if key in properties})
    arn = client("sns").subscribe(
        TopicArn=properties["TopicArn"],
        Protocol=properties["Protocol"],
        Endpoint=properties["Endpoint"],
        Attributes=attributes,
        ReturnSubscriptionArn=True,
    )["SubscriptionArn"]
    stack._skip(
        logical_id,
        properties,
        {"TopicArn", "Protocol", "Endpoint", "Region", *_SUBSCRIPTION_ATTRIBUTES, *_SUBSCRIPTION_JSON_ATTRIBUTES},
    )
    return StackResource(logical_id, "AWS::SNS::Subscription", str(arn), {"Arn": str(arn)})


def _topic_policy(
    stack: LocalStack, client: ClientFactory, logical_id: str, properties: dict[str, Any]
) -> StackResource:
    sns = client("sns")
    for arn in properties["Topics"]:
        sns.set_topic_attributes(
            TopicArn=arn, AttributeName="Policy", AttributeValue=json.dumps(properties["PolicyDocument"])
        )
    return StackResource(logical_id, "AWS::SNS::TopicPolicy", stack.derived_name(logical_id, 255))


def _event_bus(stack: LocalStack, client: ClientFactory, logical_id: str, properties: Properties) -> StackResource:
    name = str(properties["Name"])  # required by CloudFormation
    kwargs: dict[str, Any] = {"Name": name}
    for key in ("EventSourceName", "Description", "KmsKeyIdentifier"):
        if key in properties:
            kwargs[key] = properties[key]
    if properties.get("Tags"):
        kwargs["Tags"] = _tags(properties)
    arn = client("events").create_event_bus(**kwargs)["EventBusArn"]
    stack._skip(logical_id, properties, {"Name", "Tags", "EventSourceName", "Description", "KmsKeyIdentifier"})
    return StackResource(logical_id, "AWS::Events::EventBus", name, {"Arn": arn, "Name": name})


def _attach_managed(stack: LocalStack, iam: Any, logical_id: str, role: str, policy_arn: str) -> None:
    """Attach a managed policy; one moto does not hold (AWS's own, unless moto loads them) is listed as skipped."""
    try:
        iam.attach_role_policy(RoleName=role, PolicyArn=policy_arn)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "NoSuchEntity":
            raise
        stack.skipped.append(f"{logical_id}: managed policy {policy_arn} not attached (not held locally)")


def _role(stack: LocalStack, client: ClientFactory, logical_id: str, properties: Properties) -> StackResource:
    iam = client("iam")
    name = stack._name(properties, "RoleName", logical_id, 64)
    kwargs: dict[str, Any] = {
        "RoleName": name,
        "AssumeRolePolicyDocument": json.dumps(properties["AssumeRolePolicyDocument"]),
    }
    for key in ("Path", "Description", "MaxSessionDuration", "PermissionsBoundary"):
        if key in properties:
            kwargs[key] = properties[key]
    if properties.get("Tags"):
        kwargs["Tags"] = _tags(properties)
    role = iam.create_role(**kwargs)["Role"]
    for policy in properties.get("Policies", []):
        iam.put_role_policy(
            RoleName=name, PolicyName=policy["PolicyName"], PolicyDocument=json.dumps(policy["PolicyDocument"])
        )
    for policy_arn in properties.get("ManagedPolicyArns", []):
        _attach_managed(stack, iam, logical_id, name, policy_arn)
    stack._skip(
        logical_id,
        properties,
        {
            "RoleName",
            "AssumeRolePolicyDocument",
            "Path",
            "Description",
            "MaxSessionDuration",
            "PermissionsBoundary",
            "Tags",
            "Policies",
            "ManagedPolicyArns",
        },
    )
    return StackResource(logical_id, "AWS::IAM::Role", name, {"Arn": role["Arn"], "RoleId": role["RoleId"]})


def _external_role(stack: LocalStack, iam: Any, name: str) -> None:
    """A role a policy of the stack attaches to that the stack does not create: created once, empty."""
    if name in stack.external_roles or any(r.ref == name for r in stack.of_type("AWS::IAM::Role").values()):
        return
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:{PARTITION}:iam::{stack.account_id}:root"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    try:
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust), Description="outside the stack")
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "EntityAlreadyExists":
            raise
    stack.external_roles.append(name)


def _policy(stack: LocalStack, client: ClientFactory, logical_id: str, properties: Properties) -> StackResource:
    """An inline policy put on each of its roles (and users and groups), as CloudFormation does."""
    iam = client("iam")
    name = str(properties["PolicyName"])
    document = json.dumps(properties["PolicyDocument"])
    for role in properties.get("Roles", []):
        _external_role(stack, iam, role)
        iam.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=document)
    for user in properties.get("Users", []):
        iam.put_user_policy(UserName=user, PolicyName=name, PolicyDocument=document)
    for group in properties.get("Groups", []):
        iam.put_group_policy(GroupName=group, PolicyName=name, PolicyDocument=document)
    return StackResource(logical_id, "AWS::IAM::Policy", name)


def _managed_policy(
    stack: LocalStack, client: ClientFactory, logical_id: str, properties: dict[str, Any]
) -> StackResource:
    iam = client("iam")
    name = stack._name(properties, "ManagedPolicyName", logical_id, 128)
    kwargs: dict[str, Any] = {"PolicyName": name, "PolicyDocument": json.dumps(properties["PolicyDocument"])}
    for key in ("Path", "Description"):
        if key in properties:
            kwargs[key] = properties[key]
    arn = iam.create_policy(**kwargs)["Policy"]["Arn"]
    for role in properties.get("Roles", []):
        _external_role(stack, iam, role)
        iam.attach_role_policy(RoleName=role, PolicyArn=arn)
    for user in properties.get("Users", []):
        iam.attach_user_policy(UserName=user, PolicyArn=arn)
    for group in properties.get("Groups", []):
        iam.attach_group_policy(GroupName=group, PolicyArn=arn)
    return StackResource(logical_id, "AWS::IAM::ManagedPolicy", arn, {"PolicyArn": arn})


PROVISIONERS: dict[str, Provisioner] = {
    "AWS::KMS::Key": _key,
    "AWS::KMS::Alias": _alias,
    "AWS::DynamoDB::Table": _table,
    "AWS::SQS::Queue": _queue,
    "AWS::SQS::QueuePolicy": _queue_policy,
    "AWS::SNS::Topic": _topic,
    "AWS::SNS::Subscription": _subscription,
    "AWS::SNS::TopicPolicy": _topic_policy,
    "AWS::Events::EventBus": _event_bus,
    "AWS::IAM::Role": _role,
    "AWS::IAM::Policy": _policy,
    "AWS::IAM::ManagedPolicy": _managed_policy,
}


def _references(value: Any) -> set[str]:
    """The logical ids a value refers to (Ref, Fn::GetAtt, Fn::Sub's ${Name} and ${Name.Attribute})."""
    found: set[str] = set()
    if isinstance(value, list):
        for item in value:
            found |= _references(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "Ref" and isinstance(item, str):
                found.add(item)
            elif key == "Fn::GetAtt":
                found.add(item.split(".", 1)[0] if isinstance(item, str) else item[0])
            elif key == "Fn::Sub":
                text = item if isinstance(item, str) else item[0]
                found |= {m.split(".", 1)[0] for m in re.findall(r"\$\{([^!}][^}]*)\}", text)}
                if not isinstance(item, str):
                    found |= _references(item[1])
            else:
                found |= _references(item)
    return found


def _needs(resource: Mapping[str, Any]) -> set[str]:
    depends = resource.get("DependsOn", [])
    return _references(resource.get("Properties", {})) | set([depends] if isinstance(depends, str) else depends)


def creation_order(template: Mapping[str, Any], types: Collection[str] | None = None) -> list[str]:
    """The logical ids of the resources the local stack creates (of `types`, by default every type it can),
    each after those it refers to or DependsOn (a due queue after its dead-letter queue, a policy after its
    roles, a topic after its key)."""
    resources: Mapping[str, Any] = template["Resources"]
    wanted = set(PROVISIONERS if types is None else types) & set(PROVISIONERS)
    created = {k for k, r in resources.items() if r["Type"] in wanted}
    graph: dict[str, set[str]] = {}
    for logical_id in sorted(created):  # sorted: the same order every run
        graph[logical_id] = _needs(resources[logical_id]) & created
    try:
        return list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise TemplateError(f"the template's resources refer to each other in a cycle: {exc.args[1]}") from exc


def provision_template(
    template: Mapping[str, Any],
    client: ClientFactory,
    *,
    region: str = DEFAULT_REGION,
    stack_name: str = DEFAULT_STACK_NAME,
    account_id: str | None = None,
    types: Collection[str] | None = None,
) -> LocalStack:
    """Create the template's tables, queues, keys, topics, subscriptions, event buses, roles and policies (those
    of `types`, all by default; a reference to another is a stand-in) through `client(service)` (boto3 clients
    of the local endpoint, in `region`), in dependency order, and return the local stack: logical id -> Ref and
    Fn::GetAtt values (`physical_ids()` for the mapping), every intrinsic resolvable against it (`resolve`,
    `environment`).

    `account_id` defaults to the caller's (STS GetCallerIdentity: moto's account). A resource with a
    `Condition` is refused (TemplateError): duetime's templates have none, and guessing one is wrong.
    """
    if account_id is None:
        account_id = str(client("sts").get_caller_identity()["Account"])
    order = creation_order(template, types)
    stack = LocalStack(
        template=template,
        region=region,
        account_id=account_id,
        stack_name=stack_name,
        creating=frozenset(order),
    )
    for logical_id in order:
        resource = template["Resources"][logical_id]
        if "Condition" in resource:
            raise TemplateError(f"{logical_id} has a Condition, which the local stack does not evaluate")
        properties = stack.resolve(resource.get("Properties", {}))
        stack.resources[logical_id] = PROVISIONERS[resource["Type"]](stack, client, logical_id, properties)
    return stack


# --- the template as a local stack under another prefix holds it --------------------------------------------------

_POLICY_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")


def template_prefix(template: Mapping[str, Any]) -> str:
    """The name prefix the template was synthesized with (its functions' DUETIME_PREFIX)."""
    for resource in template["Resources"].values():
        variables = (resource.get("Properties") or {}).get("Environment", {}).get("Variables", {})
        if resource["Type"] == "AWS::Lambda::Function" and isinstance(variables.get("DUETIME_PREFIX"), str):
            return str(variables["DUETIME_PREFIX"])
    raise TemplateError("no function of the template has a DUETIME_PREFIX")


def localized(
    template: Mapping[str, Any],
    prefix: str,
    spread: Mapping[str, Sequence[str]] | None = None,
    from_prefix: str | None = None,
) -> dict[str, Any]:
    """A copy of `template` as the local stack named with `prefix` holds it (module docstring): every name made
    with the template's prefix (`from_prefix`, by default its functions' DUETIME_PREFIX) made with `prefix`
    (`duetime-jobs` is `<prefix>-jobs`, `duetime/webhook-secrets/*` `<prefix>/webhook-secrets/*`); an unnamed
    topic named `<prefix>-<its construct id, lower case>` (the alert topic `AlertsTopicCF7C81C9`:
    `<prefix>-alerts`); and each due queue `spread` names (its local name -> every local queue it stands for,
    itself first) copied under each further name, with its queue policy, every role policy's grant on it
    extended to the copies."""
    original = from_prefix if from_prefix is not None else template_prefix(template)

    def rename(value: Any) -> Any:
        if isinstance(value, str):
            if prefix == original:
                return value
            return re.sub(rf"(^|[:/]){re.escape(original)}(?=[-/])", rf"\g<1>{prefix}", value)
        if isinstance(value, list):
            return [rename(item) for item in value]
        if isinstance(value, dict):
            return {key: rename(item) for key, item in value.items()}
        return value

    local: dict[str, Any] = rename(copy.deepcopy(dict(template)))
    resources: dict[str, Any] = local["Resources"]
    for logical_id, resource in resources.items():
        properties = resource.setdefault("Properties", {})
        if resource["Type"] == "AWS::SNS::Topic" and not properties.get("TopicName"):
            construct = re.sub(r"Topic$", "", re.sub(r"[0-9A-F]{8}$", "", logical_id))
            properties["TopicName"] = f"{prefix}-{construct.lower()}"
    for logical_id, resource in list(resources.items()):
        names = (spread or {}).get(str(resource["Properties"].get("QueueName")))
        if resource["Type"] == "AWS::SQS::Queue" and names and len(names) > 1:
            _spread_queue(resources, logical_id, names[1:])
    return local


def _spread_queue(resources: dict[str, Any], logical_id: str, names: Sequence[str]) -> None:
    """Queue `logical_id` copied as `<logical id>Local<n>` named `names[n - 1]`, with its queue policies; each
    statement of a role policy that names it names the copies too."""
    copies = [f"{logical_id}Local{index}" for index in range(1, len(names) + 1)]
    policies = [
        (k, r) for k, r in resources.items() if r["Type"] == "AWS::SQS::QueuePolicy" and logical_id in _needs(r)
    ]
    for copy_id, name in zip(copies, names, strict=True):
        resources[copy_id] = _replaced(resources[logical_id], logical_id, copy_id)
        resources[copy_id]["Properties"]["QueueName"] = name
        for policy_id, policy in policies:
            resources[f"{policy_id}{copy_id.removeprefix(logical_id)}"] = _replaced(policy, logical_id, copy_id)
    for statement in _policy_statements(resources):
        for key in ("Resource", "NotResource"):
            if key in statement:
                listed = statement[key] if isinstance(statement[key], list) else [statement[key]]
                extended: list[Any] = []
                for item in listed:
                    named = logical_id in _references(item)
                    extended += [item, *(_replaced(item, logical_id, c) for c in copies if named)]
                statement[key] = extended


def _policy_statements(resources: Mapping[str, Any]) -> Iterable[dict[str, Any]]:
    """Every statement of the template's role policies (inline in a role, or a policy resource)."""
    for resource in resources.values():
        properties = resource.get("Properties") or {}
        if resource["Type"] == "AWS::IAM::Role":
            documents = [p["PolicyDocument"] for p in properties.get("Policies") or []]
        elif resource["Type"] in _POLICY_TYPES:
            documents = [properties["PolicyDocument"]]
        else:
            continue
        for document in documents:
            statements = document.get("Statement", [])
            yield from statements if isinstance(statements, list) else [statements]


def _replaced(value: Any, old: str, new: str) -> Any:
    """`value` with every Ref, Fn::GetAtt and Fn::Sub reference to `old` made to `new`."""
    if isinstance(value, list):
        return [_replaced(item, old, new) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "Ref" and item == old:
            out[key] = new
        elif key == "Fn::GetAtt" and isinstance(item, list) and item[0] == old:
            out[key] = [new, *item[1:]]
        elif key == "Fn::GetAtt" and isinstance(item, str) and item.split(".", 1)[0] == old:
            out[key] = new + item[len(old) :]
        elif key == "Fn::Sub":
            text, variables = (item, None) if isinstance(item, str) else item
            text = re.sub(r"\$\{" + re.escape(old) + r"(?=[.}])", "${" + new, text)
            out[key] = text if variables is None else [text, _replaced(variables, old, new)]
        else:
            out[key] = _replaced(item, old, new)
    return out
