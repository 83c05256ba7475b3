"""What every `duetime` command that calls the API shares: the connection flags, the client they make, the
errors printed as an exit status, and the output as a table or, with --json, the API's own JSON.
(duetime.cli.client and duetime.cli.limits both build on it.)"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from duetime.client import ApiError, ConfigError, DuetimeClient

EXIT_API_ERROR = 1
EXIT_CONFIG_ERROR = 2


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """Left-aligned columns separated by two spaces; None prints as '-'."""
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def api_client(args: argparse.Namespace) -> DuetimeClient:
    return DuetimeClient.connect(args.api_url, args.token, args.data_dir, args.owner)


def show(args: argparse.Namespace, value: Any, text: Callable[[Any], str]) -> None:
    print(json.dumps(value, indent=2) if args.json else text(value))


def reporting_errors(command: Callable[[argparse.Namespace], int | None]) -> Callable[[argparse.Namespace], int]:
    """The command with API and configuration errors printed to stderr as an exit status (or the status the
    command returns: `jobs bulk` when a job failed)."""

    def run(args: argparse.Namespace) -> int:
        try:
            status = command(args)
        except ApiError as exc:
            if args.json:
                error = {"status": exc.status, "code": exc.code, "message": exc.message, "field": exc.field}
                print(json.dumps({"error": error}), file=sys.stderr)
            else:
                print(f"duetime: {exc}", file=sys.stderr)
            return EXIT_API_ERROR
        except ConfigError as exc:
            print(f"duetime: {exc}", file=sys.stderr)
            return EXIT_CONFIG_ERROR
        return status or 0

    return run


def connection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-url", help="the API's base URL (else $DUETIME_API_URL, else the data dir)")
    parser.add_argument("--token", help="a bearer token (else $DUETIME_TOKEN, else one minted from the data dir)")
    parser.add_argument("--data-dir", default=".duetime", help="a running `duetime local`'s data dir")
    parser.add_argument("--owner", help="with a data dir and no token: act as this owner")
    parser.add_argument("--json", action="store_true", help="print the API's JSON instead of a table")
