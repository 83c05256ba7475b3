"""Handler grants: which owners (or their groups) may use which handler names and targets."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from duetime.domain.errors import InvalidInput

GROUP_PREFIX = "group:"


@dataclass(frozen=True)
class GrantRule:
    """Owners matching any of `owners` (a glob over the owner, or "group:NAME" for a member of NAME) may
    use handlers matching any of `handlers` (globs over the full name: "billing.*", "lambda:billing-*")."""

    owners: tuple[str, ...]
    handlers: tuple[str, ...]

    def covers_owner(self, owner: str, groups: Iterable[str]) -> bool:
        member_of = set(groups)
        for pattern in self.owners:
            if pattern.startswith(GROUP_PREFIX):
                if pattern.removeprefix(GROUP_PREFIX) in member_of:
                    return True
            elif fnmatchcase(owner, pattern):
                return True
        return False

    def covers_handler(self, handler: str) -> bool:
        return any(fnmatchcase(handler, pattern) for pattern in self.handlers)


@dataclass(frozen=True)
class Grants:
    """A list of rules; an owner may use a handler if any rule covers both."""

    rules: tuple[GrantRule, ...]

    def allows(self, owner: str, groups: Iterable[str], handler: str) -> bool:
        member_of = tuple(groups)
        return any(r.covers_handler(handler) and r.covers_owner(owner, member_of) for r in self.rules)

    def denial(self, owner: str, handler: str) -> str:
        """Why `owner` may not use `handler`: the sentence both the API and a refusing worker report."""
        return f"owner {owner!r} is not granted handler {handler!r}"

    @classmethod
    def parse(cls, raw: Any, source: str = "grants") -> Grants:
        """Rules from their JSON form `[{"owners": [...], "handlers": [...]}, ...]` (or {"rules": [...]});
        raises InvalidInput naming `source` and the rule that is malformed."""
        rules_raw = raw.get("rules") if isinstance(raw, dict) else raw
        if not isinstance(rules_raw, list):
            raise InvalidInput(f"{source}: expected a list of rules", field=source)
        rules: list[GrantRule] = []
        for index, rule in enumerate(rules_raw):
            where = f"{source}[{index}]"
            if not isinstance(rule, dict) or set(rule) != {"owners", "handlers"}:
                raise InvalidInput(f"{where}: a rule has exactly 'owners' and 'handlers'", field=source)
            owners, handlers = rule["owners"], rule["handlers"]
            for name, patterns in (("owners", owners), ("handlers", handlers)):
                if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
                    raise InvalidInput(f"{where}.{name}: expected a list of non-empty strings", field=source)
            rules.append(GrantRule(owners=tuple(owners), handlers=tuple(handlers)))
        return cls(rules=tuple(rules))


# Locally, without a grants file, everyone may use everything.
EVERYONE = Grants(rules=(GrantRule(owners=("*",), handlers=("*",)),))
# On AWS, without configured grants, everyone may use the built-in demo handlers and nothing else.
DEMO_ONLY = Grants(rules=(GrantRule(owners=("*",), handlers=("demo.*",)),))
