"""make test's parts of the integration tier (scripts/deal_tests.py): every file in exactly one part, the parts
of about equal time."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _deal_tests():
    spec = importlib.util.spec_from_file_location("deal_tests", ROOT / "scripts" / "deal_tests.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["deal_tests"] = module
    spec.loader.exec_module(module)
    return module


def test_every_file_is_in_exactly_one_part_and_the_heaviest_go_to_the_lightest_part():
    deal_tests = _deal_tests()
    weights = {"a.py": 10.0, "b.py": 6.0, "c.py": 5.0, "d.py": 4.0}
    parts = deal_tests.deal(["a.py", "b.py", "c.py", "d.py", "e.py", "f.py"], weights, 2)
    assert sorted(name for part in parts for name in part) == ["a.py", "b.py", "c.py", "d.py", "e.py", "f.py"]
    # a (10) to one part, b and c (11) to the other, d to the first (14), the unlisted (1 s each) to the second
    assert parts == [["a.py", "d.py"], ["b.py", "c.py", "e.py", "f.py"]]


def test_the_integration_tier_is_dealt_whole_into_parts_within_a_file_of_each_other():
    deal_tests = _deal_tests()
    folder = ROOT / "tests" / "integration"
    files = sorted(p.name for p in folder.glob("test_*.py"))
    weights = deal_tests.weights(folder)
    parts = deal_tests.deal(files, weights, 4)
    assert sorted(name for part in parts for name in part) == files
    loads = [sum(weights.get(name, deal_tests.DEFAULT_WEIGHT) for name in part) for part in parts]
    assert max(loads) - min(loads) <= max(weights.values(), default=1.0)


def test_weights_are_read_back_from_a_durations_log(tmp_path):
    deal_tests = _deal_tests()
    folder = tmp_path / "tests" / "integration"
    folder.mkdir(parents=True)
    log = tmp_path / "d.log"
    log.write_text(
        f"12.50s call     {folder}/test_a.py::test_one[moto]\n"
        f"2.50s setup    {folder}/test_a.py::test_one[moto]\n"
        f"3.00s call     {folder}/test_b.py::test_two\n"
        f"0.40s call     {folder}/test_c.py::test_three\n"
        f"9.00s call     {tmp_path}/elsewhere/test_d.py::test_four\n"
    )
    (folder / "weights.txt").write_text(deal_tests.weigh(log, folder))
    assert deal_tests.weights(folder) == {"test_a.py": 15.0, "test_b.py": 3.0}


def test_weights_are_read_back_from_the_cpu_plugins_lines(tmp_path, monkeypatch):
    """tests/cpu_weights.py prints the CPU each test took in the form --weigh reads (a test that waits weighs
    little: only what it computes counts)."""
    from tests import cpu_weights

    deal_tests = _deal_tests()
    folder = tmp_path / "tests" / "integration"
    folder.mkdir(parents=True)
    monkeypatch.setattr(cpu_weights, "_taken", {})
    clock = iter([10.0, 14.0, 14.0, 14.5, 20.0, 21.0])
    monkeypatch.setattr(cpu_weights, "_cpu_seconds", lambda: next(clock))
    for nodeid in (f"{folder}/test_a.py::test_one[moto]", f"{folder}/test_a.py::test_two", f"{folder}/test_b.py::t"):
        cpu_weights.pytest_runtest_logstart(nodeid, None)
        cpu_weights.pytest_runtest_logfinish(nodeid, None)

    class Reporter:
        lines: list[str] = []

        def write_line(self, line: str) -> None:
            self.lines.append(line)

    reporter = Reporter()
    cpu_weights.pytest_terminal_summary(reporter)
    log = tmp_path / "cpu.log"
    log.write_text("\n".join(reporter.lines) + "\n")
    (folder / "weights.txt").write_text(deal_tests.weigh(log, folder))
    assert deal_tests.weights(folder) == {"test_a.py": 4.0, "test_b.py": 1.0}
