"""One synthesis of DuetimeStack per session (with cdk-nag, context from cdk.json), shared by every test."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.infrastructure.helpers import CheckovReport

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

ALARM_EMAIL = "oncall@example.com"


# A synthesis (jsii's node process, cdk-nag, the layers' build) takes two to three minutes of CPU; the first test
# that asks for one waits for it in its setup, under pytest-timeout's limit. On a loaded 2-core machine that took
# over 300 s, and a timeout interrupting jsii mid-call broke the kernel for every later test: each test here may
# take up to SYNTH_TIMEOUT_SECONDS (make's PYTEST_LIMIT still bounds the whole process).
SYNTH_TIMEOUT_SECONDS = 1200


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SYNTH_TIMEOUT_SECONDS))


@dataclass
class Synthesized:
    stack: Any
    template: Any  # aws_cdk.assertions.Template
    raw: dict[str, Any]
    outdir: Path

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.raw["Resources"].items() if v["Type"] == resource_type}

    def logical_id(self, construct: Any) -> str:
        return str(self.stack.get_logical_id(construct.node.default_child))


# The hardened deployment: a customer-managed data key, `ecs:` handler families with their task roles, a
# worker principal from outside the stack, and a pre-load cycle fanned out over shard groups.
HARDENED_CONTEXT = {
    "preloadShardGroups": "4",
    "kmsKey": "create",
    "handlerTaskDefinitions": "report,export",
    "handlerTaskRoles": "report-task,arn:aws:iam::123456789012:role/export-task",
    "handlerExecutionRoles": "report-execution",
    "workerRoleArns": "arn:aws:iam::123456789012:role/onprem-worker",
}


def synthesize(tmp_path_factory: pytest.TempPathFactory, extra_context: dict[str, Any]) -> Synthesized:
    from infra.build_layers import build_deps_layer

    build_deps_layer()  # the same build `make synth` runs; kept when already built for these requirements
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from app import build_app

    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = cdk.App(outdir=str(outdir), context={**context, "alarmEmail": ALARM_EMAIL, **extra_context})
    _, stack = build_app(app)
    assembly = app.synth()  # runs the cdk-nag plugin: an unacknowledged finding fails here
    raw = assembly.get_stack_artifact(stack.artifact_id).template
    return Synthesized(stack=stack, template=Template.from_json(raw), raw=raw, outdir=outdir)


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory, {})


@pytest.fixture(scope="session")
def hardened(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory, HARDENED_CONTEXT)


@pytest.fixture(scope="session")
def with_console(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The deployment with the web console (context console=true)."""
    return synthesize(tmp_path_factory, {"console": "true"})


# An existing key's ARN (CDK context kmsKey), imported instead of creating one.
IMPORTED_KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
# Five options' contexts in one synth (a synth is ~9 s of CPU): each test of one of them reads only what its own
# option changes. The job classes spread over queues, no event bus with the accounts owners' topics may be in,
# named metric owners, an imported KMS key and provisioned billing.
VARIANTS_CONTEXT = {
    "classQueues": "default:3,long:2",
    "eventBus": "none",
    "ownerTopicAccounts": "111122223333",
    "metricOwners": "payments,reports",
    "kmsKey": IMPORTED_KEY,
    "billing": "provisioned",
    "provisionedTargetUtilization": "80",
    "provisionedMaxUnits": "900",
}


@pytest.fixture(scope="session")
def variants(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The deployment with every option of VARIANTS_CONTEXT set."""
    return synthesize(tmp_path_factory, VARIANTS_CONTEXT)


@pytest.fixture(scope="session")
def checkov(
    synthesized: Synthesized, hardened: Synthesized, with_console: Synthesized, tmp_path_factory: pytest.TempPathFactory
) -> CheckovReport:
    """checkov once over every variant's template."""
    from tests.infrastructure.helpers import VARIANTS, run_checkov

    templates = dict(zip(VARIANTS, (synthesized.raw, hardened.raw, with_console.raw), strict=True))
    return run_checkov(templates, tmp_path_factory.mktemp("checkov"))
