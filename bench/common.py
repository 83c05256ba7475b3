"""What every benchmark shares: AWS call counting with botocore hooks, DynamoDB item sizes, percentiles,
a hand clock and a bench harness (an embedded moto server with duetime's tables and queues)."""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "core" / "python"))

from duetime.adapters.aws.client import make_client  # noqa: E402
from duetime.adapters.aws.provision import create_queues, create_tables  # noqa: E402
from duetime.adapters.aws.queue import DueQueues  # noqa: E402
from duetime.adapters.aws.store import DynamoStore  # noqa: E402
from duetime.definitions import LOCAL_SETTINGS, TABLES, Settings, TableDef  # noqa: E402
from duetime.local.moto_server import EmbeddedMoto, MotoProcess  # noqa: E402
from duetime.notify import ConsoleNotifier  # noqa: E402
from duetime.service.context import Ports  # noqa: E402

REGION = "us-east-1"
logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server logs every request otherwise
_prefixes = itertools.count(1)


def unique_prefix(name: str) -> str:
    """Moto servers in one process share their backends: every benchmark gets its own table and queue names."""
    return f"bench{next(_prefixes)}-{name}"


# --- counting AWS calls ----------------------------------------------------------------------------

WRITE_OPS = {"PutItem", "UpdateItem", "DeleteItem"}


@dataclass
class Write:
    """One item written to a table: the table's logical name, how, whether it took effect, and the
    secondary indexes it writes (by the index definitions and the attributes the request sets or removes)."""

    table: str
    op: str
    transactional: bool
    succeeded: bool
    indexes: tuple[str, ...] = ()


_NAME = re.compile(r"#?[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = {"SET", "REMOVE", "ADD", "DELETE", "if_not_exists", "list_append"}


def _updated_attributes(body: dict[str, Any]) -> set[str]:
    """Attribute names an UpdateExpression sets or removes (top-level names, aliases resolved)."""
    aliases = body.get("ExpressionAttributeNames", {})
    names = set()
    for clause in re.split(r"\b(?:SET|REMOVE|ADD|DELETE)\b", body.get("UpdateExpression", "")):
        for part in clause.split(","):
            target = part.split("=")[0].strip()
            match = _NAME.match(target)
            if match and match.group(0) not in _KEYWORDS:
                names.add(aliases.get(match.group(0), match.group(0)))
    return names


def indexes_written(table: TableDef | None, op: str, body: dict[str, Any]) -> tuple[str, ...]:
    """The indexes an item write touches: a put writes those whose keys the item has; a delete, all (the
    row was in them, as far as a request shows); an update, those whose keys it sets or removes, and
    those projecting every attribute."""
    if table is None:
        return ()
    written = []
    for index in table.indexes:
        keys = {index.partition_key, *([index.sort_key] if index.sort_key else [])}
        if op == "PutItem":
            hit = keys <= set(body.get("Item", {}))
        elif op == "DeleteItem":
            hit = True
        else:
            changed = _updated_attributes(body)
            hit = bool(changed & keys) or (index.projection == "ALL" and bool(changed))
        if hit:
            written.append(index.name)
    return tuple(written)


def written_items(operation: str, params: dict[str, Any]) -> list[tuple[dict[str, Any], str, bool]]:
    """Each item a DynamoDB write request writes (a transaction's condition checks write none): its body with
    the table's name, the op (PutItem, UpdateItem, DeleteItem) and whether it is inside a transaction."""
    if operation in WRITE_OPS:
        return [(params, operation, False)]
    if operation == "TransactWriteItems":
        return [
            (body, op + "Item", True)
            for item in params.get("TransactItems", [])
            for op, body in item.items()
            if op != "ConditionCheck"
        ]
    if operation == "BatchWriteItem":
        return [
            ({"TableName": table, **request["PutRequest"]}, "PutItem", False)
            if "PutRequest" in request
            else ({"TableName": table, **request.get("DeleteRequest", {})}, "DeleteItem", False)
            for table, requests in params.get("RequestItems", {}).items()
            for request in requests
        ]
    return []


def written_key(table: TableDef, op: str, body: dict[str, Any]) -> dict[str, Any]:
    """The key of the item a write names (a put's from its item), as typed attribute values."""
    if op == "PutItem":
        item = body.get("Item", {})
        return {name: item[name] for name in (table.partition_key, table.sort_key) if name and name in item}
    return dict(body.get("Key", {}))


# An item's entry in one index: its key there, and what the index projects of it beyond the keys (a keys-only
# index: nothing; ALL: every attribute, so any change of the item rewrites its entry).
IndexEntry = tuple[tuple[str, str], str]


def moto_index_entries(physical: str, table: TableDef, key: dict[str, Any]) -> dict[str, IndexEntry | None] | None:
    """The entries of `table`'s indexes the item at `key` has now (by index name; None: not in that index), read
    off this process's moto backend without an API call; None when moto runs in another process."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType

    try:
        stored = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].get_table(physical)
    except Exception:  # not a table of this process's moto (a MotoProcess, another account)
        return None
    hash_value = key.get(table.partition_key)
    if hash_value is None:
        return None
    range_value = key.get(table.sort_key) if table.sort_key else None
    item = stored.get_item(DynamoType(hash_value), DynamoType(range_value) if range_value is not None else None)
    attrs = item.to_json()["Attributes"] if item is not None else {}
    entries: dict[str, IndexEntry | None] = {}
    for index in table.indexes:
        partition, sort = attrs.get(index.partition_key), attrs.get(index.sort_key) if index.sort_key else None
        present = partition is not None and (index.sort_key is None or sort is not None)
        projected = json.dumps(attrs, sort_keys=True, default=str) if index.projection == "ALL" else ""
        entries[index.name] = ((str(partition), str(sort)), projected) if present else None
    return entries


def changed_indexes(before: dict[str, Any], after: dict[str, Any]) -> tuple[str, ...]:
    """An index name for each write unit an item's change took on an index: one for an entry added or removed,
    two for one whose key changed (removed and added), one for one rewritten in place (an index projecting
    every attribute, when any of them changed)."""
    names: list[str] = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if old is not None and new is not None and old[0] == new[0]:
            names.append(name)  # the same key: the entry is rewritten
        else:
            names += [name] * ((old is not None) + (new is not None))
    return tuple(names)


@dataclass
class CallCounter:
    """Counts every API call of the boto3 clients it is attached to, by service and operation, and the
    DynamoDB items each call wrote (botocore's before-parameter-build and after-call hooks: once per API
    call, whatever the client's own retries)."""

    calls: Counter[str] = field(default_factory=Counter)
    writes: list[Write] = field(default_factory=list)
    tables: dict[str, TableDef] = field(default_factory=dict)  # physical table name -> definition
    lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, client: Any, settings: Settings | None = None) -> CallCounter:
        if settings is not None:
            for table in TABLES:
                self.tables[settings.table_name(table)] = table
        client.meta.events.register("before-parameter-build.*.*", self._before)
        client.meta.events.register("after-call.*.*", self._after)
        return self

    def _before(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["bench_params"] = params
        # What each written item's index entries are before the write, read off moto when it runs in this
        # process (the write's own index units are then the entries it changed, not what its request names).
        context["bench_entries"] = [self._entries(body, op) for body, op, _ in written_items(model.name, params)]

    def _after(self, model: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        service = model.service_model.service_id.hyphenize()
        params = context.get("bench_params") or {}
        failed = "Error" in parsed
        befores = context.get("bench_entries") or []
        with self.lock:
            self.calls[f"{service}:{model.name}"] += 1
            for (body, op, transactional), before in zip(written_items(model.name, params), befores, strict=False):
                after = self._entries(body, op) if before is not None else None
                measured = changed_indexes(before, after) if before is not None and after is not None else None
                self._write(body, op, transactional, not failed, measured)

    def _entries(self, body: dict[str, Any], op: str) -> dict[str, IndexEntry | None] | None:
        table = self.tables.get(body.get("TableName", ""))
        if table is None or not table.indexes:
            return None
        return moto_index_entries(body["TableName"], table, written_key(table, op, body))

    def _write(
        self, body: dict[str, Any], op: str, transactional: bool, succeeded: bool, measured: tuple[str, ...] | None
    ) -> None:
        table = self.tables.get(body.get("TableName", ""))
        name = table.logical_name if table else body.get("TableName", "")
        if not succeeded:
            indexes: tuple[str, ...] = ()
        else:
            indexes = measured if measured is not None else indexes_written(table, op, body)
        self.writes.append(Write(name, op, transactional, succeeded, indexes))

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.writes.clear()

    def snapshot(self) -> tuple[Counter[str], list[Write]]:
        with self.lock:
            return Counter(self.calls), list(self.writes)


def item_size(item: dict[str, Any]) -> int:
    """A DynamoDB item's size in bytes by AWS's published rules (names + values; numbers ~1 byte per two
    significant digits + 1; lists and maps 3 bytes + 1 per element), from its typed (wire) form."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(typed: dict[str, Any]) -> int:
    [(kind, value)] = typed.items()
    if kind == "S":
        return len(str(value).encode())
    if kind == "N":
        digits = str(Decimal(str(value)).normalize()).lstrip("-").replace(".", "")
        return math.ceil(len(digits.lstrip("0") or "0") / 2) + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in value)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(v) for k, v in value.items())
    if kind == "B":
        return len(value)
    return sum(len(str(v).encode()) for v in value)  # SS, NS, BS


def write_units(size_bytes: int, transactional: bool) -> int:
    """Write request units of one item write: 1 per started KB, doubled inside a transaction."""
    return max(1, math.ceil(size_bytes / 1024)) * (2 if transactional else 1)


# --- statistics --------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def lateness_summary(lateness_ms: list[float]) -> dict[str, float]:
    return {
        "p50Ms": round(percentile(lateness_ms, 50), 1),
        "p95Ms": round(percentile(lateness_ms, 95), 1),
        "p99Ms": round(percentile(lateness_ms, 99), 1),
        "maxMs": round(max(lateness_ms), 1) if lateness_ms else float("nan"),
    }


# --- a harness with a hand clock ----------------------------------------------------------------------


@dataclass
class HandClock:
    """A clock the benchmark moves by hand, so call counts do not depend on timing."""

    now: datetime = field(default_factory=lambda: datetime.now(UTC).replace(microsecond=0))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


class Harness:
    """duetime's adapters over their own embedded moto server, with call counters on both clients."""

    def __init__(
        self,
        name: str,
        clock: Any = None,
        lease_seconds: int = 30,
        shards: int = 4,
        max_delay_seconds: int = 0,
        separate_process: bool = False,
    ) -> None:
        # In a process of its own as `duetime local` runs it (the ceiling); in this one to profile it.
        self.moto: EmbeddedMoto | MotoProcess = (MotoProcess(0) if separate_process else EmbeddedMoto(0)).start()
        base = Settings(
            prefix=unique_prefix(name),
            shards=shards,
            preload_interval_seconds=LOCAL_SETTINGS.preload_interval_seconds,
            preload_window_seconds=LOCAL_SETTINGS.preload_window_seconds,
        )
        self.settings = base.with_lease_seconds(lease_seconds)
        self.dynamodb = make_client("dynamodb", REGION, self.moto.endpoint_url)
        self.sqs = make_client("sqs", REGION, self.moto.endpoint_url)
        create_tables(self.dynamodb, self.settings)
        create_queues(self.sqs, self.settings)
        self.counter = CallCounter().attach(self.dynamodb, self.settings).attach(self.sqs)
        counter = itertools.count(1)
        extra = {"clock": clock} if clock is not None else {}
        self.ports = Ports(
            store=DynamoStore(self.dynamodb, self.settings),
            queues=DueQueues.resolve(self.sqs, self.settings, max_delay_seconds=max_delay_seconds),
            settings=self.settings,
            notifier=ConsoleNotifier(),
            id_hex=lambda: f"{next(counter):016x}",
            uniform=lambda lo, hi: hi,
            **extra,
        )
        self.counter.reset()

    def scan_table(self, table_name: str) -> list[dict[str, Any]]:
        """Every item of a table, in its typed (wire) form; not counted."""
        return scan_all(make_client("dynamodb", REGION, self.moto.endpoint_url), table_name)

    def stop(self) -> None:
        self.moto.stop()


def scan_all(client: Any, table_name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table_name}
    while True:
        page = client.scan(**kwargs)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
