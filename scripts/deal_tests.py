"""Deal a test folder's files into parts of about equal time, for `make test`'s side-by-side pytest processes.

    python scripts/deal_tests.py --parts 4 --part 2 tests/integration   # part 2's files, one line
    python scripts/deal_tests.py --weigh cpu.log tests/integration  # weights.txt from tests/cpu_weights.py

Each file weighs the CPU seconds it took, as the folder's `weights.txt` records them (tests/cpu_weights.py
measures them; a file not listed weighs 1 s): the parts share the machine's cores, so a part lasts about as long
as its CPU. Weighed by wall time alone, the part holding the smoke test (minutes of waiting, little CPU) ended
110 s before the one holding the CPU-heavy files (2026-12-03). The heaviest file goes first to the lightest part,
and so on (longest processing time first), so no part is left running alone long after the others: dealt
round-robin by name, the part holding the smoke test and the paced limits test ended two minutes after the rest.
A stale weight only unbalances the parts; every file is dealt to exactly one part.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

DEFAULT_WEIGHT = 1.0
HEADER = """\
# CPU seconds each test file of this folder takes (its pytest process and the children it waits for, on a 2-core
# machine), read by scripts/deal_tests.py to deal the files into make test's parts of about equal CPU: the parts
# share the machine's cores, so each lasts about as long as its CPU. A file not listed weighs 1 s; a stale figure
# only unbalances the parts, it never leaves a file out. Measure again (tests/cpu_weights.py):
#   python -m pytest -q -p tests.cpu_weights -m "not bench" <folder> > cpu.log
#   python scripts/deal_tests.py --weigh cpu.log <folder>
"""


def weights(folder: Path) -> dict[str, float]:
    found: dict[str, float] = {}
    path = folder / "weights.txt"
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                seconds, name = line.split()
                found[name] = float(seconds)
    return found


def deal(files: list[str], weight: dict[str, float], parts: int) -> list[list[str]]:
    dealt: list[list[str]] = [[] for _ in range(parts)]
    load = [0.0] * parts
    for name in sorted(files, key=lambda f: (-weight.get(f, DEFAULT_WEIGHT), f)):
        lightest = load.index(min(load))
        dealt[lightest].append(name)
        load[lightest] += weight.get(name, DEFAULT_WEIGHT)
    return [sorted(part) for part in dealt]


def weigh(log: Path, folder: Path) -> str:
    seconds: dict[str, float] = {}
    line = re.compile(r"([\d.]+)s (?:call|setup|teardown|cpu)\s+(\S+?\.py)::")
    for text in log.read_text().splitlines():
        if (match := line.match(text)) and Path(match.group(2)).parent == folder:
            name = Path(match.group(2)).name
            seconds[name] = seconds.get(name, 0.0) + float(match.group(1))
    rows = [f"{value:.0f} {name}" for name, value in sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0]))]
    return HEADER + "".join(f"{row}\n" for row in rows if float(row.split()[0]) >= DEFAULT_WEIGHT)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--part", type=int, help="print this part's files (0 to parts - 1)")
    parser.add_argument("--weigh", type=Path, metavar="LOG", help="write the folder's weights.txt from this log")
    args = parser.parse_args(argv)
    if args.weigh is not None:
        (args.folder / "weights.txt").write_text(weigh(args.weigh, args.folder))
        return 0
    if args.part is None or not 0 <= args.part < args.parts:
        parser.error(f"--part is required, from 0 to {args.parts - 1}")
    files = sorted(p.name for p in args.folder.glob("test_*.py"))
    print(" ".join(str(args.folder / name) for name in deal(files, weights(args.folder), args.parts)[args.part]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
