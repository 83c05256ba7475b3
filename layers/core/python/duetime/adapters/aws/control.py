"""Control records in DynamoDB: pre-loader shard leases and cursors, handler announcements, calendars."""

from __future__ import annotations

from typing import Any

from duetime.adapters.aws.base import DynamoTables, Refused, refused_as
from duetime.adapters.aws.items import _deser, _plain, _ser
from duetime.adapters.shard_counts import ShardCountCalls
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
    start_step_ms,
)

# Conditional writes on one limit's record refused by a concurrent one are tried again this often.
RESERVE_ATTEMPTS = 20


class DynamoControl(DynamoTables, ShardCountCalls):
    """The control table: one small record per key, each change conditional on who holds it."""

    def get_control(self, key: str) -> dict[str, Any] | None:
        response = self.client.get_item(TableName=self.control_table, Key=_ser({"key": key}), ConsistentRead=True)
        item = response.get("Item")
        return _plain(_deser(item)) if item else None

    def get_controls(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """Many records by key in BatchGetItem calls of up to 100 keys, strongly consistent."""
        return {key: _plain(_deser(item)) for key, item in self._control_records(keys).items()}

    def acquire_lease(self, key: str, owner: str, now_ms: int, until_ms: int) -> dict[str, Any] | None:
        """Take or renew the lease on `key` for `owner` unless someone else holds it live.

        Returns the record (with its cursor) if `owner` now holds it, else None.
        """
        try:
            with refused_as():
                response = self.client.update_item(
                    TableName=self.control_table,
                    Key=_ser({"key": key}),
                    UpdateExpression="SET leaseOwner = :o, leaseUntilMs = :u",
                    ConditionExpression="attribute_not_exists(leaseOwner) OR leaseOwner = :o OR leaseUntilMs <= :now",
                    ExpressionAttributeValues=_ser({":o": owner, ":u": until_ms, ":now": now_ms}),
                    ReturnValues="ALL_NEW",
                )
        except Refused:
            return None
        return _plain(_deser(response["Attributes"]))

    def advance_cursor(
        self, key: str, owner: str, cursor_ms: int, reconcile_from: str | None = None, swept_ms: int | None = None
    ) -> bool:
        """Move the lease holder's cursor forward, record where the reconciler goes on (`reconcile_from`, None:
        from the start) and how far the sweep went (`swept_ms`, kept when None), and hand the lease back, all in
        one write, so the next cycle (whatever its owner) takes the shard at once. False if `owner` lost the
        lease meanwhile."""
        values: dict[str, Any] = {":c": cursor_ms, ":o": owner}
        expression = "SET cursorMs = :c"
        if swept_ms is not None:
            expression += ", sweptMs = :w"
            values[":w"] = swept_ms
        if reconcile_from:
            expression += ", reconcileFrom = :r REMOVE leaseOwner, leaseUntilMs"
            values[":r"] = reconcile_from
        else:
            expression += " REMOVE leaseOwner, leaseUntilMs, reconcileFrom"
        try:
            with refused_as():
                self.client.update_item(
                    TableName=self.control_table,
                    Key=_ser({"key": key}),
                    UpdateExpression=expression,
                    ConditionExpression="leaseOwner = :o",
                    ExpressionAttributeValues=_ser(values),
                )
        except Refused:
            return False
        return True

    def release_lease(self, key: str, owner: str) -> bool:
        """Hand back `owner`'s lease on `key` without moving its cursor (a cycle that failed part way);
        False if `owner` did not hold it."""
        try:
            with refused_as():
                self.client.update_item(
                    TableName=self.control_table,
                    Key=_ser({"key": key}),
                    UpdateExpression="REMOVE leaseOwner, leaseUntilMs",
                    ConditionExpression="leaseOwner = :o",
                    ExpressionAttributeValues=_ser({":o": owner}),
                )
        except Refused:
            return False
        return True

    # -- handler announcements: one control record per job class, one attribute per worker ---------------

    def announce_handlers(self, job_class: str, worker_id: str, names: list[str], now_ms: int, until_ms: int) -> None:
        """Record that `worker_id` serves `names` for `job_class` until `until_ms`, and forget announcements
        that ended before `now_ms` (unless their worker renewed them meanwhile)."""
        response = self.client.update_item(
            TableName=self.control_table,
            Key=_ser({"key": announcements_key(job_class)}),
            UpdateExpression="SET #w = :entry",
            ExpressionAttributeNames={"#w": ANNOUNCER_PREFIX + worker_id},
            ExpressionAttributeValues=_ser({":entry": {"names": sorted(set(names)), "untilMs": until_ms}}),
            ReturnValues="ALL_NEW",
        )
        ended = ended_announcers(_deser(response["Attributes"]), now_ms)
        if not ended:
            return
        names_by_ref = {f"#a{i}": attr for i, attr in enumerate(ended)}
        values = {f":u{i}": until for i, until in enumerate(ended.values())}
        try:
            with refused_as():
                self.client.update_item(
                    TableName=self.control_table,
                    Key=_ser({"key": announcements_key(job_class)}),
                    UpdateExpression="REMOVE " + ", ".join(names_by_ref),
                    ConditionExpression=" AND ".join(f"{ref}.untilMs = :u{i}" for i, ref in enumerate(names_by_ref)),
                    ExpressionAttributeNames=names_by_ref,
                    ExpressionAttributeValues=_ser(values),
                )
        except Refused:
            pass  # one of them announced again meanwhile: prune next time

    def withdraw_handlers(self, job_class: str, worker_id: str) -> None:
        """`worker_id` stops serving `job_class` (a clean shutdown): its announcement is removed."""
        self.client.update_item(
            TableName=self.control_table,
            Key=_ser({"key": announcements_key(job_class)}),
            UpdateExpression="REMOVE #w",
            ExpressionAttributeNames={"#w": ANNOUNCER_PREFIX + worker_id},
        )

    def announced_handlers(self, job_class: str, now_ms: int) -> set[str]:
        """The handler names announced for `job_class` by workers whose announcement is still live."""
        record = self.client.get_item(
            TableName=self.control_table, Key=_ser({"key": announcements_key(job_class)}), ConsistentRead=True
        ).get("Item")
        return served_names(_deser(record or {}), now_ms)

    # -- named calendars: one control record per owner, one attribute per calendar -----------------------

    def get_calendars(self, owner: str) -> dict[str, Calendar]:
        record = self.client.get_item(
            TableName=self.control_table, Key=_ser({"key": calendars_key(owner)}), ConsistentRead=True
        ).get("Item")
        return calendars_from_record(_deser(record or {}))

    def put_calendar(self, owner: str, calendar: Calendar) -> bool:
        response = self.client.update_item(
            TableName=self.control_table,
            Key=_ser({"key": calendars_key(owner)}),
            UpdateExpression="SET #c = :entry",
            ExpressionAttributeNames={"#c": CALENDAR_ATTR_PREFIX + calendar.name},
            ExpressionAttributeValues=_ser({":entry": calendar_entry(calendar)}),
            ReturnValues="UPDATED_OLD",
        )
        return CALENDAR_ATTR_PREFIX + calendar.name not in response.get("Attributes", {})

    def delete_calendar(self, owner: str, name: str) -> bool:
        try:
            with refused_as():
                self.client.update_item(
                    TableName=self.control_table,
                    Key=_ser({"key": calendars_key(owner)}),
                    UpdateExpression="REMOVE #c",
                    ConditionExpression="attribute_exists(#c)",
                    ExpressionAttributeNames={"#c": CALENDAR_ATTR_PREFIX + name},
                )
        except Refused:
            return False
        return True

    # -- rate limits and concurrency caps (issue 20) -------------------------------------------------------

    def get_limits(self, owner: str) -> dict[str, RateLimit]:
        record = self.client.get_item(
            TableName=self.control_table, Key=_ser({"key": limits_key(owner)}), ConsistentRead=True
        ).get("Item")
        return limits_from_record(_deser(record or {}))

    def put_limit(self, owner: str, limit: RateLimit) -> bool:
        response = self.client.update_item(
            TableName=self.control_table,
            Key=_ser({"key": limits_key(owner)}),
            UpdateExpression="SET #l = :entry",
            ExpressionAttributeNames={"#l": LIMIT_ATTR_PREFIX + limit.name},
            ExpressionAttributeValues=_ser({":entry": limit_entry(limit)}),
            ReturnValues="UPDATED_OLD",
        )
        return LIMIT_ATTR_PREFIX + limit.name not in response.get("Attributes", {})

    def delete_limit(self, owner: str, name: str) -> bool:
        try:
            with refused_as():
                self.client.update_item(
                    TableName=self.control_table,
                    Key=_ser({"key": limits_key(owner)}),
                    UpdateExpression="REMOVE #l",
                    ConditionExpression="attribute_exists(#l)",
                    ExpressionAttributeNames={"#l": LIMIT_ATTR_PREFIX + name},
                )
        except Refused:
            return False
        return True

    def reserve_start(self, key: str, now_ms: int, interval_ms: float, burst: int) -> int:
        """Reserve one start in the bucket `key` with one conditional write, no read (domain.limits
        .reserve_start, case by case): a busy bucket (its next start not past) moves on one step and the
        old value says the start; an idle one restarts from now. A write refused because another moved the
        bucket across `now` meanwhile is tried again the other way."""
        step = start_step_ms(interval_ms)
        tolerance = burst * step
        for _ in range(RESERVE_ATTEMPTS):
            try:
                with refused_as():
                    busy = self.client.update_item(
                        TableName=self.control_table,
                        Key=_ser({"key": key}),
                        UpdateExpression="SET #n = #n + :step, expiresAt = :e",
                        ConditionExpression="#n >= :now",
                        ExpressionAttributeNames={"#n": NEXT_START_ATTR},
                        ExpressionAttributeValues=_ser(
                            {":step": step, ":now": now_ms, ":e": now_ms // 1000 + CONTROL_IDLE_SECONDS}
                        ),
                        ReturnValues="UPDATED_OLD",
                    )
                tat = int(_plain(_deser(busy["Attributes"]))[NEXT_START_ATTR])
                return max(now_ms, tat - tolerance)
            except Refused:
                pass
            try:
                with refused_as():
                    self.client.update_item(
                        TableName=self.control_table,
                        Key=_ser({"key": key}),
                        UpdateExpression="SET #n = :next, expiresAt = :e",
                        ConditionExpression="attribute_not_exists(#n) OR #n < :now",
                        ExpressionAttributeNames={"#n": NEXT_START_ATTR},
                        ExpressionAttributeValues=_ser(
                            {":next": now_ms + step, ":now": now_ms, ":e": now_ms // 1000 + CONTROL_IDLE_SECONDS}
                        ),
                    )
                return now_ms
            except Refused:
                pass
        raise RuntimeError(f"the token bucket {key} kept changing under {RESERVE_ATTEMPTS} tries")

    def acquire_slot(self, key: str, holder: str, capacity: int, now_ms: int, until_ms: int) -> bool:
        """Hold a slot of `key` for `holder`: read the record, then one write conditional on every live hold
        read still being there unchanged and no other added (the record's version), so two workers taking
        the last slot at once cannot both win; ended holds are removed by the same write."""
        for _ in range(RESERVE_ATTEMPTS):
            item = self.client.get_item(TableName=self.control_table, Key=_ser({"key": key}), ConsistentRead=True).get(
                "Item"
            )
            record = _plain(_deser(item or {}))
            live = live_holders(record, now_ms)
            mine = holder_attr(holder)
            if mine not in live and len(live) >= capacity:
                return False
            ended = [a for a in record if a.startswith(holder_attr("")) and a not in live]
            names = {"#h": mine, "#v": "version"}
            names.update({f"#x{i}": attr for i, attr in enumerate(ended)})
            update = "SET #h = :u, #v = :next, expiresAt = :e" + (
                " REMOVE " + ", ".join(f"#x{i}" for i in range(len(ended))) if ended else ""
            )
            version = int(record.get("version", 0))
            try:
                with refused_as():
                    self.client.update_item(
                        TableName=self.control_table,
                        Key=_ser({"key": key}),
                        UpdateExpression=update,
                        ConditionExpression="attribute_not_exists(#v) OR #v = :version",
                        ExpressionAttributeNames=names,
                        ExpressionAttributeValues=_ser(
                            {
                                ":u": until_ms,
                                ":next": version + 1,
                                ":version": version,
                                ":e": max([until_ms, *live.values()]) // 1000 + CONTROL_IDLE_SECONDS,
                            }
                        ),
                    )
                return True
            except Refused:
                continue  # another holder came or went meanwhile: look again
        return False

    def renew_slot(self, key: str, holder: str, until_ms: int) -> bool:
        """Extend `holder`'s hold (only if it still holds one: a hold that ended and was removed stays gone);
        False if it holds none."""
        try:
            with refused_as():
                self.client.update_item(
                    TableName=self.control_table,
                    Key=_ser({"key": key}),
                    UpdateExpression="SET #h = :u, expiresAt = :e",
                    ConditionExpression="attribute_exists(#h)",
                    ExpressionAttributeNames={"#h": holder_attr(holder)},
                    ExpressionAttributeValues=_ser({":u": until_ms, ":e": until_ms // 1000 + CONTROL_IDLE_SECONDS}),
                )
        except Refused:
            return False
        return True

    def release_slot(self, key: str, holder: str) -> None:
        self.client.update_item(
            TableName=self.control_table,
            Key=_ser({"key": key}),
            UpdateExpression="REMOVE #h",
            ExpressionAttributeNames={"#h": holder_attr(holder)},
        )
