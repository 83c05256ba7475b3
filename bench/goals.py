"""Issue 32's goals measured side by side in one run: duetime on SQLite against Celery + Redis, on one
machine, a fresh system per run, the host probe recorded after every run (`make bench-goals`).

Each round runs every scenario on duetime, then on Celery, before the next scenario, so the two systems of
a pair are measured minutes apart at most; rounds repeat the whole sequence, since this machine's own speed
moves by a quarter from second to second (`sidebyside.host_probe_ms`). The scenarios are the side-by-side
harness's (`bench.sidebyside.Runner`):

1. one-off jobs at each rate over the single-job API (`Runner.one_off`): taken, saturated, lateness.
2. intake (`Runner.intake`): `intake` jobs due far beyond the dispatch horizon from `intake_clients`
   connections; duetime through POST /jobs/batch, MAX_BATCH_JOBS a request, Celery (which has no batch
   route) by `send_task` one task a call. Run before the burst and the sustained run, whose creation it
   sizes with the rate it measured.
3. a burst of `burst` jobs due at one instant (`Runner.burst`), created through the same route as (2).
4. sustained: `sustained_rate` jobs a second for `sustained_seconds`, created ahead through the same
   route as (2), due beyond the dispatch horizon (`Runner.ahead`).

The goals are judged by `bench.report.goal_targets`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from duetime.definitions import MAX_BATCH_JOBS

from bench import sidebyside
from bench.systems import local_backends

SYSTEMS = ("sqlite", "celery")
ROUTES = {"sqlite": f"POST /jobs/batch, {MAX_BATCH_JOBS} a request", "celery": "send_task one a call, no batch route"}


def side_plan() -> sidebyside.Plan:
    """Issue 32's sizes of the harness's own runs; setups may take longer than issue 13's (Celery sends
    60,000 tasks ahead of the sustained run one at a time)."""
    return sidebyside.Plan(rates=[20.0, 100.0, 500.0, 750.0], seconds=40.0, max_setup_seconds=240.0)


@dataclass
class Plan:
    """The sizes of one run of the goals (`python -m bench --only goals`); `smoke()`: a few seconds a system."""

    side: sidebyside.Plan = field(default_factory=side_plan)
    rounds: int = 2
    intake: int = 20_000
    intake_clients: int = 2
    sustained_rate: float = 1_000.0
    sustained_seconds: float = 60.0

    @classmethod
    def smoke(cls) -> Plan:
        return cls(side=sidebyside.Plan.smoke(), rounds=1, intake=1_000, sustained_rate=50.0, sustained_seconds=2.0)


def run(plan: Plan, wanted: list[str], log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every round of the goals' scenarios on each wanted system this machine has; a message for the others."""
    backends = local_backends()
    out: dict[str, Any] = {"plan": asdict(plan), "runs": [], "skipped": {}}
    runners: list[tuple[str, sidebyside.Runner]] = []
    for name in SYSTEMS:
        if name not in wanted:
            continue
        label = sidebyside.system_label(name)
        reason = sidebyside.unavailable(name, backends)
        if reason:
            log(f"... {label}: skipped, {reason}")
            out["skipped"][label] = reason
            continue
        batch = MAX_BATCH_JOBS if name == "sqlite" else 1
        make = sidebyside.factory(name, plan.side, backends)
        runners.append((name, sidebyside.Runner(label, make, plan.side, log, batch=batch)))
    measures: list[Callable[[sidebyside.Runner], dict[str, Any]]] = [
        *(lambda runner, rate=rate: runner.one_off(rate, plan.side.seconds) for rate in plan.side.rates),
        lambda runner: runner.intake(plan.intake, plan.intake_clients),
        lambda runner: runner.burst(plan.side.burst),
        lambda runner: runner.ahead(plan.sustained_rate, plan.sustained_seconds, scenario="sustained"),
    ]
    try:
        for round_number in range(1, plan.rounds + 1):
            log(f"... issue 32 goals, round {round_number} of {plan.rounds} ({time.strftime('%H:%M:%S')})")
            for measure in measures:
                for name, runner in runners:
                    result = {**measure(runner), "round": round_number}
                    if result["scenario"] != "one-off":
                        result["created"] = ROUTES[name]
                    out["runs"].append(result)
    finally:
        for _, runner in runners:
            runner.close()
    return out
