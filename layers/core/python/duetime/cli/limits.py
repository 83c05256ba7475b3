"""`duetime limits list|get|put|delete`: an owner's named rate limits and concurrency caps over the API."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from duetime.cli.client import _client, _connection_flags, _run, _show, table


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
    _show(args, {"limits": _client(args).list_limits()}, lambda v: limit_rows(v["limits"]))


def cmd_limits_get(args: argparse.Namespace) -> None:
    _show(args, _client(args).get_limit(args.name), lambda limit: limit_rows([limit]))


def cmd_limits_put(args: argparse.Namespace) -> None:
    body: dict[str, Any] = {"perSecond": args.per_second, "burst": args.burst}
    if args.max_concurrent is not None:
        body["maxConcurrent"] = args.max_concurrent
    _show(args, _client(args).put_limit(args.name, body), lambda limit: limit_rows([limit]))


def cmd_limits_delete(args: argparse.Namespace) -> None:
    _client(args).delete_limit(args.name)
    _show(args, {"name": args.name, "deleted": True}, lambda v: f"limit {v['name']} deleted")


def add_limit_commands(sub: Any) -> None:
    """Register `limits ...` on the `duetime` command's subparsers (with the client's error handling)."""
    limits = sub.add_parser("limits", help="named rate limits and concurrency caps that jobs name (rateLimit)")
    actions = limits.add_subparsers(dest="action", required=True)
    listed = actions.add_parser("list", help="your limits")
    _connection_flags(listed)
    listed.set_defaults(fn=_run(cmd_limits_list))
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
        _connection_flags(action)
        action.set_defaults(fn=_run(fn))
