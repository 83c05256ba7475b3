"""The roles of the synthesized stack, as duetime.local.iam evaluates them against the local resources.

Each role's statements are those of every AWS::IAM::Policy attached to it (Roles) and of its inline Policies,
their intrinsic functions resolved by the local stack (duetime.local.template_stack.LocalStack: the one
resolver of the template's Refs and GetAtts) to what the local resources are called: a table's Arn is the
local table's ARN, a queue's the local queue's, the pseudo parameters the local region and moto's account.
Under another name prefix, or with a class spread over several local queues (`--class-queues`), the stack is
that of the template `localized` for them (`duetime-jobs` stands for `<prefix>-jobs`, a grant on a class's
queue covers each of its queues, the alert topic is `<prefix>-alerts`).

Each role gets an access key id of its own (`role_key`), the identity its function's AWS clients call with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from duetime.local.iam import Role, Statement
from duetime.local.template_stack import LocalStack

LAMBDA_FUNCTION = "AWS::Lambda::Function"
TASK_DEFINITION = "AWS::ECS::TaskDefinition"


def role_key(logical_id: str) -> str:
    """The access key id a role's calls carry locally (AKIA-like: upper case, letters and digits)."""
    return "ASIALOCAL" + hashlib.sha256(logical_id.encode()).hexdigest()[:11].upper()


def _strings(value: Any) -> list[str]:
    """A resolved policy value as the evaluator reads it: a list of strings (booleans as IAM writes them)."""
    listed = value if isinstance(value, list) else [value]
    return [str(v).lower() if isinstance(v, bool) else str(v) for v in listed]


def resolved_statement(stack: LocalStack, raw: Mapping[str, Any]) -> Statement:
    """A statement of the template with its resources and condition values resolved against `stack`."""
    resolved = dict(raw)
    for key in ("Resource", "NotResource"):
        if key in raw:
            resolved[key] = _strings(stack.resolve(raw[key]))
    if "Condition" in raw:
        resolved["Condition"] = {
            operator: {key: _strings(stack.resolve(v)) for key, v in keys.items()}
            for operator, keys in raw["Condition"].items()
        }
    return Statement.parse(resolved)


def role_statements(stack: LocalStack) -> dict[str, Role]:
    """Every role of the stack's template (by logical id) with the statements of the policies attached to it."""
    resources = dict(stack.template["Resources"])
    roles = {logical_id: Role(logical_id) for logical_id, r in resources.items() if r["Type"] == "AWS::IAM::Role"}
    for logical_id, resource in resources.items():
        props = resource.get("Properties") or {}
        if resource["Type"] == "AWS::IAM::Role":
            for inline in props.get("Policies") or []:
                statements = inline["PolicyDocument"]["Statement"]
                roles[logical_id].statements += [resolved_statement(stack, s) for s in statements]
        elif resource["Type"] == "AWS::IAM::Policy":
            statements = [resolved_statement(stack, s) for s in props["PolicyDocument"]["Statement"]]
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


def policy_table(stack: LocalStack) -> dict[str, dict[str, Any]]:
    """What the moto server is given: each function role's access key, with its name and statements as JSON."""
    roles = role_statements(stack)
    table: dict[str, dict[str, Any]] = {}
    for role_id in set(function_roles(stack.template).values()):
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
