"""The CDK app: DuetimeStack with cdk-nag's AwsSolutions checks (`make synth`, `cdk deploy`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "layers" / "core" / "python"))  # duetime.definitions, when not pip-installed

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from infra.stack import DuetimeStack  # noqa: E402


def build_app(app: cdk.App | None = None) -> tuple[cdk.App, DuetimeStack]:
    """The app and its one stack, with cdk-nag's AwsSolutions checks as an aspect."""
    app = app or cdk.App()
    account, region = os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")
    env = cdk.Environment(account=account, region=region) if account and region else None
    stack = DuetimeStack(app, "DuetimeStack", env=env, description="duetime: a distributed job scheduler")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app, stack


if __name__ == "__main__":
    build_app()[0].synth()
