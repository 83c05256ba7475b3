"""Reading IAM policies of the synthesized template by role, and cfn-lint's verdict on it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def statements_of(synthesized: Any, role: Any) -> list[dict[str, Any]]:
    """Every statement of the IAM policies attached to `role` (a construct)."""
    role_id = synthesized.logical_id(role)
    statements: list[dict[str, Any]] = []
    for policy in synthesized.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def actions_of(synthesized: Any, role: Any) -> set[str]:
    found: set[str] = set()
    for statement in statements_of(synthesized, role):
        actions = statement["Action"]
        found.update([actions] if isinstance(actions, str) else actions)
    return found


def actions_on(synthesized: Any, role: Any, resource_logical_id: str) -> set[str]:
    """Actions `role` may take on the resource with that logical id (or on ARNs built from it)."""
    found: set[str] = set()
    for statement in statements_of(synthesized, role):
        if resource_logical_id in json.dumps(statement["Resource"]):
            actions = statement["Action"]
            found.update([actions] if isinstance(actions, str) else actions)
    return found


def cfn_lint_errors(synthesized: Any, tmp_path: Path) -> tuple[list[str], str]:
    """cfn-lint's errors on the synthesized template (its exit code's error bit counts as one), and its whole
    output."""
    template = tmp_path / "DuetimeStack.template.json"
    template.write_text(json.dumps(synthesized.raw))
    result = subprocess.run(
        [sys.executable, "-m", "cfnlint", "--format", "parseable", str(template)],
        capture_output=True,
        text=True,
        check=False,
    )
    errors = [line for line in result.stdout.splitlines() if ":E" in line or line.split(":")[-2:-1] == ["error"]]
    if result.returncode & 2:
        errors.append(f"cfn-lint exited {result.returncode}")
    return errors, result.stdout + result.stderr
