"""The roles of the synthesized stack, as duetime.local.iam evaluates them against the local resources.

Each role's statements are those of every AWS::IAM::Policy attached to it (Roles) and of its inline Policies,
their intrinsic functions resolved to what the local stack's resources are called: a table's Arn is the local
table's ARN, a queue's the local queue's (a class spread over several local queues by `--class-queues`: all of
them), an unnamed topic's Ref the local topic named `<prefix>-<its construct id, lower case>` (the alert
topic: `<prefix>-alerts`, as duetime.local.notices creates it), the pseudo parameters the local region and
moto's account. A template synthesized under another name prefix than the local one has its prefix replaced in
the names it resolves (`duetime-jobs` stands for `<prefix>-jobs`, `duetime/webhook-secrets/*` for
`<prefix>/webhook-secrets/*`).

Each role gets an access key id of its own (`role_key`), the identity its function's AWS clients call with.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from duetime.local.iam import Role, Statement
from duetime.local.iam_requests import ACCOUNT, table_arn

LAMBDA_FUNCTION = "AWS::Lambda::Function"
TASK_DEFINITION = "AWS::ECS::TaskDefinition"


def role_key(logical_id: str) -> str:
    """The access key id a role's calls carry locally (AKIA-like: upper case, letters and digits)."""
    return "ASIALOCAL" + hashlib.sha256(logical_id.encode()).hexdigest()[:11].upper()


@dataclass
class LocalNames:
    """What the template's names stand for locally."""

    region: str
    prefix: str  # the local stack's name prefix
    template_prefix: str = "duetime"
    # A template queue name: the local queues it stands for (a class's due queue: each of its queues).
    queues: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def local_name(self, name: str) -> str:
        """`name` (made with the template's prefix) with the local prefix."""
        if self.prefix == self.template_prefix:
            return name
        return re.sub(rf"(^|[:/]){re.escape(self.template_prefix)}(?=[-/])", rf"\g<1>{self.prefix}", name)


class Resolver:
    """Intrinsic functions of a role policy, resolved to strings (a list: one value may stand for several)."""

    def __init__(self, resources: Mapping[str, Any], names: LocalNames) -> None:
        self.resources, self.names = resources, names

    def pseudo(self, name: str) -> str | None:
        return {
            "AWS::Region": self.names.region,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "DuetimeStack",
        }.get(name)

    def values(self, value: Any) -> list[str]:
        if isinstance(value, str):
            return [self.names.local_name(value)]
        if isinstance(value, list):
            return [v for item in value for v in self.values(item)]
        if not isinstance(value, dict) or len(value) != 1:
            raise ValueError(f"cannot resolve {value!r}")
        (function, argument), *_ = value.items()
        if function == "Ref":
            pseudo = self.pseudo(argument)
            return [pseudo] if pseudo is not None else self.ref(argument)
        if function == "Fn::GetAtt":
            logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
            return self.get_att(logical_id, attribute)
        if function == "Fn::Join":
            separator, parts = argument
            combinations: list[list[str]] = [[]]
            for part in parts:  # a part standing for several values joins into as many strings
                combinations = [[*c, v] for c in combinations for v in self.values(part)]
            return [separator.join(c) for c in combinations]
        if function == "Fn::Sub":
            text = argument if isinstance(argument, str) else argument[0]
            return [re.sub(r"\$\{([^}]+)\}", lambda m: self._sub(m.group(1)), text)]
        if function == "Fn::Select":
            index, items = argument
            listed = items if isinstance(items, list) else self.values(items)
            return self.values(listed[int(index)])
        if function == "Fn::Split":
            separator, text = argument
            return [piece for whole in self.values(text) for piece in whole.split(separator)]
        raise ValueError(f"cannot resolve {function}")

    def _sub(self, name: str) -> str:
        pseudo = self.pseudo(name)
        if pseudo is not None:
            return pseudo
        logical_id, _, attribute = name.partition(".")
        return (self.get_att(logical_id, attribute) if attribute else self.ref(logical_id))[0]

    def _resource(self, logical_id: str) -> tuple[str, dict[str, Any]]:
        resource = self.resources[logical_id]
        return str(resource["Type"]), dict(resource.get("Properties") or {})

    def ref(self, logical_id: str) -> list[str]:
        kind, props = self._resource(logical_id)
        if kind == "AWS::SNS::Topic":
            return [self.topic_arn(logical_id, props)]
        if kind == "AWS::SQS::Queue":
            return [
                f"https://sqs.{self.names.region}.amazonaws.com/{ACCOUNT}/{name}" for name in self.queue_names(props)
            ]
        if kind == "AWS::IAM::Role":
            return [logical_id]
        return [str(props.get("TableName") or props.get("Name") or logical_id)]

    def get_att(self, logical_id: str, attribute: str) -> list[str]:
        kind, props = self._resource(logical_id)
        region = self.names.region
        if kind == "AWS::DynamoDB::Table":
            arn = table_arn(region, self.names.local_name(str(props["TableName"])))
            return [arn if attribute == "Arn" else arn + "/stream/*"]
        if kind == "AWS::SQS::Queue":
            return [f"arn:aws:sqs:{region}:{ACCOUNT}:{name}" for name in self.queue_names(props)]
        if kind == "AWS::SNS::Topic":
            return [self.topic_arn(logical_id, props)]
        if kind == "AWS::Events::EventBus":
            return [f"arn:aws:events:{region}:{ACCOUNT}:event-bus/{self.names.local_name(str(props['Name']))}"]
        if kind == "AWS::KMS::Key":
            return [f"arn:aws:kms:{region}:{ACCOUNT}:key/{logical_id}"]
        if kind == "AWS::Logs::LogGroup":
            return [f"arn:aws:logs:{region}:{ACCOUNT}:log-group:{logical_id}:*"]
        if kind == "AWS::IAM::Role":
            return [f"arn:aws:iam::{ACCOUNT}:role/{logical_id}"]
        if kind == LAMBDA_FUNCTION:
            return [f"arn:aws:lambda:{region}:{ACCOUNT}:function:{logical_id}"]
        if kind == "AWS::ECS::Cluster":
            return [f"arn:aws:ecs:{region}:{ACCOUNT}:cluster/{logical_id}"]
        return [f"arn:aws:{kind.split('::')[1].lower()}:{region}:{ACCOUNT}:{logical_id}"]

    def queue_names(self, props: Mapping[str, Any]) -> list[str]:
        name = str(props["QueueName"])
        return list(self.names.queues.get(name) or [self.names.local_name(name)])

    def topic_arn(self, logical_id: str, props: Mapping[str, Any]) -> str:
        name = props.get("TopicName")
        if not name:  # an unnamed topic ("AlertsTopicCF7C81C9"): named locally after its construct ("alerts")
            construct = re.sub(r"Topic$", "", re.sub(r"[0-9A-F]{8}$", "", logical_id))
            name = f"{self.names.prefix}-{construct.lower()}"
            return f"arn:aws:sns:{self.names.region}:{ACCOUNT}:{name}"
        return f"arn:aws:sns:{self.names.region}:{ACCOUNT}:{self.names.local_name(str(name))}"

    def statement(self, raw: Mapping[str, Any]) -> Statement:
        resolved = dict(raw)
        for key in ("Resource", "NotResource"):
            if key in raw:
                resolved[key] = self.values(raw[key] if isinstance(raw[key], list) else [raw[key]])
        if "Condition" in raw:
            resolved["Condition"] = {
                operator: {key: self.values(v if isinstance(v, list) else [v]) for key, v in keys.items()}
                for operator, keys in raw["Condition"].items()
            }
        return Statement.parse(resolved)


def role_statements(template: Mapping[str, Any], names: LocalNames) -> dict[str, Role]:
    """Every role of the template (by logical id) with the statements of the policies attached to it."""
    resources = dict(template["Resources"])
    resolver = Resolver(resources, names)
    roles = {logical_id: Role(logical_id) for logical_id, r in resources.items() if r["Type"] == "AWS::IAM::Role"}
    for logical_id, resource in resources.items():
        props = resource.get("Properties") or {}
        if resource["Type"] == "AWS::IAM::Role":
            for inline in props.get("Policies") or []:
                statements = inline["PolicyDocument"]["Statement"]
                roles[logical_id].statements += [resolver.statement(s) for s in statements]
        elif resource["Type"] == "AWS::IAM::Policy":
            statements = [resolver.statement(s) for s in props["PolicyDocument"]["Statement"]]
            for attached in props.get("Roles") or []:
                role_id = attached.get("Ref") if isinstance(attached, dict) else None
                if role_id in roles:
                    roles[role_id].statements += statements
    return roles


def _role_of(value: Any) -> str | None:
    """The logical id of the role a Role/TaskRoleArn property names ({"Fn::GetAtt": [id, "Arn"]})."""
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    return None


def function_roles(template: Mapping[str, Any]) -> dict[str, str]:
    """The role of each duetime function, by what it runs: "api", "preloader", "dlq_notifier",
    "worker:<class>" (the Lambda workers) and "task:<class>" (the ECS workers' task role)."""
    found: dict[str, str] = {}
    for resource in dict(template["Resources"]).values():
        props = resource.get("Properties") or {}
        if resource["Type"] == LAMBDA_FUNCTION:
            variables = (props.get("Environment") or {}).get("Variables") or {}
            service, role = variables.get("POWERTOOLS_SERVICE_NAME"), _role_of(props.get("Role"))
            if not isinstance(service, str) or role is None:
                continue  # a custom resource's provider, not duetime's
            job_class = variables.get("DUETIME_JOB_CLASS")
            found[f"{service}:{job_class}" if service == "worker" else service] = role
        elif resource["Type"] == TASK_DEFINITION:
            role = _role_of(props.get("TaskRoleArn"))
            for container in props.get("ContainerDefinitions") or []:
                for variable in container.get("Environment") or []:
                    if variable.get("Name") == "DUETIME_JOB_CLASS" and role:
                        found[f"task:{variable['Value']}"] = role
    return found


def policy_table(template: Mapping[str, Any], names: LocalNames) -> dict[str, dict[str, Any]]:
    """What the moto server is given: each function role's access key, with its name and statements as JSON."""
    roles = role_statements(template, names)
    table: dict[str, dict[str, Any]] = {}
    for role_id in set(function_roles(template).values()):
        role = roles[role_id]
        table[role_key(role_id)] = {
            "name": role_id,
            "statements": [statement_json(s) for s in role.statements],
        }
    return table


def statement_json(statement: Statement) -> dict[str, Any]:
    raw: dict[str, Any] = {"Effect": statement.effect}
    for key, values in (
        ("Action", statement.actions),
        ("NotAction", statement.not_actions),
        ("Resource", statement.resources),
        ("NotResource", statement.not_resources),
    ):
        if values:
            raw[key] = list(values)
    if statement.conditions:
        raw["Condition"] = {op: {k: list(v) for k, v in keys.items()} for op, keys in statement.conditions.items()}
    return raw


def roles_of_table(table: Mapping[str, Mapping[str, Any]]) -> dict[str, Role]:
    """The moto server's side: access key id -> Role."""
    return {
        key: Role(str(entry["name"]), [Statement.parse(s) for s in entry["statements"]]) for key, entry in table.items()
    }
