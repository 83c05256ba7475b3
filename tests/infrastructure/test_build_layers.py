"""The layers' staging under build/ is shared by every process of `make test` (the tiers run in parallel, and
`duetime local` in Lambda mode synthesizes too): two processes staging one folder at once must both get it
whole, and a folder already staged from the same sources is kept, not staged again under a reader's feet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from infra.build_layers import ROOT, built_once

STAGE = """
import sys
sys.path[:0] = [{root!r}, {core!r}]
from infra.build_layers import stage_core_layer
from pathlib import Path
target = stage_core_layer(Path(sys.argv[1]))
assert (target / "python" / "duetime" / "__init__.py").is_file()
assert not (target / "python" / "duetime" / "cli").exists()
"""


def test_four_processes_staging_the_core_layer_at_once_each_get_it_whole(tmp_path):
    target = tmp_path / "layers" / "core"
    script = STAGE.format(root=str(ROOT), core=str(ROOT / "layers" / "core" / "python"))
    stagers = [
        subprocess.Popen([sys.executable, "-c", script, str(target)], stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    errors = [(stager.wait(timeout=300), stager.stderr.read() if stager.stderr else "") for stager in stagers]
    assert [code for code, _ in errors] == [0, 0, 0, 0], [err[-1500:] for _, err in errors]
    assert sorted(p.name for p in target.parent.iterdir()) == ["core", "core.key", "core.lock"]


def test_a_folder_is_built_again_only_when_what_it_is_built_from_changes(tmp_path):
    target = tmp_path / "staged"
    builds: list[str] = []

    def build(key: str):
        def into(staging: Path) -> None:
            builds.append(key)
            (staging / "content").write_text(key)

        return into

    built_once(target, "a", build("a"))
    built_once(target, "a", build("a"))
    assert builds == ["a"] and (target / "content").read_text() == "a"
    built_once(target, "b", build("b"))
    assert builds == ["a", "b"] and (target / "content").read_text() == "b"
    assert target.stat().st_mode & 0o777 == 0o755  # an asset's folders are zipped with their modes


def test_a_build_that_fails_leaves_no_half_built_folder_and_is_tried_again(tmp_path):
    target = tmp_path / "staged"

    def broken(staging: Path) -> None:
        (staging / "half").write_text("x")
        raise RuntimeError("pip failed")

    with pytest.raises(RuntimeError, match="pip failed"):
        built_once(target, "a", broken)
    assert not target.exists() and [p.name for p in tmp_path.iterdir()] == ["staged.lock"]
    built_once(target, "a", lambda staging: (staging / "content").write_text("a"))
    assert (target / "content").read_text() == "a"
