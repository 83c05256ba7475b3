"""`duetime limits list|get|put|delete`: an owner's named rate limits and concurrency caps over the API."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from duetime.cli.api_command import api_client, connection_flags, reporting_errors, show, table


def limit_rows(limits: Sequence[dict[str, Any]]) -> str:
    rows = [
        (
            limit["name"],
            limit["perSecond"],
            limit["burst"],
            "-" if limit.get("maxConcurrent") is None else limit["maxConcurrent"],
            limit["updatedAt"],
        )
        for limit in limits
    ]
    return table(rows, ("NAME", "PER_SECOND", "BURST", "MAX_CONCURRENT", "UPDATED"))


def cmd_limits_list(args: argparse.Namespace) -> None:
    show(args, {"limits": api_client(args).list_limits()}, lambda v: limit_rows(v["limits"]))


def cmd_limits_get(args: argparse.Namespace) -> None:
    show(args, api_client(args).get_limit(args.name), lambda limit: limit_rows([limit]))


def cmd_limits_put(args: argparse.Namespace) -> None:
    body: dict[str, Any] = {"perSecond": args.per_second, "burst": args.burst}
    if args.max_concurrent is not None:
        body["maxConcurrent"] = args.max_concurrent
    show(args, api_client(args).put_limit(args.name, body), lambda limit: limit_rows([limit]))


def cmd_limits_delete(args: argparse.Namespace) -> None:
    api_client(args).delete_limit(args.name)
    show(args, {"name": args.name, "deleted": True}, lambda v: f"limit {v['name']} deleted")


def add_limit_commands(sub: Any) -> None:
    """Register `limits ...` on the `duetime` command's subparsers (with the client's error handling)."""
    limits = sub.add_parser("limits", help="named rate limits and concurrency caps that jobs name (rateLimit)")
    actions = limits.add_subparsers(dest="action", required=True)
    listed = actions.add_parser("list", help="your limits")
    connection_flags(listed)
    listed.set_defaults(fn=reporting_errors(cmd_limits_list))
    for name, fn, text in (
        ("get", cmd_limits_get, "show a limit"),
        ("put", cmd_limits_put, "create or replace a limit"),
        ("delete", cmd_limits_delete, "delete a limit no job names"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("name", metavar="NAME")
        if name == "put":
            action.add_argument("--per-second", dest="per_second", type=float, required=True, help="starts a second")
            action.add_argument("--burst", type=int, default=0, help="starts more at once after a quiet spell")
            action.add_argument(
                "--max-concurrent", dest="max_concurrent", type=int, help="at most N runs under the limit at once"
            )
        connection_flags(action)
        action.set_defaults(fn=reporting_errors(fn))
