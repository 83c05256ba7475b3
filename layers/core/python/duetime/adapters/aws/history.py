"""A job's runs on DynamoDB: byJob's entries merged with the plain runs found by their slots' keys.

A plain run's row has no byJob entry (domain/history.py): its key follows from its job, its slot and the spread
of the timing it was planned under. So history, find-by-id, a job's open rows and the ids in a span read the
keys of the job's slots (BatchGetItem, strongly consistent, as the rows behind an index are read) beside a Query
of byJob, and merge the two by execution id (a row written before kept its entry, and may be found twice).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from duetime.adapters.aws.base import DynamoTables
from duetime.adapters.aws.items import _deser, _ser, execution_from_item, job_from_item
from duetime.adapters.cursors import decode_cursor, encode_cursor
from duetime.definitions import EXECUTIONS_BY_JOB_INDEX
from duetime.domain import models
from duetime.domain.errors import NotFound
from duetime.domain.history import (
    MOST_SLOTS_A_PAGE,
    Timing,
    newest_reach,
    slots_after,
    slots_before,
    slots_between,
    timings_kept,
)
from duetime.domain.keys import ExecutionId, ExecutionKey, execution_id, execution_id_bound, hour_bucket, timings_key
from duetime.domain.models import Execution, Job, from_ms, to_ms
from duetime.domain.spread import spread_due
from duetime.service.ports import Page

# Pauses before looking an execution up again by id while a retry moves its row (find_execution).
FIND_PAUSES = (0.05, 0.25)
# The least and the greatest of a job's execution ids (every id is `jobId.<13 digits>` and maybe `.m`).
_LEAST, _GREATEST = ".", ".~"
# The key fields of a history cursor (as byJob's LastEvaluatedKey had them, so a cursor given out before
# stays good): the id the next page starts after; pk and sk are kept for that shape only.
_UNUSED = "-"


def _each_once(rows: Iterable[Execution], newest_first: bool) -> list[Execution]:
    """`rows` each once (by execution id), in id order (the slot's, then a run-now's after its slot's)."""
    by_id = {e.execution_id: e for e in rows}
    return [by_id[i] for i in sorted(by_id, reverse=newest_first)]


class DynamoHistory(DynamoTables):
    """Reads of a job's runs wherever their rows are: found by byJob, or by their slots' keys."""

    def job_timings(
        self, job_id: str, control: Sequence[str] = (), into: dict[str, dict[str, Any]] | None = None
    ) -> tuple[Job | None, list[Timing]]:
        """The job (None when it is gone) and every timing its plain runs had, its current one last: one
        BatchGetItem of the job and its timings record (control), strongly consistent. The `control` records
        asked for too come in the same call, into `into` as stored (by key; those absent are left out)."""
        keys = [timings_key(job_id), *control]
        request: dict[str, Any] = {
            self.jobs_table: {"Keys": [_ser({"jobId": job_id})], "ConsistentRead": True},
            self.control_table: {"Keys": [_ser({"key": k}) for k in dict.fromkeys(keys)], "ConsistentRead": True},
        }
        found: dict[str, list[dict[str, Any]]] = {}
        while request:
            response = self.client.batch_get_item(RequestItems=request)
            for table, items in response.get("Responses", {}).items():
                found.setdefault(table, []).extend(items)
            request = response.get("UnprocessedKeys") or {}
        records = {item["key"]["S"]: item for item in found.get(self.control_table, [])}
        if into is not None:
            into.update(records)
        jobs = found.get(self.jobs_table, [])
        if not jobs:
            return None, []
        job = job_from_item(jobs[0])
        record = records.get(timings_key(job_id))
        past = [Timing.from_record(r) for r in _deser(record).get("timings", [])] if record else []
        return job, [*past, Timing.current(job, past)]

    def _slot_keys(self, job_id: str, timings: list[Timing], slots: Iterable[datetime]) -> list[dict[str, Any]]:
        """The keys the plain rows of `job_id`'s `slots` have under the timings (a slot two timings share has a
        key under each; at most one holds its row), as an index entry holds them; none in an hour never fixed."""
        wanted: list[tuple[str, datetime]] = []  # (execution id, due)
        for slot in slots:
            for timing in timings:
                if timing.slots(slot, slot + timedelta(milliseconds=1)):
                    wanted.append((execution_id(job_id, slot), spread_due(job_id, slot, timing.jitter_seconds)))
        counts = self.bucket_shards.recorded([hour_bucket(due) for _, due in wanted])
        keys = {
            (key.pk, key.sk): {"pk": {"S": key.pk}, "sk": {"S": key.sk}}
            for key in (
                ExecutionKey.for_due(job_id, ident, due, counts[hour_bucket(due)])
                for ident, due in wanted
                if hour_bucket(due) in counts  # a bucket never fixed holds no row
            )
        }
        return list(keys.values())

    def _entered(self, job_id: str, low: str, high: str, limit: int | None, newest_first: bool) -> list[dict[str, Any]]:
        """The keys of the rows of `job_id` byJob names with ids in [low, high] (id suffixes of _LEAST and
        _GREATEST are the ends), at most `limit` from the end `newest_first` says."""
        kwargs: dict[str, Any] = {
            "TableName": self.executions_table,
            "IndexName": EXECUTIONS_BY_JOB_INDEX.name,
            "KeyConditionExpression": "jobId = :j AND executionId BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": _ser({":j": job_id, ":lo": low, ":hi": high}),
            "ScanIndexForward": not newest_first,
        }
        keys: list[dict[str, Any]] = []
        while limit is None or len(keys) < limit:
            if limit is not None:
                kwargs["Limit"] = limit - len(keys)
            response = self.client.query(**kwargs)
            keys.extend(response.get("Items", []))
            last = response.get("LastEvaluatedKey")
            if not last:
                break
            kwargs["ExclusiveStartKey"] = last
        return keys

    def _read(self, *keys: list[dict[str, Any]]) -> list[Execution]:
        """The rows behind `keys` (index entries' and slots' keys, each read once): one BatchGetItem a hundred."""
        unique = {(k["pk"]["S"], k["sk"]["S"]): k for group in keys for k in group}
        return [execution_from_item(item) for item in self._rows(list(unique.values()))]

    def _rows(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows behind index entries (the indexes project keys only), in the entries' order."""
        wanted = [{"pk": k["pk"], "sk": k["sk"]} for k in keys]
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for start in range(0, len(wanted), 100):
            request: dict[str, Any] = {
                self.executions_table: {"Keys": wanted[start : start + 100], "ConsistentRead": True}
            }
            while request:
                response = self.client.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self.executions_table, []):
                    found[(item["pk"]["S"], item["sk"]["S"])] = item
                request = response.get("UnprocessedKeys") or {}
        return [found[(k["pk"]["S"], k["sk"]["S"])] for k in wanted if (k["pk"]["S"], k["sk"]["S"]) in found]

    def _timings_op(self, edited: Job) -> dict[str, Any] | None:
        """The Put of the job's timings record when `edited` (not stored yet) changes the timing its plain runs
        follow: the timing it replaces kept (domain.history.timings_kept); None when the timing stays. The edit's
        transaction writes it, conditioned on the job's version, so two edits never both append."""
        stored, timings = self.job_timings(edited.job_id)
        retention = timedelta(days=self.settings.history_retention_days + 1)
        kept = None if stored is None else timings_kept(timings, edited, edited.updated_at, retention)
        if kept is None:
            return None
        expires = max(t.end or edited.updated_at for t in kept) + retention
        item = {
            "key": timings_key(edited.job_id),
            "timings": [t.to_record() for t in kept],
            "expiresAt": int(expires.timestamp()),
        }
        return {"Put": {"TableName": self.control_table, "Item": _ser(item)}}

    # -- what the store's callers read -----------------------------------------------------------------

    def list_executions(
        self, job_id: str, limit: int, cursor: str | None, newest_first: bool = True
    ) -> Page[Execution]:
        """A page of the job's executions in id order (newest first unless not `newest_first`); the cursor is
        bound to the job (raises InvalidInput for one of another job). A page reads the keys of at most
        MOST_SLOTS_A_PAGE slots: it may hold fewer than `limit` runs and still have a cursor (a paused span)."""
        scope = f"job:{job_id}"
        start = decode_cursor(scope, cursor, {"jobId": job_id, "executionId": None, "pk": None, "sk": None})
        after = None if start is None else start["executionId"]
        job, timings = self.job_timings(job_id)
        walk = self._newest_first if newest_first else self._oldest_first
        items, last = walk(job_id, job, timings, limit, after)
        key = None if last is None else {"jobId": job_id, "executionId": last, "pk": _UNUSED, "sk": _UNUSED}
        return Page(items=items, cursor=encode_cursor(scope, key))

    def _newest_first(
        self, job_id: str, job: Job | None, timings: list[Timing], limit: int, before: str | None
    ) -> tuple[list[Execution], str | None]:
        """Up to `limit` runs with ids below `before` (all when None), newest first, and the id the next page
        starts below (None: no more)."""
        items: list[Execution] = []
        examined = 0
        high = self._reach(job, timings) if before is None else _slot_of(before) + timedelta(milliseconds=1)
        while True:
            want = limit - len(items)
            slots, bound = slots_before(timings, high, want) if timings else ([], None)
            examined += len(slots)
            low = f"{job_id}{_LEAST}" if bound is None else execution_id_bound(job_id, to_ms(bound))
            top = f"{job_id}{_GREATEST}" if before is None else before
            entered = self._entered(job_id, low, top, want + 1, True)
            found = self._round(job_id, timings, slots, entered, before, True)
            if len(found) >= want:
                items.extend(found[:want])
                return items, items[-1].execution_id
            items.extend(found)
            if bound is None:
                return items, None
            before, high = low, bound
            if examined >= MOST_SLOTS_A_PAGE:
                return items, before

    def _oldest_first(
        self, job_id: str, job: Job | None, timings: list[Timing], limit: int, after: str | None
    ) -> tuple[list[Execution], str | None]:
        """Up to `limit` runs with ids above `after` (all when None), oldest first, and the id the next page
        starts above (None: no more)."""
        items: list[Execution] = []
        examined = 0
        reach = self._reach(job, timings)
        low = min((t.first_possible for t in timings), default=reach) if after is None else _slot_of(after)
        while True:
            want = limit - len(items)
            slots, more = slots_after(timings, low, reach, want) if timings else ([], False)
            examined += len(slots)
            bottom = f"{job_id}{_LEAST}" if after is None else after
            top = f"{job_id}.{to_ms(slots[-1]):013d}{_GREATEST}" if more else f"{job_id}{_GREATEST}"
            entered = self._entered(job_id, bottom, top, want + 1, False)
            found = self._round(job_id, timings, slots, entered, after, False)
            if len(found) >= want:
                items.extend(found[:want])
                return items, items[-1].execution_id
            items.extend(found)
            if not more:
                return items, None
            after, low = top, slots[-1] + timedelta(milliseconds=1)
            if examined >= MOST_SLOTS_A_PAGE:
                return items, after

    def _round(
        self,
        job_id: str,
        timings: list[Timing],
        slots: list[datetime],
        entered: list[dict[str, Any]],
        bound: str | None,
        newest_first: bool,
    ) -> list[Execution]:
        """One step of a page's walk: the rows of `slots` and of the `entered` keys whose ids are past the page's
        `bound` (below it newest first, above it oldest first; all when None), each once, in the walk's order."""
        rows = self._read(self._slot_keys(job_id, timings, slots), entered)
        if bound is not None:
            rows = [e for e in rows if (e.execution_id < bound if newest_first else e.execution_id > bound)]
        return _each_once(rows, newest_first)

    def _reach(self, job: Job | None, timings: list[Timing]) -> datetime:
        """Above every slot a plain row of `job` may have now (domain.history.newest_reach)."""
        now = from_ms(int(self.epoch_seconds() * 1000))
        if job is None:
            return now
        return newest_reach(job, timings, now, timedelta(seconds=self.settings.preload_window_seconds))

    def executions_of_job(self, job_id: str, newest_first: bool = True, limit: int = 50) -> list[Execution]:
        return self.list_executions(job_id, limit, None, newest_first).items

    def iter_executions_of_job(self, job_id: str) -> Iterator[Execution]:
        cursor: str | None = None
        while True:
            page = self.list_executions(job_id, 100, cursor, newest_first=False)
            yield from page.items
            if page.cursor is None:
                return
            cursor = page.cursor

    def find_execution(self, job_id: str, execution_id: str) -> Execution | None:
        """An execution by id: a plain run's row by its slot's key, any other through byJob, read strongly.

        A retry moves the row to another due partition (a delete and a put in one transaction) and the index
        follows the table: a row the index names may be gone when it is read, and for a moment the index may
        name no row at all. Either way the lookup is made again (FIND_PAUSES) before it answers None."""
        try:
            slot = ExecutionId.parse(execution_id).slot
        except NotFound:
            return None
        _, timings = self.job_timings(job_id)
        for pause in (0.0, *FIND_PAUSES):
            time.sleep(pause)
            plain = [] if execution_id.endswith(".m") else self._slot_keys(job_id, timings, [slot])
            rows = self._read(plain, self._entered(job_id, execution_id, execution_id, 1, True))
            for row in rows:
                if row.execution_id == execution_id:
                    return row
        return None

    def execution_ids_between(self, job_id: str, from_ms: int, to_ms: int) -> set[str]:
        """The ids of the job's stored executions whose slot is in [from_ms, to_ms), wherever their rows are
        (a retried run's row moved to another partition): byJob's, and the rows of the slots in the span."""
        job, timings = self.job_timings(job_id)
        # No plain row is past the reach (a span asked up to the far future reads no key there).
        until = models.from_ms(to_ms) if job is None else min(models.from_ms(to_ms), self._reach(job, timings))
        slots = slots_between(timings, models.from_ms(from_ms), until)
        low, high = f"{job_id}.{from_ms:013d}", f"{job_id}.{to_ms - 1:013d}{_GREATEST}"
        rows = self._read(self._slot_keys(job_id, timings, slots), self._entered(job_id, low, high, None, True))
        return {e.execution_id for e in rows}


def _slot_of(ident: str) -> datetime:
    """The slot an execution id (or a bound made by execution_id_bound) carries."""
    return from_ms(int(ident.split(".")[1]))
