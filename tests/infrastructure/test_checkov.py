"""checkov over the synthesized template, with and without a data key: no failed check outside infra.checkov_skips."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from infra.checkov_skips import SKIPPED, WITHOUT_DATA_KEY, skipped
from tests.infrastructure.conftest import ROOT

CHECKOV = ROOT / ".checkov" / "bin" / "checkov"


def run_checkov(template: dict[str, Any], workdir: Path) -> dict[str, Any]:
    assert CHECKOV.exists(), f"{CHECKOV} is missing: run scripts/bootstrap.sh (make dev)"
    path = workdir / "DuetimeStack.template.json"
    path.write_text(json.dumps(template))
    # Offline: no guideline download (BC_SKIP_MAPPING) and no policy download (--skip-download).
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "LOG_LEVEL": "ERROR"}
    result = subprocess.run(
        [
            str(CHECKOV),
            "-f",
            str(path),
            "--framework",
            "cloudformation",
            "--skip-download",
            "--compact",
            "--quiet",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=workdir,
        env=env,
        timeout=600,
    )
    assert result.stdout.strip(), result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["summary"]["parsing_errors"] == 0 and report["summary"]["resource_count"] > 100
    return report


def verdict(report: dict[str, Any], allowed: dict[str, str]) -> tuple[int, list[str], Counter[str]]:
    """(passed, failures not allowed, allowed failures by check id)."""
    failed = report["results"]["failed_checks"]
    unexpected = [f"{c['check_id']} {c['resource']}: {c['check_name']}" for c in failed if c["check_id"] not in allowed]
    return report["summary"]["passed"], unexpected, Counter(c["check_id"] for c in failed if c["check_id"] in allowed)


@pytest.mark.parametrize("variant", ["without data key", "with data key"])
def test_checkov_finds_nothing_that_is_not_skipped_with_a_reason(variant, synthesized, hardened, tmp_path, capsys):
    with_key = variant == "with data key"
    report = run_checkov((hardened if with_key else synthesized).raw, tmp_path)
    passed, unexpected, skips = verdict(report, skipped(with_key))
    with capsys.disabled():
        print(
            f"\ncheckov {report['summary']['checkov_version']} {variant}: {passed} passed, {len(unexpected)} failed, "
            f"{sum(skips.values())} skipped ({dict(sorted(skips.items()))})"
        )
    assert not unexpected, "\n".join(unexpected)
    # A skip that no longer matches anything is stale: drop it rather than keep excusing nothing.
    assert set(skips) == set(skipped(with_key)), set(skipped(with_key)) - set(skips)


def test_a_data_key_makes_the_encryption_checks_pass_instead_of_skipped():
    assert not set(SKIPPED) & set(WITHOUT_DATA_KEY)
    assert all(len(reason) > 40 for reason in {**SKIPPED, **WITHOUT_DATA_KEY}.values())
