"""The control table on SQLite: leases and cursors, handler announcements, calendars, rate limits and
concurrency slots, and the shard counts per due-hour bucket."""

from __future__ import annotations

from typing import Any

from duetime.adapters.shard_counts import ShardCountCalls
from duetime.adapters.sqlite.base import SqliteTables
from duetime.domain.exclusions import Calendar
from duetime.domain.keys import (
    ANNOUNCER_PREFIX,
    CALENDAR_ATTR_PREFIX,
    announcements_key,
    calendar_entry,
    calendars_from_record,
    calendars_key,
    ended_announcers,
    served_names,
)
from duetime.domain.limits import (
    CONTROL_IDLE_SECONDS,
    LIMIT_ATTR_PREFIX,
    NEXT_START_ATTR,
    RateLimit,
    holder_attr,
    limit_entry,
    limits_from_record,
    limits_key,
    live_holders,
    reserve_start,
)


class SqliteControl(SqliteTables, ShardCountCalls):
    """Control records: leases, announcements, calendars, limits, slots and shard counts."""

    # -- control records: leases and cursors ----------------------------------------------------------

    def get_controls(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        with self.db.read() as conn:
            records = {key: self._read_control(conn, key) for key in dict.fromkeys(keys)}
        return {key: record for key, record in records.items() if record is not None}

    def acquire_lease(self, key: str, owner: str, now_ms: int, until_ms: int) -> dict[str, Any] | None:
        """Take or renew the lease on `key` for `owner` unless someone else holds it live; the record
        (with its cursor) if `owner` now holds it, else None."""
        with self.db.write() as conn:
            record = self._read_control(conn, key) or {"key": key}
            holder, held_until = record.get("leaseOwner"), record.get("leaseUntilMs")
            if holder is not None and holder != owner and not (held_until is not None and held_until <= now_ms):
                return None
            record.update(leaseOwner=owner, leaseUntilMs=until_ms)
            self._write_control(conn, key, record)
            return record

    def advance_cursor(
        self, key: str, owner: str, cursor_ms: int, reconcile_from: str | None = None, swept_ms: int | None = None
    ) -> bool:
        """Move the lease holder's cursor forward, record where the reconciler goes on (`reconcile_from`,
        None: from the start) and how far the sweep went (`swept_ms`, kept when None), in one write; False if
        `owner` lost the lease meanwhile."""
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is None or record.get("leaseOwner") != owner:
                return False
            record["cursorMs"] = cursor_ms
            if swept_ms is not None:
                record["sweptMs"] = swept_ms
            record.pop("leaseOwner", None)  # handed back: the next cycle, whatever its owner, takes the shard
            record.pop("leaseUntilMs", None)
            if reconcile_from:
                record["reconcileFrom"] = reconcile_from
            else:
                record.pop("reconcileFrom", None)
            self._write_control(conn, key, record)
            return True

    def release_lease(self, key: str, owner: str) -> bool:
        """Hand back `owner`'s lease on `key` without moving its cursor; False if `owner` did not hold it."""
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is None or record.get("leaseOwner") != owner:
                return False
            record.pop("leaseOwner", None)
            record.pop("leaseUntilMs", None)
            self._write_control(conn, key, record)
            return True

    # -- handler announcements ---------------------------------------------------------------------------

    def announce_handlers(self, job_class: str, worker_id: str, names: list[str], now_ms: int, until_ms: int) -> None:
        """Record that `worker_id` serves `names` for `job_class` until `until_ms`, and forget announcements
        that ended before `now_ms` (one `worker:<id>` entry per worker, as on DynamoDB)."""
        key = announcements_key(job_class)
        with self.db.write() as conn:
            record = self._read_control(conn, key) or {"key": key}
            for attr in ended_announcers(record, now_ms):
                del record[attr]
            record[ANNOUNCER_PREFIX + worker_id] = {"names": sorted(set(names)), "untilMs": until_ms}
            self._write_control(conn, key, record)

    def withdraw_handlers(self, job_class: str, worker_id: str) -> None:
        """`worker_id` stops serving `job_class` (a clean shutdown): its announcement is removed."""
        key = announcements_key(job_class)
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is not None and record.pop(ANNOUNCER_PREFIX + worker_id, None) is not None:
                self._write_control(conn, key, record)

    def announced_handlers(self, job_class: str, now_ms: int) -> set[str]:
        """The handler names announced for `job_class` by workers whose announcement is still live."""
        with self.db.read() as conn:
            record = self._read_control(conn, announcements_key(job_class)) or {}
        return served_names(record, now_ms)

    # -- named calendars: one control record per owner, one `calendar:<name>` entry per calendar ------------

    def get_calendars(self, owner: str) -> dict[str, Calendar]:
        with self.db.read() as conn:
            return calendars_from_record(self._read_control(conn, calendars_key(owner)) or {})

    def put_calendar(self, owner: str, calendar: Calendar) -> bool:
        key = calendars_key(owner)
        with self.db.write() as conn:
            record = self._read_control(conn, key) or {"key": key}
            new = CALENDAR_ATTR_PREFIX + calendar.name not in record
            record[CALENDAR_ATTR_PREFIX + calendar.name] = calendar_entry(calendar)
            self._write_control(conn, key, record)
            return new

    def delete_calendar(self, owner: str, name: str) -> bool:
        key = calendars_key(owner)
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is None or record.pop(CALENDAR_ATTR_PREFIX + name, None) is None:
                return False
            self._write_control(conn, key, record)
            return True

    # -- rate limits and concurrency caps (issue 20): control records, as on DynamoDB ----------------------

    def get_limits(self, owner: str) -> dict[str, RateLimit]:
        with self.db.read() as conn:
            return limits_from_record(self._read_control(conn, limits_key(owner)) or {})

    def put_limit(self, owner: str, limit: RateLimit) -> bool:
        key = limits_key(owner)
        with self.db.write() as conn:
            record = self._read_control(conn, key) or {"key": key}
            new = LIMIT_ATTR_PREFIX + limit.name not in record
            record[LIMIT_ATTR_PREFIX + limit.name] = limit_entry(limit)
            self._write_control(conn, key, record)
            return new

    def delete_limit(self, owner: str, name: str) -> bool:
        key = limits_key(owner)
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is None or record.pop(LIMIT_ATTR_PREFIX + name, None) is None:
                return False
            self._write_control(conn, key, record)
            return True

    def reserve_start(self, key: str, now_ms: int, interval_ms: float, burst: int) -> int:
        """Reserve one start in the bucket `key`, in one transaction (the write lock orders the callers)."""
        with self.db.write() as conn:
            record = self._read_control(conn, key) or {"key": key}
            stored = record.get(NEXT_START_ATTR)
            start, next_start = reserve_start(None if stored is None else int(stored), now_ms, interval_ms, burst)
            record[NEXT_START_ATTR] = next_start
            record["expiresAt"] = next_start // 1000 + CONTROL_IDLE_SECONDS  # an idle bucket is full: forget it
            self._write_control(conn, key, record)
            return start

    def acquire_slot(self, key: str, holder: str, capacity: int, now_ms: int, until_ms: int) -> bool:
        """Hold a slot of `key` for `holder` unless `capacity` live holds exist already (one transaction)."""
        with self.db.write() as conn:
            record = self._read_control(conn, key) or {"key": key}
            live = live_holders(record, now_ms)
            if holder_attr(holder) not in live and len(live) >= capacity:
                return False
            kept = {attr: until for attr, until in live.items() if attr != holder_attr(holder)}
            kept[holder_attr(holder)] = until_ms
            fresh: dict[str, Any] = {"key": key, **kept}
            fresh["expiresAt"] = max(kept.values()) // 1000 + CONTROL_IDLE_SECONDS
            self._write_control(conn, key, fresh)
            return True

    def renew_slot(self, key: str, holder: str, until_ms: int) -> bool:
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is None or holder_attr(holder) not in record:
                return False
            record[holder_attr(holder)] = until_ms
            record["expiresAt"] = max(int(record.get("expiresAt") or 0), until_ms // 1000 + CONTROL_IDLE_SECONDS)
            self._write_control(conn, key, record)
            return True

    def release_slot(self, key: str, holder: str) -> None:
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is not None and record.pop(holder_attr(holder), None) is not None:
                self._write_control(conn, key, record)
