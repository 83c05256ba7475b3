"""Reading IAM policies of the synthesized template by role, and cfn-lint's and checkov's verdicts on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


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


CHECKOV = ROOT / ".checkov" / "bin" / "checkov"
# The templates checkov reads, each a deployment variant: one checkov process reads them all (its start-up, ten
# seconds of CPU, is most of a run; three runs cost three times one).
VARIANTS = ("without data key", "with data key", "with console")


@dataclass
class CheckovReport:
    version: str
    passed: int  # over every variant
    failed: dict[str, list[dict[str, Any]]]  # by variant


def run_checkov(templates: dict[str, dict[str, Any]], workdir: Path) -> CheckovReport:
    """checkov over each of `templates` (by variant), in one process."""
    assert CHECKOV.exists(), f"{CHECKOV} is missing: run scripts/bootstrap.sh (make dev)"
    files = {}
    for n, (variant, template) in enumerate(templates.items()):
        path = workdir / f"variant{n}.template.json"
        path.write_text(json.dumps(template))
        files[path.name] = variant
    # Offline: no guideline download (BC_SKIP_MAPPING) and no policy download (--skip-download).
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "LOG_LEVEL": "ERROR"}
    named = [arg for name in files for arg in ("-f", str(workdir / name))]
    flags = ["--framework", "cloudformation", "--skip-download", "--compact", "--quiet", "-o", "json"]
    result = subprocess.run(
        [str(CHECKOV), *named, *flags],
        capture_output=True,
        text=True,
        check=False,
        cwd=workdir,
        env=env,
        timeout=600,
    )
    assert result.stdout.strip(), result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["summary"]["parsing_errors"] == 0 and report["summary"]["resource_count"] > 100 * len(files)
    failed: dict[str, list[dict[str, Any]]] = {variant: [] for variant in templates}
    for check in report["results"]["failed_checks"]:
        failed[files[Path(check["file_path"]).name]].append(check)
    return CheckovReport(report["summary"]["checkov_version"], report["summary"]["passed"], failed)


def verdict(failed: list[dict[str, Any]], allowed: dict[str, str]) -> tuple[list[str], Counter[str]]:
    """(failures not allowed, allowed failures by check id)."""
    unexpected = [f"{c['check_id']} {c['resource']}: {c['check_name']}" for c in failed if c["check_id"] not in allowed]
    return unexpected, Counter(c["check_id"] for c in failed if c["check_id"] in allowed)
