"""`python -m bench.job_ids` runs through the SQLite adapter on a real file and reports both id shapes
(tiny sizes here; the figures come from its default sizes, docs/performance.md)."""

from __future__ import annotations

from bench import job_ids


def test_the_job_id_benchmark_measures_both_shapes_by_turns_and_compares_them():
    printed: list[str] = []
    found = job_ids.run(stored=300, count=40, rounds=1, log=printed.append)
    assert [r["shape"] for r in found["runs"]] == ["random", "time-ordered"]
    for result in found["runs"]:
        assert result["stored"] == 300 and result["count"] == 40
        assert result["createCpuUs"] > 0 and result["readCpuUs"] > 0
    assert set(found["randomOverOrdered"]) == {"createCpuUs", "createWallUs", "readCpuUs", "readWallUs"}
    assert any("random / time-ordered" in line for line in printed)
