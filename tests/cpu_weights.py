"""A pytest plugin for scripts/deal_tests.py: the CPU each test took (user and system time of the pytest process
and of the children it waited for), printed after the run as `<seconds>s cpu <test id>` lines, which
`deal_tests.py --weigh` reads. make test's parts run side by side on a machine whose cores they share, so a part
lasts about as long as its CPU: a file that mostly waits (the smoke test's paths) weighs little.

    python -m pytest -q -p tests.cpu_weights -m "not bench" tests/integration > cpu.log
    python scripts/deal_tests.py --weigh cpu.log tests/integration
"""

from __future__ import annotations

import resource
from typing import Any

_taken: dict[str, float] = {}
_started: list[float] = []


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _started[:] = [_cpu_seconds()]


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    if _started:
        _taken[nodeid] = _taken.get(nodeid, 0.0) + _cpu_seconds() - _started[0]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for nodeid, seconds in sorted(_taken.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds:.2f}s cpu {nodeid}")
