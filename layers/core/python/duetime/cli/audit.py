"""`duetime audit`: check the invariants of a running system and print what was found (exit 1 if any)."""

from __future__ import annotations

import argparse
from typing import Any

from duetime.config import RuntimeConfig, build_ports
from duetime.local.backends import attach_ports
from duetime.local.state import load_state
from duetime.service.audit import audit

EXIT_FINDINGS = 1


def cmd_audit(args: argparse.Namespace) -> int:
    if args.data_dir:
        ports = attach_ports(args.data_dir, load_state(args.data_dir))
    else:
        ports = build_ports(RuntimeConfig.from_env())
    report = audit(ports)
    print("\n".join(report.lines()), flush=True)
    return 0 if report.ok else EXIT_FINDINGS


def add_audit_command(sub: Any) -> None:
    """Register `audit` on the `duetime` command's subparsers."""
    command = sub.add_parser("audit", help="check a running system's invariants; exit 1 if one is broken")
    command.add_argument(
        "--data-dir", default=".duetime", help="a running `duetime local`'s data dir ('' for the environment)"
    )
    command.set_defaults(fn=cmd_audit)
