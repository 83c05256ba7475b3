"""Unit tests cost what they test: collecting them imports neither moto nor werkzeug (the local system's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

UNIT = Path(__file__).resolve().parent
ROOT = UNIT.parents[1]

# Collect the unit tier in a fresh interpreter (this one may already hold moto from another tier) and report
# which heavy modules that imported: the root conftest, every unit module and what they import.
PROBE = """
import sys, pytest
code = pytest.main(["-q", "--collect-only", "-p", "no:cacheprovider", sys.argv[1]])
heavy = sorted(name for name in ("moto", "werkzeug", "duetime.local.system") if name in sys.modules)
print("HEAVY=" + ",".join(heavy))
sys.exit(int(code))
"""


def test_collecting_the_unit_tier_imports_neither_moto_nor_werkzeug():
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(UNIT)], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [line] = [line for line in result.stdout.splitlines() if line.startswith("HEAVY=")]
    assert line == "HEAVY=", f"the unit tier imports {line[6:]}"
