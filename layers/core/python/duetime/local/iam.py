"""IAM identity-policy evaluation for the AWS-faithful mode: may this role make this call?

`duetime local --backend moto` gives each emulated function the identity of the role the synthesized template
gives it (an access key id per role), and the moto server asks `Policies.allows` about every request made with
such a key (duetime.local.moto_server.IamEnforcement). docs/decisions.md says why this evaluator is duetime's own.

What it evaluates, as IAM does for an identity policy within one account:
- A request is one action on one resource ARN, with its condition keys; a call on several resources (a batch
  over two tables, a transaction) is several requests, and all must be allowed.
- A statement applies when its Action (or NotAction) matches the action, case-insensitively, with `*` and `?`
  wildcards; its Resource (or NotResource) matches the ARN, case-sensitively, `*` and `?` matching any
  characters, `/` and `:` included (so `table/jobs/index/*` covers every index of jobs); and every condition
  holds.
- An explicit Deny that applies beats every Allow; without an Allow that applies the request is denied.
- Conditions: the String*, Arn*, Bool, Null and Numeric* operators, their IfExists forms and the
  ForAllValues:/ForAnyValue: set qualifiers. Several keys under one operator, and several operators, must all
  hold; several values of one key are alternatives. A key the request does not carry fails the condition,
  except for Null, IfExists, the negated operators and ForAllValues (as IAM evaluates them). An operator this
  module does not know denies the request (UnknownCondition), whatever the statement's effect: never an Allow
  by accident.

What it leaves out: resource policies (queue and topic policies), permission boundaries, session policies,
SCPs, and policy variables (`${aws:username}`): the template's role policies use none of them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ALLOW, DENY = "Allow", "Deny"


class UnknownCondition(ValueError):
    """A condition operator the evaluator does not implement: the request is denied."""


@dataclass(frozen=True)
class Request:
    """One action on one resource, with the condition keys the call carries (each key: its values)."""

    action: str  # "dynamodb:GetItem"
    resource: str  # an ARN, or "*" for actions without a resource type
    context: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Statement:
    effect: str
    actions: tuple[str, ...] = ()
    not_actions: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    not_resources: tuple[str, ...] = ()
    conditions: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Statement:
        """A statement of a policy document (its values already resolved to strings)."""
        conditions = {
            operator: {key: _strings(values) for key, values in keys.items()}
            for operator, keys in dict(raw.get("Condition") or {}).items()
        }
        return cls(
            effect=str(raw["Effect"]),
            actions=_strings(raw.get("Action")),
            not_actions=_strings(raw.get("NotAction")),
            resources=_strings(raw.get("Resource")),
            not_resources=_strings(raw.get("NotResource")),
            conditions=conditions,
        )

    def applies(self, request: Request) -> bool:
        if self.actions and not any(_action_matches(p, request.action) for p in self.actions):
            return False
        if self.not_actions and any(_action_matches(p, request.action) for p in self.not_actions):
            return False
        if self.resources and not any(_resource_matches(p, request.resource) for p in self.resources):
            return False
        if self.not_resources and any(_resource_matches(p, request.resource) for p in self.not_resources):
            return False
        return all(
            condition_holds(operator, key, values, request.context)
            for operator, keys in self.conditions.items()
            for key, values in keys.items()
        )


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value)
    return (str(value),)


@functools.lru_cache(maxsize=4096)
def _pattern(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    # fnmatch would read `[...]` as a character class: IAM knows only `*` and `?`.
    escaped = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(escaped, re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def wildcard_match(pattern: str, value: str, ignore_case: bool = False) -> bool:
    """IAM's matching: `*` any run of characters (`/` and `:` too), `?` any one character."""
    return _pattern(pattern, ignore_case).fullmatch(value) is not None


def _action_matches(pattern: str, action: str) -> bool:
    return wildcard_match(pattern, action, ignore_case=True)


def _resource_matches(pattern: str, arn: str) -> bool:
    return wildcard_match(pattern, arn)


def _lookup(context: Mapping[str, tuple[str, ...]], key: str) -> tuple[str, ...] | None:
    """Condition keys are case-insensitive."""
    lowered = key.lower()
    for name, values in context.items():
        if name.lower() == lowered:
            return values
    return None


def _single(base: str, policy: str, value: str) -> bool:
    """One policy value against one request value, for the base operator (IfExists and qualifiers removed)."""
    if base in ("StringEquals", "StringNotEquals"):
        return policy == value
    if base in ("StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase"):
        return policy.lower() == value.lower()
    if base in ("StringLike", "StringNotLike", "ArnLike", "ArnNotLike", "ArnEquals", "ArnNotEquals"):
        return wildcard_match(policy, value)
    if base == "Bool":
        return policy.lower() == value.lower()
    if base.startswith("Numeric"):
        try:
            left, right = float(value), float(policy)
        except ValueError:
            return False
        return {
            "NumericEquals": left == right,
            "NumericNotEquals": left == right,
            "NumericLessThan": left < right,
            "NumericLessThanEquals": left <= right,
            "NumericGreaterThan": left > right,
            "NumericGreaterThanEquals": left >= right,
        }[base]
    raise UnknownCondition(base)


NEGATED = {
    "StringNotEquals",
    "StringNotEqualsIgnoreCase",
    "StringNotLike",
    "ArnNotEquals",
    "ArnNotLike",
    "NumericNotEquals",
}
KNOWN = {
    "StringEquals",
    "StringEqualsIgnoreCase",
    "StringLike",
    "ArnEquals",
    "ArnLike",
    "Bool",
    "NumericEquals",
    "NumericLessThan",
    "NumericLessThanEquals",
    "NumericGreaterThan",
    "NumericGreaterThanEquals",
    *NEGATED,
}


def condition_holds(
    operator: str, key: str, policy_values: Sequence[str], context: Mapping[str, tuple[str, ...]]
) -> bool:
    """Whether `key`'s values in the request satisfy `operator` with the policy's values."""
    qualifier, _, base = operator.rpartition(":")
    if qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise UnknownCondition(operator)
    values = _lookup(context, key)
    if base == "Null":
        if qualifier:
            raise UnknownCondition(operator)
        wanted = {v.lower() for v in policy_values}
        absent = not values
        return ("true" in wanted and absent) or ("false" in wanted and not absent)
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    if base not in KNOWN:
        raise UnknownCondition(operator)
    negated = base in NEGATED

    def matches(value: str) -> bool:
        # A negated operator holds when the value matches none of the policy's values.
        hit = any(_single(base, p, value) for p in policy_values)
        return not hit if negated else hit

    if qualifier == "ForAllValues":
        return all(matches(v) for v in values or ())  # no values: holds (why a Null check goes with it)
    if qualifier == "ForAnyValue":
        return any(matches(v) for v in values or ())
    if not values:
        return if_exists or negated
    return all(matches(v) for v in values) if negated else any(matches(v) for v in values)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


def evaluate(statements: Iterable[Statement], request: Request) -> Decision:
    """IAM's decision for one request under one identity's statements."""
    allowed_by = None
    try:
        for statement in statements:
            if not statement.applies(request):
                continue
            if statement.effect == DENY:
                return Decision(False, "an explicit deny in an identity-based policy")
            if statement.effect == ALLOW:
                allowed_by = statement
    except UnknownCondition as exc:
        return Decision(False, f"condition operator {exc} is not evaluated locally")
    if allowed_by is None:
        return Decision(False, "no identity-based policy allows the action")
    return Decision(True, "allowed")


@dataclass
class Role:
    """A role's name and the statements of every policy attached to it."""

    name: str
    statements: list[Statement] = field(default_factory=list)

    def decide(self, requests: Iterable[Request]) -> tuple[Decision, Request | None]:
        """The first denied request, or an allow when every one is allowed."""
        for request in requests:
            decision = evaluate(self.statements, request)
            if not decision.allowed:
                return decision, request
        return Decision(True, "allowed"), None
