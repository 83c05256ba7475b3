"""Resharding: what each due hour's shard count is, and the one-time migration of rows written before
shard counts were recorded per hour (issue 18; docs/operations.md, "Changing the shard count")."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from duetime.domain.keys import hour_bucket, open_index_key
from duetime.service.context import Ports


@dataclass
class ReshardReport:
    configured: int  # the `shards` setting of this process: what a bucket not fixed yet gets
    visited: int  # the shards the pre-loader and reconciler visit (the most any bucket was fixed with)
    hours: dict[str, int | None] = field(default_factory=dict)  # the coming hours and their counts (None: open)
    recorded: int = 0  # buckets the migration fixed (or found fixed)
    reindexed: int = 0  # open rows moved from the `open` index key of before issue 18 to their key now

    def lines(self) -> list[str]:
        out = [
            f"configured shards: {self.configured} (for hours not fixed yet)",
            f"shards visited by the pre-loader and reconciler: {self.visited}",
        ]
        out += [f"hour {hour}: {count if count else 'not fixed yet'}" for hour, count in self.hours.items()]
        if self.recorded or self.reindexed:
            out.append(f"recorded {self.recorded} hours with rows; moved {self.reindexed} open rows to their index key")
        return out


def shard_plan(ports: Ports, now: datetime, hours: int = 24) -> ReshardReport:
    """The counts of the next `hours` due hours as fixed now: a changed `shards` applies to those not fixed."""
    buckets = [hour_bucket(now + timedelta(hours=h)) for h in range(hours)]
    recorded = ports.store.recorded_shards(buckets)
    return ReshardReport(
        configured=ports.settings.shards,
        visited=ports.store.most_shards(),
        hours={bucket: recorded.get(bucket) for bucket in buckets},
    )


def record_current(ports: Ports, now: datetime) -> ReshardReport:
    """The one-time migration of a deployment from before per-hour shard counts, run while `shards` is still
    the count every stored row was written with: fix each hour that holds rows at that count (an hour some
    writer fixed already keeps its count), then move each open row indexed under the old `open` key (the bare
    shard) to its key now. Safe to run twice and beside a running system: every write is conditional."""
    buckets = ports.store.stored_buckets()
    for bucket in sorted(buckets):
        ports.store.shards_of_bucket(bucket)
    report = shard_plan(ports, now)
    report.recorded = len(buckets)
    for stored in ports.store.scan_open_executions():
        if stored.open_shard is None or stored.open_shard == open_index_key(stored.key):
            continue
        if ports.store.reindex_open(stored.key, stored.open_shard):
            report.reindexed += 1
    return report
