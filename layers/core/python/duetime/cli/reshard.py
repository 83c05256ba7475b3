"""`duetime reshard`: show each coming hour's shard count, or run the one-time migration (--record-current)."""

from __future__ import annotations

import argparse
from typing import Any

from duetime.config import RuntimeConfig, build_ports
from duetime.local.backends import attach_ports
from duetime.local.state import load_state
from duetime.service.reshard import record_current, shard_plan


def cmd_reshard(args: argparse.Namespace) -> int:
    if args.data_dir:
        ports = attach_ports(args.data_dir, load_state(args.data_dir))
    else:
        ports = build_ports(RuntimeConfig.from_env())
    now = ports.clock()
    report = record_current(ports, now) if args.record_current else shard_plan(ports, now, args.hours)
    print("\n".join(report.lines()), flush=True)
    return 0


def add_reshard_command(sub: Any) -> None:
    """Register `reshard` on the `duetime` command's subparsers."""
    command = sub.add_parser(
        "reshard", help="show the shard count of each coming hour; --record-current: the one-time migration"
    )
    command.add_argument(
        "--record-current",
        action="store_true",
        help="fix every hour that holds rows at the configured count, and move open rows to their index key "
        "(once, before changing `shards` on a deployment from before per-hour counts)",
    )
    command.add_argument("--hours", type=int, default=24, help="how many coming hours to show")
    command.add_argument(
        "--data-dir", default=".duetime", help="a running `duetime local`'s data dir ('' for the environment)"
    )
    command.set_defaults(fn=cmd_reshard)
