"""What a deployment makes of a team's handler folder, shared by the CDK synth (infra/handlers.py) and the
local Lambda emulation (duetime.local.handler_layer): what is never shipped from the folder, and the API's
handler environment with the size Lambda allows it."""

from __future__ import annotations

import shutil
from typing import Any

from duetime.config import RuntimeConfig

# Never shipped from a handler folder: caches, virtual environments, VCS and test folders.
SKIPPED_PATTERNS = (
    "__pycache__",
    "*.pyc",
    ".git",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "cdk.out",
    "tests",
)
SKIPPED = shutil.ignore_patterns(*SKIPPED_PATTERNS)
# Lambda allows 4 KB of environment in all; the rest of the API's (queue URLs, settings) takes about 1 KB.
MAX_HANDLER_ENV_BYTES = 3000


def api_handler_environment(manifest: dict[str, list[str]], grants: list[dict[str, Any]] | None) -> dict[str, str]:
    """DUETIME_HANDLER_MANIFEST (and DUETIME_HANDLER_GRANTS when given) for the API function; raises
    ValueError (at synth rather than at deploy) when they would not fit Lambda's 4 KB environment."""
    env = RuntimeConfig(handler_manifest=manifest, handler_grants=grants).to_env()
    size = sum(len(k) + len(v.encode()) for k, v in env.items())
    if size > MAX_HANDLER_ENV_BYTES:
        raise ValueError(
            f"the handler manifest and grants take {size} bytes of the API function's environment, more than "
            f"{MAX_HANDLER_ENV_BYTES} (Lambda allows 4 KB for all variables): use fewer, broader grant rules"
        )
    return env
