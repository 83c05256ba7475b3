"""`python -m tests.simulation`: run seeds of the simulation, or replay one (`make simulate`, docs/simulation.md).

    python -m tests.simulation --seeds 500 [--first 0] [--backend sqlite|moto|both] [--steps 150] [options]
    python -m tests.simulation --seed 1234 [--backend sqlite] [--steps 150] [--trace] [options]

options: --spread (spread jobs), --edits (schedule edits), --run-now (manual runs), --backfill (backfills),
--bounded, --limits, --stale (eventually consistent reads of jobs a moment old).

Prints each failing seed with its trace and how to replay it, then the seeds run per minute; exits 1 if any
seed failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# This checkout's duetime before any installed one, as tests/conftest.py does for pytest.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "layers" / "core" / "python"))

from .world import SimulationFailure, run_seed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds to run (from --first)")
    parser.add_argument("--first", type=int, default=0, help="the first seed of the run")
    parser.add_argument("--seed", type=int, help="replay this seed alone")
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "moto", "both"])
    parser.add_argument("--steps", type=int, default=150, help="steps a seed (then the heal and the audit)")
    parser.add_argument("--trace", action="store_true", help="print the trace of a seed that passes too")
    parser.add_argument("--spread", action="store_true", help="spread a third of the jobs (jitterSeconds up to 58)")
    parser.add_argument("--edits", action="store_true", help="edit repeating jobs' schedules too")
    parser.add_argument("--run-now", action="store_true", help="run jobs now too (manual runs)")
    parser.add_argument("--backfill", action="store_true", help="backfill repeating jobs' past slots too")
    parser.add_argument("--bounded", action="store_true", help="bound two in five repeating jobs (maxRuns or endAt)")
    parser.add_argument(
        "--limits", action="store_true", help="a named limit and capped jobs (rateLimit, maxConcurrent)"
    )
    parser.add_argument(
        "--stale", action="store_true", help="eventually consistent reads of jobs answer a moment-old state"
    )
    args = parser.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else list(range(args.first, args.first + args.seeds))
    backends = ["sqlite", "moto"] if args.backend == "both" else [args.backend]
    failed = 0
    for backend in backends:
        started = time.monotonic()
        for seed in seeds:
            try:
                world = run_seed(
                    seed,
                    backend,
                    args.steps,
                    spread=args.spread,
                    edits=args.edits,
                    run_now=args.run_now,
                    backfill=args.backfill,
                    bounded=args.bounded,
                    limits=args.limits,
                    stale=args.stale,
                )
            except SimulationFailure as failure:
                failed += 1
                print(failure, file=sys.stderr)
                continue
            if args.trace:
                print("\n".join(world.trace))
        elapsed = time.monotonic() - started
        rate = len(seeds) / elapsed * 60 if elapsed else 0.0
        print(f"{backend}: {len(seeds)} seeds x {args.steps} steps in {elapsed:.1f} s ({rate:.0f} seeds/min)")
    if failed:
        print(f"{failed} seed(s) failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
