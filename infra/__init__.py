"""duetime's CDK stack, importable from a team's own CDK app: `from infra import DuetimeStack`.

With a checkout of duetime on sys.path (a git submodule, say), the core it deploys is made importable too.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

_CORE = Path(__file__).resolve().parents[1] / "layers" / "core" / "python"
if importlib.util.find_spec("duetime") is None:  # not pip-installed: the checkout's own core
    sys.path.insert(0, str(_CORE))

__all__ = ["DuetimeStack"]


def __getattr__(name: str) -> Any:
    """`DuetimeStack` on first use: importing aws_cdk costs seconds that build_layers and context do not need."""
    if name == "DuetimeStack":
        from infra.stack import DuetimeStack

        return DuetimeStack
    raise AttributeError(name)
