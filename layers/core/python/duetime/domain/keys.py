"""Deterministic identities and keys: execution ids, shards and the `hour#shard` due partition."""

from __future__ import annotations

import secrets
import time
import zlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from duetime.definitions import OPEN_INDEX_SPREAD
from duetime.domain.errors import NotFound
from duetime.domain.exclusions import Calendar
from duetime.domain.models import from_ms, to_ms, to_utc

# Ids and sort keys carry a time as 13 zero-padded digits of milliseconds since the epoch: every slot
# and due time duetime stores lies in this range, or its id would not parse back (a poison message).
EARLIEST_SLOT = from_ms(0)
LATEST_SLOT = from_ms(10**13 - 1)


def in_key_range(at: datetime) -> bool:
    return EARLIEST_SLOT <= to_utc(at) <= LATEST_SLOT


def execution_id(job_id: str, scheduled_at: datetime, manual: bool = False) -> str:
    """The id of the run of `job_id` in slot `scheduled_at`: the same slot always gives the same id.

    It sorts by slot (zero-padded milliseconds), so the byJob index lists history in time order, and it
    is the idempotency key handed to the job's handler on every attempt. A manual run ("run now")
    gets a distinct id so it never collides with a scheduled slot.
    """
    if not in_key_range(scheduled_at):
        raise ValueError(f"slot {scheduled_at.isoformat()} is outside the range execution ids can carry")
    return f"{job_id}.{to_ms(scheduled_at):013d}{'.m' if manual else ''}"


@dataclass(frozen=True)
class ExecutionId:
    """An execution id read into its parts once: the job, the slot, and whether a run-now made it."""

    job_id: str
    slot: datetime
    manual: bool = False

    @classmethod
    def parse(cls, value: str) -> ExecutionId:
        """The parts of `value`; raises NotFound for anything that is not an execution id."""
        parts = value.split(".")
        if len(parts) not in (2, 3) or not parts[0] or len(parts[1]) != 13 or not parts[1].isdigit():
            raise NotFound(f"execution {value!r} not found", field="executionId")
        if len(parts) == 3 and parts[2] != "m":
            raise NotFound(f"execution {value!r} not found", field="executionId")
        return cls(parts[0], from_ms(int(parts[1])), manual=len(parts) == 3)

    def __str__(self) -> str:
        return execution_id(self.job_id, self.slot, self.manual)


def parse_execution_id(value: str) -> tuple[str, datetime]:
    """(jobId, scheduledAt) encoded in an execution id; raises NotFound for anything else."""
    parsed = ExecutionId.parse(value)
    return parsed.job_id, parsed.slot


def stable_hash(value: str) -> int:
    """A hash that is the same in every process and Python version (unlike hash())."""
    return zlib.crc32(value.encode())


def shard_of(job_id: str, shards: int) -> int:
    return stable_hash(job_id) % shards


def hour_bucket(at: datetime) -> str:
    utc = to_utc(at)  # every key's year has four digits (EARLIEST_SLOT is 1970)
    return f"{utc.year:04d}{utc.month:02d}{utc.day:02d}{utc.hour:02d}"


@dataclass(frozen=True)
class ExecutionKey:
    """Where an execution row lives: partition `YYYYMMDDHH#shard` of its due hour, sort `dueMs#executionId`."""

    pk: str
    sk: str

    @classmethod
    def for_due(cls, job_id: str, execution_id: str, due_at: datetime, shards: int) -> ExecutionKey:
        return cls(pk=due_partition(due_at, shard_of(job_id, shards)), sk=sort_key(due_at, execution_id))

    @property
    def shard(self) -> int:
        """The shard of the row's partition (`YYYYMMDDHH#shard`): it picks the due queue of a spread class."""
        return shard_of_partition(self.pk)


def due_partition(due_at: datetime, shard: int) -> str:
    return f"{hour_bucket(due_at)}#{shard:03d}"


def sort_key(due_at: datetime, execution_id: str) -> str:
    return f"{to_ms(due_at):013d}#{execution_id}"


def execution_id_of_sort_key(sk: str) -> str:
    """The execution id a row's (or an index entry's) sort key ends with: the part after `dueMs#`."""
    return sk.split("#", 1)[1]


def due_ms_of_sort_key(sk: str) -> int:
    """The due time (epoch milliseconds) a row's sort key starts with."""
    return int(sk.split("#", 1)[0])


def job_of_sort_key(sk: str) -> str:
    """The job whose run a row's sort key names."""
    return ExecutionId.parse(execution_id_of_sort_key(sk)).job_id


def execution_id_bound(job_id: str, slot_ms: int) -> str:
    """A bound every id of `job_id`'s runs in slots from `slot_ms` on sorts at or above (byJob's sort key)."""
    return f"{job_id}.{max(0, slot_ms):013d}"


def sort_key_after(due_by: datetime) -> str:
    """A bound every sort key of a row due at or before `due_by` sorts below, and every later one above."""
    return f"{to_ms(due_by) + 1:013d}"


def bucket_of_partition(partition: str) -> str:
    """The due-hour bucket (`YYYYMMDDHH`) of a partition key `YYYYMMDDHH#shard`."""
    return partition.split("#", 1)[0]


def shard_of_partition(partition: str) -> int:
    return int(partition.rsplit("#", 1)[1])


# The control record that fixes how many shards a due-hour bucket has: written once, before the bucket's
# first row (first writer wins), never changed, so every key of the bucket derives from the same count
# whatever `shards` is configured now. Changing `shards` applies to buckets not fixed yet: forward only.
SHARDS_KEY_PREFIX = "shards#"
# The control record holding the largest shard count any bucket was fixed with (it only grows): the
# pre-loader and the reconciler visit that many shards, so rows of buckets fixed before a reshard to
# fewer shards are still pre-loaded and reconciled.
MOST_SHARDS_KEY = "shards#most"


def preload_record_key(shard: int) -> str:
    """The control record of `shard`'s pre-loader: its lease, its cursors (`sweptMs`: how far it swept)."""
    return f"preload#{shard:03d}"


def bucket_shards_key(bucket: str) -> str:
    return f"{SHARDS_KEY_PREFIX}{bucket}"


def open_index_key(key: ExecutionKey) -> str:
    """The `open` index partition of a row: its shard, then its execution id's hash mod OPEN_INDEX_SPREAD."""
    execution = execution_id_of_sort_key(key.sk)
    return open_index_partition(shard_of_partition(key.pk), stable_hash(execution) % OPEN_INDEX_SPREAD)


def open_index_partition(shard: int, spread: int) -> str:
    return f"{shard:03d}#{spread}"


def open_index_partitions(shard: int) -> list[str]:
    """Every `open` index partition of `shard`, in the order the reconciler reads them."""
    return [open_index_partition(shard, spread) for spread in range(OPEN_INDEX_SPREAD)]


# A job id: "j_" and the lower-case hex of Ports.id_hex. The API refuses (404) anything else before it
# reaches a store, and the OpenAPI document states the same pattern.
JOB_ID_PREFIX = "j_"
JOB_ID_PATTERN = JOB_ID_PREFIX + "[0-9a-f]{1,64}"


def new_job_id(id_hex: str) -> str:
    return f"{JOB_ID_PREFIX}{id_hex}"


def time_ordered_hex(epoch_ms: int | None = None) -> str:
    """A new job's id digits: 12 hex digits of the wall-clock epoch milliseconds (now, or `epoch_ms`), then
    64 random bits.

    Ids made later sort later (as UUIDv7 and ULIDs do), so every index keyed by job id (SQLite's jobs
    table, byJob and openByJob) takes a new job at its right edge, and the jobs of one burst sit side by
    side: with random ids each new row lands on a page of its own among all the earlier ones. Measured by
    `python -m bench.job_ids` (150,000 jobs stored): a create took 251 us of CPU (319 wall) with random ids
    and 180 (207) with these, reading the job back 48.5 against 40.8 us. The random part keeps an
    id unguessable (docs/security.md: what a handler task's role can read); DynamoDB hashes the partition key, so the
    time prefix makes no hot partition there, and shards hash the whole id.
    """
    made = time.time_ns() // 1_000_000 if epoch_ms is None else epoch_ms
    return f"{made:012x}{secrets.token_hex(8)}"


# In an announcements record, each live worker's entry is the attribute "worker:<id>".
ANNOUNCER_PREFIX = "worker:"


def announcements_key(job_class: str) -> str:
    """The control record holding the handler names that live workers of `job_class` announce."""
    return f"handlers#{job_class}"


def timings_key(job_id: str) -> str:
    """The control record of the timings a job's edits replaced (domain/history.py): where its earlier plain
    runs' rows are."""
    return f"timings#{job_id}"


# In an owner's calendars record, each calendar is the attribute "calendar:<name>".
CALENDAR_ATTR_PREFIX = "calendar:"


def calendars_key(owner: str) -> str:
    """The control record holding all of an owner's named calendars."""
    return f"calendars#{owner}"


def calendar_entry(calendar: Calendar) -> dict[str, Any]:
    """A calendar as its attribute in the owner's calendars record (both adapters store this shape)."""
    return {"dates": list(calendar.dates), "updatedMs": calendar.updated_ms}


def served_names(record: dict[str, Any], now_ms: int) -> set[str]:
    """The handler names an announcements record holds for workers whose announcement is live at `now_ms`."""
    served: set[str] = set()
    for attr, entry in record.items():
        if attr.startswith(ANNOUNCER_PREFIX) and int(entry["untilMs"]) > now_ms:
            served.update(str(name) for name in entry["names"])
    return served


def ended_announcers(record: dict[str, Any], now_ms: int) -> dict[str, int]:
    """The `worker:<id>` attributes of an announcements record that ended by `now_ms`, with their end."""
    return {
        attr: int(entry["untilMs"])
        for attr, entry in record.items()
        if attr.startswith(ANNOUNCER_PREFIX) and int(entry["untilMs"]) <= now_ms
    }


def calendars_from_record(record: dict[str, Any]) -> dict[str, Calendar]:
    """The calendars of an owner's calendars record, by name."""
    return {
        attr.removeprefix(CALENDAR_ATTR_PREFIX): Calendar(
            name=attr.removeprefix(CALENDAR_ATTR_PREFIX),
            dates=tuple(str(d) for d in entry["dates"]),
            updated_ms=int(entry["updatedMs"]),
        )
        for attr, entry in record.items()
        if attr.startswith(CALENDAR_ATTR_PREFIX)
    }


def dead_letter_key(key: ExecutionKey, told_at: datetime) -> str:
    """The dead-letter index's sort key of a failed row: when its owner was told, then its execution id
    (the part of `sk` after `dueMs#`), so an owner's dead letters list newest first, each once."""
    return f"{to_ms(told_at):013d}#{execution_id_of_sort_key(key.sk)}"


def open_page_after(after: str | None) -> str | None:
    """The sort key a reconciler page resumes after (a token an earlier page returned: the last `sk` it took),
    or None to start from the first. A token of the form from before issue 18 ("pk sk") starts over."""
    if not after or " " in after:
        return None
    return after
